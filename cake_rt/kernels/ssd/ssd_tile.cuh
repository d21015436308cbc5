// Mamba2 SSD: the chunk-tile device functions shared by both families (exact scan, chunk-parallel).
//
// Bitwise equality between the families rests on this file: both call the SAME functions, in the same
// order, for the three pieces of arithmetic of a chunk (64 headdim rows p0..p0+63 of one head):
//   ssd_chunk_prep     dt' = clamp(softplus?(dt + bias)), inclusive in-chunk cumsum cs of dt'*A
//   ssd_chunk_state    S_loc = X^T (w * B), w_s = exp(cs_last - cs_s) dt'_s     (K order: tokens ascending)
//   ssd_state_step     S <- fma(exp(cs_last), S, S_loc)                          (fp32, elementwise)
//   ssd_chunk_output   y = exp(cs) * (C S_prev^T) + (C B^T * L) X + D x, gated by z
// They differ only in where S lives between chunks (exact: shared memory; chunk-parallel: an fp32
// workspace scanned by phase 2), always in fp32, and S_prev is rounded to the input dtype the same way.
//
// Compile-time parameters (defines): SSD_T (0 bf16, 1 fp16, 2 fp32: x, B, C, z, y), SSD_DT (dt dtype,
// same codes), SSD_SD (state dtype, same codes), SSD_P (headdim), SSD_N (dstate), SSD_Q (chunk size).
// A CTA is 128 * SSD_WN threads: 8 warps (two per scheduler) by default, 4 for the exact scan with more
// items than SMs (two CTAs per SM). Warp w owns rows 16*(w & 3).. +15 of every 64-row tile and column share
// (w >> 2) of its outputs.
#pragma once
#include "../common/types.cuh"
#include "../common/mma.cuh"

#ifndef SSD_T
#define SSD_T 0
#endif
#ifndef SSD_DT
#define SSD_DT 2
#endif
#ifndef SSD_SD
#define SSD_SD 2
#endif
#ifndef SSD_P
#define SSD_P 64
#endif
#ifndef SSD_N
#define SSD_N 128
#endif
#ifndef SSD_Q
#define SSD_Q 256
#endif

template <int CODE> struct ElemOf;
template <> struct ElemOf<0> { typedef ElemBF16 type; };
template <> struct ElemOf<1> { typedef ElemFP16 type; };
template <> struct ElemOf<2> { typedef ElemF32 type; };

typedef typename ElemOf<SSD_T>::type E;     // x / B / C / z / y element
typedef typename E::storage T;
typedef typename ElemOf<SSD_DT>::type EDT;  // dt element
typedef typename EDT::storage DTT;
typedef typename ElemOf<SSD_SD>::type ESD;  // state element (returned / initial states)
typedef typename ESD::storage SDT;

// SSD_WN: warps per row block, splitting every warp tile's columns (2: 8-warp CTAs; 1: 4-warp CTAs, two
// resident per SM where registers allow). Each output element is accumulated by one thread in the same k
// order either way, so the split never changes a bit.
#ifndef SSD_WN
#define SSD_WN 2
#endif
#define SSD_THREADS (128 * SSD_WN)
#define SSD_WARPS (SSD_THREADS / 32)
#define SSD_PB 64                        // headdim rows per tile
#define SSD_SUB 64                       // tokens per sub-block of a chunk
#define SSD_NSUB_MAX (SSD_Q / SSD_SUB)
#define SSD_IS_F32 (SSD_T == 2)
#define SSD_PAD (SSD_IS_F32 ? 4 : 8)     // 16 bytes of row padding: ldmatrix rows stay aligned, banks spread
#define SSD_LDN (SSD_N + SSD_PAD)        // leading dim of N-wide tiles (C, B, S_prev)
#define SSD_LDX (SSD_PB + SSD_PAD)       // leading dim of 64-wide tiles (X, M)
#define SSD_LDF (SSD_N + 4)              // leading dim of the fp32 state (exact scan)
#ifndef SSD_NB
#define SSD_NB (SSD_N == 128 ? 128 : 64)  // dstate 256: four passes keep the exact scan spill-free
#endif  // state columns per pass (register budget)
#define SSD_NPASS (SSD_N / SSD_NB)

