// Pieces both tile loops share: q staging, the weights and the fixed-order head sum.
#pragma once
#include "layout.cuh"
#include "../common/mma.cuh"

namespace dsa {

// Stage q[q0 .. q0 + nq) as QROWS (query, head) rows, row = qq * H + h; rows past nq * H are zero.
CAKE_DEVICE void load_q(unsigned char* qs, const bf16_t* q, const Unit& un) {
    const char* qb = (const char*)q;
#pragma unroll 1
    for (int i = threadIdx.x; i < QROWS * CHUNKS; i += NT) {
        const int r = i / CHUNKS, c = i % CHUNKS;
        const bool ok = r < un.nq * H;
        const char* src = qb + (ok ? (((size_t)un.q0 * H + r) * ROWB + c * 16) : 0);
        cp_async_16_zfill(qs + swz_rows(r, c, QROWS), src, ok ? 16 : 0);
    }
    cp_async_commit();
}

// The weights of the heads this thread sums, for every query of the block: head 8 j + 2 (lane % 4) + e
// (the columns an accumulator block gives this lane). 0 for queries past nq.
CAKE_DEVICE void load_weights(float (&wq)[BQ][HB][2], const float* w, const Unit& un) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int qq = 0; qq < BQ; ++qq)
#pragma unroll
        for (int j = 0; j < HB; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                wq[qq][j][e] = qq < un.nq ? w[(size_t)(un.q0 + qq) * H + j * 8 + 2 * (lane & 3) + e] : 0.0f;
}

// score = sum_h w[h] * max(0, dot_h) for key rows `row` (hr = 0) and `row + 8` (hr = 1) of queries
// 0 .. NQ - 1 (the block's queries the product's columns hold; the selection reads no other query's scores).
// acc[4 b + 2 hr + e] is the dot product of key row + 8 hr with pair column 8 b + 2 (lane % 4) + e
// (block b = qq * HB + j); wt(qq, j) gives the weights of those two heads (e = 0, 1). Fixed order for every
// (t, j) whatever H-aligned column a query starts at: an fmaf chain over (j, e) ascending from 0, then the
// xor-1 and xor-2 shuffle adds, so the four lanes of a quad end with identical bits. Queries go in pairs: a pair's
// four sums are made before its shuffles and stores (no store between the two queries' weight loads, the shuffles in
// flight together); four queries' sums at once spill at BQ = 4. Lane quad leader writes sc[qq * TILE + row + 8 hr].
template <int NQ = BQ, int NACC, class Wt>
CAKE_DEVICE void head_sum_store(const float (&acc)[NACC], Wt wt, float* sc, int row) {
    static_assert(NQ >= 1 && NQ <= BQ && NACC >= NQ * HB * 4, "accumulators of every summed pair");
    constexpr int G = NQ >= 2 ? 2 : 1;    // queries a group
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int q0 = 0; q0 < NQ; q0 += G) {
        float s[G][2];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const int qq = q0 + g;
            if (qq >= NQ) break;
            float2 wv[HB];
#pragma unroll
            for (int j = 0; j < HB; ++j) wv[j] = wt(qq, j);
#pragma unroll
            for (int hr = 0; hr < 2; ++hr) {
                float c = 0.0f;
#pragma unroll
                for (int j = 0; j < HB; ++j) {
                    c = fmaf(wv[j].x, fmaxf(acc[(qq * HB + j) * 4 + 2 * hr + 0], 0.0f), c);
                    c = fmaf(wv[j].y, fmaxf(acc[(qq * HB + j) * 4 + 2 * hr + 1], 0.0f), c);
                }
                s[g][hr] = c;
            }
        }
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
                if (q0 + g < NQ) s[g][hr] += __shfl_xor_sync(0xffffffffu, s[g][hr], 1);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
            for (int hr = 0; hr < 2; ++hr)
                if (q0 + g < NQ) s[g][hr] += __shfl_xor_sync(0xffffffffu, s[g][hr], 2);
        if ((lane & 3) == 0) {
#pragma unroll
            for (int g = 0; g < G; ++g)
#pragma unroll
                for (int hr = 0; hr < 2; ++hr)
                    if (q0 + g < NQ) sc[(q0 + g) * TILE + row + hr * 8] = s[g][hr];
        }
    }
}

}  // namespace dsa
