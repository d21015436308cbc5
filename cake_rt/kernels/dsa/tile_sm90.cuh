// sm_90a tile loop: scores of one unit's key tiles on the tensor cores (wgmma), appended in key order.
//
// Score tile = K_tile [TILE x D] * Q_block^T [D x 128]: keys as M (two warpgroups of 64 keys), the
// block's (query, head) pairs as N = 128 (zero columns past nq * H), K = D in 16-wide steps in order,
// m64n128k16 for every program, so the float32 operations of a score never depend on H's block layout.
//
// Software pipeline, iteration it: wait for key tile it; issue its wgmma (asynchronous); while the
// tensor cores run, compact nearly full buffers, start the copy of tile it+1 and append tile it-1's
// scores; then wait for the wgmma and write tile it's scores to the other score buffer.
#pragma once
#include "tile_common.cuh"
#include "selection.cuh"
#include "../common/wgmma.cuh"
#if !defined(CAKE_HAS_WGMMA)
#error "DSA_WGMMA needs the sm_90a target"
#endif

namespace dsa {

// q must be staged (load_q, waited, proxy-fenced) and key tile 0 in flight; wq loaded.
CAKE_DEVICE void tile_loop(const Sel& s, const Unit& un, int ntiles, unsigned char* kt, const unsigned char* qs,
                           float* sc, const bf16_t* kmat, const float (&wq)[BQ][HB][2], int topk, int causal) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wgi = warp >> 2;
    const int erow = wgi * 64 + (warp & 3) * 16 + (lane >> 2);  // first key row of this thread's accumulators
    constexpr int SCF = BQ * TILE;                                // floats per score buffer
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
        cp_async_wait<0>();
        fence_proxy_async_shared();  // cp.async results are read by wgmma (async proxy)
        // Tile it landed for every thread; every warpgroup has waited for the wgmma of tile it-1 (so its
        // key buffer may be refilled) and written its scores; the append of it-2 is done.
        __syncthreads();
        const unsigned char* tb = kt + (it & 1) * (TILE * ROWB);
        float acc[64];
#pragma unroll
        for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
        // S[64 keys x 128 pairs] = K_wg Q^T
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const int kb = ks >> 2, koff = (ks & 3) * 32;
            const uint64_t da = wgmma_desc_sw128(tb + kb * TILE * 128 + wgi * 64 * 128 + koff);
            const uint64_t db = wgmma_desc_sw128(qs + kb * QROWS * 128 + koff);
            wgmma_m64n128k16_bf16(acc, da, db, 1);
        }
        wgmma_commit();
        // While the tensor cores run: compactions (in the key buffer of tile it+1, not loaded yet), the copy
        // of tile it+1 (its buffer's last reader, the wgmma of tile it-1, is done), the append of tile it-1.
        compact_full(s, topk, kt + ((it + 1) & 1) * (TILE * ROWB));
        if (it + 1 < ntiles) load_key_tile(kt, kmat, un, it + 1);
        if (it >= 1) append_tile(s, un, sc + ((it - 1) & 1) * SCF, un.klo + (it - 1) * TILE, causal);
        wgmma_wait<0>();
        wgmma_fence_operands(acc);
        // score = sum_h w_h relu(S_h)
        head_sum_store(acc, wq, sc + (it & 1) * SCF, erow);
    }
    __syncthreads();  // the last tile's scores are written; the append of ntiles-2 is done
    if (ntiles > 0) {
        compact_full(s, topk, kt);  // no copy or wgmma in flight: every key buffer is free
        append_tile(s, un, sc + ((ntiles - 1) & 1) * SCF, un.klo + (ntiles - 1) * TILE, causal);
    }
    __syncthreads();  // the last append is done
}

}  // namespace dsa