// Warp roles: row block (16 rows) and column half of every warp tile.
__device__ __forceinline__ int ssd_wm() { return (threadIdx.x >> 5) & 3; }
__device__ __forceinline__ int ssd_wn() { return SSD_WN == 2 ? (int)(threadIdx.x >> 7) : 0; }
// The warps of one row block (w, w + 4) meet here (named barrier 1 + row block; 0 is __syncthreads).
__device__ __forceinline__ void ssd_pair_sync() {
#if SSD_WN == 2
    asm volatile("bar.sync %0, 64;" ::"r"(1 + ssd_wm()) : "memory");
#else
    __syncwarp();
#endif
}

// Flags (runtime, uniform per launch).
#define SSD_F_D 1
#define SSD_F_DP 2
#define SSD_F_Z 4
#define SSD_F_BIAS 8
#define SSD_F_SOFTPLUS 16
#define SSD_F_CLAMP 32
#define SSD_F_INIT 64

// SSD_NBUF: 2 = double-buffered B/X tiles (the next tile's loads overlap this tile's math), 1 = single.
#ifndef SSD_NBUF
#define SSD_NBUF 2
#endif

// Shared-memory layout (bytes), identical for both kernels; the host computes the same numbers.
#define SSD_BYTES_N (SSD_SUB * SSD_LDN * (int)sizeof(T))
#define SSD_BYTES_X (SSD_SUB * SSD_LDX * (int)sizeof(T))
#define SSD_OFF_CS 0
#define SSD_OFF_DTV (SSD_OFF_CS + 4 * SSD_Q)
#define SSD_OFF_W (SSD_OFF_DTV + 4 * SSD_Q)
#define SSD_OFF_GT (SSD_OFF_W + 4 * SSD_Q)
#define SSD_OFF_C (SSD_OFF_GT + 64)
#define SSD_OFF_B0 (SSD_OFF_C + SSD_BYTES_N)
#define SSD_OFF_X0 (SSD_OFF_B0 + SSD_BYTES_N)
#define SSD_OFF_B1 (SSD_NBUF == 2 ? SSD_OFF_X0 + SSD_BYTES_X : SSD_OFF_B0)
#define SSD_OFF_X1 (SSD_NBUF == 2 ? SSD_OFF_B1 + SSD_BYTES_N : SSD_OFF_X0)
#define SSD_OFF_SP (SSD_OFF_C + SSD_BYTES_N + SSD_NBUF * (SSD_BYTES_N + SSD_BYTES_X))
#define SSD_SMEM_TILE (SSD_OFF_SP + SSD_PB * SSD_LDN * (int)sizeof(T))
// The exact scan also keeps the fp32 state; with fp32 inputs it is the S_prev tile itself.
#define SSD_SMEM_EXACT (SSD_IS_F32 ? SSD_SMEM_TILE : SSD_SMEM_TILE + SSD_PB * SSD_LDF * 4)

struct SsdArgs {
    const T* x; const DTT* dt; const float* A; const T* Bm; const T* Cm;
    const float* D; const T* z; const float* dt_bias; const SDT* init;
    T* y; SDT* final_out; SDT* varlen_out; SDT* chunk_out;
    const long long* table;   // segments [nseg][8], then order [nseg], then chunk -> segment [total_chunks]
    int nseg, total_chunks, nheads, ngroups, flags;
    float lo, hi;
};

// Segment record fields.
#define SEG_TOK0 0      // global token index (row * seqlen + start) of the first token
#define SEG_LEN 1
#define SEG_INIT 2      // initial_states index, -1: zeros
#define SEG_CHUNK0 3    // global index of its first chunk (workspace row)
#define SEG_CKPT0 4     // index in chunk_states of its first checkpoint
#define SEG_FINAL 5     // final_states index, -1: none
#define SEG_VARLEN 6    // varlen_states index, -1: none

