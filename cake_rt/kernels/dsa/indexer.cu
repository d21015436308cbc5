// Deterministic DSA indexer top-k: fused scores (tensor cores) + exact streaming top-k.
//
//   score(t, j) = sum_h weights[t, h] * fmaxf(0, dot(q[t, h, :], k[j, :]))
//
// dsa_scan: one work unit = a block of DSA_BQ consecutive queries of one segment x one range of keys.
// Keys stream through shared memory in tiles of DSA_TILE rows; the score tile is an mma.sync product
// with keys as M and (query, head) pairs as N (K = D), so every thread holds whole rows of heads and
// sums them in registers, then two xor-shuffles finish the head sum. The order of every float32
// operation of score(t, j) is the same for every (t, j): D in 16-wide steps in order, heads in a fixed
// register order, the same shuffle tree, and (H = 64) head half 0 + head half 1. A key's position in
// the tile only changes which thread holds it, never the arithmetic.
//
// Selection: candidate key x = (float_order_key(score) << 32) | j. Each query keeps a buffer of
// candidates in ascending j (appends are ballot-ordered, compaction is stable) and a floor `lo`:
// only x >= lo enters. When the buffer is nearly full, an exact radix select finds K with exactly
// topk keys >= K; the buffer keeps those and lo = K + 1. The top-k set under a total order is unique,
// so any key split and any schedule give the same set, and buffer order gives ascending ids.
//
// A unit with slot >= 0 covers only part of its block's keys: it writes its (<= topk) candidates to
// the workspace and dsa_merge selects the final top-k from all parts of the block, in part order.
#include "../common/types.cuh"
#include "../common/mma.cuh"
#include "../common/float_key.cuh"
#include "../common/ticket.cuh"
#include "select.cuh"
#if defined(DSA_WGMMA) && DSA_WGMMA
#include "../common/wgmma.cuh"
#if !defined(CAKE_HAS_WGMMA)
#error "DSA_WGMMA needs the sm_90a target"
#endif
#define DSA_USE_WGMMA 1
#else
#define DSA_USE_WGMMA 0
#endif
// CAKE_RT_DSA_FAST=1 compiles the performance variant (-DDSA_FAST=1): register-resident selections with one
// scan per keep (select.cuh), and on sm_90a a software-pipelined tile loop (the wgmma of tile it runs while
// the block compacts and appends tile it-1). Without it the program is exactly the GPU-verified default.
#if defined(DSA_FAST) && DSA_FAST
#define DSA_FAST_ON 1
#else
#define DSA_FAST_ON 0
#endif

#ifndef DSA_H
#define DSA_H 32
#endif
#ifndef DSA_D
#define DSA_D 128
#endif
#ifndef DSA_BQ
#define DSA_BQ (128 / DSA_H)
#endif
#ifndef DSA_TILE
#define DSA_TILE 128
#endif
#ifndef DSA_CAP
#define DSA_CAP 4096
#endif
#ifndef DSA_MCAP
#define DSA_MCAP 8192
#endif

