// Deterministic DSA indexer top-k: fused scores (tensor cores) + exact streaming top-k, one launch.
//
//   score(t, j) = sum_h weights[t, h] * fmaxf(0, dot(q[t, h, :], k[j, :]))
//
// dsa_scan: a persistent grid draws work units (a block of <= BQ consecutive queries of one segment x a
// range of keys) from a ticket word (or a static enumeration); per unit:
//   setup      stage q (rows = (query, head) pairs, zero-padded to the product's N) and the weights
//   tile loop  tile_sm90.cuh (wgmma, warp-specialized: product and selection warpgroups on a ring of score
//              tiles) or tile_sm80.cuh (mma.sync): score tiles, appended in key order to per-query
//              candidate buffers with compactions (selection.cuh)
//   finish     exact top-k of each buffer: the output row, or a part when the block's keys are split
//   merge      the last part of a split block to arrive merges its parts (merge.cuh)
// The float32 operations of score(t, j) are the same for every (t, j) of a program: D in 16-wide steps in
// order, then the head sum of tile_common.cuh (a function of H only). A key's or a query's position in a
// tile or block only changes which thread holds it.
// (The include inliner is textual: everything both loops need is included before the #if.)
#include "layout.cuh"
#include "tile_common.cuh"
#include "selection.cuh"
#include "merge.cuh"
#include "../common/ticket.cuh"
#if DSA_USE_WGMMA
#include "tile_sm90.cuh"
#else
#include "tile_sm80.cuh"
#endif

using namespace dsa;

// The selection's end of a unit: the exact top-k of every query (output rows), or for a split unit its parts
// and, when it is the last part of its block to arrive, the merge (merge.cuh). Selection threads only.
CAKE_DEVICE void finish_and_merge(const Sel& sel, const Unit& un, int topk, unsigned char* smem, unsigned* arrivals,
                                  int* flags, int* out_idx, float* out_sc, uint64_t* ws_ent, int* ws_cnt) {
    if (un.slot >= 0)
        finish_split_unit(sel, un, topk, arrivals, flags + 1, out_idx, out_sc, ws_ent, ws_cnt,
                          reinterpret_cast<uint64_t*>(smem), reinterpret_cast<int*>(smem + Layout::pstart));
    else  // the key tiles are free now
        finish_unit(sel, un, topk, out_idx, out_sc, reinterpret_cast<uint32_t*>(smem + Layout::kt));
}

#if DSA_USE_WGMMA
// Register split of the warp-specialized block (64K registers / 512 threads on entry): the product keeps
// its accumulators (64) and addresses, the selection its register-resident buffers.
constexpr int PRODUCT_REGS = 104, SELECT_REGS = 152;
static_assert(PRODUCT_REGS + SELECT_REGS == 2 * (65536 / BLOCK), "the register file, split");

// Next unit: every thread of the block meets at BAR_UNIT (the previous unit is done with every buffer). The
// product and the selection call it from their own loops: the unaligned barrier.
CAKE_DEVICE unsigned next_unit(unsigned u, unsigned* ticket, int use_ticket, unsigned* tslot) {
    named_sync_unaligned(BAR_UNIT, BLOCK);  // everyone has read the previous ticket and is done with the unit
    if (!use_ticket) return u + gridDim.x;
    if (threadIdx.x == 0) *tslot = atomicAdd(ticket, 1u);
    named_sync_unaligned(BAR_UNIT, BLOCK);
    return *tslot;
}
#endif

#if DSA_USE_WGMMA
// The key map (sm_90a): k as [Tkv rows][D columns], 64 x 64 boxes in the 128-byte swizzle (cake_rt/ops/dsa.py).
#define DSA_KMAP_PARAM , const __grid_constant__ CakeTensorMap tm_k
#else
#define DSA_KMAP_PARAM
#endif

