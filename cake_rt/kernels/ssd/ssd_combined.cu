// Mamba2 SSD combined prefill: the exact-scan and chunk-parallel programs (see ssd_tile.cuh for the
// shared chunk arithmetic that makes them bitwise equal).
#include "ssd_tile.cuh"
#include "../common/grid_barrier.cuh"

// Resident CTAs per SM the register allocation is sized for. Chunk-parallel: two (16 warps; 128 registers
// fit without spills). Exact scan: one (it spills under a 128-register cap; its double-buffered shared
// memory allows one CTA per SM anyway).
#ifndef SSD_MINB_EXACT
#define SSD_MINB_EXACT 1
#endif
#ifndef SSD_MINB_CHUNKPAR
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SSD_MINB_CHUNKPAR 2
#else
#define SSD_MINB_CHUNKPAR 1  // sm_80/sm_89: two of its CTAs do not fit an SM's shared memory anyway
#endif
#endif

__device__ __forceinline__ float sd_to_float(SDT v) { return ESD::to_float(v); }
__device__ __forceinline__ SDT sd_from_float(float v) { return ESD::from_float(v); }

// ===================================================================================================
// Exact scan: one CTA per (segment, head, 64-row headdim block); chunks in order, state in shared memory.
// ===================================================================================================
struct ExactSink {
    const SsdSmem* s;
    float decay;
    // Only the fp32 recurrence here (small unrolled code); S_prev and checkpoints follow in one loop.
    __device__ __forceinline__ void operator()(int n0, float (*acc)[4]) {
        const int lane = threadIdx.x & 31;
        const int g = lane >> 2, tg = lane & 3;
        const int pw = 16 * ssd_wm(), nw = n0 + ssd_wn() * (SSD_NB / SSD_WN);
#pragma unroll
        for (int t = 0; t < SSD_NB / (8 * SSD_WN); ++t) {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int p = pw + g + (q >= 2 ? 8 : 0);
                const int n = nw + 8 * t + 2 * tg + (q & 1);
                float* sf = s->Sf + p * SSD_LDF + n;
                *sf = ssd_state_step(decay, *sf, acc[t][q]);
            }
        }
    }
};

extern "C" __global__ void __launch_bounds__(SSD_THREADS, SSD_MINB_EXACT) ssd_exact(
    const T* __restrict__ x, const DTT* __restrict__ dt, const float* __restrict__ A, const T* __restrict__ Bm,
    const T* __restrict__ Cm, const float* __restrict__ D, const T* __restrict__ z, const float* __restrict__ dt_bias,
    const SDT* __restrict__ init, T* y, SDT* final_out, SDT* varlen_out, SDT* chunk_out,
    const long long* __restrict__ table, int nseg, int total_chunks, int nheads, int ngroups, int flags, float lo, float hi) {
    const SsdArgs a{x, dt, A, Bm, Cm, D, z, dt_bias, init, y, final_out, varlen_out, chunk_out, table,
                    nseg, total_chunks, nheads, ngroups, flags, lo, hi};
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SsdSmem s = ssd_smem(smem_raw);
    constexpr int PBLK = SSD_P / SSD_PB;
    const int per = a.nheads * PBLK;
    const int item = blockIdx.x;
    const int si = (int)a.table[(long long)a.nseg * 8 + item / per];  // longest segments first
    const int h = (item % per) / PBLK;
    const int p0 = (item % PBLK) * SSD_PB;
    const long long* seg = a.table + (long long)si * 8;
    const long long tok0 = seg[SEG_TOK0];
    const int len = (int)seg[SEG_LEN];
    const long long init_idx = seg[SEG_INIT];

    // S = initial state (fp32) and S_prev = round_T(S).
    for (int e = threadIdx.x; e < SSD_PB * SSD_N; e += SSD_THREADS) {
        const int p = e / SSD_N, n = e % SSD_N;
        float v = 0.0f;
        if ((a.flags & SSD_F_INIT) && init_idx >= 0) v = sd_to_float(a.init[ssd_state_index(init_idx, a.nheads, h, p0 + p) + n]);
        s.Sf[p * SSD_LDF + n] = v;
#if !SSD_IS_F32
        s.Sp[p * SSD_LDN + n] = E::from_float(v);
#endif
    }
    __syncthreads();

    const int nch = (len + SSD_Q - 1) / SSD_Q;
    for (int c = 0; c < nch; ++c) {
        const long long ctok = tok0 + (long long)c * SSD_Q;
        const int l = min(SSD_Q, len - c * SSD_Q);
        const float decay = ssd_chunk_prep(a, s, ctok, l, h);
        ssd_chunk_output(a, s, ctok, l, h, p0);
        ExactSink sink{&s, decay};
        ssd_chunk_state(a, s, ctok, l, h, p0, sink);
        __syncthreads();
        // S_prev = round_T(S) for the next chunk; the checkpoint after a complete chunk.
        const long long ckpt = (a.chunk_out != nullptr && l == SSD_Q) ? seg[SEG_CKPT0] + c : -1;
        for (int e = threadIdx.x; e < SSD_PB * SSD_N; e += SSD_THREADS) {
            const int p = e / SSD_N, n = e % SSD_N;
            const float v = s.Sf[p * SSD_LDF + n];
#if !SSD_IS_F32
            s.Sp[p * SSD_LDN + n] = E::from_float(v);
#endif
            if (ckpt >= 0) a.chunk_out[ssd_state_index(ckpt, a.nheads, h, p0 + p) + n] = sd_from_float(v);
        }
        __syncthreads();  // S_prev is complete before the next chunk reads it
    }

    const long long fi = seg[SEG_FINAL], vi = seg[SEG_VARLEN];
    for (int e = threadIdx.x; e < SSD_PB * SSD_N; e += SSD_THREADS) {
        const int p = e / SSD_N, n = e % SSD_N;
        const SDT v = sd_from_float(s.Sf[p * SSD_LDF + n]);
        if (fi >= 0 && a.final_out) a.final_out[ssd_state_index(fi, a.nheads, h, p0 + p) + n] = v;
        if (vi >= 0 && a.varlen_out) a.varlen_out[ssd_state_index(vi, a.nheads, h, p0 + p) + n] = v;
    }
}