namespace dsa {

constexpr int H = DSA_H, D = DSA_D, BQ = DSA_BQ, TILE = DSA_TILE, CAP = DSA_CAP;
constexpr int NT = 256, NWARPS = NT / 32;
constexpr int G = BQ * H / 32;   // warp groups of 32 (query, head) pairs
constexpr int WK = NWARPS / G;   // warps side by side along the key tile
constexpr int KW = TILE / WK;    // keys per warp
constexpr int MT = KW / 16;      // 16-key m-tiles per warp
constexpr int KS = D / 16;       // k-steps
constexpr int ROWB = D * 2;      // bytes per bf16 row
constexpr int CHUNKS = D / 8;    // 16-byte chunks per row
constexpr int UNIT_INTS = 8;
constexpr bool WG = DSA_USE_WGMMA;  // Hopper path: two warpgroups x wgmma m64n128k16, q and keys from smem
constexpr int QROWS = BQ * H;        // (query, head) pairs of a block
constexpr int HIST_WORDS = 2048;

static_assert(H == 32 || H == 64, "H must be 32 or 64");
static_assert(D == 64 || D == 128, "D must be 64 or 128");
static_assert(G >= 1 && NWARPS % G == 0, "warp groups must divide the warps");
static_assert(KW % 16 == 0 && MT >= 1, "each warp needs whole 16-key m-tiles");
static_assert(WG || BQ * H <= 2 * TILE, "the q staging area reuses the two key-tile buffers");
static_assert(!WG || (QROWS == 128 && TILE == 128), "wgmma path: 128 pairs (N) x 2 warpgroups of 64 keys (M)");
static_assert(CAP % NT == 0 && CAP >= 2 * TILE, "candidate capacity");
static_assert(BQ <= NWARPS, "one warp appends per query");

// Shared-memory layout (dynamic): [wgmma: 1024-byte alignment pad] key tiles | [wgmma: q] | candidates |
// score tile | histogram | small state.
constexpr int SMEM_ALIGN = WG ? 1024 : 0;
constexpr int SMEM_KT = 2 * TILE * ROWB;
constexpr int SMEM_Q = WG ? QROWS * ROWB : 0;
constexpr int SMEM_CAND = BQ * CAP * 8;
#if DSA_FAST_ON && DSA_USE_WGMMA
constexpr int SMEM_SC = 2 * G * TILE * 4;  // two score tiles: the epilogue of tile it, the append of it-1
#else
constexpr int SMEM_SC = G * TILE * 4;
#endif
constexpr int SMEM_HIST = HIST_WORDS * 4;
constexpr int SMEM_MISC = 256 + 8 * BQ + 4 * BQ;

// Byte offset of 16-byte chunk c of row r in a tile of `rows` rows. mma.sync path: whole rows with the
// chunk XOR-swizzled (conflict-free ldmatrix). wgmma path: the 128-byte-swizzle K-major layout of
// common/wgmma.cuh, one [rows x 64-element] block per 64 columns of D.
CAKE_DEVICE int swz_rows(int r, int c, int rows) {
    if (WG) return (c >> 3) * rows * 128 + (r * 128 + (((c & 7) ^ (r & 7)) << 4));
    return r * ROWB + ((c ^ (r & 7)) << 4);
}
CAKE_DEVICE int swz(int r, int c) { return swz_rows(r, c, TILE); }

struct Unit {
    int q0, nq, ks0, lenk, pbase, klo, khi, slot;
};

CAKE_DEVICE Unit load_unit(const int* units, int u) {
    const int* p = units + (size_t)u * UNIT_INTS;
    Unit r;
    r.q0 = p[0]; r.nq = p[1]; r.ks0 = p[2]; r.lenk = p[3];
    r.pbase = p[4]; r.klo = p[5]; r.khi = p[6]; r.slot = p[7];
    return r;
}

// Exclusive end of the keys query t sees (global ids; its first key is ks0).
CAKE_DEVICE int visible_end(const Unit& u, int t, int causal) {
    if (!causal) return u.ks0 + u.lenk;
    const long long p = (long long)u.pbase + t;  // causal position of t in its segment's keys
    long long n = p + 1;
    if (n > u.lenk) n = u.lenk;
    if (n < 0) n = 0;
    return u.ks0 + (int)n;
}

CAKE_DEVICE float score_of(uint64_t x) { return float_from_order_key((uint32_t)(x >> 32)); }

// Stable in-order write of the keys x >= K among buf[0..n). Sink(pos, x) receives each kept key with
// its output position. Safe in place (sink writing to buf): every round reads before its barriers
// and writes only at positions <= the positions it read.
// Each round covers KEEP_E * NTB keys, KEEP_E consecutive ones per thread (loads in flight together).
constexpr int KEEP_E = 4;
template <int NTB, class Sink>
CAKE_DEVICE int ordered_keep(const uint64_t* buf, int n, uint64_t K, int* scratch, Sink sink) {
    int base = 0;
    for (int r0 = 0; r0 < n; r0 += NTB * KEEP_E) {
        const int i0 = r0 + (int)threadIdx.x * KEEP_E;
        uint64_t x[KEEP_E];
        int mine = 0;
#pragma unroll
        for (int e = 0; e < KEEP_E; ++e) {
            x[e] = (i0 + e < n) ? buf[i0 + e] : 0ull;
            mine += (i0 + e < n && x[e] >= K) ? 1 : 0;
        }
        int total;
        int pos = base + block_excl_scan<NTB>(mine, scratch, total);
#pragma unroll
        for (int e = 0; e < KEEP_E; ++e) {
            if (i0 + e < n && x[e] >= K) sink(pos++, x[e]);
        }
        base += total;
    }
    return base;
}

}  // namespace dsa

using namespace dsa;

// Finish one query's candidate buffer: final output row (slot < 0) or one part in the workspace.
template <int NTB>
CAKE_DEVICE void finish_query(uint64_t* cand, int n, int topk, int t, int out_row, int* out_idx,
                              float* out_sc, uint64_t* part, int* part_count, uint32_t* hist,
                              DsaSelState* st, int* scratch) {
    const uint64_t K = (n > topk) ? block_kth_largest<NTB>(cand, n, topk, hist, st, scratch) : 0ull;
    int kept;
    if (part != nullptr) {
        kept = ordered_keep<NTB>(cand, n, K, scratch, [&](int pos, uint64_t x) { part[pos] = x; });
        if (threadIdx.x == 0) *part_count = kept;
    } else {
        int* oi = out_idx + (size_t)out_row * topk;
        float* os = out_sc + (size_t)out_row * topk;
        kept = ordered_keep<NTB>(cand, n, K, scratch, [&](int pos, uint64_t x) {
            oi[pos] = (int)(uint32_t)x;
            os[pos] = score_of(x);
        });
        for (int i = kept + (int)threadIdx.x; i < topk; i += NTB) {
            oi[i] = -1;
            os[i] = __int_as_float(0xff800000);  // -inf
        }
    }
    (void)t;
}

#if DSA_FAST_ON
// Keys per thread of the register-resident selection: R rounds of 4 (CAP <= 4096 keeps R <= 4).
constexpr int REG_R = (CAP + NT * 4 - 1) / (NT * 4);
constexpr bool REG_SEL = REG_R <= 4;

