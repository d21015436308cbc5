// sm_80+ tile loop (mma.sync): scores of one unit's key tiles, appended in key order.
//
// Score tile = K_tile [TILE x D] * Q_block^T [D x pairs]: warp w < MMA_WARPS computes keys 16 w .. 16 w + 15
// against every pair of the block (m16n8k16, one 8-column block per accumulator quad), so each thread holds
// whole queries' heads and the head sum is the same fixed-order code as the wgmma loop (tile_common.cuh).
#pragma once
#include "tile_common.cuh"
#include "selection.cuh"

namespace dsa {

constexpr int NB = BQ * HB;          // 8-column blocks holding real pairs
constexpr int NBP = (NB + 1) / 2;  // pairs of 8-column blocks (one ldmatrix_x4 of q each)

// Copy keys [klo + it * TILE, + TILE) of the unit into key-tile buffer it & 1 (zero rows past khi), by the NT
// threads [0, NT). Thread t copies the 16-byte chunk t % CHUNKS of rows t / CHUNKS + k * RSTEP: one column, and
// (RSTEP a multiple of 8) one swizzle phase r & 7, so its destinations are one swizzled offset plus k * RSTEP rows
// and its sources one row plus k * RSTEP rows: the address arithmetic is done once per call, not per chunk.
CAKE_DEVICE void load_key_tile(unsigned char* kt, const bf16_t* kmat, const Unit& un, int it) {
    constexpr int RSTEP = NT / CHUNKS, NK = TILE / RSTEP;
    static_assert(NT % CHUNKS == 0 && RSTEP % 8 == 0 && TILE % RSTEP == 0, "the threads cover whole row groups");
    const int t = threadIdx.x;
    const int c = (int)((unsigned)t % CHUNKS), r = (int)((unsigned)t / CHUNKS);
    unsigned char* dst = kt + (it & 1) * (TILE * ROWB) + swz_rows(r, c, TILE);
    const int j = un.klo + it * TILE + r;
    const char* src = (const char*)kmat + c * 16;
    if (j + (NK - 1) * RSTEP < un.khi) {  // every row is a key (all but a unit's last tile)
        src += (size_t)j * ROWB;
#pragma unroll
        for (int k = 0; k < NK; ++k) cp_async_16(dst + k * RSTEP * ROWB, src + k * RSTEP * ROWB);
    } else {
#pragma unroll
        for (int k = 0; k < NK; ++k) {
            const int jk = j + k * RSTEP;  // a row past khi reads nothing (zero fill), at the last row's address
            cp_async_16_zfill(dst + k * RSTEP * ROWB, src + (size_t)min(jk, un.khi - 1) * ROWB, jk < un.khi ? 16 : 0);
        }
    }
    cp_async_commit();
}

// q must be staged (load_q, waited) and key tile 0 in flight; wq loaded. gh: the split block's histograms of
// appended keys (merge.cuh), else nullptr.
CAKE_DEVICE void tile_loop(const Sel& s, const Unit& un, int ntiles, unsigned char* kt, const unsigned char* qs,
                           float* sc, const bf16_t* kmat, const float (&wq)[BQ][HB][2], int topk, int causal,
                           uint32_t* gh) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
        if (it + 1 < ntiles) {
            load_key_tile(kt, kmat, un, it + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();  // tile it landed; the previous append (counts, floors, scores) is done
        open_windows(s, it);
        compact_full(s, topk);
        const unsigned char* tb = kt + (it & 1) * (TILE * ROWB);
        if (warp < MMA_WARPS) {
            float acc[NBP * 8];
#pragma unroll
            for (int i = 0; i < NBP * 8; ++i) acc[i] = 0.0f;
            // S[16 keys x pairs] = K_w Q^T, k-steps in order
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                uint32_t afr[4];
                ldmatrix_x4(afr, tb + swz_rows(warp * 16 + (lane & 15), 2 * ks + (lane >> 4), TILE));
#pragma unroll
                for (int np = 0; np < NBP; ++np) {
                    const int m = lane >> 3, r = lane & 7;
                    uint32_t x[4];
                    ldmatrix_x4(x, qs + swz_rows(np * 16 + (m >> 1) * 8 + r, 2 * ks + (m & 1), QROWS));
                    const uint32_t b0[2] = {x[0], x[1]}, b1[2] = {x[2], x[3]};
                    mma_bf16_16816(&acc[(2 * np) * 4], afr, b0);
                    mma_bf16_16816(&acc[(2 * np + 1) * 4], afr, b1);
                }
            }
            // score = sum_h w_h relu(S_h)
            head_sum_store(acc, [&](int qq, int j) { return make_float2(wq[qq][j][0], wq[qq][j][1]); }, sc,
                           warp * 16 + (lane >> 2));
        }
        __syncthreads();  // scores ready; every warp is done reading this key tile
        // The next iteration's barrier orders this append before the next epilogue overwrites the scores.
        append_tile(s, un, sc, un.klo + it * TILE, causal, gh);
    }
    __syncthreads();  // the last append is done
}

}  // namespace dsa
