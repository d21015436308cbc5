// sm_90a tile loop, warp-specialized: the product warpgroups score key tiles on the tensor cores (wgmma)
// while the selection warpgroups append the scores in key order and compact the candidate buffers.
//
// Score tile = K_tile [TILE x D] * Q_block^T [D x 128]: keys as M (two warpgroups of 64 keys), the
// block's (query, head) pairs as N = 128 (zero columns past nq * H), K = D in 16-wide steps in order,
// m64n128k16 for every program, so the float32 operations of a score never depend on H's block layout.
//
// Product (threads [0, NT)), tile it: wait for key tile it (cp.async, double-buffered); issue its wgmma,
// then the copy of tile it+1; the head sum writes the scores to ring slot it % RING once the selection has
// released it (named barrier EMPTY), then marks it full (FULL). Selection (threads [NT, 2 NT)), tile it:
// wait for FULL, compact buffers that could not take a tile, append, release the slot. Neither side has a
// block-wide barrier per tile; the selection always consumes tiles in key order, so every buffer stays
// ascending in id.
#pragma once
#include "tile_common.cuh"
#include "selection.cuh"
#include "../common/wgmma.cuh"
#if !defined(CAKE_HAS_WGMMA)
#error "DSA_WGMMA needs the sm_90a target"
#endif

namespace dsa {

constexpr int SCF = BQ * TILE;  // floats per score slot

// Product side of one unit (threads [0, NT)). Stages q and the weights (wsm: [BQ * H], 0 past nq) itself;
// ends with every wgmma and copy of the unit complete.
CAKE_DEVICE void product_loop(const Unit& un, int ntiles, unsigned char* kt, unsigned char* qs, float* sc,
                              float* wsm, const bf16_t* q, const bf16_t* kmat, const float* w) {
    if (ntiles == 0) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wgi = warp >> 2;
    const int erow = wgi * 64 + (warp & 3) * 16 + (lane >> 2);  // first key row of this thread's accumulators
    load_q(qs, q, un);
    load_key_tile(kt, kmat, un, 0);
    for (int i = threadIdx.x; i < BQ * H; i += NT) wsm[i] = i < un.nq * H ? w[(size_t)un.q0 * H + i] : 0.0f;
    // The weights of the heads this thread sums (head sum, tile_common.cuh): heads 8 j + 2 (lane % 4) + {0, 1}.
    const float* wl = wsm + 2 * (lane & 3);
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
        cp_async_wait<0>();
        fence_proxy_async_shared();  // cp.async results are read by wgmma (async proxy)
        // Tile it (q, the weights) landed for every product thread; both warpgroups have waited for the
        // wgmma of tile it-1, so its key buffer may be refilled.
        named_sync(BAR_MMA, NT);
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
        if (it + 1 < ntiles) load_key_tile(kt, kmat, un, it + 1);
        wgmma_wait<0>();
        wgmma_fence_operands(acc);
        const int slot = it % RING;
        if (it >= RING) named_sync(BAR_EMPTY + slot, BLOCK);  // the selection has appended tile it - RING
        // score = sum_h w_h relu(S_h)
        head_sum_store(acc, [&](int qq, int j) { return *reinterpret_cast<const float2*>(wl + qq * H + j * 8); },
                       sc + slot * SCF, erow);
        named_arrive(BAR_FULL + slot, BLOCK);
    }
}

// Selection side of one unit (threads [NT, 2 NT)): every tile's scores appended in key order. Ends with
// a selection barrier (the last append is done).
CAKE_DEVICE void select_loop(const Sel& s, const Unit& un, int ntiles, const float* sc, int topk, int causal) {
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
        const int slot = it % RING;
        // The scores of tile it are in the slot; a barrier of the selection threads too (the previous
        // append's counts are visible).
        named_sync(BAR_FULL + slot, BLOCK);
        compact_full(s, topk);
        append_tile(s, un, sc + slot * SCF, un.klo + it * TILE, causal);
        // Released only when the product will refill it in this unit: every arrival meets one wait.
        if (it + RING < ntiles) named_arrive(BAR_EMPTY + slot, BLOCK);
    }
    sel_sync();
}

}  // namespace dsa
