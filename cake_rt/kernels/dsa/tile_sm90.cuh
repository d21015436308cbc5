// sm_90a tile loop, warp-specialized: the product warpgroups score key tiles on the tensor cores (wgmma)
// while the selection warpgroups append the scores in key order and compact the candidate buffers.
//
// Score tile = K_tile [TILE x D] * Q_block^T [D x N]: keys as M (two warpgroups of 64 keys), the unit's
// (query, head) pairs as N = 32, 64 or 128, the fewest columns that hold its nq * H pairs (zero columns past
// them), K = D in 16-wide steps in order: m64nNk16, whose every element is the same k16 steps whatever N is,
// so the float32 operations of a score depend neither on H's block layout nor on the unit's queries.
//
// Product (threads [0, NT)): each warpgroup streams its own 64 key rows of every tile (one thread's tensor-map
// copy, double-buffered, the copy of tile it+1 issued behind the wgmma of tile it; a block of two passes, H = 64's
// four queries, scores each tile twice, q rows 0-127 then 128-255, from one key buffer refilled once its last pass
// has read it). The two warpgroups issue their wgmma independently, so while one warpgroup's head sum runs the
// other's wgmma can, with no barrier between them (turn-taking measured slower: docs/dsa.md, round 41). The head sums
// write ring slot g % RING (g: the tile's number since the launch) once the selection has released the slot (its
// EMPTY mbarrier), then mark it full (BAR_FULL). Selection (threads [NT, 2 NT)), tile g: wait for FULL, compact
// buffers that could not take a tile, append, release the slot. Neither side has a block-wide barrier per tile, and
// the two product warpgroups share none; the selection always consumes tiles in key order, so every buffer stays
// ascending in id.
#pragma once
#include "tile_common.cuh"
#include "selection.cuh"
#include "../common/wgmma.cuh"
#include "../common/mbarrier.cuh"
#include "../common/tma.cuh"
#if !defined(CAKE_HAS_WGMMA)
#error "DSA_WGMMA needs the sm_90a target"
#endif