// finish_query for the scan's CTA (NT threads) on the register copy of the buffer.
CAKE_DEVICE void finish_query_fast(uint64_t* cand, int n, int topk, int out_row, int* out_idx, float* out_sc,
                                   uint64_t* part, int* part_count, uint32_t* hist, DsaSelState* st,
                                   int* scratch) {
    if constexpr (!REG_SEL) {
        finish_query<NT>(cand, n, topk, out_row, out_row, out_idx, out_sc, part, part_count, hist, st, scratch);
    } else {
        uint64_t x[REG_R][4];
        dsa_reg_load<NT, REG_R>(x, cand, n);
        const uint64_t K = (n > topk) ? reg_kth_largest<NT, REG_R>(x, n, topk, hist, st, scratch) : 0ull;
        int kept;
        if (part != nullptr) {
            kept = reg_ordered_keep<NT, REG_R>(x, n, K, scratch, [&](int pos, uint64_t v) { part[pos] = v; });
            if (threadIdx.x == 0) *part_count = kept;
        } else {
            int* oi = out_idx + (size_t)out_row * topk;
            float* os = out_sc + (size_t)out_row * topk;
            kept = reg_ordered_keep<NT, REG_R>(x, n, K, scratch, [&](int pos, uint64_t v) {
                oi[pos] = (int)(uint32_t)v;
                os[pos] = score_of(v);
            });
            for (int i = kept + (int)threadIdx.x; i < topk; i += NT) {
                oi[i] = -1;
                os[i] = __int_as_float(0xff800000);  // -inf
            }
        }
    }
}

// Cut query qq's buffer to exactly topk keys (n > CAP - TILE >= topk) and raise its floor. Block-uniform.
// Ends with a barrier: the new count and floor are visible to every thread.
CAKE_DEVICE void compact_fast(uint64_t* cb, int n, int topk, int* cnt_q, uint64_t* lo_q, uint32_t* hist,
                              DsaSelState* st, int* scratch) {
    uint64_t K;
    int kept;
    if constexpr (!REG_SEL) {
        K = block_kth_largest<NT>(cb, n, topk, hist, st, scratch);
        kept = ordered_keep<NT>(cb, n, K, scratch, [&](int pos, uint64_t v) { cb[pos] = v; });
    } else {
        uint64_t x[REG_R][4];
        dsa_reg_load<NT, REG_R>(x, cb, n);
        K = reg_kth_largest<NT, REG_R>(x, n, topk, hist, st, scratch);
        kept = reg_ordered_keep<NT, REG_R>(x, n, K, scratch, [&](int pos, uint64_t v) { cb[pos] = v; });
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        *cnt_q = kept;
        *lo_q = K + 1ull;
    }
    __syncthreads();
}

// All queries of a block select together (select.cuh multi_*): one histogram per query in a free key-tile
// area, the passes' barriers and scans shared. States and scan scratch live in the (then unused) `hist`.
constexpr bool MULTI = REG_SEL && BQ <= 4;
constexpr int MULTI_HIST_BYTES = BQ * 2048 * 4;
constexpr bool MULTI_COMPACT = WG && MULTI && MULTI_HIST_BYTES <= TILE * ROWB;  // one key tile buffer is free
static_assert(!MULTI || MULTI_HIST_BYTES <= SMEM_KT, "the final selection's histograms fit in the key tiles");

// Compact the buffers of the queries in `mask` (block-uniform; each has cnt > topk) to exactly topk keys
// and raise their floors. hists: MULTI_HIST_BYTES of free shared memory. Ends with a barrier.
CAKE_DEVICE void compact_multi(unsigned mask, uint64_t* cand, int* cnt, uint64_t* lo, int topk, uint32_t* hists,
                               uint32_t* hist) {
    if constexpr (MULTI) {
        DsaMultiState* ms = reinterpret_cast<DsaMultiState*>(hist);
        uint64_t* scratch64 = reinterpret_cast<uint64_t*>(hist) + 32;
        int n[BQ];
#pragma unroll
        for (int q = 0; q < BQ; ++q) n[q] = ((mask >> q) & 1u) ? cnt[q] : 0;
        uint64_t K[BQ];
        multi_kth_largest<NT, REG_R, BQ>(cand, CAP, n, topk, mask, hists, ms, scratch64, K);
        int kept[BQ];
        multi_ordered_keep<NT, REG_R, BQ, true>(cand, CAP, n, mask, K, scratch64, kept,
                                                [&](int q, int pos, uint64_t x) { cand[q * CAP + pos] = x; });
        __syncthreads();
        if (threadIdx.x == 0) {
#pragma unroll
            for (int q = 0; q < BQ; ++q)
                if ((mask >> q) & 1u) {
                    cnt[q] = kept[q];
                    lo[q] = K[q] + 1ull;
                }
        }
        __syncthreads();
    }
}

