// Mamba2 SSD combined prefill: the exact-scan and chunk-parallel kernels (see ssd_tile.cuh for the shared chunk
// arithmetic that makes them bitwise equal).
//
// A program holds one kernel, picked by SSD_FAMILY (0: ssd_exact, 1: ssd_chunkpar): a call runs one family, and
// NVRTC compiles only the kernel it runs. Per-family defines (the host picks them from the shared-memory budget,
// ops/ssd.py `program_defines`):
//   SSD_HBX, SSD_NBUFX                 exact scan: units per CTA, B/X buffers (1 or 2)
//   SSD_HB, SSD_NBUF                   chunk-parallel: the same
//   SSD_ROWS                           chunk-parallel: phase-3 items a tile (its row blocks split, ssd_next_row)
//   SSD_COLS                           chunk-parallel: phase-1 items a tile (its state columns split, ssd_chunk_state)
#include "ssd_tile.cuh"
#include "../common/grid_barrier.cuh"

#if !defined(SSD_FAMILY) || (SSD_FAMILY != 0 && SSD_FAMILY != 1)
#error "SSD_FAMILY: 0 (exact scan) or 1 (chunk-parallel)"
#endif
#ifndef SSD_MINB
#define SSD_MINB 2
#endif
// State columns per pass: HB units x NB columns of fp32 accumulators stay at 64 registers per thread.
#ifndef SSD_NBMAX
#define SSD_NBMAX 128
#endif
#define SSD_NB_OF(HB) ((SSD_NBMAX / (HB)) < SSD_N ? (SSD_NBMAX / (HB)) : SSD_N)

__device__ __forceinline__ float sd_to_float(SDT v) { return ESD::to_float(v); }
__device__ __forceinline__ SDT sd_from_float(float v) { return ESD::from_float(v); }

#if SSD_FAMILY == 0
#ifndef SSD_HBX
#define SSD_HBX 1
#endif
#ifndef SSD_NBUFX
#define SSD_NBUFX 2
#endif

// ===================================================================================================
// Exact scan: one CTA per (segment, block of HB units); chunks in order, fp32 states in shared memory.
// ===================================================================================================
// Round_T of the state element pair (p, n), (p, n + 1) into the unit's S_prev operand tile (SSD_WG: the
// wgmma operand is a 16-bit tile; the mma.sync path packs its fragments from the fp32 states instead).
__device__ __forceinline__ void put_prev(const SsdSmem& s, int u, int p, int n, float v0, float v1) {
#if SSD_WG
    st_pair(sS(s, u) + tidx(SSD_LDN, p, n), v0, v1);
#endif
}

// S_u <- fma(decay_u, S_u, S_loc_u) on the warp's rows and the pass's columns (and round_T(S_u), SSD_WG).
template <int HB, int NB>
struct ExactSink {
    const SsdSmem* s;
    __device__ __forceinline__ void operator()(int n0, float (*acc)[NB / 8][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
        const int m0 = 16 * (threadIdx.x >> 5);
#pragma unroll
        for (int u = 0; u < HB; ++u) {
            const float decay = s->dec[u];
            float* S = s->Sf + u * SSD_PB * SSD_LDF;
#pragma unroll
            for (int t = 0; t < NB / 8; ++t) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    float2* q = (float2*)(S + (m0 + g + 8 * half) * SSD_LDF + n0 + 8 * t + 2 * tg);
                    float2 v = *q;
                    v.x = ssd_state_step(decay, v.x, acc[u][t][2 * half]);
                    v.y = ssd_state_step(decay, v.y, acc[u][t][2 * half + 1]);
                    *q = v;
                    put_prev(*s, u, m0 + g + 8 * half, n0 + 8 * t + 2 * tg, v.x, v.y);
                }
            }
        }
#if SSD_WG
        fence_proxy_async_shared();  // round_T(S) is read by wgmma (async proxy) after the next barrier
#endif
    }
};

// Copy the block's fp32 states to a returned state array (state dtype) at state index idx.
// FRESH_TID (the fused state's programs): tid.x read here (volatile), so that the addresses below are not computed
// ahead of the chunk loop and held across it (ptxas spills them beside the fused state's accumulators).
template <int HB, bool FRESH_TID = false>
__device__ __forceinline__ void store_states(const SsdArgs& a, const float* Sf, SDT* out, long long idx, int u0) {
    int tid = threadIdx.x;
    if constexpr (FRESH_TID) asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    for (int e = tid; e < HB * SSD_PB * SSD_N; e += SSD_THREADS) {
        const int u = e / (SSD_PB * SSD_N), p = (e / SSD_N) % SSD_PB, n = e % SSD_N;
        out[ssd_state_index(idx, a.nheads, unit_head(u0 + u), unit_p0(u0 + u) + p) + n] =
            sd_from_float(Sf[(u * SSD_PB + p) * SSD_LDF + n]);
    }
}

// The CTA's item: its segment's record, first token, length and chunks, and its block's first unit.
struct ExactItem {
    const long long* seg;
    long long tok0;
    int len, nch, u0;
};
template <int HB>
__device__ __forceinline__ ExactItem exact_item(const SsdArgs& a) {
    const int nblk = a.nheads * SSD_PBLKS / HB;
    const int item = blockIdx.x;
    const int si = (int)a.table[(long long)a.nseg * 8 + item / nblk];  // longest segments first
    ExactItem it;
    it.u0 = (item % nblk) * HB;
    it.seg = a.table + (long long)si * 8;
    it.tok0 = it.seg[SEG_TOK0];
    it.len = (int)it.seg[SEG_LEN];
    it.nch = (it.len + SSD_Q - 1) / SSD_Q;
    return it;
}