namespace dsa {

constexpr int SCF = BQ * TILE;  // floats per score slot
constexpr int WG_THREADS = 128;

// Before the roles split (then a block barrier): the slots' EMPTY mbarriers, one arrival per selection thread
// (each thread releases its own reads of the slot; compute-sanitizer's racecheck sees the order then, where a
// warp's __syncwarp before one lane's arrival left it reporting the product's next write as a race), and the
// product warpgroups' key-row FULL mbarriers, one arrival (the copying thread's, with the bytes) per tile.
CAKE_DEVICE void init_slots(uint64_t* empty, uint64_t* kfull) {
    if (threadIdx.x < RING) mbarrier_init(empty + threadIdx.x, NT);
    if (threadIdx.x >= 32 && threadIdx.x < 34) mbarrier_init(kfull + threadIdx.x - 32, 1);
}

// Warpgroup wgi's 64 key rows of tile `it` of the unit (keys klo + it * TILE + 64 wgi ..) into key buffer it % KBUF, by
// one thread: D / 64 boxes of the key map (64 rows x 64 columns in the 128-byte swizzle, 1024-byte aligned: the
// layout swz_rows gives and the wgmma descriptors read), their bytes completed on the warpgroup's FULL mbarrier
// (`full`). A warpgroup has at most one copy in flight and its threads wait for each before the next is issued
// (after their own wgmma of the tile before), so one mbarrier completes one phase per tile. Rows past the unit's end
// are the next keys of the tensor or, past its last row, TMA's zeros: their scores are computed and never appended
// (append_rows takes keys below khi only).
CAKE_DEVICE void copy_key_rows(unsigned char* kt, const CakeTensorMap* kmap, const Unit& un, int it, int wgi,
                               uint64_t* full) {
    unsigned char* dst = kt + (KBUF == 2 ? (it & 1) * (TILE * ROWB) : 0) + wgi * 64 * 128;
    const int row = un.klo + it * TILE + wgi * 64;
    mbarrier_arrive_expect_tx(full, 64 * ROWB);
#pragma unroll
    for (int kb = 0; kb < D / 64; ++kb) tma_load_2d(dst + kb * TILE * 128, kmap, kb * 64, row, full);
}

// Product side of one unit (threads [0, NT)) with NCOL pair columns (32, 64 or PAIRS; product_unit picks
// them), in NPASS passes a key tile (2: q rows PAIRS .. 2 PAIRS - 1 in the second, the block's queries NQ ..). Stages
// q and the weights (wsm: [BQ * H], 0 past nq) itself; ends with every wgmma and copy of the unit complete. g: tiles
// produced since the launch (both roles count the same tiles; a product warpgroup's FULL mbarrier completes phase g
// with tile g's rows).
template <int NCOL, int NPASS = 1>
CAKE_DEVICE void product_loop(const Unit& un, int ntiles, unsigned char* kt, unsigned char* qs, float* sc,
                              float* wsm, const bf16_t* q, const CakeTensorMap* kmap, const float* w, uint64_t* empty,
                              uint64_t* kfull, unsigned& g) {
    static_assert(NCOL == 32 || NCOL == 64 || NCOL == PAIRS, "a wgmma shape the product issues");
    static_assert(NPASS == 1 || (NPASS == QPASS && NCOL == PAIRS), "two passes of full columns");
    constexpr int NQ = NCOL / H < BQ ? NCOL / H : BQ;  // queries whose pairs a pass's columns hold
    if (ntiles == 0) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wgi = warp >> 2, wt = threadIdx.x & (WG_THREADS - 1);
    const int erow = wgi * 64 + (warp & 3) * 16 + (lane >> 2);  // first key row of this thread's accumulators
    uint64_t* full = kfull + wgi;
    if (wt == 0) copy_key_rows(kt, kmap, un, 0, wgi, full);
    load_q(qs, q, un);
    for (int i = threadIdx.x; i < BQ * H; i += NT) wsm[i] = i < un.nq * H ? w[(size_t)un.q0 * H + i] : 0.0f;
    // The weights of the heads this thread sums (head sum, tile_common.cuh): heads 8 j + 2 (lane % 4) + {0, 1}.
    const float* wl = wsm + 2 * (lane & 3);
    cp_async_wait<0>();
    fence_proxy_async_shared();  // cp.async results are read by wgmma (async proxy)
    named_sync(BAR_MMA, NT);     // q and the weights landed
    // The weights of the first RQ queries of a one-pass block with H <= 32 stay in registers for the unit: the
    // shared-memory pipe runs near its peak in the tile loop (docs/dsa.md, round 36), and this halves the head sum's
    // weight loads from it. (More queries, or H > 32, and the product role spills.)
    constexpr int RQ = NPASS == 1 && HB <= 4 ? (NQ < 8 / HB ? NQ : 8 / HB) : 0;
    float2 wr[RQ > 0 ? RQ : 1][HB];
#pragma unroll
    for (int qq = 0; qq < RQ; ++qq)
#pragma unroll
        for (int j = 0; j < HB; ++j) wr[qq][j] = *reinterpret_cast<const float2*>(wl + qq * H + j * 8);
    // The operands' descriptors at k-step 0: this warpgroup's rows of key buffer 0, and q. A key buffer, a 64-column
    // block of D and a k-step are constant byte offsets, which add to the low word (wgmma.cuh): no address
    // arithmetic between the wgmma instructions.
    const uint32_t a_lo = wgmma_desc_lo(smem_u32(kt + wgi * 64 * 128) & 0x3FFFFu, 16u);
    const uint32_t b_lo = wgmma_desc_lo(smem_u32(qs) & 0x3FFFFu, 16u);
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
        mbarrier_wait_parity(full, g & 1u);  // this warpgroup's rows of tile it landed
        const uint32_t a_tile = a_lo + (KBUF == 2 ? (it & 1) * (TILE * ROWB / 16) : 0);
#pragma unroll
        for (int p = 0; p < NPASS; ++p) {
            float acc[NCOL / 2];
#pragma unroll
            for (int i = 0; i < NCOL / 2; ++i) acc[i] = 0.0f;
            // S[64 keys x NCOL pairs] = K_wg Q_p^T (q rows p * PAIRS .. p * PAIRS + NCOL - 1)
            wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                const int kb = ks >> 2, koff = (ks & 3) * 32;
                const uint64_t da = wgmma_desc_sw128(a_tile + (kb * TILE * 128 + koff) / 16);
                const uint64_t db = wgmma_desc_sw128(b_lo + (p * PAIRS * 128 + kb * QROWS * 128 + koff) / 16);
                if constexpr (NCOL == 32) wgmma_m64n32k16_bf16(acc, da, db, 1);
                else if constexpr (NCOL == 64) wgmma_m64n64k16_bf16(acc, da, db, 1);
                else wgmma_m64n128k16_bf16(acc, da, db, 1);
            }
            wgmma_commit();
            // Two key buffers: every thread of this warpgroup has waited for its wgmma of tile it - 1, so that buffer
            // takes tile it + 1 while tile it's wgmma runs.
            if constexpr (KBUF == 2) {
                if (wt == 0 && it + 1 < ntiles) copy_key_rows(kt, kmap, un, it + 1, wgi, full);
            }
            wgmma_wait<0>();
            if constexpr (KBUF == 1) {
                // One key buffer: refilled once the warpgroup's last pass has read it (a wgmma is one operation of
                // the warpgroup: its completion, seen by the copying thread, is every warp's).
                if (p + 1 == NPASS && wt == 0 && it + 1 < ntiles) copy_key_rows(kt, kmap, un, it + 1, wgi, full);
            }
            wgmma_fence_operands(acc);
            const unsigned slot = g % RING;
            // The selection has appended tile g - RING (the slot's phase (g / RING - 1) has completed).
            if (p == 0 && g >= RING) mbarrier_wait_parity(empty + slot, ((g / RING) & 1u) ^ 1u);
            // score = sum_h w_h relu(S_h), queries p * NQ ..
            head_sum_store<NQ>(acc,
                               [&](int qq, int j) {
                                   if (qq < RQ) return wr[qq < RQ ? qq : 0][j];
                                   return *reinterpret_cast<const float2*>(wl + (p * NQ + qq) * H + j * 8);
                               },
                               sc + slot * SCF + p * NQ * TILE, erow);
        }
        named_arrive(BAR_FULL + g % RING, BLOCK);
        ++g;
    }
}