// ===================================================================================================
// Chunk-parallel: ONE cooperative kernel, three phases separated by grid barriers.
//   1. every (chunk, head, headdim block) tile: S_loc -> fp32 workspace, exp(cs_last) -> decay workspace
//   2. every (segment, head, 128-element block): S <- fma(decay, S, S_loc) over the segment's chunks in
//      order, writing round_T(S_prev) per chunk and the returned states
//   3. every tile: outputs from S_prev
// ===================================================================================================
struct ChunkparWs {
    float* local;      // [total_chunks][nheads][P][N] fp32
    T* prev;           // [total_chunks][nheads][P][N] round_T(S_prev)
    float* decay;      // [total_chunks][nheads]
    unsigned* barrier; // two words, 0 at launch, 0 again at exit
};

struct LocalSink {
    const SsdArgs* a; const ChunkparWs* ws; long long c; int h, p0;
    __device__ __forceinline__ void operator()(int n0, float (*acc)[4]) {
        const int lane = threadIdx.x & 31;
        const int g = lane >> 2, tg = lane & 3;
        const int pw = 16 * ssd_wm(), nw = n0 + ssd_wn() * (SSD_NB / SSD_WN);
#pragma unroll
        for (int t = 0; t < SSD_NB / (8 * SSD_WN); ++t) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int p = pw + g + 8 * half;
                const int n = nw + 8 * t + 2 * tg;
                *(float2*)(ws->local + ssd_state_index(c, a->nheads, h, p0 + p) + n) =
                    make_float2(acc[t][2 * half], acc[t][2 * half + 1]);
            }
        }
    }
};