extern "C" __global__ void __launch_bounds__(SSD_CTA_THREADS, SSD_MINB) ssd_exact(
    const T* __restrict__ x, const DTT* __restrict__ dt, const float* __restrict__ A, const T* __restrict__ Bm,
    const T* __restrict__ Cm, const float* __restrict__ D, const T* __restrict__ z, const float* __restrict__ dt_bias,
    const SDT* __restrict__ init, T* y, SDT* final_out, SDT* varlen_out, SDT* chunk_out,
    const long long* __restrict__ table, int nseg, int total_chunks, int nheads, int ngroups, int flags, float lo, float hi
    SSD_TMAP_PARAMS) {
    constexpr int HB = SSD_HBX, NBUF = SSD_NBUFX, NB = SSD_NB_OF(SSD_HBX);
    // sm_90a, one unit, one pass of every state column: the chunk-local state is computed in the output's last row
    // block (ssd_chunk_output's NBS), whose steps load the chunk's B / X sub-blocks in the state pass's order, so the
    // chunk loads them once. (Two units, or two passes: the accumulators beside the row block's spill.) Chunks of up to
    // 128 tokens: at 256 the fused program spills in the math warpgroup and ran m2-2.7b-b8 0.93-0.97x (docs/ssd.md, ssd40).
    constexpr bool FUSED = SSD_WG && HB == 1 && NB == SSD_N && SSD_Q <= 128;
    const SsdArgs a{x, dt, A, Bm, Cm, D, z, dt_bias, init, y, final_out, varlen_out, chunk_out, table,
                    nseg, total_chunks, nheads, ngroups, flags, lo, hi SSD_TMAP_ARGS};
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SsdSmem s = ssd_smem<HB, NBUF, true>(smem_raw);
    float* Sf = s.Sf;
    SsdPipe pipe{0, 0, 0, 0, 0};
#if SSD_WG
    ssd_pipe_init(s);
    if (threadIdx.x >= SSD_THREADS) {  // the producer warpgroup: every tile load, in the math warpgroup's order,
        setmaxnreg_dec<SSD_LOAD_REGS>();  // and the chunk prep, a chunk ahead (off the math warpgroup's path)
        // (each role reads the CTA's item after the split: a value read before it that the producer keeps across its
        // loop is spilled at the split, where the producer has 40 registers, and the math warpgroup reloads it from there)
        const ExactItem it = exact_item<HB>(a);
        const long long tok0 = it.tok0;
        const int len = it.len, nch = it.nch, u0 = it.u0;
        float raw[SSD_PREP_TASKS(HB)];
        load_prep_dt<HB>(a, raw, tok0, min(SSD_Q, len), u0);
        if (nch > 0) produce_chunk_prep<HB>(a, s, pipe, raw, min(SSD_Q, len), u0);
        for (int c = 0; c < nch; ++c) {
            const long long ctok = tok0 + (long long)c * SSD_Q;
            const int l = min(SSD_Q, len - c * SSD_Q);
            const int ln = min(SSD_Q, len - (c + 1) * SSD_Q);  // the next chunk's tokens (<= 0: none)
            if (ln > 0) load_prep_dt<HB>(a, raw, ctok + SSD_Q, ln, u0);
            produce_output<HB, NBUF, 1>(a, s, pipe, ctok, l, 0, u0, nullptr, nullptr, -1);
            // The next chunk's prep here: its set was released a chunk ago, and the math warpgroup is in this chunk's
            // last row block, whose diagonal step frees the slot of the state pass's first load only after a copy's
            // round trip and C_i B_i^T.
            if (ln > 0) produce_chunk_prep<HB>(a, s, pipe, raw, ln, u0);
            if (!FUSED) produce_state<HB, NBUF, NB, 1>(a, s, pipe, ctok, l, u0, 0);
        }
        cp_async_drain();
        return;
    }
    setmaxnreg_inc<SSD_MATH_REGS>();
#endif
    const ExactItem it = exact_item<HB>(a);
    const long long* seg = it.seg;
    const long long tok0 = it.tok0;
    const int len = it.len, nch = it.nch, u0 = it.u0;
    const long long init_idx = seg[SEG_INIT];

    // S = initial state (fp32)
    for (int e = 2 * threadIdx.x; e < HB * SSD_PB * SSD_N; e += 2 * SSD_THREADS) {
        const int u = e / (SSD_PB * SSD_N), p = (e / SSD_N) % SSD_PB, n = e % SSD_N;
        float v0 = 0.0f, v1 = 0.0f;
        if ((a.flags & SSD_F_INIT) && init_idx >= 0) {
            const SDT* src = a.init + ssd_state_index(init_idx, a.nheads, unit_head(u0 + u), unit_p0(u0 + u) + p) + n;
            v0 = sd_to_float(src[0]);
            v1 = sd_to_float(src[1]);
        }
        Sf[(u * SSD_PB + p) * SSD_LDF + n] = v0;
        Sf[(u * SSD_PB + p) * SSD_LDF + n + 1] = v1;
        put_prev(s, u, p, n, v0, v1);
    }
#if SSD_WG
    fence_proxy_async_shared();  // round_T(S) is read by wgmma after the first barrier
#endif

    for (int c = 0; c < nch; ++c) {
        const long long ctok = tok0 + (long long)c * SSD_Q;
        const int l = min(SSD_Q, len - c * SSD_Q);
#if SSD_WG
        const int slot = ring_slot<2>(pipe.dt);  // the chunk's prep set, computed by the producer
        const SsdSmem sc = prep_set<HB>(s, slot);
        math_sync();  // publishes S (the initial state, the previous chunk's sink) to every warp's products
        use_begin(s, BAR_FULL_PREP + slot, ring_phase<2>(pipe.dt), false);
        ExactSink<HB, NB> sink{&sc};
        if constexpr (FUSED) {
            ssd_chunk_output<HB, NBUF, 1, true, NB>(a, sc, pipe, ctok, l, 0, u0, false, &sink);
        } else {
            ssd_chunk_output<HB, NBUF, 1, true>(a, sc, pipe, ctok, l, 0, u0, false);
            ssd_chunk_state<HB, NBUF, NB, 1>(a, sc, pipe, l, 0, sink);
        }
        use_end(s, BAR_EMPTY_PREP + slot);  // (after the sink's read of the decay)
        ++pipe.dt;
#else
        ssd_chunk_prep<HB>(a, s, pipe, ctok, l, u0);            // (its first barrier also publishes S)
        ExactSink<HB, NB> sink{&s};
        ssd_chunk_output<HB, NBUF, 1, true>(a, s, ctok, l, 0, u0);
        ssd_chunk_state<HB, NBUF, NB, 1>(a, s, ctok, l, u0, 0, sink);
#endif
        if (a.chunk_out != nullptr && l == SSD_Q) {        // the checkpoint after a complete chunk
            math_sync();
            store_states<HB, FUSED>(a, Sf, a.chunk_out, seg[SEG_CKPT0] + c, u0);
        }
    }
    math_sync();
    const long long fi = seg[SEG_FINAL], vi = seg[SEG_VARLEN];
    if (fi >= 0 && a.final_out) store_states<HB, FUSED>(a, Sf, a.final_out, fi, u0);
    if (vi >= 0 && a.varlen_out) store_states<HB, FUSED>(a, Sf, a.varlen_out, vi, u0);
}