// units: int32 [nunits, UNIT_INTS], longest first. ticket: the ticket word (use_ticket). arrivals: one record
// of SPLIT_WORDS per split block (zero at launch, left at zero). ws_ent / ws_cnt: parts of split units.
extern "C" __global__ void __launch_bounds__(BLOCK, 1)
dsa_scan(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kmat, const float* __restrict__ w,
         const int* __restrict__ units, int nunits, unsigned* ticket, int use_ticket, unsigned* arrivals, int topk,
         int causal, int* __restrict__ out_idx, float* __restrict__ out_sc, uint64_t* __restrict__ ws_ent,
         int* __restrict__ ws_cnt DSA_KMAP_PARAM) {
    // ---- shared memory
    extern __shared__ __align__(128) unsigned char smem_raw[];
    // wgmma tiles start 1024-byte aligned (the swizzle is a function of the address).
    unsigned char* smem = smem_raw + (WG ? ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u) : 0u);
    unsigned char* kt = smem + Layout::kt;
    unsigned char* qs = smem + Layout::q;
    float* sc = reinterpret_cast<float*>(smem + Layout::sc);
    int* flags = reinterpret_cast<int*>(smem + Layout::flags);
    unsigned* tslot = reinterpret_cast<unsigned*>(flags);
    Sel sel;
    sel.cand = reinterpret_cast<uint32_t*>(smem + Layout::cand);
    sel.cnt = reinterpret_cast<int*>(smem + Layout::cnt);
    sel.lo = reinterpret_cast<uint64_t*>(smem + Layout::lo);
    sel.hist = reinterpret_cast<uint32_t*>(smem + Layout::hist);
    sel.st = reinterpret_cast<DsaSelState*>(smem + Layout::st);
    sel.scratch = reinterpret_cast<int*>(smem + Layout::scratch);
    sel.chist = reinterpret_cast<uint32_t*>(smem + Layout::chist);
    sel.pscratch = reinterpret_cast<uint64_t*>(smem + Layout::pstart);
    const int tid = threadIdx.x;

#if DSA_USE_WGMMA
    // ---- warp-specialized: the product warpgroups and the selection warpgroups walk the same units
    uint64_t* empty = reinterpret_cast<uint64_t*>(smem + Layout::empty);
    uint64_t* kfull = reinterpret_cast<uint64_t*>(smem + Layout::kfull);
    // The key map into the TMA unit's cache before the unit's row is read: its fetch off the first copy's path.
    if (tid == 0) tma_prefetch_map(&tm_k);
    init_slots(empty, kfull);
    __syncthreads();  // the mbarriers are initialised
    unsigned g = 0u;  // score tiles since the launch (each role counts them)
    unsigned u = use_ticket ? next_unit(0u, ticket, 1, tslot) : blockIdx.x;
    if (tid < NT) {
        setmaxnreg_dec<PRODUCT_REGS>();
        float* wsm = reinterpret_cast<float*>(smem + Layout::wts);
        while (u < (unsigned)nunits) {
            const Unit un = load_unit(units, (int)u);
            const int span = un.khi - un.klo;
            const int ntiles = span > 0 ? (span + TILE - 1) / TILE : 0;
            product_unit(un, ntiles, kt, qs, sc, wsm, q, &tm_k, w, empty, kfull, g);
            u = next_unit(u, ticket, use_ticket, tslot);
        }
    } else {
        setmaxnreg_inc<SELECT_REGS>();
        while (u < (unsigned)nunits) {
            const Unit un = load_unit(units, (int)u);
            const int span = un.khi - un.klo;
            const int ntiles = span > 0 ? (span + TILE - 1) / TILE : 0;
            reset_queries(sel, sel_tid(), NT);
            sel_sync();
            select_loop(sel, un, ntiles, sc, topk, causal, split_hist(arrivals, un), empty, g);
            finish_and_merge(sel, un, topk, smem, arrivals, flags, out_idx, out_sc, ws_ent, ws_cnt);
            // Its accesses of the key tiles (the final selection's histograms, the merge's buffer) before the next
            // unit's tensor-map copies (the async proxy) overwrite them.
            fence_proxy_async_shared();
            u = next_unit(u, ticket, use_ticket, tslot);
        }
    }
#else
    // ---- scheduler
    unsigned u = use_ticket ? ticket_draw(ticket, tslot) : blockIdx.x;
    while (u < (unsigned)nunits) {
        const Unit un = load_unit(units, (int)u);
        __syncthreads();  // the previous unit is done with every buffer

        // ---- setup: q, weights, empty buffers, key tile 0 in flight
        load_q(qs, q, un);
        cp_async_wait<0>();
        reset_queries(sel, tid, BLOCK);
        float wq[BQ][HB][2];
        load_weights(wq, w, un);
        __syncthreads();
        const int span = un.khi - un.klo;
        const int ntiles = span > 0 ? (span + TILE - 1) / TILE : 0;
        if (ntiles > 0) load_key_tile(kt, kmat, un, 0);

        // ---- tile loop (scores + ordered appends)
        tile_loop(sel, un, ntiles, kt, qs, sc, kmat, wq, topk, causal, split_hist(arrivals, un));
        finish_and_merge(sel, un, topk, smem, arrivals, flags, out_idx, out_sc, ws_ent, ws_cnt);

        u = use_ticket ? ticket_draw(ticket, tslot) : u + gridDim.x;
    }
#endif
    if (use_ticket && tid == 0) ticket_done(ticket, u, (unsigned)nunits);
}