// Final selection of all queries of a unit at once (output rows, or parts in the workspace when split).
// hists: MULTI_HIST_BYTES of free shared memory (the key tiles: no copy is in flight after the loop).
CAKE_DEVICE void finish_unit_multi(const Unit& un, const uint64_t* cand, const int* cnt, int topk, int* out_idx,
                                   float* out_sc, uint64_t* ws_ent, int* ws_cnt, uint32_t* hists, uint32_t* hist) {
    if constexpr (MULTI) {
        DsaMultiState* ms = reinterpret_cast<DsaMultiState*>(hist);
        uint64_t* scratch64 = reinterpret_cast<uint64_t*>(hist) + 32;
        int n[BQ];
        unsigned todo = 0u, active = 0u;
#pragma unroll
        for (int q = 0; q < BQ; ++q) {
            n[q] = q < un.nq ? cnt[q] : 0;
            if (q < un.nq) todo |= 1u << q;
            if (q < un.nq && n[q] > topk) active |= 1u << q;
        }
        uint64_t K[BQ];
        multi_kth_largest<NT, REG_R, BQ>(cand, CAP, n, topk, active, hists, ms, scratch64, K);
        int kept[BQ];
        const bool split = un.slot >= 0;
        multi_ordered_keep<NT, REG_R, BQ, false>(cand, CAP, n, todo, K, scratch64, kept,
                                                 [&](int q, int pos, uint64_t x) {
            if (split) {
                ws_ent[((size_t)un.slot * BQ + q) * topk + pos] = x;
            } else {
                out_idx[(size_t)(un.q0 + q) * topk + pos] = (int)(uint32_t)x;
                out_sc[(size_t)(un.q0 + q) * topk + pos] = score_of(x);
            }
        });
#pragma unroll
        for (int q = 0; q < BQ; ++q) {
            if (q >= un.nq) continue;
            if (split) {
                if (threadIdx.x == 0) ws_cnt[(size_t)un.slot * BQ + q] = kept[q];
            } else {
                int* oi = out_idx + (size_t)(un.q0 + q) * topk;
                float* os = out_sc + (size_t)(un.q0 + q) * topk;
                for (int i = kept[q] + (int)threadIdx.x; i < topk; i += NT) {
                    oi[i] = -1;
                    os[i] = __int_as_float(0xff800000);  // -inf
                }
            }
        }
    }
}
#endif

extern "C" __global__ void __launch_bounds__(256, 1)
dsa_scan(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kmat, const float* __restrict__ w,
         const int* __restrict__ units, int nunits, unsigned* ticket, int use_ticket, int topk, int causal,
         int Tkv, int* __restrict__ out_idx, float* __restrict__ out_sc, uint64_t* __restrict__ ws_ent,
         int* __restrict__ ws_cnt, unsigned long long* prof) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // wgmma tiles must start 1024-byte aligned (the swizzle is a function of the address).
    unsigned char* smem = smem_raw + (WG ? ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u) : 0u);
    unsigned char* kt = smem;
    unsigned char* qs = smem + SMEM_KT;  // wgmma path only: q for the whole unit
    uint64_t* cand = (uint64_t*)(smem + SMEM_KT + SMEM_Q);
    float* sc = (float*)(smem + SMEM_KT + SMEM_Q + SMEM_CAND);
    uint32_t* hist = (uint32_t*)(smem + SMEM_KT + SMEM_Q + SMEM_CAND + SMEM_SC);
    unsigned char* misc = smem + SMEM_KT + SMEM_Q + SMEM_CAND + SMEM_SC + SMEM_HIST;
    DsaSelState* st = (DsaSelState*)misc;                 // 40 bytes
    int* scratch = (int*)(misc + 64);                     // 32 ints
    unsigned* tslot = (unsigned*)(misc + 192);
    uint64_t* lo = (uint64_t*)(misc + 256);               // BQ
    int* cnt = (int*)(misc + 256 + 8 * BQ);               // BQ

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = warp % G;          // (query, head-half) group of this warp
    const int kw = warp / G;         // key slice of this warp
    const int gq = (g * 32) / H;     // query of the group within the block
    const int hbase = (g * 32) % H;  // first head of the group

#if DSA_PROFILE
    // Cycle accounting by thread 0 (warp 0: it also appends for query 0), per phase, summed over CTAs.
    long long pacc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long long plast = clock64();
#define DSA_MARK(k)                                  \
    do {                                             \
        if (tid == 0) {                              \
            const long long now_ = clock64();        \
            pacc[k] += now_ - plast;                 \
            plast = now_;                            \
        }                                            \
    } while (0)
#else
#define DSA_MARK(k) \
    do {            \
    } while (0)
    (void)prof;