// The product of a unit with the fewest columns that hold its nq * H pairs: 32, 64 or PAIRS. A split tail's
// one-query parts (H = 32 or 64: 32 or 64 of 128 columns) then take a quarter or half of the tensor time per
// tile, which bounds their tile loop. Each element of a score tile is the same k16 steps in the same order
// whatever N the instruction has, so a score's bits do not depend on the shape (the fingerprints and the
// GPU tests compare one-query units with full blocks bit for bit).
CAKE_DEVICE void product_unit(const Unit& un, int ntiles, unsigned char* kt, unsigned char* qs, float* sc,
                              float* wsm, const bf16_t* q, const CakeTensorMap* kmap, const float* w, uint64_t* empty,
                              uint64_t* kfull, unsigned& g) {
    const int pairs = un.nq * H;
    if constexpr (H <= 32) {
        if (pairs <= 32) return product_loop<32>(un, ntiles, kt, qs, sc, wsm, q, kmap, w, empty, kfull, g);
    }
    if constexpr (H <= 64) {
        if (pairs <= 64) return product_loop<64>(un, ntiles, kt, qs, sc, wsm, q, kmap, w, empty, kfull, g);
    }
    if constexpr (QPASS == 2) {
        if (pairs > PAIRS) return product_loop<PAIRS, 2>(un, ntiles, kt, qs, sc, wsm, q, kmap, w, empty, kfull, g);
    }
    product_loop<PAIRS>(un, ntiles, kt, qs, sc, wsm, q, kmap, w, empty, kfull, g);
}

// Selection side of one unit (threads [NT, 2 NT)): every tile's scores appended in key order (gh: the split
// block's histograms of appended keys, else nullptr). Ends with a selection barrier (the last append is done).
CAKE_DEVICE void select_loop(const Sel& s, const Unit& un, int ntiles, const float* sc, int topk, int causal,
                             uint32_t* gh, uint64_t* empty, unsigned& g) {
    const auto select_tile = [&](int it) {
        const unsigned slot = g % RING;
        // The scores of tile it are in the slot; a barrier of the selection threads too (the previous
        // append's counts are visible).
        named_sync(BAR_FULL + slot, BLOCK);
        open_windows(s, it);
        compact_full(s, topk);
        append_tile(s, un, sc + slot * SCF, un.klo + it * TILE, causal, gh);
        mbarrier_arrive(empty + slot);  // this thread is done reading the slot
    };
    if constexpr (RUNNING_FLOOR) {
        // A one-query part of RFLOOR_TILES tiles or more raises its floor a third of the way through (the floor's
        // round trip and scan, ~1 us, against the appends and counts it saves over the rest of the tiles; shorter
        // parts lost, docs/dsa.md round 54), between two runs of the tile loop: the outer loop runs the one inner loop
        // twice, so select_tile's code is inlined once (a second copy grows the program that the A rows' cold
        // instruction fetch pays for, round 55).
        const int raise_at = gh && un.nq == 1 && ntiles >= RFLOOR_TILES ? ntiles / 3 : ntiles;
        int it = 0;
#pragma unroll 1
        for (int stop = raise_at;; stop = ntiles) {
#pragma unroll 1
            for (; it < stop; ++it, ++g) select_tile(it);
            if (it == ntiles) break;
            raise_split_floor(s, gh, topk);
        }
    } else {
#pragma unroll 1
        for (int it = 0; it < ntiles; ++it, ++g) select_tile(it);
    }
    sel_sync();
}

}  // namespace dsa