#endif  // SSD_FAMILY == 0

#if SSD_FAMILY == 1
#ifndef SSD_HB
#define SSD_HB 1
#endif
#ifndef SSD_NBUF
#define SSD_NBUF 2
#endif
#ifndef SSD_ROWS
#define SSD_ROWS 1
#endif
#ifndef SSD_COLS
#define SSD_COLS 1
#endif
#ifndef SSD_SCAN_BATCH
#define SSD_SCAN_BATCH (SSD_N > 128 ? 2 : 8)
#endif

// ===================================================================================================
// Chunk-parallel: ONE cooperative kernel. The units (head, 64 headdim rows) are cut into slices whose
// workspace fits the cap; per slice three phases separated by grid barriers:
//   1. every (chunk, block of HB units) tile: S_loc -> fp32 workspace, 2^cs_last -> decay workspace, the prep's
//      cs and dt' -> prep workspace, in SSD_COLS items of the tile's state columns (each item repeats the prep;
//      the first writes the decay and the saved prep)
//   2. every (segment, unit, 512-element block): S <- fma(decay, S, S_loc) over the segment's chunks in
//      order, writing round_T(S_prev) per chunk and the returned states
//   3. every tile: outputs from round_T(S_prev), with phase 1's cs and dt' (the prep is not repeated), in SSD_ROWS items
//      of the tile's row blocks (ssd_next_row)
// No grid barrier between slices: a CTA goes from its phase-3 tiles of slice s to its phase-1 tiles of slice s + 1,
// so the tail of one phase fills with the other's tiles. What phase 1 of s + 1 writes is free: the local states and
// decays were last read by phase 2 of s (before barrier 2 of s), the S_prev part is written by phase 2 only; the
// prep, which phase 3 of s still reads, alternates between two parts by slice parity.
// Workspace of a slice of `un` units: prev [total_chunks][un][64][N] (T, read as tiles by phase 3); local (fp32)
// [un][UE / SCAN_BLK][total_chunks][SCAN_BLK]: a phase-2 item (SCAN_BLK adjacent elements of one unit's state) finds
// its chunks one after another, so a batch of chunk loads reads one contiguous run; prep (fp32)
// [slice parity][total_chunks][un][2][Q] (cs, then dt'; one part when the call is one slice).
// ===================================================================================================
#define SSD_UE (SSD_PB * SSD_N)                    // elements of one unit's state
#define SSD_SCAN_SV 4                              // phase 2: adjacent state columns a thread (16-byte loads)
#define SSD_SCAN_BLK (SSD_THREADS * SSD_SCAN_SV)   // phase 2: state elements of one item
__device__ __forceinline__ long long local_index(int total_chunks, long long c, int uu, int e) {
    return (((long long)uu * (SSD_UE / SSD_SCAN_BLK) + e / SSD_SCAN_BLK) * total_chunks + c) * SSD_SCAN_BLK +
           e % SSD_SCAN_BLK;
}
// round_T of 4 adjacent state values into the S_prev workspace (8 or 16 bytes, aligned).
__device__ __forceinline__ void store_prev4(T* q, const float (&S)[4]) {
#if SSD_IS_F32
    *(float4*)q = make_float4(S[0], S[1], S[2], S[3]);
#else
    const uint32_t lo = (uint32_t)E::from_float(S[0]) | ((uint32_t)E::from_float(S[1]) << 16);
    const uint32_t hi = (uint32_t)E::from_float(S[2]) | ((uint32_t)E::from_float(S[3]) << 16);
    *(uint2*)q = make_uint2(lo, hi);
#endif
}

// A phase-2 item of a slice of `un` units: its segment, unit in the slice, first state element, first chunk and
// chunk count, and its run of chunk-local states (chunk k at run + k * SCAN_BLK floats: one contiguous run).
struct ScanItem {
    const long long* seg;
    const float* run;
    long long c0;
    int uu, e0, nch;
};
__device__ __forceinline__ ScanItem scan_item(const SsdArgs& a, const float* ws_local, long long it, int un) {
    constexpr int NEB = SSD_UE / SSD_SCAN_BLK;
    ScanItem t;
    t.seg = a.table + (it / ((long long)un * NEB)) * 8;
    t.uu = (int)((it / NEB) % un);
    t.e0 = (int)(it % NEB) * SSD_SCAN_BLK;
    t.c0 = t.seg[SEG_CHUNK0];
    t.nch = ((int)t.seg[SEG_LEN] + SSD_Q - 1) / SSD_Q;
    t.run = ws_local + local_index(a.total_chunks, t.c0, t.uu, t.e0);
    return t;
}
// Phase 2's L2 look-ahead: chunks [k0, k1) of an item's run (clipped to its chunks) asked of L2 by one bulk prefetch
// (sm_90; no data returns to the SM), so the batch that loads them waits for L2 instead of DRAM. A batch is asked for
// SSD_SCAN_AHEAD batches before its loads (the registers bound how many loads are in flight; this does not).
#ifndef SSD_SCAN_AHEAD
#define SSD_SCAN_AHEAD 3
#endif
__device__ __forceinline__ void scan_prefetch(const ScanItem& t, int k0, int k1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    k1 = min(k1, t.nch);
    if (k0 < k1)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(t.run + (long long)k0 * SSD_SCAN_BLK),
                     "r"((unsigned)((k1 - k0) * SSD_SCAN_BLK * 4))
                     : "memory");