#endif
    unsigned u = use_ticket ? ticket_draw(ticket, tslot) : blockIdx.x;
    DSA_MARK(7);
    while (u < (unsigned)nunits) {
        const Unit un = load_unit(units, (int)u);
        __syncthreads();  // the previous unit is done with every buffer

        // Stage q[q0 .. q0+nq) (rows = (query, head) pairs) in the key-tile area, swizzled.
        {
            const char* qb = (const char*)q;
            for (int i = tid; i < BQ * H * CHUNKS; i += NT) {
                const int r = i / CHUNKS, c = i % CHUNKS;
                const int qq = r / H;
                const bool ok = qq < un.nq;
                const char* src = qb + (ok ? (((size_t)(un.q0 + qq) * H + (r % H)) * ROWB + c * 16) : 0);
                unsigned char* dst = WG ? qs + swz_rows(r, c, QROWS) : kt + swz(r, c);
                cp_async_16_zfill(dst, src, ok ? 16 : 0);
            }
            cp_async_commit();
            cp_async_wait<0>();
#if DSA_USE_WGMMA
            fence_proxy_async_shared();  // cp.async results are read by wgmma (async proxy)
#endif
        }
        if (tid < BQ) {
            cnt[tid] = 0;
            lo[tid] = 0ull;
        }
        __syncthreads();

#if !DSA_USE_WGMMA
        // B fragments of this warp's 32 pairs, resident in registers for the whole unit.
        uint32_t bfr[4][KS][2];
#pragma unroll
        for (int np = 0; np < 2; ++np) {
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                const int m = lane >> 3, r = lane & 7;
                const int row = g * 32 + np * 16 + (m >> 1) * 8 + r;
                uint32_t x[4];
                ldmatrix_x4(x, kt + swz(row, 2 * ks + (m & 1)));
                bfr[2 * np][ks][0] = x[0];
                bfr[2 * np][ks][1] = x[1];
                bfr[2 * np + 1][ks][0] = x[2];
                bfr[2 * np + 1][ks][1] = x[3];
            }
        }
        // Weights of the 8 heads this thread sums: head = hbase + nt * 8 + 2 * (lane % 4) + e.
        float wr[4][2];
        {
            const bool ok = gq < un.nq;
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    wr[nt][e] = ok ? w[(size_t)(un.q0 + gq) * H + hbase + nt * 8 + 2 * (lane & 3) + e] : 0.0f;
        }
        __syncthreads();  // staging read into registers before key tiles overwrite it
#else
        // Weights of the heads this thread sums, for every query of the block:
        // head = j * 8 + 2 * (lane % 4) + e for the block's 8-column accumulator groups j of that query.
        float wq[BQ][H / 8][2];
#pragma unroll
        for (int qq = 0; qq < BQ; ++qq)