struct SsdSmem {
    float* cs; float* dtv; float* w; float* gt;
    T* Cs; T* B0; T* B1; T* X0; T* X1; T* Sp; float* Sf;
};
// Buffer selection by value (an indexed pointer array would live in local memory).
__device__ __forceinline__ T* sB(const SsdSmem& s, int buf) { return buf ? s.B1 : s.B0; }
__device__ __forceinline__ T* sX(const SsdSmem& s, int buf) { return buf ? s.X1 : s.X0; }

__device__ __forceinline__ SsdSmem ssd_smem(unsigned char* base) {
    SsdSmem s;
    s.cs = (float*)(base + SSD_OFF_CS);
    s.dtv = (float*)(base + SSD_OFF_DTV);
    s.w = (float*)(base + SSD_OFF_W);
    s.gt = (float*)(base + SSD_OFF_GT);
    s.Cs = (T*)(base + SSD_OFF_C);
    s.B0 = (T*)(base + SSD_OFF_B0);
    s.X0 = (T*)(base + SSD_OFF_X0);
    s.B1 = (T*)(base + SSD_OFF_B1);
    s.X1 = (T*)(base + SSD_OFF_X1);
    s.Sp = (T*)(base + SSD_OFF_SP);
    s.Sf = SSD_IS_F32 ? (float*)(base + SSD_OFF_SP) : (float*)(base + SSD_SMEM_TILE);
    return s;
}

// ---------------------------------------------------------------------------------------------------
// Warp GEMM on shared-memory tiles: acc[t] (16 x 8, mma C layout) += A[m0.., k] * B[k, n0 + 8t ..].
// Layouts: A_RM A stored [m][k]; A_KM stored [k][m]; B_NK B stored [n][k]; B_KN stored [k][n].
// 16-bit inputs: ldmatrix + mma.sync m16n8k16 (f32 accumulate). fp32 inputs: the same fragment
// ownership computed with fp32 FMAs in k order (no tf32: fp32 accuracy).
#define A_RM 0
#define A_KM 1
#define B_NK 0
#define B_KN 1

template <int AL, int BL, int NT>
__device__ __forceinline__ void warp_gemm(float (*acc)[4], const T* A, int lda, int m0, const T* B, int ldb,
                                          int n0, int K) {
    const int lane = threadIdx.x & 31;
#if SSD_IS_F32
    const int g = lane >> 2, tg = lane & 3;
    for (int k = 0; k < K; ++k) {
        const float a0 = AL == A_RM ? A[(m0 + g) * lda + k] : A[k * lda + m0 + g];
        const float a1 = AL == A_RM ? A[(m0 + g + 8) * lda + k] : A[k * lda + m0 + g + 8];
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            const int n = n0 + 8 * t + 2 * tg;
            const float b0 = BL == B_NK ? B[n * ldb + k] : B[k * ldb + n];
            const float b1 = BL == B_NK ? B[(n + 1) * ldb + k] : B[k * ldb + n + 1];
            acc[t][0] = __fmaf_rn(a0, b0, acc[t][0]);
            acc[t][1] = __fmaf_rn(a0, b1, acc[t][1]);
            acc[t][2] = __fmaf_rn(a1, b0, acc[t][2]);
            acc[t][3] = __fmaf_rn(a1, b1, acc[t][3]);
        }
    }
#else
    const int li = lane & 7, mat = lane >> 3;