extern "C" __global__ void __launch_bounds__(SSD_THREADS, SSD_MINB_CHUNKPAR) ssd_chunkpar(
    const T* __restrict__ x, const DTT* __restrict__ dt, const float* __restrict__ A, const T* __restrict__ Bm,
    const T* __restrict__ Cm, const float* __restrict__ D, const T* __restrict__ z, const float* __restrict__ dt_bias,
    const SDT* __restrict__ init, T* y, SDT* final_out, SDT* varlen_out, SDT* chunk_out,
    const long long* __restrict__ table, int nseg, int total_chunks, int nheads, int ngroups, int flags, float lo, float hi,
    float* ws_local, T* ws_prev, float* ws_decay, unsigned* barrier) {
    const SsdArgs a{x, dt, A, Bm, Cm, D, z, dt_bias, init, y, final_out, varlen_out, chunk_out, table,
                    nseg, total_chunks, nheads, ngroups, flags, lo, hi};
    const ChunkparWs ws{ws_local, ws_prev, ws_decay, barrier};
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const SsdSmem s = ssd_smem(smem_raw);
    constexpr int PBLK = SSD_P / SSD_PB;
    const long long* chunk_seg = a.table + (long long)a.nseg * 9;
    const long long ntiles = (long long)a.total_chunks * a.nheads * PBLK;

    // Phase 1: chunk-local states.
    for (long long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const long long c = tile / (a.nheads * PBLK);
        const int h = (int)((tile / PBLK) % a.nheads);
        const int p0 = (int)(tile % PBLK) * SSD_PB;
        const long long* seg = a.table + chunk_seg[c] * 8;
        const int cc = (int)(c - seg[SEG_CHUNK0]);
        const long long ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
        const int l = min(SSD_Q, (int)seg[SEG_LEN] - cc * SSD_Q);
        __syncthreads();  // the previous tile is done with the chunk scratch
        const float decay = ssd_chunk_prep(a, s, ctok, l, h);
        if (threadIdx.x == 0 && p0 == 0) ws.decay[c * a.nheads + h] = decay;
        LocalSink sink{&a, &ws, c, h, p0};
        ssd_chunk_state(a, s, ctok, l, h, p0, sink);
    }
    grid_barrier(ws.barrier);

    // Phase 2: the cross-chunk recurrence, elementwise, chunks in order.
    constexpr int EB = SSD_THREADS;                       // elements per item
    constexpr int NEB = SSD_P * SSD_N / EB;
    const long long nitems = (long long)a.nseg * a.nheads * NEB;
    for (long long it = blockIdx.x; it < nitems; it += gridDim.x) {
        const int si = (int)(it / ((long long)a.nheads * NEB));
        const int h = (int)((it / NEB) % a.nheads);
        const int e = (int)(it % NEB) * EB + threadIdx.x;
        const int p = e / SSD_N, n = e % SSD_N;
        const long long* seg = a.table + (long long)si * 8;
        const int len = (int)seg[SEG_LEN];
        const long long c0 = seg[SEG_CHUNK0], init_idx = seg[SEG_INIT];
        const int nch = (len + SSD_Q - 1) / SSD_Q;
        float S = 0.0f;
        if ((a.flags & SSD_F_INIT) && init_idx >= 0) S = sd_to_float(a.init[ssd_state_index(init_idx, a.nheads, h, p) + n]);
        for (int cb = 0; cb < nch; cb += 8) {
            float loc[8], dec[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {  // independent loads first (cg: written by other CTAs this launch)
                const long long c = c0 + cb + k;
                if (cb + k < nch) {
                    loc[k] = __ldcg(ws.local + ssd_state_index(c, a.nheads, h, p) + n);
                    dec[k] = __ldcg(ws.decay + c * a.nheads + h);
                }
            }
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                if (cb + k < nch) {
                    const long long c = c0 + cb + k;
                    ws.prev[ssd_state_index(c, a.nheads, h, p) + n] = E::from_float(S);
                    S = ssd_state_step(dec[k], S, loc[k]);
                    if (a.chunk_out != nullptr && (cb + k + 1) * SSD_Q <= len)
                        a.chunk_out[ssd_state_index(seg[SEG_CKPT0] + cb + k, a.nheads, h, p) + n] = sd_from_float(S);
                }
            }
        }
        const long long fi = seg[SEG_FINAL], vi = seg[SEG_VARLEN];
        if (fi >= 0 && a.final_out) a.final_out[ssd_state_index(fi, a.nheads, h, p) + n] = sd_from_float(S);
        if (vi >= 0 && a.varlen_out) a.varlen_out[ssd_state_index(vi, a.nheads, h, p) + n] = sd_from_float(S);
    }
    grid_barrier(ws.barrier);

    // Phase 3: outputs.
    for (long long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        const long long c = tile / (a.nheads * PBLK);
        const int h = (int)((tile / PBLK) % a.nheads);
        const int p0 = (int)(tile % PBLK) * SSD_PB;
        const long long* seg = a.table + chunk_seg[c] * 8;
        const int cc = (int)(c - seg[SEG_CHUNK0]);
        const long long ctok = seg[SEG_TOK0] + (long long)cc * SSD_Q;
        const int l = min(SSD_Q, (int)seg[SEG_LEN] - cc * SSD_Q);
        __syncthreads();
        load_tile_async<SSD_N>(s.Sp, SSD_LDN, ws.prev + ssd_state_index(c, a.nheads, h, p0), SSD_N, SSD_PB);
        cp_async_commit();  // joined by the prep's barriers below (prep does not touch Sp)
        cp_async_wait<0>();
        ssd_chunk_prep(a, s, ctok, l, h);
        ssd_chunk_output(a, s, ctok, l, h, p0);
    }
}