#pragma unroll
            for (int j = 0; j < H / 8; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    wq[qq][j][e] = qq < un.nq ? w[(size_t)(un.q0 + qq) * H + j * 8 + 2 * (lane & 3) + e] : 0.0f;
#endif

        DSA_MARK(0);  // unit setup: q staging, fragments, weights
        const int span = un.khi - un.klo;
        const int ntiles = span > 0 ? (span + TILE - 1) / TILE : 0;
        auto load_tile = [&](int it) {
            unsigned char* dst = kt + (it & 1) * (TILE * ROWB);
            const int j0 = un.klo + it * TILE;
            const char* kb = (const char*)kmat;
            for (int i = tid; i < TILE * CHUNKS; i += NT) {
                const int r = i / CHUNKS, c = i % CHUNKS;
                const int j = j0 + r;
                const bool ok = j < un.khi;
                const char* src = kb + (ok ? ((size_t)j * ROWB + c * 16) : 0);
                cp_async_16_zfill(dst + swz(r, c), src, ok ? 16 : 0);
            }
            cp_async_commit();
        };
        if (ntiles > 0) load_tile(0);

#if DSA_FAST_ON && DSA_USE_WGMMA
        // Software-pipelined tile loop (fast variant, sm_90a). Iteration it: wait for tile it; issue its
        // wgmma (asynchronous); while the tensor cores run, compact nearly full buffers, start the copy of
        // tile it+1 and append tile it-1's scores; then wait for the wgmma and write tile it's scores to the
        // other score buffer. The last tile's append follows the loop. Every (t, j) score is the same float32
        // sequence as in the default loop (zeroed accumulators, k-steps in order, the same epilogue), and the
        // appends see the tiles in the same order; compactions keep exactly the top-k of their buffer (only
        // the floor and the moment differ), so the final top-k set, hence every output bit, is the same.
        {
            const int wgi = warp >> 2;
            const int erow = wgi * 64 + (warp & 3) * 16 + (lane >> 2);
            constexpr int SCF = BQ * TILE;  // floats per score buffer
            // Compact every buffer that could not take another full tile (with MULTI_COMPACT, all nearly full
            // buffers together; `freebuf` is the key-tile buffer no copy or wgmma uses now). Ends with a barrier:
            // every thread has read the counts before the appends rewrite them.
            auto compact_all = [&](int freebuf) {
                unsigned m = 0u;
#pragma unroll
                for (int qq = 0; qq < BQ; ++qq)
                    if (cnt[qq] > CAP - TILE) m |= 1u << qq;
                if (m) {  // block-uniform
                    if constexpr (MULTI_COMPACT) {
#pragma unroll
                        for (int qq = 0; qq < BQ; ++qq) {
                            const int n = cnt[qq];
                            if (n > CAP - 2 * TILE && n > topk) m |= 1u << qq;  // nearly full: join the batch
                        }
                        compact_multi(m, cand, cnt, lo, topk, (uint32_t*)(kt + freebuf * (TILE * ROWB)), hist);
                    } else {
#pragma unroll 1
                        for (int qq = 0; qq < BQ; ++qq)
                            if ((m >> qq) & 1u)
                                compact_fast(cand + qq * CAP, cnt[qq], topk, cnt + qq, lo + qq, hist, st, scratch);
                    }
                }
                __syncthreads();
                DSA_MARK(2);
            };
            // Warp qq appends the scores of tile `at` for query qq, in ascending id.
            auto append = [&](int at) {
                if (at >= 0 && warp < BQ && warp < un.nq) {
                    const int qq = warp;
                    const int t = un.q0 + qq;
                    int vend = visible_end(un, t, causal);
                    if (vend > un.khi) vend = un.khi;
                    const uint64_t floor_key = lo[qq];
                    int c0 = cnt[qq];
                    const int j0 = un.klo + at * TILE;
                    const float* scp = sc + (at & 1) * SCF + qq * TILE;
#pragma unroll
                    for (int c = 0; c < TILE / 32; ++c) {
                        const int r = c * 32 + lane;
                        const int j = j0 + r;
                        const uint64_t x = score_id_key(scp[r], (uint32_t)j);
                        const bool take = j < vend && x >= floor_key;
                        const unsigned b = __ballot_sync(0xffffffffu, take);
                        if (take) cand[qq * CAP + c0 + __popc(b & dsa_lanemask_lt())] = x;
                        c0 += __popc(b);
                    }
                    __syncwarp();  // every lane has read cnt[qq] before lane 0 rewrites it
                    if (lane == 0) cnt[qq] = c0;
                }
                DSA_MARK(5);
            };
#pragma unroll 1
            for (int it = 0; it < ntiles; ++it) {
                cp_async_wait<0>();
                fence_proxy_async_shared();  // cp.async results are read by wgmma (async proxy)
                // Tile it landed for every thread; every warpgroup has waited for the wgmma of tile it-1
                // (so its key buffer may be refilled) and written its scores; the append of it-2 is done.
                __syncthreads();
                DSA_MARK(1);
                const unsigned char* tb = kt + (it & 1) * (TILE * ROWB);
                float acc[64];
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
                wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const int kb = ks >> 2, koff = (ks & 3) * 32;
                    const uint64_t da = wgmma_desc_sw128(tb + kb * TILE * 128 + wgi * 64 * 128 + koff);
                    const uint64_t db = wgmma_desc_sw128(qs + kb * QROWS * 128 + koff);
                    wgmma_m64n128k16_bf16(acc, da, db, 1);
                }
                wgmma_commit();
                // While the tensor cores run: compactions (in the key buffer of tile it+1, not loaded yet), then
                // the copy of tile it+1 (its buffer's last reader, the wgmma of tile it-1, is done) and the
                // append of tile it-1.
                compact_all((it + 1) & 1);
                if (it + 1 < ntiles) load_tile(it + 1);
                append(it - 1);
                wgmma_wait<0>();
                wgmma_fence_operands(acc);
                float* scw = sc + (it & 1) * SCF;
#pragma unroll
                for (int qq = 0; qq < BQ; ++qq) {
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        float s = 0.0f;
#pragma unroll
                        for (int j = 0; j < H / 8; ++j)
#pragma unroll
                            for (int e = 0; e < 2; ++e)
                                s = fmaf(wq[qq][j][e], fmaxf(acc[(qq * (H / 8) + j) * 4 + 2 * hr + e], 0.0f), s);
                        s += __shfl_xor_sync(0xffffffffu, s, 1);
                        s += __shfl_xor_sync(0xffffffffu, s, 2);
                        if ((lane & 3) == 0) scw[qq * TILE + erow + hr * 8] = s;
                    }
                }
                DSA_MARK(3);
            }
            __syncthreads();  // the last tile's scores are written; the append of ntiles-2 is done
            compact_all(0);   // no copy or wgmma in flight: every key buffer is free
            append(ntiles - 1);
        }
        __syncthreads();  // the last append is done