#ifndef SSD_KUNROLL
#define SSD_KUNROLL 2
#endif
#pragma unroll SSD_KUNROLL  // bounded look-ahead: full unrolling hoists every fragment load (register spills)
    for (int k0 = 0; k0 < K; k0 += 16) {
        uint32_t a[4];
        if (AL == A_RM) {
            ldmatrix_x4(a, A + (m0 + (lane & 15)) * lda + k0 + ((lane >> 4) << 3));
        } else {
            ldmatrix_x4_trans(a, A + (k0 + li + ((mat >> 1) << 3)) * lda + m0 + ((mat & 1) << 3));
        }
#pragma unroll
        for (int t = 0; t < NT; t += 2) {
            uint32_t b[4];
            if (BL == B_NK) {
                ldmatrix_x4(b, B + (n0 + 8 * t + li + ((mat >> 1) << 3)) * ldb + k0 + ((mat & 1) << 3));
            } else {
                ldmatrix_x4_trans(b, B + (k0 + li + ((mat & 1) << 3)) * ldb + n0 + 8 * t + ((mat >> 1) << 3));
            }
#if SSD_T == 0
            mma_bf16_16816(acc[t], a, b);
            mma_bf16_16816(acc[t + 1], a, b + 2);
#else
            mma_fp16_16816(acc[t], a, b);
            mma_fp16_16816(acc[t + 1], a, b + 2);
#endif
        }
    }
#endif
}

// 2^x in one MUFU instruction (ftz: results below 2^-126 flush to 0; the same code in both families).
__device__ __forceinline__ float ex2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

// Store two adjacent values of an element tile (rounded to T).
__device__ __forceinline__ void st_pair(T* p, float lo, float hi) {
#if SSD_T == 0
    *(uint32_t*)p = pack_bf16x2(lo, hi);
#elif SSD_T == 1
    *(uint32_t*)p = pack_fp16x2(lo, hi);
#else
    *(float2*)p = make_float2(lo, hi);
#endif
}
__device__ __forceinline__ void ld_pair(const T* p, float& lo, float& hi) {
#if SSD_IS_F32
    const float2 v = *(const float2*)p;
    lo = v.x; hi = v.y;
#else
    const uint32_t v = *(const uint32_t*)p;
    lo = E::to_float((T)(v & 0xffffu));
    hi = E::to_float((T)(v >> 16));
#endif
}

// 64 rows x ROW_ELEMS elements global -> shared (cp.async, zero-fill rows >= valid). Ends with a CTA barrier.
template <int ROW_ELEMS>
__device__ __forceinline__ void load_tile_async(T* dst, int ld_dst, const T* src, long long row_stride, int valid) {
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int PER_ROW = ROW_ELEMS / VEC;
    for (int i = threadIdx.x; i < SSD_SUB * PER_ROW; i += SSD_THREADS) {
        const int r = i / PER_ROW, c = (i % PER_ROW) * VEC;
        const bool ok = r < valid;
        const T* g = src + (ok ? (long long)r * row_stride + c : 0);
        cp_async_16_zfill(dst + r * ld_dst + c, g, ok ? 16 : 0);
    }
}
__device__ __forceinline__ void cp_async_join() {
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
}

// ---------------------------------------------------------------------------------------------------
// Chunk prep: dtv[t] = dt'_t (0 beyond the chunk's l tokens), cs[t] = inclusive cumsum of dt'*A*log2(e) in a
// fixed order (32-token warp scans, then the group totals added left to right), w[t] = exp(cs_last - cs_t)
// dt'_t. Returns exp(cs_last) (the chunk decay). Ends with a CTA barrier.
__device__ __forceinline__ float ssd_chunk_prep(const SsdArgs& a, const SsdSmem& s, long long ctok, int l, int h) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float Ah2 = __fmul_rn(a.A[h], 1.4426950408889634f);  // cumsums in log2 units: 2^x is one MUFU op
    const float bias = (a.flags & SSD_F_BIAS) ? a.dt_bias[h] : 0.0f;
    for (int gi = warp; gi < SSD_Q / 32; gi += SSD_THREADS / 32) {
        const int t = gi * 32 + lane;
        float d = 0.0f, v = 0.0f;
        if (t < l) {
            d = EDT::to_float(a.dt[(ctok + t) * a.nheads + h]);
            if (a.flags & SSD_F_BIAS) d = __fadd_rn(d, bias);
            if (a.flags & SSD_F_SOFTPLUS) d = d > 20.0f ? d : log1pf(expf(d));
            if (a.flags & SSD_F_CLAMP) d = fminf(fmaxf(d, a.lo), a.hi);
            v = __fmul_rn(d, Ah2);
        }
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const float n = __shfl_up_sync(0xffffffffu, v, off);
            if (lane >= off) v = __fadd_rn(v, n);
        }
        s.dtv[t] = d;
        s.cs[t] = v;
        if (lane == 31) s.gt[gi] = v;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < SSD_Q; t += SSD_THREADS) {
        const int gi = t >> 5;
        if (gi > 0) {
            float pre = s.gt[0];
            for (int k = 1; k < gi; ++k) pre = __fadd_rn(pre, s.gt[k]);
            s.cs[t] = __fadd_rn(pre, s.cs[t]);
        }
    }
    __syncthreads();
    const float last = s.cs[l - 1];
    for (int t = threadIdx.x; t < SSD_Q; t += SSD_THREADS) {
        s.w[t] = t < l ? __fmul_rn(ex2(__fsub_rn(last, s.cs[t])), s.dtv[t]) : 0.0f;
    }
    __syncthreads();
    return ex2(last);
}