#else
    (void)t; (void)k0; (void)k1;
#endif
}

template <int HB, int NB>
struct LocalSink {
    float* local;  // the slice's workspace
    long long c;   // the tile's chunk
    int uu0;       // its first unit in the slice
    int total_chunks;
    __device__ __forceinline__ void operator()(int n0, float (*acc)[NB / 8][4]) {
        const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
        const int m0 = 16 * (threadIdx.x >> 5);
        static_assert(SSD_SCAN_BLK % SSD_N == 0, "a state row never straddles a phase-2 item");
#pragma unroll
        for (int u = 0; u < HB; ++u) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float* q = local + local_index(total_chunks, c, uu0 + u, (m0 + g + 8 * half) * SSD_N) + n0 + 2 * tg;
#pragma unroll
                for (int t = 0; t < NB / 8; ++t)
                    *(float2*)(q + 8 * t) = make_float2(acc[u][t][2 * half], acc[u][t][2 * half + 1]);
            }
        }
    }
};

// Chunk-parallel tile `tile` of a slice starting at unit `us` (nblk blocks of HB units a chunk): its global chunk
// c, the chunk's first token and length, and the block's first unit. Phases 1 and 3 walk the same tiles.
struct ChunkTile {
    long long c, ctok;
    int l, u0;
};
template <int HB>
__device__ __forceinline__ ChunkTile chunk_tile(const SsdArgs& a, long long tile, int nblk, int us) {
    ChunkTile t;
    t.c = tile / nblk;
    t.u0 = us + (int)(tile % nblk) * HB;
    const long long* seg = a.table + a.table[(long long)a.nseg * 9 + t.c] * 8;
    const int cc = (int)(t.c - seg[SEG_CHUNK0]);
    t.ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
    t.l = min(SSD_Q, (int)seg[SEG_LEN] - cc * SSD_Q);
    return t;
}

#ifndef SSD_WALK
#define SSD_WALK 0
#endif
#if SSD_WALK
// ---------------------------------------------------------------------------------------------------
// The walk schedule (SSD_WALK: sm_90a, one slice, one unit a tile, one pass of the state columns). CTA w < items walks
// item w = (segment, unit) through its chunks in order: phase 1's state pass, phase 2's step applied in its sink to a
// state held in registers (no fp32 chunk-local states), the returned states. Before a chunk's pass it writes the
// chunk's round_T(S_prev) and, after the chunk's prep, its saved cs and dt' into the item's ring slot, then counts the
// chunk in shared memory; its producer publishes that count on the item's word once a chunk (the release's wait stays
// off the walk's path), and the walker itself before it waits for a ring slot. Every CTA, a walker once its walk is
// done, takes phase-3 tiles chunk-major from a ticket, each once its item's word counts its chunk, and counts the slot's
// read. The same device functions in the same order as the three phases, so the same bits; the cooperative launch keeps
// every waiter's producer resident: a walker waits only for tiles drawn before the tile that needs its next chunk, and
// only after it has published every chunk it stored.
// Words (in the local-state part of the workspace, zeroed by the CTAs before one grid barrier): [items] chunks
// published, [items][ring] reads of each slot, the ticket.
// ---------------------------------------------------------------------------------------------------
// The walker's state S <- fma(decay, S, S_loc), in the state product's accumulator layout.
template <int NB>
struct WalkSink {
    float (*S)[4];
    float decay;
    __device__ __forceinline__ void operator()(int, float (*acc)[NB / 8][4]) {
#pragma unroll
        for (int t = 0; t < NB / 8; ++t)
#pragma unroll
            for (int q = 0; q < 4; ++q) S[t][q] = ssd_state_step(decay, S[t][q], acc[0][t][q]);
    }
};
// f(row, column, v0, v1) on each adjacent pair of the walker's state (row m0 + g + 8 half, column 8 t + 2 tg).
template <int NB, class F>
__device__ __forceinline__ void walk_pairs(const float (*S)[4], F f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3, m0 = 16 * (threadIdx.x >> 5);
#pragma unroll
    for (int t = 0; t < NB / 8; ++t)
#pragma unroll
        for (int half = 0; half < 2; ++half) f(m0 + g + 8 * half, 8 * t + 2 * tg, S[t][2 * half], S[t][2 * half + 1]);
}
// round_T(S) into its ring slot ([64][N], row-major), through the C tile's buffer `stage` (idle in a walking CTA: its
// producer takes tiles once the walk is done): stmatrix into 16-byte chunks whose column is XORed with the row (no
// bank conflicts either way), then 16-byte stores of whole rows (an accumulator pair a store left 16 bytes of each
// 32-byte sector unwritten, and took four times the instructions).
template <int NB>
__device__ __forceinline__ void walk_store_prev(const float (*S)[4], unsigned char* stage, T* prev) {
    constexpr int CH = NB / 8;  // 16-byte chunks a row
    static_assert(CH % 8 == 0, "whole 128-byte lines a row");
    const int lane = threadIdx.x & 31, j = lane >> 3;
    const int r = 16 * (threadIdx.x >> 5) + 8 * (j & 1) + (lane & 7);  // lane's row address: matrix j, row lane % 8
#pragma unroll
    for (int t = 0; t < NB / 8; t += 2) {  // matrices (t, rows 0-7), (t, 8-15), (t + 1, 0-7), (t + 1, 8-15)
        const uint32_t v[4] = {pack2(S[t][0], S[t][1]), pack2(S[t][2], S[t][3]), pack2(S[t + 1][0], S[t + 1][1]),
                               pack2(S[t + 1][2], S[t + 1][3])};
        stmatrix_x4(v, stage + (r * CH + ((t + (j >> 1)) ^ (r & 7))) * 16);
    }
    math_sync();
    static_assert(SSD_PB * CH % SSD_THREADS == 0, "whole rounds of chunks");
#pragma unroll
    for (int k = 0; k < SSD_PB * CH / SSD_THREADS; ++k) {
        const int e = threadIdx.x + k * SSD_THREADS, row = e / CH, c = e % CH;
        *(uint4*)(prev + row * SSD_N + 8 * c) = *(const uint4*)(stage + (row * CH + (c ^ (row & 7))) * 16);
    }
}
// The walker's producer: counts on the item's word the chunks its math warpgroup has stored (`stored`, in shared
// memory). The release waits for the SM's outstanding stores (about a microsecond beside a CTA of output tiles), which
// the walk's path would otherwise pay every chunk; here the producer pays it, ahead of the walk. (A max: the math
// warpgroup also counts, before it waits for a ring slot.)
// A drawn tile as the producer's thread 0 hands it over (two of them after the mbarriers, tile k's in k % 2): the
// ticket, its ring slot and chunk_tile<1>'s token offset, length and unit, which the other threads would otherwise
// recompute (a 64-bit division and four table loads a warp); the same values, so the same addresses and bits.
struct WalkTile {
    long long ctok;
    unsigned it, slot;  // slot | WALK_UNCOUNTED: no later chunk of the item takes the slot, so its read is not counted
    int l, u0;
};
constexpr unsigned WALK_UNCOUNTED = 1u << 31;
__device__ __forceinline__ WalkTile* walk_tiles(const SsdSmem& s) { return reinterpret_cast<WalkTile*>(s.bar + SSD_NBARS); }
__device__ __forceinline__ unsigned* walk_stored(const SsdSmem& s) {
    return reinterpret_cast<unsigned*>(walk_tiles(s) + 2);
}
__device__ __forceinline__ void walk_publish(const SsdSmem& s, unsigned* word) {
    red_release_max_gpu(word, read_acquire_cta(walk_stored(s)));
}
// A returned state from the walker's registers.
template <int NB>
__device__ __forceinline__ void walk_store_states(const SsdArgs& a, const float (*S)[4], SDT* out, long long idx, int h,
                                                  int p0) {
    walk_pairs<NB>(S, [&](int r, int n, float v0, float v1) {
        SDT* q = out + ssd_state_index(idx, a.nheads, h, p0 + r) + n;
        q[0] = sd_from_float(v0);
        q[1] = sd_from_float(v1);
    });
}
#endif