#else
#pragma unroll 1
        for (int it = 0; it < ntiles; ++it) {
            if (it + 1 < ntiles) {
                load_tile(it + 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
#if DSA_USE_WGMMA
            fence_proxy_async_shared();
#endif
            __syncthreads();  // tile `it` landed; the previous append (counts, floors, scores) is done
            DSA_MARK(1);  // copy issue + wait + barrier
            // Compact any buffer that could not take another full tile.
#pragma unroll 1
            for (int qq = 0; qq < BQ; ++qq) {
                const int n = cnt[qq];
#if DSA_FAST_ON
                if (n > CAP - TILE) compact_fast(cand + qq * CAP, n, topk, cnt + qq, lo + qq, hist, st, scratch);
#else
                if (n > CAP - TILE) {
                    uint64_t* cb = cand + qq * CAP;
                    const uint64_t K = block_kth_largest<NT>(cb, n, topk, hist, st, scratch);
                    const int kept = ordered_keep<NT>(cb, n, K, scratch, [&](int pos, uint64_t x) { cb[pos] = x; });
                    __syncthreads();
                    if (tid == 0) {
                        cnt[qq] = kept;
                        lo[qq] = K + 1ull;
                    }
                    __syncthreads();
                }
#endif
            }
            DSA_MARK(2);  // compactions
            const unsigned char* tb = kt + (it & 1) * (TILE * ROWB);

#if DSA_USE_WGMMA
            {
                // Warpgroup wg: keys [64 wg, 64 wg + 64) x all 128 pairs, K = D in 16-wide steps in order.
                const int wg = warp >> 2;
                float acc[64];
#pragma unroll
                for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
                wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < KS; ++ks) {
                    const int kb = ks >> 2, koff = (ks & 3) * 32;
                    const uint64_t da = wgmma_desc_sw128(tb + kb * TILE * 128 + wg * 64 * 128 + koff);
                    const uint64_t db = wgmma_desc_sw128(qs + kb * QROWS * 128 + koff);
                    wgmma_m64n128k16_bf16(acc, da, db, 1);
                }
                wgmma_commit();
                wgmma_wait<0>();
                wgmma_fence_operands(acc);
                const int row = wg * 64 + (warp & 3) * 16 + (lane >> 2);
#pragma unroll
                for (int qq = 0; qq < BQ; ++qq) {
#pragma unroll
                    for (int hr = 0; hr < 2; ++hr) {
                        float s = 0.0f;
#pragma unroll
                        for (int j = 0; j < H / 8; ++j)
#pragma unroll
                            for (int e = 0; e < 2; ++e)
                                s = fmaf(wq[qq][j][e], fmaxf(acc[(qq * (H / 8) + j) * 4 + 2 * hr + e], 0.0f), s);
                        s += __shfl_xor_sync(0xffffffffu, s, 1);
                        s += __shfl_xor_sync(0xffffffffu, s, 2);
                        if ((lane & 3) == 0) sc[qq * TILE + row + hr * 8] = s;
                    }
                }
            }
#else
            float acc[MT][4][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                uint32_t afr[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    const int row = kw * KW + mt * 16 + (lane & 15);
                    ldmatrix_x4(afr[mt], tb + swz(row, 2 * ks + (lane >> 4)));
                }
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt) mma_bf16_16816(acc[mt][nt], afr[mt], bfr[nt][ks]);
            }
            // ReLU, weights, head sum: registers in a fixed order, then the same xor tree in every lane.
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int hr = 0; hr < 2; ++hr) {
                    float s = 0.0f;
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                        for (int e = 0; e < 2; ++e) s = fmaf(wr[nt][e], fmaxf(acc[mt][nt][2 * hr + e], 0.0f), s);
                    s += __shfl_xor_sync(0xffffffffu, s, 1);
                    s += __shfl_xor_sync(0xffffffffu, s, 2);
                    if ((lane & 3) == 0) sc[g * TILE + kw * KW + mt * 16 + hr * 8 + (lane >> 2)] = s;
                }
            }
#endif
            DSA_MARK(3);  // matrix product + epilogue
            __syncthreads();  // scores ready; every warp is done reading this key tile
            DSA_MARK(4);  // barrier after the epilogue

            // Ordered append: warp qq walks the tile's keys in ascending id. The other warps go on to the
            // next tile's copy; the barrier at the top of the loop orders this append before the next
            // epilogue overwrites the score tile.
            if (warp < BQ && warp < un.nq) {
                const int qq = warp;
                const int t = un.q0 + qq;
                int vend = visible_end(un, t, causal);
                if (vend > un.khi) vend = un.khi;
                const uint64_t floor_key = lo[qq];
                int c0 = cnt[qq];
                const int j0 = un.klo + it * TILE;
#pragma unroll
                for (int c = 0; c < TILE / 32; ++c) {
                    const int r = c * 32 + lane;
                    const int j = j0 + r;
                    float s;
                    if (H == 64 && !WG) s = sc[(2 * qq) * TILE + r] + sc[(2 * qq + 1) * TILE + r];
                    else s = sc[qq * TILE + r];
                    const uint64_t x = score_id_key(s, (uint32_t)j);
                    const bool take = j < vend && x >= floor_key;
                    const unsigned b = __ballot_sync(0xffffffffu, take);
                    if (take) cand[qq * CAP + c0 + __popc(b & dsa_lanemask_lt())] = x;
                    c0 += __popc(b);
                }
                __syncwarp();  // every lane has read cnt[qq] before lane 0 rewrites it
                if (lane == 0) cnt[qq] = c0;
            }
            DSA_MARK(5);  // appends (thread 0 is in warp 0, which appends for query 0)
        }
        __syncthreads();  // the last append is done
#endif

        // Final selection per query, in buffer (= ascending id) order.
#if DSA_FAST_ON
        if constexpr (MULTI) {
            finish_unit_multi(un, cand, cnt, topk, out_idx, out_sc, ws_ent, ws_cnt, (uint32_t*)kt, hist);
            __syncthreads();
        } else