// ---------------------------------------------------------------------------------------------------
// Chunk-local state of rows p0..p0+63: S_loc[p][n] = sum_s X[s][p] * round_T(w_s B[s][n]), tokens in
// ascending order. Calls sink(pass_n0, acc) with the warp's accumulators (rows 16*wm.., columns
// n0 + wn*NB/WN + 8t .., t < NB/(8 WN)).
// Issue (cp.async, one commit group) the B columns n0..n0+NCOLS and the X rows p0..p0+63 of the 64-token
// sub-block starting at token `tok` into buffer `buf`.
template <int NCOLS>
__device__ __forceinline__ void issue_bx(const SsdArgs& a, const SsdSmem& s, int buf, long long tok, int valid, int grp,
                                         int h, int p0, int n0) {
    load_tile_async<NCOLS>(sB(s, buf) + n0, SSD_LDN, a.Bm + (tok * a.ngroups + grp) * SSD_N + n0,
                           (long long)a.ngroups * SSD_N, valid);
    load_tile_async<SSD_PB>(sX(s, buf), SSD_LDX, a.x + (tok * a.nheads + h) * SSD_P + p0,
                            (long long)a.nheads * SSD_P, valid);
    cp_async_commit();
}

template <class Sink>
__device__ __forceinline__ void ssd_chunk_state(const SsdArgs& a, const SsdSmem& s, long long ctok, int l, int h,
                                                int p0, Sink& sink) {
    const int wm = ssd_wm(), wn = ssd_wn();
    const int grp = h / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    for (int pass = 0; pass < SSD_NPASS; ++pass) {
        const int n0 = pass * SSD_NB;
        float acc[SSD_NB / (8 * SSD_WN)][4];  // the warp's column share of the pass
#pragma unroll
        for (int t = 0; t < SSD_NB / (8 * SSD_WN); ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
        __syncthreads();  // previous users of the B / X buffers are done
        if (SSD_NBUF == 2) issue_bx<SSD_NB>(a, s, 0, ctok, min(SSD_SUB, l), grp, h, p0, n0);
        for (int j = 0; j < nsub; ++j) {
            const int buf = SSD_NBUF == 2 ? (j & 1) : 0;
            if (j > 0) __syncthreads();  // step j-1 is done with the buffer the prefetch overwrites
            if (SSD_NBUF == 2) {
                if (j + 1 < nsub) {
                    issue_bx<SSD_NB>(a, s, buf ^ 1, ctok + (j + 1) * SSD_SUB, min(SSD_SUB, l - (j + 1) * SSD_SUB), grp,
                                     h, p0, n0);
                    cp_async_wait<1>();
                } else {
                    cp_async_wait<0>();
                }
            } else {
                issue_bx<SSD_NB>(a, s, 0, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, h, p0, n0);
                cp_async_wait<0>();
            }
            __syncthreads();
            // Bw = round_T(w * B): the decayed, dt-weighted B of the chunk-state product.
            T* Bs = sB(s, buf);
            for (int i = threadIdx.x; i < SSD_SUB * (SSD_NB / 2); i += SSD_THREADS) {
                const int r = i / (SSD_NB / 2), c = n0 + 2 * (i % (SSD_NB / 2));
                const float wv = s.w[j * SSD_SUB + r];
                float b0, b1;
                ld_pair(Bs + r * SSD_LDN + c, b0, b1);
                st_pair(Bs + r * SSD_LDN + c, __fmul_rn(b0, wv), __fmul_rn(b1, wv));
            }
            __syncthreads();
            warp_gemm<A_KM, B_KN, SSD_NB / (8 * SSD_WN)>(acc, sX(s, buf), SSD_LDX, 16 * wm, Bs + n0, SSD_LDN,
                                                         wn * (SSD_NB / SSD_WN), SSD_SUB);
        }
        sink(n0, acc);
    }
}

// fp32 recurrence step, the one both families use: S <- exp(cs_last) * S + S_loc.
__device__ __forceinline__ float ssd_state_step(float decay, float S, float loc) { return __fmaf_rn(decay, S, loc); }

// ---------------------------------------------------------------------------------------------------
// Chunk outputs of rows p0..p0+63 from S_prev (round_T of the fp32 state, in s.Sp [p][n]):
//   y[t][p] = exp(cs_t) * sum_n C[t][n] Sp[p][n] + sum_{s<=t} round_T(CB[t][s] exp(cs_t - cs_s) dt'_s) X[s][p]
//             + D x, then * z sigmoid(z).
// Row sub-block i (64 tokens) accumulates over key sub-blocks j = 0..i in order.
__device__ __forceinline__ void ssd_chunk_output(const SsdArgs& a, const SsdSmem& s, long long ctok, int l, int h,
                                                 int p0) {
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2, tg = lane & 3;
    const int grp = h / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    constexpr int NT = 8 / SSD_WN;                       // 8-column tiles per warp
    const int m0 = 16 * ssd_wm(), c0w = 8 * NT * ssd_wn();  // the warp's rows and its output / key columns
    int k = 0;  // step counter over (i, j): the buffer parity
    __syncthreads();  // previous users of the C / B / X buffers are done
    if (SSD_NBUF == 2) issue_bx<SSD_N>(a, s, 0, ctok, min(SSD_SUB, l), grp, h, p0, 0);
    for (int i = 0; i < nsub; ++i) {
        const long long tok_i = ctok + i * SSD_SUB;
        const int valid_i = min(SSD_SUB, l - i * SSD_SUB);
        float y[NT][4];
        int buf = 0;
        for (int j = 0; j <= i; ++j, ++k) {
            buf = SSD_NBUF == 2 ? (k & 1) : 0;
            if (k > 0) __syncthreads();  // the previous step is done with Cs (j == 0) and with buffer buf ^ 1
            if (j == 0) {
                load_tile_async<SSD_N>(s.Cs, SSD_LDN, a.Cm + (tok_i * a.ngroups + grp) * SSD_N,
                                       (long long)a.ngroups * SSD_N, valid_i);
                cp_async_commit();
            }
            if (SSD_NBUF == 2) {
                const int ni = j < i ? i : i + 1, nj = j < i ? j + 1 : 0;  // the next step
                if (ni < nsub) {
                    issue_bx<SSD_N>(a, s, buf ^ 1, ctok + nj * SSD_SUB, min(SSD_SUB, l - nj * SSD_SUB), grp, h, p0, 0);
                    cp_async_wait<1>();
                } else {
                    cp_async_wait<0>();
                }
            } else {
                issue_bx<SSD_N>(a, s, 0, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, h, p0, 0);
                cp_async_wait<0>();
            }
            __syncthreads();
            if (j == 0) {
#pragma unroll
                for (int t = 0; t < NT; ++t) y[t][0] = y[t][1] = y[t][2] = y[t][3] = 0.0f;
                warp_gemm<A_RM, B_NK, NT>(y, s.Cs, SSD_LDN, m0, s.Sp, SSD_LDN, c0w, SSD_N);
                const float e0 = ex2(s.cs[i * SSD_SUB + m0 + g]);
                const float e1 = ex2(s.cs[i * SSD_SUB + m0 + g + 8]);
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    y[t][0] = __fmul_rn(y[t][0], e0); y[t][1] = __fmul_rn(y[t][1], e0);
                    y[t][2] = __fmul_rn(y[t][2], e1); y[t][3] = __fmul_rn(y[t][3], e1);
                }
            }
            float gacc[NT][4];
#pragma unroll
            for (int t = 0; t < NT; ++t) gacc[t][0] = gacc[t][1] = gacc[t][2] = gacc[t][3] = 0.0f;
            warp_gemm<A_RM, B_NK, NT>(gacc, s.Cs, SSD_LDN, m0, sB(s, buf), SSD_LDN, c0w, SSD_N);
            __syncthreads();  // every warp has read B: its buffer becomes M
            T* Ms = sB(s, buf);
            const int tr0 = i * SSD_SUB + m0 + g, tr1 = tr0 + 8;  // chunk positions of the two rows
            const float c0 = s.cs[tr0], c1 = s.cs[tr1];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const int sc = j * SSD_SUB + c0w + 8 * t + 2 * tg;  // chunk position of the first column
                float v[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int tr = q < 2 ? tr0 : tr1;
                    const int sp = sc + (q & 1);
                    const float ct = q < 2 ? c0 : c1;
                    v[q] = sp <= tr ? __fmul_rn(__fmul_rn(gacc[t][q], ex2(__fsub_rn(ct, s.cs[sp]))), s.dtv[sp]) : 0.0f;
                }
                st_pair(Ms + (m0 + g) * SSD_LDX + c0w + 8 * t + 2 * tg, v[0], v[1]);
                st_pair(Ms + (m0 + g + 8) * SSD_LDX + c0w + 8 * t + 2 * tg, v[2], v[3]);
            }
            ssd_pair_sync();  // the warp reads back its 16 rows of M: its half and its partner's
            warp_gemm<A_RM, B_KN, NT>(y, Ms, SSD_LDX, m0, sX(s, buf), SSD_LDX, c0w, SSD_SUB);
        }
        const T* Xi = sX(s, buf);  // X_i: the last step was j == i
        // Epilogue: D x and the z gate (z * sigmoid(z) = z / (1 + 2^(-z log2 e))), rows < valid_i.
        const bool hasD = a.flags & SSD_F_D, hasZ = a.flags & SSD_F_Z, perP = a.flags & SSD_F_DP;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = m0 + g + 8 * half;
            if (r >= valid_i) continue;
            const long long row = ((tok_i + r) * a.nheads + h) * SSD_P + p0;
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                const int pc = c0w + 8 * t + 2 * tg;
                float o0 = y[t][2 * half], o1 = y[t][2 * half + 1];
                if (hasD) {
                    float x0, x1;
                    ld_pair(Xi + r * SSD_LDX + pc, x0, x1);
                    const float* Dv = perP ? a.D + h * SSD_P + p0 + pc : a.D + h;
                    o0 = __fmaf_rn(Dv[0], x0, o0);
                    o1 = __fmaf_rn(Dv[perP ? 1 : 0], x1, o1);
                }
                if (hasZ) {
                    float z0, z1;
                    ld_pair(a.z + row + pc, z0, z1);
                    o0 = __fmul_rn(o0, __fdividef(z0, __fadd_rn(1.0f, ex2(__fmul_rn(z0, -1.4426950408889634f)))));
                    o1 = __fmul_rn(o1, __fdividef(z1, __fadd_rn(1.0f, ex2(__fmul_rn(z1, -1.4426950408889634f)))));
                }
                st_pair(a.y + row + pc, o0, o1);
            }
        }
    }
}

__device__ __forceinline__ long long ssd_state_index(long long idx, int nheads, int h, int p) {
    return ((idx * nheads + h) * SSD_P + p) * (long long)SSD_N;
}