extern "C" __global__ void __launch_bounds__(SSD_CTA_THREADS, SSD_MINB) ssd_chunkpar(
    const T* __restrict__ x, const DTT* __restrict__ dt, const float* __restrict__ A, const T* __restrict__ Bm,
    const T* __restrict__ Cm, const float* __restrict__ D, const T* __restrict__ z, const float* __restrict__ dt_bias,
    const SDT* __restrict__ init, T* y, SDT* final_out, SDT* varlen_out, SDT* chunk_out,
    const long long* __restrict__ table, int nseg, int total_chunks, int nheads, int ngroups, int flags, float lo, float hi,
    float* ws_local, T* ws_prev, float* ws_decay, float* ws_prep, unsigned* barrier, int slice_units
    SSD_TMAP_PARAMS) {
    constexpr int HB = SSD_HB, NBUF = SSD_NBUF, NB = SSD_NB_OF(SSD_HB), ROWS = SSD_ROWS, COLS = SSD_COLS;
    constexpr int NB1 = NB < SSD_N / COLS ? NB : SSD_N / COLS;  // phase 1's state columns per pass
    static_assert(SSD_N % COLS == 0 && (!SSD_WG || SSD_N / COLS >= 64), "COLS: whole 64-column panels an item");
    constexpr long long UE = SSD_UE;
    constexpr int SV = SSD_SCAN_SV;
    constexpr int NEB = SSD_UE / SSD_SCAN_BLK;              // phase-2 items per unit
    const SsdArgs a{x, dt, A, Bm, Cm, D, z, dt_bias, init, y, final_out, varlen_out, chunk_out, table,
                    nseg, total_chunks, nheads, ngroups, flags, lo, hi SSD_TMAP_ARGS};
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SsdSmem s = ssd_smem<HB, NBUF, false>(smem_raw);
    const int units = a.nheads * SSD_PBLKS;
    const long long prep_part = (long long)a.total_chunks * slice_units * 2 * SSD_Q;  // floats of one prep part
    constexpr int GRID_THREADS = SSD_WG ? SSD_THREADS : 0;  // sm_90a: the producer never joins the grid barrier
    SsdPipe pipe{0, 0, 0, 0, 0};
#if SSD_WG
    if (threadIdx.x == SSD_THREADS) {  // the maps' descriptors fetched while the CTA sets up and the first dt loads
        tma_prefetch_map(a.tm_x);
        tma_prefetch_map(a.tm_B);
        tma_prefetch_map(a.tm_C);
        if (a.z != nullptr) tma_prefetch_map(a.tm_z);  // (without z its map is zeros, no descriptor)
    }
    ssd_pipe_init(s);
    if (threadIdx.x >= SSD_THREADS) {  // the producer warpgroup: the tile loads of phases 1 and 3
        setmaxnreg_dec<SSD_LOAD_REGS>();
#if SSD_WALK
        {
            const int items = a.nseg * units, ring = slice_units;  // (the walk's kernel argument: the ring depth)
            unsigned* words = reinterpret_cast<unsigned*>(ws_local);
            const int ptid = threadIdx.x & (SSD_THREADS - 1);
            if ((int)blockIdx.x < items) {  // a walker: phase 1's loads of its item's chunks and their preps
                const long long* seg = a.table + (long long)(blockIdx.x / units) * 8;
                const int u0 = blockIdx.x % units, len = (int)seg[SEG_LEN];
                const int grp = unit_head(u0) / (a.nheads / a.ngroups);
                float raw[SSD_PREP_TASKS(1)];
                if (len > 0) {
                    load_prep_dt<1>(a, raw, seg[SEG_TOK0], min(SSD_Q, len), u0);
                    produce_chunk_prep<1>(a, s, pipe, raw, min(SSD_Q, len), u0);
                }
                for (int cc = 0; cc * SSD_Q < len; ++cc) {
                    const long long ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
                    const int l = min(SSD_Q, len - cc * SSD_Q);
                    const int ln = min(SSD_Q, len - (cc + 1) * SSD_Q);  // the next chunk's tokens (<= 0: none)
                    if (ln > 0) load_prep_dt<1>(a, raw, ctok + SSD_Q, ln, u0);
                    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
                    for (int j = 0; j < nsub; ++j) {  // produce_state's loads, the next chunk's prep among them
                        produce_bx<1, NBUF, NB1>(a, s, pipe.bx, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp,
                                                 u0, 0);
                        // once the ring is full (the next load waits for the math warpgroup): its prep set was
                        // released with the previous chunk's state pass
                        if (j == min(NBUF, nsub) - 1 && ln > 0) produce_chunk_prep<1>(a, s, pipe, raw, ln, u0);
                    }
                    if (ptid == 0) walk_publish(s, words + blockIdx.x);
                }
                pipe.dt = 0;  // (the tiles' staged prep: its own barriers, from their first phase)
            }
            // Phase-3 tiles from the ticket: thread 0 draws one, finds its ring slot and chunk, hands them to both
            // warpgroups in tile k's WalkTile (k % 2: rewritten for tile k + 2, after the math warpgroup has read tile
            // k + 1's and every producer thread has passed tile k + 1's barrier), then waits for its chunk.
            // the words are zeroed (the grid barrier) and, in a walking CTA, the walk is done (every chunk stored; the
            // C tile's buffer free)
            mbarrier_wait_parity(s.bar + BAR_EPOCH, 0u);
            if ((int)blockIdx.x < items && ptid == 0) walk_publish(s, words + blockIdx.x);
            const long long ntiles = (long long)a.total_chunks * units;
            WalkTile* tw = walk_tiles(s);
            for (unsigned k = 0;; ++k) {
                if (ptid == 0) {
                    WalkTile d{0, atomicAdd(words + items + items * ring, 1u), 0u, 0, 0};
                    unsigned need = 0;
                    const unsigned* w = words;
                    if (d.it < ntiles) {  // chunk_tile<1>(a, d.it, units, 0)'s values
                        const long long c = d.it / units, si = a.table[(long long)a.nseg * 9 + c];
                        const long long* seg = a.table + si * 8;
                        const int cc = (int)(c - seg[SEG_CHUNK0]);
                        d.u0 = (int)(d.it % units);
                        d.ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
                        d.l = min(SSD_Q, (int)seg[SEG_LEN] - cc * SSD_Q);
                        d.slot = (unsigned)((si * units + d.u0) * ring + cc % ring);
                        // the read is counted only for a walker that will wait for it: its item's chunk cc + ring
                        // (the count's release waits for the SM's outstanding stores: about a microsecond a tile)
                        if ((long long)(cc + ring) * SSD_Q >= seg[SEG_LEN]) d.slot |= WALK_UNCOUNTED;
                        need = (unsigned)cc + 1u;
                        w = words + si * units + d.u0;
                    }
                    mbarrier_wait_parity(s.bar + BAR_TILE_EMPTY, (k & 1u) ^ 1u);
                    tw[k & 1u] = d;
                    mbarrier_arrive(s.bar + BAR_TILE_FULL);
                    if (d.it < ntiles) wait_at_least(w, need);
                }
                producer_sync();  // (thread 0's acquire orders every producer thread's loads of the slot)
                const WalkTile t = tw[k & 1u];
                if (t.it >= ntiles) break;
                const long long slot = t.slot & ~WALK_UNCOUNTED;
                produce_output<1, NBUF, 1>(a, s, pipe, t.ctok, t.l, 0, t.u0, ws_prev + slot * UE,
                                           ws_prep + slot * 2 * SSD_Q, -1);
            }
            cp_async_drain();
            return;
        }
#endif
        int epochs = 0;  // slices with items here: one BAR_EPOCH phase each (the math thread 0 arrives for the same)
        for (int us = 0; us < units; us += slice_units) {
            const int un = min(slice_units, units - us);
            const int nblk = un / HB;
            const long long ntiles = (long long)a.total_chunks * nblk;
            const float* prep = ws_prep + ((us / slice_units) & 1) * prep_part;
            for (long long it = blockIdx.x; it < ntiles * COLS; it += gridDim.x) {
                const ChunkTile t = chunk_tile<HB>(a, it / COLS, nblk, us);
                produce_dt<HB>(a, s, pipe, t.ctok, t.l, t.u0);
                produce_state<HB, NBUF, NB1, COLS>(a, s, pipe, t.ctok, t.l, t.u0, (int)(it % COLS));
            }
            for (long long it = blockIdx.x; it < ntiles * ROWS; it += gridDim.x) {
                const ChunkTile t = chunk_tile<HB>(a, it / ROWS, nblk, us);
                const int part = (int)(it % ROWS);
                // A part that starts past its chunk's end has no rows (ROWS = 1: never); as the CTA's first item it
                // still waits for the slice's BAR_EPOCH phase, which the math thread 0 completes for every CTA with an
                // item: a phase left unwaited would let the next slice's parity wait pass early.
                if (ROWS > 1 && part * SSD_SUB >= t.l) {
                    if (it == blockIdx.x) mbarrier_wait_parity(s.bar + BAR_EPOCH, (uint32_t)(epochs++ & 1));
                    continue;
                }
                produce_output<HB, NBUF, ROWS>(a, s, pipe, t.ctok, t.l, part, t.u0,
                                               ws_prev + (t.c * un + (t.u0 - us)) * UE,
                                               prep + (t.c * un + (t.u0 - us)) * 2 * SSD_Q,
                                               it == blockIdx.x ? (epochs++ & 1) : -1);
            }
        }
        cp_async_drain();
        return;
    }
    setmaxnreg_inc<SSD_MATH_REGS>();
#endif
#if SSD_WALK
    static_assert(SSD_WG && HB == 1 && ROWS == 1 && COLS == 1 && NB1 == SSD_N, "the walk: one unit, one pass");
    {
        const int items = a.nseg * units, ring = slice_units;
        unsigned* words = reinterpret_cast<unsigned*>(ws_local);
        for (long long e = (long long)blockIdx.x * SSD_THREADS + threadIdx.x; e <= (long long)items * (ring + 1);
             e += (long long)gridDim.x * SSD_THREADS)
            words[e] = 0u;
        grid_barrier(barrier, GRID_THREADS);
        if ((int)blockIdx.x < items) {  // the walk
            const int si = blockIdx.x / units, u0 = blockIdx.x % units;
            const long long* seg = a.table + (long long)si * 8;
            const int len = (int)seg[SEG_LEN], h = unit_head(u0), p0 = unit_p0(u0);
            const long long init_idx = seg[SEG_INIT];
            unsigned* word = words + blockIdx.x;  // (item si * units + u0)
            // S = the initial state or 0 (fp32, in registers)
            float S[NB1 / 8][4];
            walk_pairs<NB1>(S, [&](int r, int n, float, float) {
                float v0 = 0.0f, v1 = 0.0f;
                if ((a.flags & SSD_F_INIT) && init_idx >= 0) {
                    const SDT* src = a.init + ssd_state_index(init_idx, a.nheads, h, p0 + r) + n;
                    v0 = sd_to_float(src[0]);
                    v1 = sd_to_float(src[1]);
                }
                S[n / 8][2 * ((r % 16) / 8)] = v0;
                S[n / 8][2 * ((r % 16) / 8) + 1] = v1;
            });
            for (int cc = 0; cc * SSD_Q < len; ++cc) {
                const long long ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
                const int l = min(SSD_Q, len - cc * SSD_Q);
                const long long slot = ((long long)si * units + u0) * ring + cc % ring;
                if (cc >= ring) {  // the slot's previous chunk has been read by its tile
                    if (threadIdx.x == 0) {  // (that tile waits for a count the producer may not have published yet)
                        red_release_max_gpu(word, (unsigned)cc);
                        wait_at_least(words + items + slot, (unsigned)(cc / ring));
                    }
                    math_sync();
                }
                // the chunk's S_prev and prep (the producer's, in prep set `set`) into the slot, then counted
                walk_store_prev<NB1>(S, reinterpret_cast<unsigned char*>(s.Cs), ws_prev + slot * UE);
                const int set = ring_slot<2>(pipe.dt);
                const SsdSmem sc = prep_set<1>(s, set);
                use_begin(s, BAR_FULL_PREP + set, ring_phase<2>(pipe.dt), false);
                ssd_prep_save<1>(sc, ws_prep + slot * 2 * SSD_Q);
                math_sync();  // every thread's S_prev and prep stores before the count
                if (threadIdx.x == 0) exch_release_cta(walk_stored(s), (unsigned)cc + 1u);  // for the producer to publish
                // S <- fma(decay, S, S_loc)
                WalkSink<NB1> sink{S, sc.dec[0]};
                ssd_chunk_state<1, NBUF, NB1, 1>(a, sc, pipe, l, 0, sink);
                use_end(s, BAR_EMPTY_PREP + set);
                ++pipe.dt;
                if (a.chunk_out != nullptr && l == SSD_Q) walk_store_states<NB1>(a, S, a.chunk_out, seg[SEG_CKPT0] + cc, h, p0);
            }
            const long long fi = seg[SEG_FINAL], vi = seg[SEG_VARLEN];
            if (fi >= 0 && a.final_out) walk_store_states<NB1>(a, S, a.final_out, fi, h, p0);
            if (vi >= 0 && a.varlen_out) walk_store_states<NB1>(a, S, a.varlen_out, vi, h, p0);
            fence_proxy_async_shared();  // the staging's generic writes before the producer's tensor-map copies of C
            math_sync();
            pipe.dt = 0;  // (the tiles' staged prep: its own barriers, from their first phase)
        }
        if (threadIdx.x == 0) mbarrier_arrive(s.bar + BAR_EPOCH);  // the producer may take tiles
        // phase 3's tiles, as the producer hands them over
        const long long ntiles = (long long)a.total_chunks * units;
        const WalkTile* tw = walk_tiles(s);
        for (unsigned k = 0;; ++k) {
            mbarrier_wait_parity(s.bar + BAR_TILE_FULL, k & 1u);
            const WalkTile t = tw[k & 1u];
            math_sync();  // every math thread has read the words before the producer may rewrite them
            if (threadIdx.x == 0) mbarrier_arrive(s.bar + BAR_TILE_EMPTY);
            if (t.it >= ntiles) break;
            ssd_prep_load<1>(s, pipe, nullptr);  // (staged by the producer)
            ssd_chunk_output<1, NBUF, 1, false>(a, s, pipe, t.ctok, t.l, 0, t.u0, true);
            // the slot's S_prev and prep landed before the tile's first product: its walker may rewrite it
            if (threadIdx.x == 0 && !(t.slot & WALK_UNCOUNTED)) red_release_gpu(words + items + t.slot, 1u);
        }
        grid_barrier_exit(barrier);
        return;
    }
#endif

    for (int us = 0; us < units; us += slice_units) {
        const int un = min(slice_units, units - us);
        const int nblk = un / HB;
        const long long ntiles = (long long)a.total_chunks * nblk;
        float* prep = ws_prep + ((us / slice_units) & 1) * prep_part;  // the previous slice's phase 3 reads the other

        // Phase 1: chunk-local states, COLS items a tile.
        for (long long it = blockIdx.x; it < ntiles * COLS; it += gridDim.x) {
            const ChunkTile t = chunk_tile<HB>(a, it / COLS, nblk, us);
            const long long c = t.c, ctok = t.ctok;
            const int u0 = t.u0, l = t.l;
            const int part = (int)(it % COLS);
            ssd_chunk_prep<HB>(a, s, pipe, ctok, l, u0);
            if (part == 0) {  // (COLS = 1: always)
                if (threadIdx.x < HB && unit_p0(u0 + threadIdx.x) == 0)
                    ws_decay[c * a.nheads + unit_head(u0 + threadIdx.x)] = s.dec[threadIdx.x];
                ssd_prep_save<HB>(s, prep + (c * un + (u0 - us)) * 2 * SSD_Q);
            }
            LocalSink<HB, NB1> sink{ws_local, c, u0 - us, a.total_chunks};
#if SSD_WG
            ssd_chunk_state<HB, NBUF, NB1, COLS>(a, s, pipe, l, part, sink);
#else
            ssd_chunk_state<HB, NBUF, NB1, COLS>(a, s, ctok, l, u0, part, sink);
#endif
        }
        grid_barrier(barrier, GRID_THREADS);

        // Phase 2: the cross-chunk recurrence, elementwise (SV adjacent state columns a thread: 16-byte loads),
        // chunks in order.
        const long long nitems = (long long)a.nseg * un * NEB;
        constexpr int BATCH = SSD_SCAN_BATCH;
        for (long long it = blockIdx.x; it < nitems; it += gridDim.x) {
            const ScanItem item = scan_item(a, ws_local, it, un);
            const long long* seg = item.seg;
            const int uu = item.uu, nch = item.nch, e = item.e0 + threadIdx.x * SV;
            const long long c0 = item.c0;
            const int u = us + uu, h = unit_head(u);
            const int p = unit_p0(u) + e / SSD_N, n = e % SSD_N;
            const int len = (int)seg[SEG_LEN];
            if (threadIdx.x == 0) scan_prefetch(item, BATCH, SSD_SCAN_AHEAD * BATCH);  // batches 1..AHEAD-1
            const long long init_idx = seg[SEG_INIT];
            float S[SV];
#pragma unroll
            for (int v = 0; v < SV; ++v) S[v] = 0.0f;
            if ((a.flags & SSD_F_INIT) && init_idx >= 0) {
#pragma unroll
                for (int v = 0; v < SV; ++v) S[v] = sd_to_float(a.init[ssd_state_index(init_idx, a.nheads, h, p) + n + v]);
            }
            // BATCH chunks' loads in flight at once: the scan waits one round trip per batch (L2's, with the look-ahead).
            // The addresses walk (a chunk's local states are SCAN_BLK floats after the previous one's, its S_prev a slice
            // row after), and lane k of each warp loads the decay of the batch's chunk k, passed on by shuffles: the
            // batch's registers are its loads, not their addresses.
            const float4* lp = (const float4*)(ws_local + local_index(a.total_chunks, c0, uu, e));
            const float* dp = ws_decay + c0 * a.nheads + h;
            T* pp = ws_prev + (c0 * un + uu) * UE + e;
            const int lane = threadIdx.x & 31;
            static_assert(BATCH <= 32, "a decay per lane");
            for (int cb = 0; cb < nch; cb += BATCH, lp += BATCH * (SSD_SCAN_BLK / 4), dp += BATCH * a.nheads) {
                if (threadIdx.x == 0) scan_prefetch(item, cb + SSD_SCAN_AHEAD * BATCH, cb + (SSD_SCAN_AHEAD + 1) * BATCH);
                float4 loc[BATCH];
#pragma unroll
                for (int k = 0; k < BATCH; ++k)  // independent loads first (cg: written by other CTAs)
                    if (cb + k < nch) loc[k] = __ldcg(lp + k * (SSD_SCAN_BLK / 4));
                const float decl = lane < BATCH && cb + lane < nch ? __ldcg(dp + lane * a.nheads) : 0.0f;
#pragma unroll
                for (int k = 0; k < BATCH; ++k) {
                    const float dec = __shfl_sync(0xffffffffu, decl, k);
                    if (cb + k < nch) {
                        store_prev4(pp, S);
                        pp += (long long)un * UE;
                        S[0] = ssd_state_step(dec, S[0], loc[k].x);
                        S[1] = ssd_state_step(dec, S[1], loc[k].y);
                        S[2] = ssd_state_step(dec, S[2], loc[k].z);
                        S[3] = ssd_state_step(dec, S[3], loc[k].w);
                        if (a.chunk_out != nullptr && (cb + k + 1) * SSD_Q <= len) {
                            SDT* q = a.chunk_out + ssd_state_index(seg[SEG_CKPT0] + cb + k, a.nheads, h, p) + n;
#pragma unroll
                            for (int v = 0; v < SV; ++v) q[v] = sd_from_float(S[v]);
                        }
                    }
                }
            }
            const long long fi = seg[SEG_FINAL], vi = seg[SEG_VARLEN];
#pragma unroll
            for (int v = 0; v < SV; ++v) {
                if (fi >= 0 && a.final_out) a.final_out[ssd_state_index(fi, a.nheads, h, p) + n + v] = sd_from_float(S[v]);
                if (vi >= 0 && a.varlen_out) a.varlen_out[ssd_state_index(vi, a.nheads, h, p) + n + v] = sd_from_float(S[v]);
            }
        }
        grid_barrier(barrier, GRID_THREADS);
#if SSD_WG
        if (threadIdx.x == 0 && blockIdx.x < ntiles * ROWS)  // S_prev of this slice is ready
            mbarrier_arrive(s.bar + BAR_EPOCH);
#endif

        // Phase 3: outputs, ROWS items a tile.
        for (long long it = blockIdx.x; it < ntiles * ROWS; it += gridDim.x) {
            const ChunkTile t = chunk_tile<HB>(a, it / ROWS, nblk, us);
            const long long c = t.c, ctok = t.ctok;
            const int u0 = t.u0, l = t.l;
            const int part = (int)(it % ROWS);
            if (ROWS > 1 && part * SSD_SUB >= l) continue;  // a part past the chunk's end (ROWS = 1: never)
            const float* saved = prep + (c * un + (u0 - us)) * 2 * SSD_Q;
#if SSD_WG
            ssd_prep_load<HB>(s, pipe, saved);
            ssd_chunk_output<HB, NBUF, ROWS, false>(a, s, pipe, ctok, l, part, u0, true);
#else
            __syncthreads();  // the previous item is done with S_prev
#pragma unroll
            for (int u = 0; u < HB; ++u)
                load_tile_async<SSD_N>(sS(s, u), SSD_LDN, ws_prev + (c * un + (u0 - us) + u) * UE,
                                       SSD_N, SSD_PB);
            cp_async_commit();  // waited for by the output's first step (cp.async groups complete in order)
            ssd_prep_load<HB>(s, pipe, saved);
            ssd_chunk_output<HB, NBUF, ROWS, false>(a, s, ctok, l, part, u0);
#endif
        }
    }
    grid_barrier_exit(barrier);
}
#endif  // SSD_FAMILY == 1