#endif
#pragma unroll 1
        for (int qq = 0; qq < un.nq; ++qq) {
            const int n = cnt[qq];
            uint64_t* part = nullptr;
            int* pc = nullptr;
            if (un.slot >= 0) {
                part = ws_ent + ((size_t)un.slot * BQ + qq) * topk;
                pc = ws_cnt + (size_t)un.slot * BQ + qq;
            }
#if DSA_FAST_ON
            finish_query_fast(cand + qq * CAP, n, topk, un.q0 + qq, out_idx, out_sc, part, pc, hist, st, scratch);
#else
            finish_query<NT>(cand + qq * CAP, n, topk, un.q0 + qq, un.q0 + qq, out_idx, out_sc, part, pc, hist,
                             st, scratch);
#endif
            __syncthreads();
        }

        DSA_MARK(6);  // final selection and output
        u = use_ticket ? ticket_draw(ticket, tslot) : u + gridDim.x;
        DSA_MARK(7);
    }
    if (use_ticket && tid == 0) ticket_done(ticket, u, (unsigned)nunits);
#if DSA_PROFILE
    if (tid == 0 && prof != nullptr)
        for (int i = 0; i < 8; ++i) atomicAdd(prof + i, (unsigned long long)pacc[i]);
#endif
}

// dsa_merge: one CTA per query whose block was split. Parts are appended in key order (each part is in
// ascending id), with the same floor/compaction rule as the scan, then the exact top-k is written.
// Merge table row: (t, first slot, number of parts, query index in its block). The part counts of up
// to DSA_MNT parts are read at once and the parts' keys are streamed as one flattened sequence, so the
// loads of many parts are in flight together.
#define DSA_MNT 1024
constexpr int MERGE_E = 4;  // keys per thread per append round
extern "C" __global__ void __launch_bounds__(DSA_MNT, 1)
dsa_merge(const int* __restrict__ mtab, int topk, const uint64_t* __restrict__ ws_ent,
          const int* __restrict__ ws_cnt, int* __restrict__ out_idx, float* __restrict__ out_sc) {
    constexpr int MNT = DSA_MNT;
    constexpr int MCAP = DSA_MCAP;
    constexpr int ROUND = MNT * MERGE_E;
    static_assert(MCAP >= 2 * ROUND, "merge capacity");
    extern __shared__ __align__(128) unsigned char smem[];
    uint64_t* cand = (uint64_t*)smem;
    uint32_t* hist = (uint32_t*)(smem + MCAP * 8);
    unsigned char* misc = smem + MCAP * 8 + HIST_WORDS * 4;
    DsaSelState* st = (DsaSelState*)misc;
    int* scratch = (int*)(misc + 64);
    int* pstart = (int*)(misc + 256);  // MNT + 1 ints: flattened start of each part of the batch

    const int* row = mtab + blockIdx.x * 4;
    const int t = row[0], slot0 = row[1], nparts = row[2], qi = row[3];
    const int tid = threadIdx.x;
    int n = 0;
    uint64_t floor_key = 0ull;
#pragma unroll 1
    for (int pb = 0; pb < nparts; pb += MNT) {
        const int nb = min(MNT, nparts - pb);
        const int c = tid < nb ? ws_cnt[(size_t)(slot0 + pb + tid) * BQ + qi] : 0;
        int total;
        const int ex = block_excl_scan<MNT>(c, scratch, total);
        if (tid < nb) pstart[tid] = ex;
        if (tid == 0) pstart[nb] = total;
        __syncthreads();
#pragma unroll 1
        for (int r0 = 0; r0 < total; r0 += ROUND) {
            if (n + ROUND > MCAP) {  // make room: keep exactly topk (n > MCAP - ROUND >= topk)
                const uint64_t K = block_kth_largest<MNT>(cand, n, topk, hist, st, scratch);
                n = ordered_keep<MNT>(cand, n, K, scratch, [&](int pos, uint64_t x) { cand[pos] = x; });
                floor_key = K + 1ull;
                __syncthreads();
            }
            const int i0 = r0 + tid * MERGE_E;
            uint64_t x[MERGE_E];
            int mine = 0;
            if (i0 < total) {
                int lo_p = 0, hi_p = nb;  // last part p with pstart[p] <= i0
                while (hi_p - lo_p > 1) {
                    const int mid = (lo_p + hi_p) >> 1;
                    if (pstart[mid] <= i0) lo_p = mid; else hi_p = mid;
                }
                int p = lo_p;
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e) {
                    const int i = i0 + e;
                    x[e] = 0ull;
                    if (i < total) {
                        while (pstart[p + 1] <= i) ++p;
                        x[e] = ws_ent[((size_t)(slot0 + pb + p) * BQ + qi) * topk + (i - pstart[p])];
                    }
                }
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e) mine += (i0 + e < total && x[e] >= floor_key) ? 1 : 0;
            }
            int added;
            int pos = n + block_excl_scan<MNT>(mine, scratch, added);
            if (i0 < total) {
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e)
                    if (i0 + e < total && x[e] >= floor_key) cand[pos++] = x[e];
            }
            n += added;
        }
        __syncthreads();  // pstart is rewritten by the next batch
    }
    __syncthreads();
    finish_query<MNT>(cand, n, topk, t, t, out_idx, out_sc, nullptr, nullptr, hist, st, scratch);
}
