// Mamba2 SSD: the chunk-tile device functions shared by both families (exact scan, chunk-parallel).
//
// Bitwise equality between the families rests on this file: both call the SAME functions for the four
// pieces of arithmetic of a chunk, on a block of HB "units" (a unit is 64 headdim rows p0..p0+63 of one
// head; the units of a block share one group of B / C):
//   ssd_chunk_prep     dt' = clamp(softplus?(dt + bias)), cs = inclusive in-chunk cumsum of dt' A (log2 units),
//                      w_s = 2^(cs_last - cs_s) dt'_s, decay = 2^cs_last
//   ssd_chunk_state    S_loc = round_T(w * X)^T B                         (K order: tokens ascending)
//   ssd_state_step     S <- fma(decay, S, S_loc)                          (fp32, elementwise)
//   ssd_chunk_output   y = 2^cs C round_T(S_prev)^T + round_T(C B^T * L) X + D x, gated by z
// Every output element is computed by the same instruction sequence whatever HB is (C B^T of a 16 x 64
// strip is the same bits whether one unit or several use it), so HB and the buffering are free per family.
// The families differ only in where S lives between chunks (exact: fp32 in shared memory, the fragments of
// round_T(S_prev) packed from it; chunk-parallel: round_T(S_prev) in a workspace, read by ldmatrix): the
// same rounded values either way.
//
// Output tile of a 64-token row block i (warp w owns tokens 16w..16w+15):
//   acc  = 2^R_i (C_i S_prev^T)                          R_i = cs[64 i - 1] (0 for i = 0), <= 0
//   acc += round_T(CB_ij * c_s) X_j        for j < i     c_s = 2^(R_i - cs_s) dt'_s <= dt'_s
//   acc *= 2^(cs_t - R_i)                                 (<= 1: both factors of the decay have exponent <= 0)
//   acc += round_T(CB_ii * 2^(cs_t - cs_s) dt'_s [s <= t]) X_i       (diagonal block, masked per element)
// CB_ij = C_i B_j^T is computed once per warp strip and reused for every unit of the block; M never leaves
// the registers (the C fragments of two n-tiles are the A fragment of the next mma).
// sm_90a, chunks of 256 tokens (ssd_chain): the steps j < i are replaced by a 16-bit state carried over the row blocks,
//   S_0 = round_T(S_prev),  S_{j+1} = round_T(2^(R_{j+1} - R_j) S_j + round_T(c_s X_j)^T B_j)
//                                                  c_s = 2^(R_{j+1} - cs_s) dt'_s (the steps' factor)
//   acc  = C_i S_i^T, then the diagonal step as above
// (one product and the diagonal step a row block; each sub-block's B / X loaded once a chunk instead of 4 - j times).
//
// Compile-time parameters (defines): SSD_T (0 bf16, 1 fp16, 2 fp32: x, B, C, z, y), SSD_DT (dt dtype,
// same codes), SSD_SD (state dtype, same codes), SSD_P (headdim), SSD_N (dstate), SSD_Q (chunk size),
// SSD_WG (1: the sm_90a warpgroup path, 16-bit inputs only); in ssd_combined.cu: the kernel of the program
// (SSD_FAMILY) and its units per CTA and B/X buffers.
//
// Two tensor-core paths, one per architecture, the same arithmetic around them:
//   sm_80..sm_89 (SSD_WG 0): mma.sync m16n8k16 per warp, operands by ldmatrix from padded rows;
//   sm_90a (SSD_WG 1): wgmma m64nNk16 per warpgroup, every element tile stored as 64-column panels of 128-byte
//     swizzled rows (the layout wgmma descriptors read); C B^T and C S_prev^T from shared memory (both
//     K-major), M X and the state product with A from registers (M never leaves them; w X^T is scaled in them)
//     and B read transposed (MN-major) from the same tiles. The CTA is two warpgroups: the math warpgroup
//     (threads 0..127, the arithmetic above) and a producer warpgroup that issues every tile copy (tensor-map
//     boxes; a partial sub-block by cp.async) and stages dt, one buffer ahead (the exact scan: computes the chunk
//     prep itself, a chunk ahead, into one of two prep sets), behind full / empty mbarriers ("The load pipeline");
//     setmaxnreg gives the math warpgroup 216 registers and the producer 40. The math warpgroup synchronizes on named
//     barrier 1 only, the producer's prep on named barrier 2.
// The two families' programs of one shape and target use the same path, so their bits still agree.
#pragma once
#include "../common/types.cuh"
#include "../common/mma.cuh"

#ifndef SSD_WG
#define SSD_WG 0
#endif
#if SSD_WG
#include "../common/wgmma.cuh"
#include "../common/mbarrier.cuh"
#include "../common/tma.cuh"
#if !defined(CAKE_HAS_WGMMA)
#error "SSD_WG needs the sm_90a target"
#endif
#endif

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

// k steps of the tile GEMMs unrolled together: loads of the next step overlap the mma of this one.
#ifndef SSD_KUNROLL
#define SSD_KUNROLL 2
#endif
#define SSD_THREADS 128                  // the math warpgroup: warp w owns rows 16w..16w+15 of every 64-row tile
#if SSD_WG
// sm_90a: a second warpgroup is the producer (it issues every tile load; the math warpgroup only waits on
// mbarriers). setmaxnreg moves its registers to the math warpgroup: 2 CTAs per SM x 256 threads x 128.
#define SSD_CTA_THREADS 256
#if defined(SSD_WALK) && SSD_WALK
// The walk's producer also runs the walker's loads and the chunk preps, which spill at 40 registers; the math warpgroup
// needs no more than 200 there (docs/ssd.md, "The two families").
#define SSD_MATH_REGS 200
#define SSD_LOAD_REGS 56
#else
#define SSD_MATH_REGS 216                // 232 / 24: the producer spills (its loops, 64-bit addresses)
#define SSD_LOAD_REGS 40
#endif
#else
#define SSD_CTA_THREADS 128
#endif
#define SSD_PB 64                        // headdim rows per unit
#define SSD_PBLKS (SSD_P / SSD_PB)       // units per head
#define SSD_SUB 64                       // tokens per sub-block of a chunk
#define SSD_IS_F32 (SSD_T == 2)
#if SSD_WG
#if SSD_IS_F32
#error "SSD_WG is for 16-bit inputs"
#endif
#define SSD_LDN SSD_N                    // swizzled panels, no padding (tidx places an element)
#define SSD_LDX SSD_PB
#else
#define SSD_PAD (SSD_IS_F32 ? 4 : 8)     // 16 bytes of row padding: ldmatrix rows stay aligned, banks spread
#define SSD_LDN (SSD_N + SSD_PAD)        // leading dim of N-wide element tiles (C, B, S_prev)
#define SSD_LDX (SSD_PB + SSD_PAD)       // leading dim of 64-wide element tiles (X)
#endif
#define SSD_LDF (SSD_N + 8)              // leading dim of the fp32 state (exact scan): float2 rows conflict-free

// Flags (runtime, uniform per launch).
#define SSD_F_D 1
#define SSD_F_DP 2
#define SSD_F_Z 4
#define SSD_F_BIAS 8
#define SSD_F_SOFTPLUS 16
#define SSD_F_CLAMP 32
#define SSD_F_INIT 64

// ---------------------------------------------------------------------------------------------------
// shared memory: one layout per (units, buffers, state kind); the host mirrors it (ops/ssd.py smem_bytes).
__host__ __device__ constexpr int ssd_align16(int v) { return (v + 15) / 16 * 16; }
#if SSD_WG
// mbarriers of the load pipeline (sm_90a): full (producer -> math) and empty (math -> producer) per buffer.
// B and X of a sub-block have their own barriers: B is free after C B^T, X only after M X (or the epilogue),
// so the next B streams in under this step's M X even with one buffer.
#define BAR_FULL_B 0    // [2] B ring
#define BAR_EMPTY_B 2   // [2]
#define BAR_FULL_X 4    // [2] X ring (the same slots)
#define BAR_EMPTY_X 6   // [2]
#define BAR_FULL_C 8    // C of the row block
#define BAR_EMPTY_C 9
#define BAR_FULL_Z 10   // z of the row block
#define BAR_EMPTY_Z 11
#define BAR_FULL_S 12   // chunk-parallel: round_T(S_prev) of the tile
#define BAR_EMPTY_S 13
#define BAR_FULL_DT 14  // chunk-parallel: the chunk's raw dt (as float), read by the prep
#define BAR_EMPTY_DT 15
// Exact scan and the walk schedule's walk: two prep sets, each computed by the producer (full) and released by the
// math warpgroup (empty). The exact scan's are the four barriers of the S_prev tile and the staged dt, which only the
// chunk-parallel kernel loads; the walk's, four of its own (its output tiles load both).
#define BAR_EPOCH 16    // chunk-parallel: this slice's phase 2 is done grid-wide (count 1: the math thread 0)
#if defined(SSD_WALK) && SSD_WALK
#define BAR_TILE_FULL 17   // the walk schedule: the producer's drawn tile in the tile word (count 1)
#define BAR_TILE_EMPTY 18  // the math warpgroup has read it (count 1)
#define BAR_FULL_PREP 19   // [2]
#define BAR_EMPTY_PREP 21  // [2]
#define SSD_NBARS 23
#define SSD_ONE_BARS 19    // barriers BAR_EPOCH.. below this one take one arrival
#define SSD_PIPE_SLOTS 30  // and two drawn tiles (WalkTile, 3 slots each), the walker's count of stored chunks
#define SSD_PREP_SETS 2    // the chunk-parallel layout's prep sets (the exact scan's has two anyway)
#else
#define BAR_FULL_PREP 12   // [2]
#define BAR_EMPTY_PREP 14  // [2]
#define SSD_NBARS 17
#define SSD_ONE_BARS 17
#define SSD_PIPE_SLOTS 17
#define SSD_PREP_SETS 1
#endif
// Element tiles first, from a 1024-byte aligned base (the swizzle is a function of the address), each a
// whole number of 8 KiB panels; then the exact scan's fp32 states and the chunk arrays.
template <int HB, int NBUF, bool EXACT>
struct SsdLayout {
    static constexpr int BYTES_N = SSD_SUB * SSD_N * 2;
    static constexpr int BYTES_X = SSD_SUB * SSD_PB * 2;
    static constexpr int C = 0;                                    // T [64][N]      C of the row block
    static constexpr int B = C + BYTES_N;                          // T [NBUF][64][N]
    static constexpr int X = B + NBUF * BYTES_N;                   // T [NBUF][HB][64][64]
    static constexpr int S = X + NBUF * HB * BYTES_X;              // T [HB][64][N]  round_T(S_prev)
    static constexpr int Z = S + HB * BYTES_N;                     // T [HB][64][64] z of the row block
    static constexpr int SF = Z + HB * BYTES_X;                    // exact: float [HB][64][LDF]
    static constexpr int cs = SF + (EXACT ? HB * SSD_PB * SSD_LDF * 4 : 0);
    static constexpr int dtv = cs + 4 * HB * SSD_Q;
    static constexpr int w = dtv + 4 * HB * SSD_Q;
    static constexpr int dtr = w + 4 * HB * SSD_Q;                 // chunk-parallel: float [HB][2][Q]  the raw dt
                                                                   // staged by the producer; phase 3's cs and dt'
                                                                   // exact, the walk: the second prep set's cs,
                                                                   // dtv, w
    static constexpr int SETS = EXACT ? 2 : SSD_PREP_SETS;        // prep sets (a second one: cs, dtv, w in dtr)
    static constexpr int gt = dtr + 4 * HB * SSD_Q * (SETS == 2 ? 3 : 2);
    static constexpr int dec = gt + 4 * HB * (SSD_Q / 32);         // float [SETS][HB] chunk decays, a set's each
    static constexpr int bar = (dec + 4 * HB * SETS + 7) / 8 * 8;  // uint64 [SSD_NBARS] mbarriers, then the words
    static constexpr int bytes = bar + 8 * SSD_PIPE_SLOTS;
};
#else
template <int HB, int NBUF, bool EXACT>
struct SsdLayout {
    static constexpr int BYTES_N = SSD_SUB * SSD_LDN * (int)sizeof(T);
    static constexpr int BYTES_X = SSD_SUB * SSD_LDX * (int)sizeof(T);
    static constexpr int cs = 0;                                   // float [HB][Q]  cumsum (log2 units)
    static constexpr int dtv = cs + 4 * HB * SSD_Q;                // float [HB][Q]  dt'
    static constexpr int w = dtv + 4 * HB * SSD_Q;                 // float [HB][Q]  state weights
    static constexpr int cf = w + 4 * HB * SSD_Q;                  // float [HB][Q]  off-diagonal column factors
    static constexpr int gt = cf + 4 * HB * SSD_Q;                 // float [HB][Q/32] warp-scan totals
    static constexpr int dec = gt + 4 * HB * (SSD_Q / 32);         // float [HB]     chunk decays
    static constexpr int C = ssd_align16(dec + 4 * HB);            // T [64][LDN]    C of the row block
    static constexpr int B = C + BYTES_N;                          // T [NBUF][64][LDN]
    static constexpr int X = B + NBUF * BYTES_N;                   // T [NBUF][HB][64][LDX]
    static constexpr int S = X + NBUF * HB * BYTES_X;              // exact: float [HB][64][LDF]; else T [HB][64][LDN]
    static constexpr int S_UNIT = EXACT ? SSD_PB * SSD_LDF * 4 : SSD_PB * SSD_LDN * (int)sizeof(T);
    static constexpr int SF = S;
    static constexpr int Z = S;  // (unused: z is read from global memory)
    static constexpr int bytes = S + HB * S_UNIT;
};
#endif

struct SsdSmem {
    float* cs; float* dtv; float* w; float* cf; float* gt; float* dec;
    T* Cs; T* B0; T* X0; unsigned char* S;
    int b1, x1;  // elements from slot 0 to slot 1 of B / X (0 with one slot): constants of the layout
    float* Sf;  // exact scan: the fp32 states [HB][64][LDF]
    T* Zs;      // SSD_WG: z of the row block [HB][64][64]
    uint64_t* bar;  // SSD_WG: the load pipeline's mbarriers
    float* dtr;     // SSD_WG, chunk-parallel: the chunk's raw dt [HB][Q] (phase 3: the saved cs, dt' [HB][2][Q])
};
template <int HB, int NBUF, bool EXACT>
__device__ __forceinline__ SsdSmem ssd_smem(unsigned char* raw) {
    typedef SsdLayout<HB, NBUF, EXACT> L;
#if SSD_WG
    unsigned char* base = raw + ((1024u - (smem_u32(raw) & 1023u)) & 1023u);  // the host adds 1024 bytes for this
#else
    unsigned char* base = raw;
#endif
    SsdSmem s;
    s.cs = (float*)(base + L::cs);
    s.dtv = (float*)(base + L::dtv);
    s.w = (float*)(base + L::w);
#if SSD_WG
    s.cf = nullptr;  // (c_s is computed where it is used)
#else
    s.cf = (float*)(base + L::cf);
#endif
    s.gt = (float*)(base + L::gt);
    s.dec = (float*)(base + L::dec);
    s.Cs = (T*)(base + L::C);
    s.B0 = (T*)(base + L::B);
    s.b1 = (NBUF - 1) * L::BYTES_N / (int)sizeof(T);
    s.X0 = (T*)(base + L::X);
    s.x1 = (NBUF - 1) * HB * L::BYTES_X / (int)sizeof(T);
    s.S = base + L::S;
    s.Sf = (float*)(base + L::SF);
    s.Zs = (T*)(base + L::Z);
#if SSD_WG
    s.bar = (uint64_t*)(base + L::bar);
    s.dtr = (float*)(base + L::dtr);
#else
    s.bar = nullptr;
    s.dtr = nullptr;
#endif
    return s;
}
#if SSD_WG
// Exact scan and the walk: the view of prep set b (0 or 1): cs, dtv, w and dec of set 1 follow set 0's (the layout's dtr part and
// the second half of dec). The producer computes chunk c + 1's set while the math warpgroup reads chunk c's.
template <int HB>
__device__ __forceinline__ SsdSmem prep_set(const SsdSmem& s, int b) {
    SsdSmem v = s;
    const int off = b * 3 * HB * SSD_Q;
    v.cs += off;
    v.dtv += off;
    v.w += off;
    v.dec += b * HB;
    return v;
}
#endif
// Buffer selection by arithmetic (buf 0 or 1; an indexed pointer array would live in local memory, and a select
// of two addresses becomes a select of two wgmma descriptors per product), by the layout's constant slot distance: the
// difference of two slots' pointers was not folded, its 64-bit arithmetic about 20 uniform instructions a product.
__device__ __forceinline__ T* sB(const SsdSmem& s, int buf) { return s.B0 + buf * s.b1; }
__device__ __forceinline__ T* sX(const SsdSmem& s, int buf, int u) {
    return s.X0 + buf * s.x1 + u * SSD_SUB * SSD_LDX;
}
// Unit u's 16-bit S_prev operand tile (the chunk-parallel kernel's, and the sm_90a exact scan's round_T copy).
__device__ __forceinline__ T* sS(const SsdSmem& s, int u) { return (T*)s.S + u * SSD_PB * SSD_LDN; }

struct SsdArgs {
    const T* x; const DTT* dt; const float* A; const T* Bm; const T* Cm;
    const float* D; const T* z; const float* dt_bias; const SDT* init;
    T* y; SDT* final_out; SDT* varlen_out; SDT* chunk_out;
    const long long* table;   // segments [nseg][8], then order [nseg], then chunk -> segment [total_chunks]
    int nseg, total_chunks, nheads, ngroups, flags;
    float lo, hi;
#if SSD_WG
    // Tensor maps of x, B, C, z (the kernels' __grid_constant__ parameters, SSD_TMAP_PARAMS): 2-D [tokens][columns]
    // views (x, z: nheads * headdim columns; B, C: ngroups * dstate), 64 x 64 boxes in the 128-byte swizzle.
    const CakeTensorMap *tm_x, *tm_B, *tm_C, *tm_z;
#endif
};
#if SSD_WG
#define SSD_TMAP_PARAMS , const __grid_constant__ CakeTensorMap tm_x, const __grid_constant__ CakeTensorMap tm_B, \
    const __grid_constant__ CakeTensorMap tm_C, const __grid_constant__ CakeTensorMap tm_z
#define SSD_TMAP_ARGS , &tm_x, &tm_B, &tm_C, &tm_z
#else
#define SSD_TMAP_PARAMS
#define SSD_TMAP_ARGS
#endif

// Segment record fields.
#define SEG_TOK0 0      // global token index (row * seqlen + start) of the first token
#define SEG_LEN 1
#define SEG_INIT 2      // initial_states index, -1: zeros
#define SEG_CHUNK0 3    // global index of its first chunk (workspace row)
#define SEG_CKPT0 4     // index in chunk_states of its first checkpoint
#define SEG_FINAL 5     // final_states index, -1: none
#define SEG_VARLEN 6    // varlen_states index, -1: none

__device__ __forceinline__ int unit_head(int u) { return u / SSD_PBLKS; }
__device__ __forceinline__ int unit_p0(int u) { return (u % SSD_PBLKS) * SSD_PB; }
__device__ __forceinline__ long long ssd_state_index(long long idx, int nheads, int h, int p) {
    return ((idx * nheads + h) * SSD_P + p) * (long long)SSD_N;
}

// ---------------------------------------------------------------------------------------------------
// small helpers
// 2^x in one MUFU instruction (ftz: results below 2^-126 flush to 0; the same code in both families).
__device__ __forceinline__ float ex2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
// z * sigmoid(z) = z / (1 + 2^(-z log2 e)) as z * rcp(1 + 2^(-z log2 e)): what __fdividef compiles to, one MUFU.RCP
// and a product, without its range fix-up (divisors below 2^-126 scaled first), which 1 + 2^x (>= 1, or NaN)
// never takes, so the same value.
__device__ __forceinline__ float silu(float z) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.0f, ex2(__fmul_rn(z, -1.4426950408889634f)))));
    return __fmul_rn(z, r);
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
#if SSD_T == 0
    return pack_bf16x2(lo, hi);
#else
    return pack_fp16x2(lo, hi);
#endif
}
__device__ __forceinline__ float lo16(uint32_t v) { return E::to_float((T)(v & 0xffffu)); }
__device__ __forceinline__ float hi16(uint32_t v) { return E::to_float((T)(v >> 16)); }
// Store two adjacent values of an element tile (rounded to T).
__device__ __forceinline__ void st_pair(T* p, float lo, float hi) {
#if SSD_IS_F32
    *(float2*)p = make_float2(lo, hi);
#else
    *(uint32_t*)p = pack2(lo, hi);
#endif
}
__device__ __forceinline__ void ld_pair(const T* p, float& lo, float& hi) {
#if SSD_IS_F32
    const float2 v = *(const float2*)p;
    lo = v.x; hi = v.y;
#else
    const uint32_t v = *(const uint32_t*)p;
    lo = lo16(v);
    hi = hi16(v);
#endif
}
__device__ __forceinline__ void mma16816(float d[4], const uint32_t a[4], const uint32_t* b) {
#if SSD_T == 0
    mma_bf16_16816(d, a, b);
#else
    mma_fp16_16816(d, a, b);
#endif
}
template <int NT>
__device__ __forceinline__ void zero_tiles(float (*acc)[4]) {
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
}

// Index of element (row r, column c) of a 64-row element tile of leading dim ld: padded rows, or (SSD_WG)
// 64-column panels of 64 x 128-byte rows whose 16-byte chunk q sits at chunk q ^ (r % 8).
__device__ __forceinline__ int tidx(int ld, int r, int c) {
#if SSD_WG
    return ((c >> 6) << 12) + (r << 6) + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
#else
    return r * ld + c;
#endif
}

// Fragment loads (16-bit programs). A: 16 x 16 (rows m0.., k k0..); B: two 16 x 8 n-tiles (n0.., n0 + 8..).
#if SSD_WG
__device__ __forceinline__ void ldA_km(uint32_t a[4], const T* A, int lda, int m0, int k0) {  // A stored [k][m]
    const int lane = threadIdx.x & 31, li = lane & 7, mat = lane >> 3;
    ldmatrix_x4_trans(a, A + tidx(lda, k0 + li + ((mat >> 1) << 3), m0 + ((mat & 1) << 3)));
}
// The thread's pairs of an element tile in the accumulator layout, v[t] = (row m0 + g + 8 half, columns 8t + 2tg, +1) as
// stored, chunks t < NT (64-column panels of 8), four chunks an ldmatrix / stmatrix (an 8 x 8 matrix's fragment is that
// layout): lane l passes row m0 + 8 half + l % 8 of chunk 4q + l / 8. Where each pair took a 32-bit access and two
// instructions of index arithmetic (tidx), four pairs take one instruction and one address. The address is tidx's in
// bytes, from one per-lane offset: chunk 4q + l / 8 sits at chunk (l / 8 ^ l % 8) ^ 4 (q % 2) of panel q / 2, and rows
// 8 half further swizzle alike.
__device__ __forceinline__ const T* acc_pair_rows(const T* tile, int half, int q) {
    const int lane = threadIdx.x & 31, r = lane & 7;
    const int o = ((16 * (threadIdx.x >> 5) + r) << 7) | (((lane >> 3) ^ r) << 4);
    return (const T*)((const unsigned char*)tile + ((o ^ ((q & 1) << 6)) + ((q >> 1) << 13) + (half << 10)));
}
template <int NT>
__device__ __forceinline__ void ld_acc_pairs(uint32_t (&v)[NT], const T* tile, int half) {
#pragma unroll
    for (int q = 0; q < NT / 4; ++q) ldmatrix_x4(&v[4 * q], acc_pair_rows(tile, half, q));
}
template <int NT>
__device__ __forceinline__ void st_acc_pairs(const uint32_t (&v)[NT], T* tile, int half) {
#pragma unroll
    for (int q = 0; q < NT / 4; ++q) stmatrix_x4(&v[4 * q], const_cast<T*>(acc_pair_rows(tile, half, q)));
}
#else
__device__ __forceinline__ void ldA_rm(uint32_t a[4], const T* A, int lda, int m0, int k0) {  // A stored [m][k]
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(a, A + (m0 + (lane & 15)) * lda + k0 + ((lane >> 4) << 3));
}
__device__ __forceinline__ void ldA_km(uint32_t a[4], const T* A, int lda, int m0, int k0) {  // A stored [k][m]
    const int lane = threadIdx.x & 31, li = lane & 7, mat = lane >> 3;
    ldmatrix_x4_trans(a, A + (k0 + li + ((mat >> 1) << 3)) * lda + m0 + ((mat & 1) << 3));
}
__device__ __forceinline__ void ldB_nk(uint32_t b[4], const T* B, int ldb, int n0, int k0) {  // B stored [n][k]
    const int lane = threadIdx.x & 31, li = lane & 7, mat = lane >> 3;
    ldmatrix_x4(b, B + (n0 + li + ((mat >> 1) << 3)) * ldb + k0 + ((mat & 1) << 3));
}
__device__ __forceinline__ void ldB_kn(uint32_t b[4], const T* B, int ldb, int n0, int k0) {  // B stored [k][n]
    const int lane = threadIdx.x & 31, li = lane & 7, mat = lane >> 3;
    ldmatrix_x4_trans(b, B + (k0 + li + ((mat & 1) << 3)) * ldb + n0 + ((mat >> 1) << 3));
}
#endif

#if SSD_WG
// ---------------------------------------------------------------------------------------------------
// Warpgroup products (sm_90a). Accumulators d[4t + q] are the mma.m16n8k16 fragments of 8-column block t.
__device__ __forceinline__ void wg_ss_n64(float* d, uint64_t da, uint64_t db, int accumulate) {
#if SSD_T == 0
    wgmma_m64n64k16_bf16(d, da, db, accumulate);
#else
    wgmma_m64n64k16_f16(d, da, db, accumulate);
#endif
}
template <int NN>
__device__ __forceinline__ void wg_rs_tb(float* d, const uint32_t a[4], uint64_t db, int accumulate) {
    static_assert(NN == 64 || NN == 128, "state columns per pass");
#if SSD_T == 0
    if (NN == 64) wgmma_m64n64k16_bf16_rs_tb(d, a, db, accumulate);
    else wgmma_m64n128k16_bf16_rs_tb(d, a, db, accumulate);
#else
    if (NN == 64) wgmma_m64n64k16_f16_rs_tb(d, a, db, accumulate);
    else wgmma_m64n128k16_f16_rs_tb(d, a, db, accumulate);
#endif
}
// Wait for the groups committed so far (wg_land) / for the group just committed (wg_wait); the accumulators are not
// touched before they land.
template <int R>
__device__ __forceinline__ void wg_land(float* d) {
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void wg_wait(float* d) {
    wgmma_commit();
    wg_land<R>(d);
}
// Descriptor of 16 K columns k0.. of a K-major tile (k0 % 16 == 0): panel k0 / 64, 32 bytes per 16 columns; the
// tile's descriptor from 32-bit halves (wgmma.cuh), then a constant offset a product. ADD64: the offset added to the
// 64-bit descriptor (ptxas: one UIADD3.64 into the product's register pair, whose high word stays), else to the low
// word (a UIADD3, and ptxas writes the constant high word again, a UMOV, before every product). Both give the same
// bits: the low word (address >> 4 below 2^14, the leading byte offset's field below 2^26) never carries. Which one
// costs fewer instructions depends on ptxas's uniform registers (docs/ssd.md, "The wgmma descriptors' high words and
// the prep copy").
template <bool ADD64>
__device__ __forceinline__ uint64_t desc_k(const T* tile, int k0) {
    const uint32_t off = (uint32_t)((((k0 >> 6) << 13) + ((k0 & 63) << 1)) >> 4);
    if (ADD64) return wgmma_desc_sw128(wgmma_desc_lo(smem_u32(tile), 16u)) + off;
    return wgmma_desc_sw128(wgmma_desc_lo(smem_u32(tile), 16u) + off);
}
// Descriptor of 16 K rows k0.. of an MN-major tile, MN columns n0.. (n0 % 64 == 0): 64-column panels 8 KiB apart
// (the offset added to the 64-bit descriptor, as desc_k<true>).
__device__ __forceinline__ uint64_t desc_mn(const T* tile, int k0, int n0) {
    return wgmma_desc_sw128(wgmma_desc_lo(smem_u32(tile), 8192u)) + (uint32_t)((((n0 >> 6) << 13) + (k0 << 7)) >> 4);
}
// C's descriptors (the A operand of C S_prev^T and C B^T): at chunks of up to 128 ptxas keeps C B^T's in their own
// registers from C S_prev^T's when both take the low-word form; at 256 it does not, and C S_prev^T's cost least
// added whole (counted on the walk programs, nemotron-h and m2-2.7b).
constexpr bool SSD_C_INTER_ADD64 = SSD_Q > 128;
#endif

// 64 rows x ROW_ELEMS elements global -> shared (cp.async, zero-fill rows >= valid).
// Columns c0.. of the tile (c0 % 64 == 0 with SSD_WG).
#if SSD_WG
#define SSD_TILE_COPY_INLINE __noinline__  // the producer: the partial sub-blocks' path, out of its loop's registers
#else
#define SSD_TILE_COPY_INLINE __forceinline__
#endif
template <int ROW_ELEMS>
__device__ SSD_TILE_COPY_INLINE void load_tile_async(T* dst, int ld_dst, const T* src, long long row_stride, int valid,
                                                     int c0 = 0) {
    constexpr int VEC = 16 / (int)sizeof(T);
    constexpr int PER_ROW = ROW_ELEMS / VEC;
    const int tid = threadIdx.x & (SSD_THREADS - 1);  // the issuing warpgroup's thread
#if SSD_WG
    // The producer warpgroup. Rows of up to 128 elements in whole rounds: a thread keeps its 16-byte column and
    // steps RSTEP rows (a multiple of 8: the swizzle phase stays) a round, walking one pointer (it runs at a few
    // dozen registers). Wider rows: 128-column halves.
    if (ROW_ELEMS > 128) {
#pragma unroll 1
        for (int h = 0; h < ROW_ELEMS / 128; ++h)
            load_tile_async<(ROW_ELEMS > 128 ? 128 : ROW_ELEMS)>(dst, ld_dst, src + 128 * h, row_stride, valid,
                                                                 c0 + 128 * h);
        return;
    }
    constexpr int ROUNDS = SSD_SUB * PER_ROW / SSD_THREADS, RSTEP = SSD_THREADS / PER_ROW;
    static_assert(ROW_ELEMS > 128 || (SSD_SUB * PER_ROW % SSD_THREADS == 0 && RSTEP % 8 == 0), "whole rounds");
    const int r0 = tid / PER_ROW, c = (tid % PER_ROW) * VEC;
    const T* g = src + (long long)r0 * row_stride + c;
    const uint32_t d = smem_u32(dst + tidx(ld_dst, r0, c0 + c));
    const long long gstep = RSTEP * row_stride;
#pragma unroll 1
    for (int k = 0; k < ROUNDS; ++k, g += gstep) {
        const bool ok = r0 + k * RSTEP < valid;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d + k * RSTEP * 128), "l"(ok ? g : src),
                     "r"(ok ? 16 : 0));
    }
#else
    for (int i = tid; i < SSD_SUB * PER_ROW; i += SSD_THREADS) {
        const int r = i / PER_ROW, c = (i % PER_ROW) * VEC;
        const bool ok = r < valid;
        const T* g = src + (ok ? (long long)r * row_stride + c : 0);
        cp_async_16_zfill(dst + c0 + r * ld_dst + c, g, ok ? 16 : 0);
    }
#endif
}

// cp.async copies, rows >= valid zero-filled, of the 64-token sub-block starting at token `tok`: B columns
// n0..n0+NCOLS into buffer `buf` (copy_b_async), and the rows of units u0..u0+HB of x or z (src) into adjacent
// tiles at dst (copy_units_async). Every sub-block's copy on sm_80; on sm_90a a partial sub-block's (whole ones take
// TMA: tma_tile).
template <int NCOLS>
__device__ __forceinline__ void copy_b_async(const SsdArgs& a, const SsdSmem& s, int buf, long long tok, int valid,
                                             int grp, int n0) {
    load_tile_async<NCOLS>(sB(s, buf), SSD_LDN, a.Bm + (tok * a.ngroups + grp) * SSD_N + n0,
                           (long long)a.ngroups * SSD_N, valid, n0);
}
template <int HB>
__device__ __forceinline__ void copy_units_async(const SsdArgs& a, T* dst, const T* src, long long tok, int valid,
                                                 int u0) {
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const int uu = u0 + u;
        load_tile_async<SSD_PB>(dst + u * SSD_SUB * SSD_LDX, SSD_LDX,
                                src + (tok * a.nheads + unit_head(uu)) * SSD_P + unit_p0(uu), (long long)a.nheads * SSD_P,
                                valid);
    }
}

#if SSD_WG
// Producer: a tile of 64 token rows and NP * 64 columns whose rows are all inside the segment (valid == 64): NP boxes
// of `map` (rows tok.., columns col.., col + 64, ...) into consecutive 8 KiB panels at dst, by one elected thread,
// completing a phase of `full` (the others arrive on it). TMA's 128-byte swizzle of a 64-column box (128-byte rows,
// 1024-byte aligned panels) is the layout tidx gives. A partial sub-block takes cp.async instead: its rows past the
// segment's end are zero-filled per copy, where a box would read the next segment's rows (the packed tensor has no
// bound at a segment's end).
template <int NP>
__device__ __forceinline__ void tma_tile(const CakeTensorMap* map, T* dst, int col, long long tok, uint64_t* full) {
    static_assert(NP >= 1, "a tile of fewer than 64 columns would complete its phase with no copy");
    if ((threadIdx.x & (SSD_THREADS - 1)) == 0) {
        mbarrier_arrive_expect_tx(full, NP * SSD_SUB * 128);
#pragma unroll
        for (int q = 0; q < NP; ++q) tma_load_2d(dst + q * SSD_SUB * 64, map, col + 64 * q, (int)tok, full);
    } else {
        mbarrier_arrive(full);
    }
}
// Copy B columns n0..n0+NCOLS, the X rows of every unit of the block, C or z of the 64-token sub-block starting at
// token `tok` into their buffers, completing a phase of `full`.
template <int NCOLS>
__device__ __forceinline__ void load_b(const SsdArgs& a, const SsdSmem& s, int buf, long long tok, int valid, int grp,
                                       int n0, uint64_t* full) {
    if (valid == SSD_SUB) {
        tma_tile<NCOLS / 64>(a.tm_B, sB(s, buf) + tidx(SSD_LDN, 0, n0), grp * SSD_N + n0, tok, full);
        return;
    }
    copy_b_async<NCOLS>(a, s, buf, tok, valid, grp, n0);
    mbarrier_arrive_cp_async(full);
}
__device__ __forceinline__ void load_c(const SsdArgs& a, T* dst, long long tok, int valid, int grp, uint64_t* full) {
    if (valid == SSD_SUB) {
        tma_tile<SSD_N / 64>(a.tm_C, dst, grp * SSD_N, tok, full);
        return;
    }
    load_tile_async<SSD_N>(dst, SSD_LDN, a.Cm + (tok * a.ngroups + grp) * SSD_N, (long long)a.ngroups * SSD_N, valid);
    mbarrier_arrive_cp_async(full);
}
// x (Z false) or z: the units of a block are adjacent 64-column spans (unit u: columns 64 u..) and their tiles
// adjacent panels.
template <int HB, bool Z>
__device__ __forceinline__ void load_units(const SsdArgs& a, T* dst, long long tok, int valid, int u0, uint64_t* full) {
    if (valid == SSD_SUB) {
        tma_tile<HB>(Z ? a.tm_z : a.tm_x, dst, u0 * SSD_PB, tok, full);
        return;
    }
    copy_units_async<HB>(a, dst, Z ? a.z : a.x, tok, valid, u0);
    mbarrier_arrive_cp_async(full);
}
template <int HB>
__device__ __forceinline__ void load_x(const SsdArgs& a, const SsdSmem& s, int buf, long long tok, int valid, int u0,
                                       uint64_t* full) {
    load_units<HB, false>(a, sX(s, buf, 0), tok, valid, u0, full);
}
#else
// B columns n0..n0+NCOLS and the X rows of every unit of the block for the sub-block at `tok` into buffer `buf`,
// as one cp.async commit group.
template <int HB, int NCOLS>
__device__ __forceinline__ void issue_bx(const SsdArgs& a, const SsdSmem& s, int buf, long long tok, int valid, int grp,
                                         int u0, int n0) {
    copy_b_async<NCOLS>(a, s, buf, tok, valid, grp, n0);
    copy_units_async<HB>(a, sX(s, buf, 0), a.x, tok, valid, u0);
    cp_async_commit();
}
#endif

// Barrier of the math threads (sm_90a: the math warpgroup alone, named barrier 1; the producer never joins).
__device__ __forceinline__ void math_sync() {
#if SSD_WG
    asm volatile("bar.sync 1, %0;\n" ::"n"(SSD_THREADS) : "memory");
#else
    __syncthreads();
#endif
}

// Loads so far per buffer of the sm_90a pipeline (see "The load pipeline"): B / X ring, C, z, S_prev, dt.
struct SsdPipe {
    int bx, c, z, s, dt;
};
#if SSD_WG
// The load pipeline (sm_90a). The producer warpgroup issues every tile copy in the order the math warpgroup
// consumes them; each role counts its loads per buffer (SsdPipe), so both derive the same slot and phase.
template <int NBUF>
__device__ __forceinline__ int ring_slot(int k) { return NBUF == 2 ? (k & 1) : 0; }
template <int NBUF>
__device__ __forceinline__ uint32_t ring_phase(int k) { return (uint32_t)((NBUF == 2 ? k >> 1 : k) & 1); }
// Producer: wait for the consumers to free a buffer / arrive on its full barrier when this thread's copies land.
__device__ __forceinline__ void fill_begin(const SsdSmem& s, int empty, uint32_t phase) { mbarrier_wait_parity(s.bar + empty, phase ^ 1u); }
__device__ __forceinline__ void fill_end(const SsdSmem& s, int full) { mbarrier_arrive_cp_async(s.bar + full); }
// Math warpgroup: wait for a buffer / free it. A tensor-map copy (the async proxy) is seen by wgmma and by generic loads
// once its full barrier's phase completes; a cp.async fill (the generic proxy: a partial sub-block, S_prev) read by
// wgmma (the async proxy) needs the proxy fence after the wait (`cp_wgmma`). The fence is not free: its MEMBAR waits
// for the thread's outstanding memory operations, the previous row block's stores of y among them.
__device__ __forceinline__ void use_begin(const SsdSmem& s, int full, uint32_t phase, bool cp_wgmma) {
    mbarrier_wait_parity(s.bar + full, phase);
    if (cp_wgmma) fence_proxy_async_shared();
}
__device__ __forceinline__ void use_end(const SsdSmem& s, int empty) { mbarrier_arrive(s.bar + empty); }
// The same for a buffer the math warpgroup read with generic loads (ld.shared: x and z in the epilogue) that the
// producer refills by tensor map (the async proxy): the proxy fence orders those reads before the copy that overwrites
// them (its MEMBAR waits for the loads). Without it an arrive could overtake the thread's last loads of the buffer and
// the next sub-block's copy land under them (seen: chunk-parallel y differing between runs in the columns read last).
__device__ __forceinline__ void use_end_read(const SsdSmem& s, int empty) {
    fence_proxy_async_shared();
    mbarrier_arrive(s.bar + empty);
}

// Producer: the raw dt of a chunk for the prep (plain loads: a 16-bit dt is too narrow for cp.async).
template <int HB>
__device__ __forceinline__ void produce_dt(const SsdArgs& a, const SsdSmem& s, SsdPipe& p, long long ctok, int l, int u0) {
    fill_begin(s, BAR_EMPTY_DT, (uint32_t)(p.dt & 1));
    for (int e = threadIdx.x & (SSD_THREADS - 1); e < HB * SSD_Q; e += SSD_THREADS) {
        const int u = e / SSD_Q, t = e % SSD_Q;
        s.dtr[e] = t < l ? EDT::to_float(a.dt[(ctok + t) * a.nheads + unit_head(u0 + u)]) : 0.0f;
    }
    mbarrier_arrive(s.bar + BAR_FULL_DT);  // (release: the stores above are seen by the waiters)
    ++p.dt;
}
// Producer, chunk-parallel phase 3: the tile's cs and dt' saved by phase 1 (ssd_prep_save) into the dt buffer.
template <int HB>
__device__ __forceinline__ void produce_prep(const SsdSmem& s, SsdPipe& p, const float* saved) {
    fill_begin(s, BAR_EMPTY_DT, (uint32_t)(p.dt & 1));
    for (int e = threadIdx.x & (SSD_THREADS - 1); e < HB * 2 * SSD_Q / 4; e += SSD_THREADS)
        cp_async_16(s.dtr + 4 * e, saved + 4 * e);
    fill_end(s, BAR_FULL_DT);
    ++p.dt;
}
#endif


// ---------------------------------------------------------------------------------------------------
// Chunk prep of every unit u of the block (arrays [u][Q]): dtv = dt' (0 beyond the chunk's l tokens),
// cs = inclusive cumsum of dt' A log2(e) in a fixed order (32-token warp scans, then the group totals added
// left to right), w = 2^(cs_last - cs) dt', dec[u] = 2^cs_last. Three stages, each a function of the element (and of
// the warp and lane for the scans), separated by barriers of the threads that run them: the math warpgroup
// (ssd_chunk_prep) or, in the exact scan on sm_90a, the producer (produce_chunk_prep). Either way the same threads'
// positions hold the same elements and every element takes the same fp32 operations in the same order.
#define SSD_PREP_G (SSD_Q / 32)  // 32-token groups of a chunk
static_assert(SSD_PREP_G >= 2, "a chunk of two 32-token groups or more");
// Stage 1, one group gi of unit u (the calling warp; lane: its token in the group): dt' of token t = 32 gi + lane
// (raw(t): its dt, asked for t < l only), the group's inclusive scan of dt' A log2(e) into cs, its total into gt.
template <class Raw>
__device__ __forceinline__ void prep_group(const SsdArgs& a, const SsdSmem& s, int u, int gi, int lane, int l, float Ah,
                                           float bias, const Raw& raw) {
    const float Ah2 = __fmul_rn(Ah, 1.4426950408889634f);  // log2 units: 2^x is one MUFU op
    const int t = gi * 32 + lane;
    float d = 0.0f, v = 0.0f;
    if (t < l) {
        d = raw(t);
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
    s.dtv[u * SSD_Q + t] = d;
    s.cs[u * SSD_Q + t] = v;
    if (lane == 31) s.gt[u * SSD_PREP_G + gi] = v;
}
// Stage 2, the elements tid, tid + 128, ...: group gi's prefix ((gt_0 + gt_1) + ...) + gt_(gi-1), left to right: the
// unit's totals loaded at once (no load waits for an addition) and summed in one chain, the element taking the running
// sum as it passes its group: the additions of summing them one load after another, in the same order, so the same
// bits. (One chain a unit kept for all of a thread's elements, or this loop unrolled, holds more registers across the
// prep: programs spill more.)
template <int HB>
__device__ __forceinline__ void prep_prefixes(const SsdSmem& s, int tid) {
    constexpr int G = SSD_PREP_G;
#pragma unroll 1
    for (int e = tid; e < HB * SSD_Q; e += SSD_THREADS) {
        const int u = e / SSD_Q, gi = (e % SSD_Q) >> 5;
        if (gi > 0) {
            const float* g = s.gt + u * G;
            float run = g[0], pg = run;
#pragma unroll
            for (int k = 2; k < G; ++k) {
                run = __fadd_rn(run, g[k - 1]);
                if (gi == k) pg = run;
            }
            s.cs[e] = __fadd_rn(pg, s.cs[e]);
        }
    }
}
// Stage 3, the elements tid, tid + 128, ...: the state weights, and (tid < HB) unit tid's decay.
template <int HB>
__device__ __forceinline__ void prep_weights(const SsdSmem& s, int tid, int l) {
    for (int e = tid; e < HB * SSD_Q; e += SSD_THREADS) {
        const int u = e / SSD_Q, t = e % SSD_Q;
        const float last = s.cs[u * SSD_Q + l - 1];
        s.w[e] = t < l ? __fmul_rn(ex2(__fsub_rn(last, s.cs[e])), s.dtv[e]) : 0.0f;
    }
    if ((unsigned)tid < HB) s.dec[tid] = ex2(s.cs[tid * SSD_Q + l - 1]);  // (unsigned: tid >= 0, as threadIdx.x)
}

// The prep by the math warpgroup (the chunk-parallel phase 1; the exact scan without the producer warpgroup), the raw
// dt staged by the producer (sm_90a) or read here. Starts and ends with a barrier of the math threads.
// A and dt_bias (0 without it) of the block's HB units, the prep's per-unit constants.
template <int HB>
__device__ __forceinline__ void unit_decay_bias(const SsdArgs& a, int u0, float (&Au)[HB], float (&biasu)[HB]) {
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const int h = unit_head(u0 + u);
        Au[u] = a.A[h];
        biasu[u] = (a.flags & SSD_F_BIAS) ? a.dt_bias[h] : 0.0f;
    }
}

template <int HB>
__device__ __forceinline__ void ssd_chunk_prep(const SsdArgs& a, const SsdSmem& s, SsdPipe& p, long long ctok, int l,
                                               int u0) {
    constexpr int G = SSD_PREP_G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // A and dt_bias of the block's units, loaded before the waits below (their round trip overlaps them)
    float Au[HB], biasu[HB];
    unit_decay_bias<HB>(a, u0, Au, biasu);
    math_sync();  // the previous users of the chunk arrays are done
#if SSD_WG
    mbarrier_wait_parity(s.bar + BAR_FULL_DT, (uint32_t)(p.dt & 1));
#else
    (void)p;
#endif
    for (int task = warp; task < HB * G; task += SSD_THREADS / 32) {
        const int u = task / G, gi = task % G;
        float Ah = Au[0], bias = biasu[0];
#pragma unroll
        for (int v = 1; v < HB; ++v) {  // (selected by value: an indexed register array would live in local memory)
            if (u == v) {
                Ah = Au[v];
                bias = biasu[v];
            }
        }
#if SSD_WG
        prep_group(a, s, u, gi, lane, l, Ah, bias, [&](int t) { return s.dtr[u * SSD_Q + t]; });
#else
        prep_group(a, s, u, gi, lane, l, Ah, bias,
                   [&](int t) { return EDT::to_float(a.dt[(ctok + t) * a.nheads + unit_head(u0 + u)]); });
#endif
    }
#if SSD_WG
    use_end(s, BAR_EMPTY_DT);
    ++p.dt;
#endif
    math_sync();
    prep_prefixes<HB>(s, threadIdx.x);
    math_sync();
    prep_weights<HB>(s, threadIdx.x, l);
    math_sync();
}

#if SSD_WG
// Exact scan and the walk, the producer: this thread's raw dt of a chunk for its stage-1 groups of produce_chunk_prep (task k: group
// warp + 4k of the block's units), loaded a chunk ahead of its use so that the loads land under the chunk's tile loads.
#define SSD_PREP_TASKS(HB) (((HB) * SSD_PREP_G + 3) / 4)  // stage-1 groups a producer warp, at most
template <int HB>
__device__ __forceinline__ void load_prep_dt(const SsdArgs& a, float (&raw)[SSD_PREP_TASKS(HB)], long long ctok, int l,
                                             int u0) {
    const int tid = threadIdx.x & (SSD_THREADS - 1), warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int k = 0; k < SSD_PREP_TASKS(HB); ++k) {
        const int task = warp + 4 * k, u = task / SSD_PREP_G, t = (task % SSD_PREP_G) * 32 + lane;
        raw[k] = task < HB * SSD_PREP_G && t < l ? EDT::to_float(a.dt[(ctok + t) * a.nheads + unit_head(u0 + u)]) : 0.0f;
    }
}
// Barrier of the producer warpgroup alone (named barrier 2).
__device__ __forceinline__ void producer_sync() {
    asm volatile("bar.sync 2, %0;\n" ::"n"(SSD_THREADS) : "memory");
}
// Exact scan and the walk, the producer: the prep of a chunk of l tokens (its raw dt in `raw`, load_prep_dt) into prep set
// ring_slot<2>(p.dt), once the math warpgroup has released that set's previous chunk (two chunks back), completing a
// phase of the set's full barrier. Its stages are those of ssd_chunk_prep on the same thread positions (producer
// thread 128 + i where the math thread i would be), so the same bits; the set is the math warpgroup's to read after
// its wait, so no barrier opens or closes it. The producer's own reads of the totals (stage 2) are behind the barrier
// before stage 3, ahead of the next prep's stage 1.
template <int HB>
__device__ __forceinline__ void produce_chunk_prep(const SsdArgs& a, const SsdSmem& s, SsdPipe& p,
                                                   const float (&raw)[SSD_PREP_TASKS(HB)], int l, int u0) {
    const int tid = threadIdx.x & (SSD_THREADS - 1), warp = tid >> 5, lane = tid & 31;
    float Au[HB], biasu[HB];
    unit_decay_bias<HB>(a, u0, Au, biasu);
    const int slot = ring_slot<2>(p.dt);
    fill_begin(s, BAR_EMPTY_PREP + slot, ring_phase<2>(p.dt));
    const SsdSmem d = prep_set<HB>(s, slot);
#pragma unroll
    for (int k = 0; k < SSD_PREP_TASKS(HB); ++k) {
        const int task = warp + 4 * k, u = task / SSD_PREP_G;
        if (task < HB * SSD_PREP_G) {
            float Ah = Au[0], bias = biasu[0];
#pragma unroll
            for (int v = 1; v < HB; ++v) {
                if (u == v) {
                    Ah = Au[v];
                    bias = biasu[v];
                }
            }
            prep_group(a, d, u, task % SSD_PREP_G, lane, l, Ah, bias, [&](int) { return raw[k]; });
        }
    }
    producer_sync();
    prep_prefixes<HB>(d, tid);
    producer_sync();
    prep_weights<HB>(d, tid, l);
    mbarrier_arrive(s.bar + BAR_FULL_PREP + slot);  // (release: the set's stores are seen by the waiters)
    ++p.dt;
}
#endif

// Chunk-parallel: phase 1 saves the prep's cs and dt' of the block's units (to `saved`: [HB][2][Q], cs then dt'),
// and phase 3 copies them back instead of repeating the prep: the same values, so the same bits. The save follows
// ssd_chunk_prep (whose last barrier published them; the next prep's first barrier waits for these reads).
template <int HB>
__device__ __forceinline__ void ssd_prep_save(const SsdSmem& s, float* saved) {
    constexpr int Q4 = SSD_Q / 4;
    for (int e = threadIdx.x; e < HB * 2 * Q4; e += SSD_THREADS) {
        const int u = e / (2 * Q4), r = e % (2 * Q4);
        const float* src = r < Q4 ? s.cs + u * SSD_Q + 4 * r : s.dtv + u * SSD_Q + 4 * (r - Q4);
        *(float4*)(saved + 4 * e) = *(const float4*)src;
    }
}
// Phase 3's prep: cs and dt' of the tile from phase 1 (sm_90a: staged in the dt buffer by the producer; else read
// from `saved` here). Starts and ends with a barrier of the math threads, as ssd_chunk_prep does.
template <int HB>
__device__ __forceinline__ void ssd_prep_load(const SsdSmem& s, SsdPipe& p, const float* saved) {
    constexpr int Q4 = SSD_Q / 4;
    math_sync();  // the previous users of the chunk arrays are done
#if SSD_WG
    (void)saved;
    mbarrier_wait_parity(s.bar + BAR_FULL_DT, (uint32_t)(p.dt & 1));
    const float* src = s.dtr;
#else
    (void)p;
    const float* src = saved;
#endif
    // Thread t (the math threads: t < SSD_THREADS) copies elements t, t + SSD_THREADS, ... below NE, in a loop of a
    // compile-time trip count (one from threadIdx.x cost a test and its arithmetic an element; docs/ssd.md, "The wgmma
    // descriptors' high words and the prep copy").
    constexpr int NE = HB * 2 * Q4;
#pragma unroll
    for (int i = 0; i < (NE + SSD_THREADS - 1) / SSD_THREADS; ++i) {
        const int e = (int)threadIdx.x + i * SSD_THREADS;
        if (NE % SSD_THREADS != 0 && e >= NE) break;
        const int u = e / (2 * Q4), r = e % (2 * Q4);
        float* dst = r < Q4 ? s.cs + u * SSD_Q + 4 * r : s.dtv + u * SSD_Q + 4 * (r - Q4);
#if SSD_WG
        *(float4*)dst = *(const float4*)(src + 4 * e);
#else
        *(float4*)dst = __ldcg((const float4*)(src + 4 * e));  // (cg: written by other CTAs)
#endif
    }
#if SSD_WG
    use_end(s, BAR_EMPTY_DT);
    ++p.dt;
#endif
    math_sync();
}
// A fragment of the state product (16-bit programs, both tensor-core paths): A = round_T(w_s X^T), rows
// m0.. (headdim), columns k0.. (tokens of the sub-block); the fragment's columns are tokens k0 + 2tg (+1) and
// k0 + 8 + 2tg (+1). w: the unit's state weights of this sub-block.
// scaled_fragment: the same from X^T's fragment av (ldA_km) and the weights of the fragment's tokens (w0: k0 + 2tg,
// +1; w8: k0 + 8 + 2tg, +1).
__device__ __forceinline__ void scaled_fragment(uint32_t af[4], const uint32_t av[4], float2 w0, float2 w8) {
    af[0] = pack2(__fmul_rn(lo16(av[0]), w0.x), __fmul_rn(hi16(av[0]), w0.y));
    af[1] = pack2(__fmul_rn(lo16(av[1]), w0.x), __fmul_rn(hi16(av[1]), w0.y));
    af[2] = pack2(__fmul_rn(lo16(av[2]), w8.x), __fmul_rn(hi16(av[2]), w8.y));
    af[3] = pack2(__fmul_rn(lo16(av[3]), w8.x), __fmul_rn(hi16(av[3]), w8.y));
}
__device__ __forceinline__ void wx_fragment(uint32_t af[4], const T* Xs, const float* w, int m0, int k0) {
    const int tg = threadIdx.x & 3;
    uint32_t av[4];
    ldA_km(av, Xs, SSD_LDX, m0, k0);
    scaled_fragment(af, av, *(const float2*)(w + k0 + 2 * tg), *(const float2*)(w + k0 + 8 + 2 * tg));
}

// ---------------------------------------------------------------------------------------------------
// Chunk-local states of the block: S_loc_u[p][n] = sum_s round_T(w_u[s] X_u[s][p]) B[s][n], tokens in
// ascending order, NB state columns per pass (B loaded once per step and used by every unit), over the state
// columns of part `part` of COLS: N / COLS columns from part * N / COLS (COLS = 1: all of them; the chunk-parallel
// program's SSD_COLS splits a tile's columns over CTAs; a column's sum is the same products in the same order
// whatever columns a pass holds, so the bits do not depend on the split).
// Calls sink(n0, acc) per pass with the warp's accumulators: acc[u][t] holds rows 16w + g (+8), columns
// n0 + 8t + 2tg (+1).
#if SSD_WG
// Producer: one B / X sub-block into the ring.
template <int HB, int NBUF, int NCOLS>
__device__ __forceinline__ void produce_bx(const SsdArgs& a, const SsdSmem& s, int& k, long long tok, int valid,
                                           int grp, int u0, int n0) {
    const int slot = ring_slot<NBUF>(k);
    const uint32_t ph = ring_phase<NBUF>(k);
    fill_begin(s, BAR_EMPTY_B + slot, ph);
    load_b<NCOLS>(a, s, slot, tok, valid, grp, n0, s.bar + BAR_FULL_B + slot);
    fill_begin(s, BAR_EMPTY_X + slot, ph);
    load_x<HB>(a, s, slot, tok, valid, u0, s.bar + BAR_FULL_X + slot);
    ++k;
}
// Producer: the loads of ssd_chunk_state, in its order.
template <int HB, int NBUF, int NB, int COLS>
__device__ __forceinline__ void produce_state(const SsdArgs& a, const SsdSmem& s, SsdPipe& p, long long ctok, int l,
                                              int u0, int part) {
    constexpr int NC = SSD_N / COLS;
    const int grp = unit_head(u0) / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    for (int n0 = part * NC; n0 < part * NC + NC; n0 += NB)
        for (int j = 0; j < nsub; ++j)
            produce_bx<HB, NBUF, NB>(a, s, p.bx, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, u0, n0);
}

// Every barrier expects the 128 threads of one warpgroup (the producer's copies or the math threads' arrivals).
__device__ __forceinline__ void ssd_pipe_init(const SsdSmem& s) {
    if (threadIdx.x == 0) {
        for (int b = 0; b < SSD_NBARS; ++b) mbarrier_init(s.bar + b, b >= BAR_EPOCH && b < SSD_ONE_BARS ? 1 : SSD_THREADS);
        for (int w = 2 * SSD_NBARS; w < 2 * SSD_PIPE_SLOTS; ++w) reinterpret_cast<unsigned*>(s.bar)[w] = 0u;  // words
    }
    __syncthreads();
}
// The producer's last copies land before it leaves. This waits for cp.async only: a tensor-map copy is waited for
// by the math warpgroup on its FULL barrier, which every fill the producer makes is (so none lands after the exit).
__device__ __forceinline__ void cp_async_drain() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// The state product of sub-block j, in two parts (a B wait may sit between them): the A fragments round_T(w X_u^T)
// (rows m0.., the sub-block's tokens, 16 a k-tile) of every unit from X in slot buf, then acc_u += A_u B[tokens,
// n0..n0+NB] issued and landed. The exact scan's chunk-local state (ssd_chunk_state, or fused into the last row block's
// steps: ssd_chunk_output) and the chunk-parallel phase 1 issue these same products in the same order.
template <int HB>
__device__ __forceinline__ void state_fragments(uint32_t (&af)[HB][SSD_SUB / 16][4], const SsdSmem& s, int buf, int j,
                                                int m0) {
#pragma unroll
    for (int k = 0; k < SSD_SUB / 16; ++k) {
#pragma unroll
        for (int u = 0; u < HB; ++u) wx_fragment(af[u][k], sX(s, buf, u), s.w + u * SSD_Q + j * SSD_SUB, m0, 16 * k);
    }
}
template <int HB, int NB>
__device__ __forceinline__ void state_product(float (&acc)[HB][NB / 8][4], const uint32_t (&af)[HB][SSD_SUB / 16][4],
                                              const T* Bs, int n0) {
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < SSD_SUB / 16; ++k)
#pragma unroll
        for (int u = 0; u < HB; ++u) wg_rs_tb<NB>(&acc[u][0][0], af[u][k], desc_mn(Bs, 16 * k, n0), 1);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int u = 0; u < HB; ++u)
#pragma unroll
        for (int t = 0; t < NB / 8; ++t)
#pragma unroll
            for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(acc[u][t][q])::"memory");
}

template <int HB, int NBUF, int NB, int COLS, class Sink>
__device__ __forceinline__ void ssd_chunk_state(const SsdArgs&, const SsdSmem& s, SsdPipe& p, int l, int part,
                                                Sink& sink) {
    constexpr int NT = NB / 8, NC = SSD_N / COLS;
    const int m0 = 16 * (threadIdx.x >> 5);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    for (int n0 = part * NC; n0 < part * NC + NC; n0 += NB) {
        float acc[HB][NT][4];
#pragma unroll
        for (int u = 0; u < HB; ++u) zero_tiles<NT>(acc[u]);
        for (int j = 0; j < nsub; ++j) {
            const int buf = ring_slot<NBUF>(p.bx);
            const bool cp = l - j * SSD_SUB < SSD_SUB;  // a partial sub-block: cp.async fills
            use_begin(s, BAR_FULL_X + buf, ring_phase<NBUF>(p.bx), false);  // (read by ldmatrix)
            uint32_t af[HB][SSD_SUB / 16][4];
            state_fragments<HB>(af, s, buf, j, m0);
            use_begin(s, BAR_FULL_B + buf, ring_phase<NBUF>(p.bx), cp);
            state_product<HB, NB>(acc, af, sB(s, buf), n0);
            use_end(s, BAR_EMPTY_B + buf);
            use_end(s, BAR_EMPTY_X + buf);
            ++p.bx;
        }
        sink(n0, acc);
    }
}
#else
template <int HB, int NBUF, int NB, int COLS, class Sink>
__device__ __forceinline__ void ssd_chunk_state(const SsdArgs& a, const SsdSmem& s, long long ctok, int l, int u0,
                                                int part, Sink& sink) {
    constexpr int NT = NB / 8, NC = SSD_N / COLS;
    const int lane = threadIdx.x & 31, m0 = 16 * (threadIdx.x >> 5);
    const int g = lane >> 2, tg = lane & 3;
    const int grp = unit_head(u0) / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    for (int n0 = part * NC; n0 < part * NC + NC; n0 += NB) {
        float acc[HB][NT][4];
#pragma unroll
        for (int u = 0; u < HB; ++u) zero_tiles<NT>(acc[u]);
        __syncthreads();  // previous users of the B / X buffers are done
        if (NBUF == 2) issue_bx<HB, NB>(a, s, 0, ctok, min(SSD_SUB, l), grp, u0, n0);
        for (int j = 0; j < nsub; ++j) {
            const int buf = NBUF == 2 ? (j & 1) : 0;
            if (j > 0) __syncthreads();  // step j-1 is done with the buffer the next load overwrites
            if (NBUF == 2) {
                if (j + 1 < nsub) {
                    issue_bx<HB, NB>(a, s, buf ^ 1, ctok + (j + 1) * SSD_SUB, min(SSD_SUB, l - (j + 1) * SSD_SUB), grp,
                                     u0, n0);
                    cp_async_wait<1>();
                } else {
                    cp_async_wait<0>();
                }
            } else {
                issue_bx<HB, NB>(a, s, 0, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, u0, n0);
                cp_async_wait<0>();
            }
            __syncthreads();
            const T* Bs = sB(s, buf);
#if SSD_IS_F32
            for (int k = 0; k < SSD_SUB; ++k) {
#pragma unroll
                for (int u = 0; u < HB; ++u) {
                    const T* Xs = sX(s, buf, u);
                    const float wk = s.w[u * SSD_Q + j * SSD_SUB + k];
                    const float a0 = __fmul_rn(Xs[k * SSD_LDX + m0 + g], wk);
                    const float a1 = __fmul_rn(Xs[k * SSD_LDX + m0 + g + 8], wk);
#pragma unroll
                    for (int t = 0; t < NT; ++t) {
                        const float2 b = *(const float2*)(Bs + k * SSD_LDN + n0 + 8 * t + 2 * tg);
                        acc[u][t][0] = __fmaf_rn(a0, b.x, acc[u][t][0]);
                        acc[u][t][1] = __fmaf_rn(a0, b.y, acc[u][t][1]);
                        acc[u][t][2] = __fmaf_rn(a1, b.x, acc[u][t][2]);
                        acc[u][t][3] = __fmaf_rn(a1, b.y, acc[u][t][3]);
                    }
                }
            }
#else
#pragma unroll SSD_KUNROLL
            for (int k0 = 0; k0 < SSD_SUB; k0 += 16) {
                uint32_t b[NT / 2][4];
#pragma unroll
                for (int t2 = 0; t2 < NT / 2; ++t2) ldB_kn(b[t2], Bs, SSD_LDN, n0 + 16 * t2, k0);
#pragma unroll
                for (int u = 0; u < HB; ++u) {
                    uint32_t af[4];
                    wx_fragment(af, sX(s, buf, u), s.w + u * SSD_Q + j * SSD_SUB, m0, k0);
#pragma unroll
                    for (int t2 = 0; t2 < NT / 2; ++t2) {
                        mma16816(acc[u][2 * t2], af, b[t2]);
                        mma16816(acc[u][2 * t2 + 1], af, b[t2] + 2);
                    }
                }
            }
#endif
        }
        sink(n0, acc);
    }
}

#endif  // SSD_WG

// fp32 recurrence step, the one both families use: S <- 2^cs_last * S + S_loc.
__device__ __forceinline__ float ssd_state_step(float decay, float S, float loc) { return __fmaf_rn(decay, S, loc); }

// A chunk's row blocks split over ROWS items (ssd_chunk_output, produce_output): ROWS = 1 is every row block (the exact
// scan, and the chunk-parallel programs of calls with enough tiles); more split a chunk-parallel tile's outputs over
// that many CTAs when its tiles alone would leave most of the grid idle (the program's SSD_ROWS): with ROWS = Q / 64 a
// row block each, with Q / 128 a pair from both ends (part p: row blocks p and Q/64 - 1 - p; row block i is a chain of
// i + 1 steps, so each pair is Q/64 + 1). A part starts at row block `part` and has no rows when the chunk ends before
// it. A row block's arithmetic does not depend on which others its CTA computes, so the bits do not either.
template <int ROWS>
__device__ __forceinline__ int ssd_next_row(int part, int i) {  // the part's row block after i (Q / 64: none)
    constexpr int NSUB = SSD_Q / SSD_SUB;
    static_assert(ROWS == 1 || ROWS == NSUB || 2 * ROWS == NSUB, "ROWS: 1, Q / 64 or Q / 128");
    return ROWS == 1 ? i + 1 : ROWS == NSUB || i != part ? NSUB : NSUB - 1 - part;
}
template <int ROWS>
__device__ __forceinline__ int ssd_last_row(int part, int nsub) {  // the part's last row block of nsub (part < nsub)
    constexpr int NSUB = SSD_Q / SSD_SUB;
    return ROWS == 1 ? nsub - 1 : ROWS == NSUB || NSUB - 1 - part >= nsub ? part : NSUB - 1 - part;
}

// ---------------------------------------------------------------------------------------------------
// Output GEMM pieces (warp strip: 16 token rows m0.., 64 columns as 8 n-tiles).

#if SSD_WG
// CB = C_i B_j^T, 64 x 64 (the warp's strip: rows m0..m0+15), K = the N state columns in order, 16 per product;
// issued and landed apart (gemm_cb_issue, gemm_cb_land) where the math warpgroup has work for the wait.
__device__ __forceinline__ void gemm_cb_issue(float (*cb)[4], const T* Cs, const T* Bs) {
    float* d = &cb[0][0];
    wgmma_fence();
#pragma unroll
    for (int k0 = 0; k0 < SSD_N; k0 += 16) wg_ss_n64(d, desc_k<false>(Cs, k0), desc_k<true>(Bs, k0), k0 > 0);
    wgmma_commit();
}
__device__ __forceinline__ void gemm_cb_land(float (*cb)[4]) { wg_land<32>(&cb[0][0]); }
__device__ __forceinline__ void gemm_cb(float (*cb)[4], const T* Cs, const T* Bs, int, int) {
    gemm_cb_issue(cb, Cs, Bs);
    gemm_cb_land(cb);
}
// y_u += C S_u^T over the N state columns (S_u: round_T(S_prev) of unit u, [64][N] swizzled).
template <int HB, bool S_F32>
__device__ __forceinline__ void gemm_inter(float (*y)[8][4], const T* Cs, int, const unsigned char* S) {
    wgmma_fence();
#pragma unroll
    for (int u = 0; u < HB; ++u)
#pragma unroll
        for (int k0 = 0; k0 < SSD_N; k0 += 16)
            wg_ss_n64(&y[u][0][0], desc_k<SSD_C_INTER_ADD64>(Cs, k0),
                      desc_k<true>((const T*)S + u * SSD_PB * SSD_N, k0), 1);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int u = 0; u < HB; ++u)
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(y[u][t][q])::"memory");
}
// k-tile kk's A fragment of M (gemm_mx). MASK = false: the k-tile is left of the warp's last (its diagonal k-tile on
// the diagonal step), so f's mask keeps every element and its selects are left out (the same values).
template <bool MASK, class F>
__device__ __forceinline__ void mx_fragment(uint32_t (&a)[4], const float (*cb)[4], const F& f, int kk, int g, int tg) {
    const int c0 = 16 * kk + 2 * tg, c1 = c0 + 8;
    a[0] = f.template pair<MASK>(cb[2 * kk][0], cb[2 * kk][1], g, c0);
    a[1] = f.template pair<MASK>(cb[2 * kk][2], cb[2 * kk][3], g + 8, c0);
    a[2] = f.template pair<MASK>(cb[2 * kk + 1][0], cb[2 * kk + 1][1], g, c1);
    a[3] = f.template pair<MASK>(cb[2 * kk + 1][2], cb[2 * kk + 1][3], g + 8, c1);
}
// y += M X_j, M[r][c] = f(cb[r][c], r, c) as register A fragments (the accumulator fragments of n-tiles 2kk,
// 2kk+1 are the A fragment of k-tile kk), X_j read transposed; k-tiles kk >= nk (this warp's rows see
// nothing there) get zero fragments: the warpgroup issues all four products. Only k-tile nk - 1 is masked.
// `under()` runs between the products' issue and their wait (work for the math warpgroup while the tensor cores run).
template <class F, class U>
__device__ __forceinline__ void gemm_mx(float (*y)[4], const float (*cb)[4], const T* Xs, int nk, const F& f,
                                        const U& under) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    uint32_t af[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        af[kk][0] = af[kk][1] = af[kk][2] = af[kk][3] = 0u;
        if (kk + 1 < nk) mx_fragment<false>(af[kk], cb, f, kk, g, tg);
        else if (kk < nk) mx_fragment<true>(af[kk], cb, f, kk, g, tg);
    }
    float* d = &y[0][0];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) wg_rs_tb<64>(d, af[kk], desc_mn(Xs, 16 * kk, 0), 1);
    wgmma_commit();
    under();
    wg_land<32>(d);
}
template <class F>
__device__ __forceinline__ void gemm_mx(float (*y)[4], const float (*cb)[4], const T* Xs, int nk, const F& f) {
    gemm_mx(y, cb, Xs, nk, f, [] {});
}
#else
// acc[j] += C[m0.., :] X_j^T over the N state columns, for the 8-row tiles X_j of an operand X that holds units of
// 64 rows (tile j: rows 8 (j % 8).. of unit j / 8, at X + (j / 8) * USTRIDE, leading dimension LD), tiles j < nt
// only (nt even). X_F32 on 16-bit inputs: X is fp32 and its B fragments are packed (round_T) from it, which gives
// the operand bits an ldmatrix of round_T(X) gives. The CB strip (gemm_cb) and the inter-chunk term (gemm_inter) are
// this product.
template <int J, int LD, int USTRIDE, bool X_F32>
__device__ __forceinline__ void gemm_c_tiles(float (*acc)[4], const T* Cs, int m0, const void* X, int nt) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
#if SSD_IS_F32
    const float* Xf = (const float*)X;
    for (int k = 0; k < SSD_N; ++k) {
        const float a0 = Cs[(m0 + g) * SSD_LDN + k], a1 = Cs[(m0 + g + 8) * SSD_LDN + k];
#pragma unroll
        for (int j = 0; j < J; ++j) {
            if (j < nt) {
                const float b0 = Xf[(j / 8) * USTRIDE + (8 * (j % 8) + 2 * tg) * LD + k];
                const float b1 = Xf[(j / 8) * USTRIDE + (8 * (j % 8) + 2 * tg + 1) * LD + k];
                acc[j][0] = __fmaf_rn(a0, b0, acc[j][0]);
                acc[j][1] = __fmaf_rn(a0, b1, acc[j][1]);
                acc[j][2] = __fmaf_rn(a1, b0, acc[j][2]);
                acc[j][3] = __fmaf_rn(a1, b1, acc[j][3]);
            }
        }
    }
#else
#pragma unroll SSD_KUNROLL
    for (int k0 = 0; k0 < SSD_N; k0 += 16) {
        uint32_t av[4];
        ldA_rm(av, Cs, SSD_LDN, m0, k0);
#pragma unroll
        for (int j = 0; j < J; j += 2) {
            if (j < nt) {
                uint32_t b[4];
                if (X_F32) {
                    // B fragment (k = state column, n = headdim row): rows 8 (j % 8) + g and + 8 + g of the unit
                    const float* r0 = (const float*)X + (j / 8) * USTRIDE + (8 * (j % 8) + g) * LD + k0 + 2 * tg;
                    const float* r1 = r0 + 8 * LD;
                    const float2 v00 = *(const float2*)r0, v01 = *(const float2*)(r0 + 8);
                    const float2 v10 = *(const float2*)r1, v11 = *(const float2*)(r1 + 8);
                    b[0] = pack2(v00.x, v00.y);
                    b[1] = pack2(v01.x, v01.y);
                    b[2] = pack2(v10.x, v10.y);
                    b[3] = pack2(v11.x, v11.y);
                } else {
                    ldB_nk(b, (const T*)X + (j / 8) * USTRIDE, LD, 8 * (j % 8), k0);
                }
                mma16816(acc[j], av, b);
                mma16816(acc[j + 1], av, b + 2);
            }
        }
    }
#endif
}

// CB strip: cb[t] = C[m0.., :] B[8t.., :]^T over the N state columns, n-tiles t < nt (even) only.
__device__ __forceinline__ void gemm_cb(float (*cb)[4], const T* Cs, const T* Bs, int m0, int nt) {
    zero_tiles<8>(cb);
    gemm_c_tiles<8, SSD_LDN, 0, false>(cb, Cs, m0, Bs, nt);
}

// Inter-chunk term of every unit: y[u][t] += C[m0.., :] round_T(S_u[8t.., :])^T over the N state columns.
// S_F32: S_u is the fp32 state [64][LDF] (exact scan: fragments packed from it); else round_T(S_prev)
// [64][LDN] (chunk-parallel: ldmatrix). Both give the same operand bits. y[u][t] is tile 8u + t of the product.
template <int HB, bool S_F32>
__device__ __forceinline__ void gemm_inter(float (*y)[8][4], const T* Cs, int m0, const unsigned char* S) {
    constexpr int SLD = S_F32 ? SSD_LDF : SSD_LDN;
    gemm_c_tiles<8 * HB, SLD, SSD_PB * SLD, S_F32>(reinterpret_cast<float (*)[4]>(y), Cs, m0, S, 8 * HB);
}

// y[t] += M X_j for the 16-row strip, M[r][c] = f(cb[r][c], r, c) (r: strip row 0..15, c: column 0..63 of the
// sub-block), k-tiles kk < nk only. 16-bit: M is rounded to T and packed from the accumulator fragments
// (the C fragments of n-tiles 2kk, 2kk+1 are the A fragment of k-tile kk). fp32: each lane fetches the
// row values it needs from the owning lane by shuffles.
template <class F>
__device__ __forceinline__ void gemm_mx(float (*y)[4], const float (*cb)[4], const T* Xs, int nk, const F& f) {
    const int lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
#if SSD_IS_F32
    // One k-tile per iteration, not unrolled (a fully unrolled body was 2048 FMAs per call site and set the fp32
    // programs' compile time); its two n-tiles of cb are selected into registers first, so every register index
    // stays static. The products and their order per element are those of the unrolled loop.
    const int nkk = nk < 4 ? nk : 4;
#pragma unroll 1
    for (int kk = 0; kk < nkk; ++kk) {
        float c[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                c[h][q] = kk == 0 ? cb[h][q] : kk == 1 ? cb[2 + h][q] : kk == 2 ? cb[4 + h][q] : cb[6 + h][q];
#pragma unroll
        for (int kq = 0; kq < 16; ++kq) {
            const int k = 16 * kk + kq;
            const int src = (lane & ~3) | ((kq >> 1) & 3);
            const float a0 = f.one(__shfl_sync(0xffffffffu, c[kq >> 3][kq & 1], src), g, k);
            const float a1 = f.one(__shfl_sync(0xffffffffu, c[kq >> 3][2 + (kq & 1)], src), g + 8, k);
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                const float2 b = *(const float2*)(Xs + k * SSD_LDX + 8 * t + 2 * tg);
                y[t][0] = __fmaf_rn(a0, b.x, y[t][0]);
                y[t][1] = __fmaf_rn(a0, b.y, y[t][1]);
                y[t][2] = __fmaf_rn(a1, b.x, y[t][2]);
                y[t][3] = __fmaf_rn(a1, b.y, y[t][3]);
            }
        }
    }
#else
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        if (kk < nk) {
            const int c0 = 16 * kk + 2 * tg, c1 = c0 + 8;
            uint32_t af[4];
            af[0] = f.pair(cb[2 * kk][0], cb[2 * kk][1], g, c0);
            af[1] = f.pair(cb[2 * kk][2], cb[2 * kk][3], g + 8, c0);
            af[2] = f.pair(cb[2 * kk + 1][0], cb[2 * kk + 1][1], g, c1);
            af[3] = f.pair(cb[2 * kk + 1][2], cb[2 * kk + 1][3], g + 8, c1);
#pragma unroll
            for (int t = 0; t < 8; t += 2) {
                uint32_t b[4];
                ldB_kn(b, Xs, SSD_LDX, 8 * t, 16 * kk);
                mma16816(y[t], af, b);
                mma16816(y[t + 1], af, b + 2);
            }
        }
    }
#endif
}
// (the sm_90a form's work under the products: here after them)
template <class F, class U>
__device__ __forceinline__ void gemm_mx(float (*y)[4], const float (*cb)[4], const T* Xs, int nk, const F& f,
                                        const U& under) {
    gemm_mx(y, cb, Xs, nk, f);
    under();
}

#endif  // SSD_WG

// Diagonal block: M[t][s] = CB * 2^(cs_t - cs_s) dt'_s for s <= t, else 0 (t, s in the same sub-block).
struct MDiag {
    const float* cs;   // the unit's cumsum of this sub-block
    const float* dtv;  // its dt'
    float ct0, ct1;    // cs of the strip rows g and g + 8
    int r0;            // strip row offset (16 w)
    // Every element is computed and those right of the diagonal are dropped after (their ex2 may be inf: dropped
    // all the same): without a branch per element, the loads and ex2 chains of a k-tile's elements interleave.
    // MASK = false: a k-tile left of the warp's diagonal one, every element kept (a warp-uniform choice, gemm_mx).
    template <bool MASK = true>
    __device__ __forceinline__ float masked(float v, float ct, float q, float d, int r, int c) const {
        const float m = __fmul_rn(__fmul_rn(v, ex2(__fsub_rn(ct, q))), d);
        return !MASK || c <= r0 + r ? m : 0.0f;
    }
    __device__ __forceinline__ float one(float v, int r, int c) const {
        return masked(v, r < 8 ? ct0 : ct1, cs[c], dtv[c], r, c);
    }
    template <bool MASK = true>
    __device__ __forceinline__ uint32_t pair(float v0, float v1, int r, int c) const {  // c even
        const float ct = r < 8 ? ct0 : ct1;
        const float2 q = *(const float2*)(cs + c), d = *(const float2*)(dtv + c);
        return pack2(masked<MASK>(v0, ct, q.x, d.x, r, c), masked<MASK>(v1, ct, q.y, d.y, r, c + 1));
    }
};

// ---------------------------------------------------------------------------------------------------
// Chunk outputs of every unit of the block (see the file header for the formula). S: the units' S_prev
// (S_F32: fp32 [HB][64][LDF]; else T [HB][64][LDN]). Row block i accumulates over key sub-blocks j = 0..i
// in order.
#if SSD_WG
// The z gate of row block i, silu(z) = z * sigmoid(z) = z / (1 + 2^(-z log2 e)) per element of every unit's z_i tile
// (rows past `valid` are zero-filled: silu(0) = 0, never stored), into gz[u][half][t][k] (row m0 + g + 8 half, column
// 8t + 2tg + k); HALF: the warp's rows g (0) or g + 8 (1). It depends on z alone, so the math warpgroup forms it while
// the tensor cores run the diagonal step's products (two MUFU ops an element, 64 a thread: the epilogue's largest part):
// half 0 under C_i B_i^T, half 1 under M X_i. The values are pinned before the caller's wait so that the compiler
// does not sink them to their use in the epilogue.
template <int HB, int HALF>
__device__ __forceinline__ void ssd_gate_rows(float (&gz)[HB][2][8][2], const SsdSmem& s) {
    uint32_t zv[HB][8];  // 16-bit pairs, as stored
#pragma unroll
    for (int u = 0; u < HB; ++u) ld_acc_pairs(zv[u], s.Zs + u * SSD_SUB * SSD_PB, HALF);
#pragma unroll
    for (int u = 0; u < HB; ++u)
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            gz[u][HALF][t][0] = silu(lo16(zv[u][t]));
            gz[u][HALF][t][1] = silu(hi16(zv[u][t]));
            asm volatile("" : "+f"(gz[u][HALF][t][0]), "+f"(gz[u][HALF][t][1]));
        }
}

// Epilogue of row block i (rows < valid of the 64 tokens from tok): y = acc + D x, times the gate gz (ssd_gate_rows;
// HAS_Z). D_MODE: 0 no D, 1 a per-head D (dh: each unit's, loaded once a tile), 2 a per-headdim D (SSD_F_DP, read
// here). X: the block's X_i (unit 0; the units follow), rows past `valid` zero-filled; `release()` is called once the
// last unit's x is in registers, so its slot refills under this arithmetic. Every operand of a unit is loaded before
// its first store of y (a store through a generic pointer may alias shared memory or D in the compiler's view, so
// loads after it are not hoisted above it). Both halves' elements are formed before any store (rows past `valid` too,
// not stored), so their chains interleave. The D and z flags are template arguments: behind a runtime flag the
// compiler kept a branch around each pair, and the per-headdim D's loads ran predicated off in every row block.
template <int HB, int D_MODE, bool HAS_Z, class Release>
__device__ __forceinline__ void ssd_epilogue_rows(const SsdArgs& a, float (*y)[8][4], const float (*gz)[2][8][2],
                                                  const float* dh, const T* X, long long tok_i, int valid_i, int u0,
                                                  const Release& release) {
    const int lane = threadIdx.x & 31, m0 = 16 * (threadIdx.x >> 5);
    const int g = lane >> 2, tg = lane & 3;
    constexpr bool HAS_D = D_MODE != 0;
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const int h = unit_head(u0 + u), p0 = unit_p0(u0 + u);
        const T* Xi = X + u * SSD_SUB * SSD_LDX;
        float dv[8][2];
        uint32_t xv[2][8] = {};  // 16-bit pairs, as stored
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const int pc = 8 * t + 2 * tg;
            dv[t][0] = dv[t][1] = dh[u];
            if (D_MODE == 2) {
                const float2 d2 = __ldg((const float2*)(a.D + h * SSD_P + p0 + pc));
                dv[t][0] = d2.x; dv[t][1] = d2.y;
            }
        }
        if (HAS_D) {
#pragma unroll
            for (int half = 0; half < 2; ++half) ld_acc_pairs(xv[half], Xi, half);
        }
        if (u == HB - 1) release();
        float o[2][8][2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                float o0 = y[u][t][2 * half], o1 = y[u][t][2 * half + 1];
                if (HAS_D) {
                    o0 = __fmaf_rn(dv[t][0], lo16(xv[half][t]), o0);
                    o1 = __fmaf_rn(dv[t][1], hi16(xv[half][t]), o1);
                }
                if (HAS_Z) {
                    o0 = __fmul_rn(o0, gz[u][half][t][0]);
                    o1 = __fmul_rn(o1, gz[u][half][t][1]);
                }
                o[half][t][0] = o0;
                o[half][t][1] = o1;
            }
        }
        // y's rows g and g + 8 from one address, 8 token rows apart: the 64-bit index arithmetic once, not per half
        T* const yg = a.y + ((tok_i + m0 + g) * a.nheads + h) * SSD_P + p0 + 2 * tg;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            if (m0 + g + 8 * half >= valid_i) continue;
            T* const yr = yg + half * 8LL * a.nheads * SSD_P;
#pragma unroll
            for (int t = 0; t < 8; ++t) st_pair(yr + 8 * t, o[half][t][0], o[half][t][1]);
        }
    }
}

template <int HB, class Release>
__device__ __forceinline__ void ssd_epilogue(const SsdArgs& a, float (*y)[8][4], const float (*gz)[2][8][2],
                                             const float* dh, const T* X, long long tok_i, int valid_i, int u0,
                                             const Release& release) {
    const int dm = !(a.flags & SSD_F_D) ? 0 : (a.flags & SSD_F_DP) ? 2 : 1;
    if (a.flags & SSD_F_Z) {
        if (dm == 1) ssd_epilogue_rows<HB, 1, true>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
        else if (dm == 2) ssd_epilogue_rows<HB, 2, true>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
        else ssd_epilogue_rows<HB, 0, true>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
    } else {
        if (dm == 1) ssd_epilogue_rows<HB, 1, false>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
        else if (dm == 2) ssd_epilogue_rows<HB, 2, false>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
        else ssd_epilogue_rows<HB, 0, false>(a, y, gz, dh, X, tok_i, valid_i, u0, release);
    }
}
#else
// Epilogue of row block i (rows < valid of the 64 tokens from tok): y = acc + D x, times the z gate
// (z * sigmoid(z) = z / (1 + 2^(-z log2 e))), stored half by half. X: the block's X_i (unit 0; the units follow),
// read as it goes (the register-held tiles leave no room for 32 more values); z from global memory, every z value of a
// unit loaded before its first store of y (a store through a generic pointer may alias D or z in the compiler's view,
// so loads after it are not hoisted above it: one round trip per 8 columns otherwise). One instantiation reads the D
// and z flags at run time (four spill the fp32 programs at 255 registers). `release()` at the end.
template <int HB, class Release>
__device__ __forceinline__ void ssd_epilogue(const SsdArgs& a, const SsdSmem&, float (*y)[8][4], const T* X,
                                             long long tok_i, int valid_i, int u0, const Release& release) {
    const int lane = threadIdx.x & 31, m0 = 16 * (threadIdx.x >> 5);
    const int g = lane >> 2, tg = lane & 3;
    const bool hasD = a.flags & SSD_F_D, hasZ = a.flags & SSD_F_Z;
    const bool perP = a.flags & SSD_F_DP;
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const int h = unit_head(u0 + u), p0 = unit_p0(u0 + u);
        const T* Xi = X + u * SSD_SUB * SSD_LDX;
        float dv[8][2];
        float zv[2][8][2];
        const float dh = (hasD && !perP) ? __ldg(a.D + h) : 0.0f;
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            const int pc = 8 * t + 2 * tg;
            dv[t][0] = dv[t][1] = dh;
            if (hasD && perP) {
                const float2 d2 = __ldg((const float2*)(a.D + h * SSD_P + p0 + pc));
                dv[t][0] = d2.x; dv[t][1] = d2.y;
            }
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int r = m0 + g + 8 * half;
                zv[half][t][0] = zv[half][t][1] = 0.0f;
                if (hasZ && r < valid_i) ld_pair(a.z + ((tok_i + r) * a.nheads + h) * SSD_P + p0 + pc,
                                                  zv[half][t][0], zv[half][t][1]);
            }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            float o[8][2];
#pragma unroll
            for (int t = 0; t < 8; ++t) {
                float o0 = y[u][t][2 * half], o1 = y[u][t][2 * half + 1];
                if (hasD) {
                    float x0, x1;
                    ld_pair(Xi + tidx(SSD_LDX, m0 + g + 8 * half, 8 * t + 2 * tg), x0, x1);
                    o0 = __fmaf_rn(dv[t][0], x0, o0);
                    o1 = __fmaf_rn(dv[t][1], x1, o1);
                }
                if (hasZ) {
                    o0 = __fmul_rn(o0, silu(zv[half][t][0]));
                    o1 = __fmul_rn(o1, silu(zv[half][t][1]));
                }
                o[t][0] = o0;
                o[t][1] = o1;
            }
            const int r = m0 + g + 8 * half;
            if (r >= valid_i) continue;
            const long long row = ((tok_i + r) * a.nheads + h) * SSD_P + p0;
#pragma unroll
            for (int t = 0; t < 8; ++t) st_pair(a.y + row + 8 * t + 2 * tg, o[t][0], o[t][1]);
        }
    }
    release();
}
#endif

// acc *= 2^R_i: row block i's C S_prev^T scaled by the decay from the chunk start to the row block's start
// (R_i: the cumsum at the row before it).
template <int HB>
__device__ __forceinline__ void scale_by_row_decay(float (&y)[HB][8][4], const float* cs, int i) {
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const float eR = ex2(cs[u * SSD_Q + i * SSD_SUB - 1]);
#pragma unroll
        for (int t = 0; t < 8; ++t)
#pragma unroll
            for (int q = 0; q < 4; ++q) y[u][t][q] = __fmul_rn(y[u][t][q], eR);
    }
}

// The diagonal step of row block i: acc *= 2^(cs_t - R_i) (R_0 = 0: the inter term alone, 2^cs_t C S_prev^T),
// then acc += (C_i B_i^T * L) X_i over the n-tiles at or left of each warp's diagonal; `under()` runs under the first
// unit's product (gemm_mx).
template <int HB, class U>
__device__ __forceinline__ void output_diagonal_step(float (&y)[HB][8][4], const float (&cb)[8][4], const SsdSmem& s,
                                                     int buf, int i, int m0, int g, int w, const U& under) {
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const float* cs = s.cs + u * SSD_Q + i * SSD_SUB;
        const float ct0 = cs[m0 + g], ct1 = cs[m0 + g + 8];
        const float R = i > 0 ? s.cs[u * SSD_Q + i * SSD_SUB - 1] : 0.0f;
        const float r0 = ex2(__fsub_rn(ct0, R)), r1 = ex2(__fsub_rn(ct1, R));
#pragma unroll
        for (int t = 0; t < 8; ++t) {
            y[u][t][0] = __fmul_rn(y[u][t][0], r0); y[u][t][1] = __fmul_rn(y[u][t][1], r0);
            y[u][t][2] = __fmul_rn(y[u][t][2], r1); y[u][t][3] = __fmul_rn(y[u][t][3], r1);
        }
        const MDiag f{cs, s.dtv + u * SSD_Q + i * SSD_SUB, ct0, ct1, m0};
        if (u == 0) gemm_mx(y[u], cb, sX(s, buf, u), w + 1, f, under);
        else gemm_mx(y[u], cb, sX(s, buf, u), w + 1, f);
    }
}

#if SSD_WG
// Off-diagonal M = CB * c_s, c_s = 2^(R_i - cs_s) dt'_s computed where it is used (no shared array, so no
// barrier between row blocks).
// c_s = 2^(R - cs_s) dt'_s of two adjacent tokens from their cs (q) and dt' (d) (the chain's weights too).
__device__ __forceinline__ float2 column_factors(float2 q, float2 d, float R) {
    return make_float2(__fmul_rn(ex2(__fsub_rn(R, q.x)), d.x), __fmul_rn(ex2(__fsub_rn(R, q.y)), d.y));
}
struct MOffWG {
    const float* cs;   // the unit's cumsum of this sub-block
    const float* dtv;  // its dt'
    float R;           // R_i
    template <bool = true>  // (no mask: gemm_mx's MASK is the diagonal step's)
    __device__ __forceinline__ uint32_t pair(float v0, float v1, int, int c) const {
        const float2 f = column_factors(*(const float2*)(cs + c), *(const float2*)(dtv + c), R);
        return pack2(__fmul_rn(v0, f.x), __fmul_rn(v1, f.y));
    }
};

// Chunks of 256 tokens (sm_90a, units of at most 128 state columns in all): the tokens before row block i reach it
// through a state carried from row block to row block in the unit's 16-bit operand tile instead of i off-diagonal
// steps, so a row block is one inter-chunk product and its diagonal step, and each sub-block's B / X are loaded once a
// tile (ssd_chain):
//   S_0 = round_T(S_prev);  S_{j+1} = round_T(2^(R_{j+1} - R_j) S_j + round_T(c_s X_j)^T B_j)      (R_0 = 0,
//                                                       c_s = 2^(R_{j+1} - cs_s) dt'_s, the steps' factor)
//   acc = C_i S_i^T, then the diagonal step (acc *= 2^(cs_t - R_i), += the masked block)
// A step is the state product (A = round_T(c_s X_j^T) from registers, B_j read transposed) on S_j loaded from the tile
// into its fp32 accumulators, S_{j+1} stored back: the state lives in the tile between steps, because 64 more fp32
// registers beside a row block's accumulators spill. Both families start from the same round_T(S_prev) tile, so their
// bits stay equal, and a row block's bits do not depend on which row blocks its item computes (ssd_next_row).
// A part's row block i (ROWS > 1) first takes the steps of the sub-blocks after the part's previous row block (all
// before i for its first); with ROWS = 1 each row block takes its own sub-block's step in place, after its epilogue (two
// B / X slots: beside the epilogue's registers it spills) or, with one slot, before it, so that B_i's slot refills under
// the epilogue.
template <int HB>
__host__ __device__ constexpr bool ssd_chain() { return SSD_Q == 256 && HB * SSD_N <= 128; }
// The state product's A fragment round_T(c_s X^T) with the column factors relative to R (wx_fragment's, its weights
// formed here).
__device__ __forceinline__ void chain_fragment(uint32_t af[4], const T* Xs, const float* cs, const float* dtv, float R,
                                               int m0, int k0) {
    const int tg = threadIdx.x & 3;
    uint32_t av[4];
    ldA_km(av, Xs, SSD_LDX, m0, k0);
    const float2 q0 = *(const float2*)(cs + k0 + 2 * tg), q8 = *(const float2*)(cs + k0 + 8 + 2 * tg);
    const float2 d0 = *(const float2*)(dtv + k0 + 2 * tg), d8 = *(const float2*)(dtv + k0 + 8 + 2 * tg);
    scaled_fragment(af, av, column_factors(q0, d0, R), column_factors(q8, d8, R));
}
// S_{j+1} into the units' tiles from S_j there, with sub-block j's B / X in slot buf (whole sub-blocks: j is before the
// chunk's last row block). Each thread reads and writes its own accumulator positions; the proxy fence and the barrier
// at the end order the stores before the tile's next reader (wgmma, or the next step).
template <int HB>
__device__ __forceinline__ void chain_step(const SsdSmem& s, int buf, int j, int m0) {
    float st[HB][SSD_N / 8][4];
    uint32_t af[HB][SSD_SUB / 16][4];
#pragma unroll
    for (int u = 0; u < HB; ++u) {
        const float* cs = s.cs + u * SSD_Q;
        const float R1 = cs[(j + 1) * SSD_SUB - 1], R0 = j > 0 ? cs[j * SSD_SUB - 1] : 0.0f;
        const float d = ex2(__fsub_rn(R1, R0));
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            uint32_t v[SSD_N / 8];
            ld_acc_pairs(v, sS(s, u), half);
#pragma unroll
            for (int t = 0; t < SSD_N / 8; ++t) {
                st[u][t][2 * half] = __fmul_rn(lo16(v[t]), d);
                st[u][t][2 * half + 1] = __fmul_rn(hi16(v[t]), d);
            }
        }
#pragma unroll
        for (int k = 0; k < SSD_SUB / 16; ++k)
            chain_fragment(af[u][k], sX(s, buf, u), cs + j * SSD_SUB, s.dtv + u * SSD_Q + j * SSD_SUB, R1, m0, 16 * k);
    }
    state_product<HB, SSD_N>(st, af, sB(s, buf), 0);
#pragma unroll
    for (int u = 0; u < HB; ++u)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            uint32_t v[SSD_N / 8];
#pragma unroll
            for (int t = 0; t < SSD_N / 8; ++t) v[t] = pack2(st[u][t][2 * half], st[u][t][2 * half + 1]);
            st_acc_pairs(v, sS(s, u), half);
        }
    fence_proxy_async_shared();
    math_sync();
}
// The part's row block before i (-1: i is its first), whose sub-block the chain took last (ssd_chain).
template <int ROWS>
__device__ __forceinline__ int ssd_prev_row(int part, int i) {
    return i == part ? -1 : ROWS == 1 ? i - 1 : part;
}

// Producer: the loads of ssd_chunk_output: per row block i of part `part` (ssd_next_row): C_i, B/X of step (i, j0),
// z_i, B/X of steps (i, j0 + 1..i) (j0 = 0; with ssd_chain the sub-block after the part's previous row block); prev:
// the tile's round_T(S_prev) (chunk-parallel, units UE apart; after the part's first row block's B_0 / X_0 and before
// its z, behind the tile's cs and dt' saved by phase 1 (`saved`, produce_prep); the slice's first item first waits for
// phase `epoch` (parity) of BAR_EPOCH, -1: no wait, which also orders its reads of `saved` after the math warpgroup's
// phase-1 stores) or nullptr (exact scan: the math warpgroup writes S itself, and the producer stages the raw dt before
// this). z waits for the previous item's last epilogue to free its buffer; the prep and S_prev, which the math
// warpgroup waits for first, do not wait behind it. Any order is deadlock-free whose waits are for buffers the math
// warpgroup frees before it needs this load.
template <int HB, int NBUF, int ROWS>
__device__ __forceinline__ void produce_output(const SsdArgs& a, const SsdSmem& s, SsdPipe& p, long long ctok, int l,
                                               int part, int u0, const T* prev, const float* saved, int epoch) {
    const int grp = unit_head(u0) / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    for (int i = part; i < nsub; i = ssd_next_row<ROWS>(part, i)) {
        const long long tok_i = ctok + i * SSD_SUB;
        const int valid_i = min(SSD_SUB, l - i * SSD_SUB);
        fill_begin(s, BAR_EMPTY_C, (uint32_t)(p.c & 1));
        load_c(a, s.Cs, tok_i, valid_i, grp, s.bar + BAR_FULL_C);
        ++p.c;
        // ssd_chain: the sub-blocks after the part's previous row block (whose own the chain took in place)
        const int j0 = ssd_chain<HB>() ? ssd_prev_row<ROWS>(part, i) + 1 : 0;
        for (int j = j0; j <= i; ++j) {
            produce_bx<HB, NBUF, SSD_N>(a, s, p.bx, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, u0, 0);
            // after the part's first C_i, B_0, X_0 (those need no grid-wide result; row block 0 has no step but j = 0)
            if (i == part && (part == 0 || j == 0) && prev != nullptr) {
                if (epoch >= 0) mbarrier_wait_parity(s.bar + BAR_EPOCH, (uint32_t)epoch);
                produce_prep<HB>(s, p, saved);
                fill_begin(s, BAR_EMPTY_S, (uint32_t)(p.s & 1));
#pragma unroll
                for (int u = 0; u < HB; ++u)
                    load_tile_async<SSD_N>(sS(s, u), SSD_LDN, prev + (long long)u * SSD_PB * SSD_N,
                                           SSD_N, SSD_PB);
                fill_end(s, BAR_FULL_S);
                ++p.s;
            }
            if (j == j0 && (a.flags & SSD_F_Z)) {  // read by the row block's epilogue
                fill_begin(s, BAR_EMPTY_Z, (uint32_t)(p.z & 1));
                load_units<HB, true>(a, s.Zs, tok_i, valid_i, u0, s.bar + BAR_FULL_Z);
                ++p.z;
            }
        }
    }
}

// NBS > 0 (the exact scan, one pass of NBS = N state columns): the chunk-local state is computed in the last row block's
// steps, each sub-block's product right after its C B^T (the state pass's products, in its order, on the B_j / X_j
// tiles the row block loads anyway: no second load of the chunk's sub-blocks), and handed to sink(0, acc) at the end.
struct NoSink {};  // ssd_chunk_output without the fused state
template <int HB, int NBUF, int ROWS, bool S_F32, int NBS = 0, class Sink = NoSink>
__device__ __forceinline__ void ssd_chunk_output(const SsdArgs& a, const SsdSmem& s, SsdPipe& p, long long ctok, int l,
                                                 int part, int u0, bool s_pipe, Sink* sink = nullptr) {
    constexpr bool FUSE = NBS > 0;
    static_assert(!FUSE || (ROWS == 1 && NBS == SSD_N), "the fused state: every row block, one pass of all columns");
    float st[HB][FUSE ? NBS / 8 : 1][4];  // FUSE: the chunk-local state
    if constexpr (FUSE) {
#pragma unroll
        for (int u = 0; u < HB; ++u) zero_tiles<NBS / 8>(st[u]);
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int m0 = 16 * w;
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    const bool hasZ = a.flags & SSD_F_Z;
    float dh[HB];  // a per-head D: one load a tile, its round trip under the first products
#pragma unroll
    for (int u = 0; u < HB; ++u)
        dh[u] = (a.flags & SSD_F_D) && !(a.flags & SSD_F_DP) ? __ldg(a.D + unit_head(u0 + u)) : 0.0f;
    constexpr bool CHAIN = ssd_chain<HB>();
    static_assert(!(CHAIN && FUSE), "the fused state is for chunks of up to 128 tokens");
    if (s_pipe) use_begin(s, BAR_FULL_S, (uint32_t)(p.s & 1), true);
    int done = 0;  // CHAIN: the sub-blocks in the tile's state
    const int last = ssd_last_row<ROWS>(part, nsub);
    for (int i = part; i < nsub; i = ssd_next_row<ROWS>(part, i)) {
        const long long tok_i = ctok + i * SSD_SUB;
        const int valid_i = min(SSD_SUB, l - i * SSD_SUB);
        const bool fuse_i = FUSE && i == last;  // this row block's steps also take the state's products
        const bool carry_i = CHAIN && i != last;  // CHAIN: sub-block i also advances the chain
        if constexpr (CHAIN) {
            for (; done < i; ++done) {  // the sub-blocks between the state's last and this row block (ROWS > 1)
                const int buf = ring_slot<NBUF>(p.bx);
                const uint32_t ph = ring_phase<NBUF>(p.bx);
                use_begin(s, BAR_FULL_X + buf, ph, false);  // (whole sub-blocks: tensor-map copies; X read by ldmatrix)
                use_begin(s, BAR_FULL_B + buf, ph, false);
                chain_step<HB>(s, buf, done, m0);
                use_end(s, BAR_EMPTY_B + buf);
                use_end(s, BAR_EMPTY_X + buf);
                ++p.bx;
            }
        }
        // FUSE, row block `last`: sub-block jj's state product on the B_jj / X_jj in slot buf (X waited for here, read
        // by ldmatrix), before B_jj is released
        auto fused_state_step = [&](int jj, int buf, uint32_t ph) {
            if constexpr (FUSE) {
                if (fuse_i) {
                    uint32_t af[HB][SSD_SUB / 16][4];
                    use_begin(s, BAR_FULL_X + buf, ph, false);
                    state_fragments<HB>(af, s, buf, jj, m0);
                    state_product<HB, NBS>(st, af, sB(s, buf), 0);
                }
            }
        };
        float y[HB][8][4];
        use_begin(s, BAR_FULL_C, (uint32_t)(p.c & 1), valid_i < SSD_SUB);
        // acc = 2^R_i (C_i S_prev^T)
#pragma unroll
        for (int u = 0; u < HB; ++u) zero_tiles<8>(y[u]);
        gemm_inter<HB, S_F32>(y, s.Cs, m0, s.S);
        if (s_pipe && i == last) {  // the part's last use of S_prev
            use_end(s, BAR_EMPTY_S);
            ++p.s;
        }
        if (!CHAIN && i > 0) scale_by_row_decay<HB>(y, s.cs, i);
        // the steps left of the diagonal: CB = C_i B_j^T, acc += round_T(CB * c_s) X_j
        for (int j = 0; j < (CHAIN ? 0 : i); ++j) {
            const int buf = ring_slot<NBUF>(p.bx);
            const uint32_t ph = ring_phase<NBUF>(p.bx);
            float cb[8][4];
            use_begin(s, BAR_FULL_B + buf, ph, false);  // (j < i: a whole sub-block, a tensor-map copy)
            gemm_cb(cb, s.Cs, sB(s, buf), m0, 8);
            fused_state_step(j, buf, ph);
            use_end(s, BAR_EMPTY_B + buf);
            use_begin(s, BAR_FULL_X + buf, ph, false);
#pragma unroll
            for (int u = 0; u < HB; ++u) {
                const MOffWG f{s.cs + u * SSD_Q + j * SSD_SUB, s.dtv + u * SSD_Q + j * SSD_SUB,
                               s.cs[u * SSD_Q + i * SSD_SUB - 1]};
                gemm_mx(y[u], cb, sX(s, buf, u), 4, f);
            }
            use_end(s, BAR_EMPTY_X + buf);
            ++p.bx;
        }
        // the diagonal step (j = i; zero fragments above each warp's diagonal in M X). z_i's gate is formed while
        // the tensor cores run its products, half under C_i B_i^T and half under M X_i, and z_i is released there:
        // the producer's next z lands under the rest.
        const int buf = ring_slot<NBUF>(p.bx);
        const uint32_t ph = ring_phase<NBUF>(p.bx);
        float cb[8][4], gz[HB][2][8][2];
        use_begin(s, BAR_FULL_B + buf, ph, valid_i < SSD_SUB);
        gemm_cb_issue(cb, s.Cs, sB(s, buf));
        if (hasZ) {
            use_begin(s, BAR_FULL_Z, (uint32_t)(p.z & 1), false);  // (read by ld.shared)
            ssd_gate_rows<HB, 0>(gz, s);
        }
        gemm_cb_land(cb);
        fused_state_step(i, buf, ph);
        if (!carry_i) use_end(s, BAR_EMPTY_B + buf);
        use_begin(s, BAR_FULL_X + buf, ph, valid_i < SSD_SUB);
        use_end(s, BAR_EMPTY_C);  // the row block's last use of C
        ++p.c;
        output_diagonal_step<HB>(y, cb, s, buf, i, m0, g, w, [&] {
            if (hasZ) {
                ssd_gate_rows<HB, 1>(gz, s);
                use_end_read(s, BAR_EMPTY_Z);
                ++p.z;
            }
        });
        // CHAIN: S_{i+1} on B_i / X_i in place, after the epilogue (beside it the row block's registers spill), or before
        // it with one B / X slot, which B_i frees then for the next row block's B to land under the epilogue
        constexpr bool CARRY_EARLY = NBUF == 1;
        if constexpr (CHAIN && CARRY_EARLY) {
            if (carry_i) {
                chain_step<HB>(s, buf, i, m0);
                use_end(s, BAR_EMPTY_B + buf);
            }
        }
        // X_i is released once the epilogue holds it in registers: the next row block's diagonal X then lands under
        // the epilogue's arithmetic (CHAIN: unless the late carry reads it).
        ssd_epilogue<HB>(a, y, gz, dh, sX(s, buf, 0), tok_i, valid_i, u0, [&] {
            if (!(CHAIN && !CARRY_EARLY && carry_i)) {
                use_end_read(s, BAR_EMPTY_X + buf);
                ++p.bx;
            }
        });
        if constexpr (CHAIN && !CARRY_EARLY) {
            if (carry_i) {
                chain_step<HB>(s, buf, i, m0);
                use_end(s, BAR_EMPTY_B + buf);
                use_end_read(s, BAR_EMPTY_X + buf);  // (the epilogue read x from it)
                ++p.bx;
            }
        }
        if (carry_i) done = i + 1;
    }
    if constexpr (FUSE) (*sink)(0, st);
}
#else
// Off-diagonal M = CB * c_s (c_s = 2^(R_i - cs_s) dt'_s, precomputed per row block in s.cf).
struct MOff {
    const float* cf;  // the unit's column factors of this sub-block
    __device__ __forceinline__ float one(float v, int, int c) const { return __fmul_rn(v, cf[c]); }
    __device__ __forceinline__ uint32_t pair(float v0, float v1, int, int c) const {
        const float2 f = *(const float2*)(cf + c);
        return pack2(__fmul_rn(v0, f.x), __fmul_rn(v1, f.y));
    }
};
// Starts with a CTA barrier.
template <int HB, int NBUF, int ROWS, bool S_F32>
__device__ __forceinline__ void ssd_chunk_output(const SsdArgs& a, const SsdSmem& s, long long ctok, int l, int part,
                                                 int u0) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int g = lane >> 2, tg = lane & 3;
    const int m0 = 16 * w;
    const int grp = unit_head(u0) / (a.nheads / a.ngroups);
    const int nsub = (l + SSD_SUB - 1) / SSD_SUB;
    int k = 0;  // step counter over (i, j): the buffer parity
    __syncthreads();  // previous users of the C / B / X buffers are done
    if (NBUF == 2) issue_bx<HB, SSD_N>(a, s, 0, ctok, min(SSD_SUB, l), grp, u0, 0);
    for (int i = part; i < nsub; i = ssd_next_row<ROWS>(part, i)) {
        const long long tok_i = ctok + i * SSD_SUB;
        const int valid_i = min(SSD_SUB, l - i * SSD_SUB);
        float y[HB][8][4];
        int buf = 0;
        for (int j = 0; j <= i; ++j, ++k) {
            buf = NBUF == 2 ? (k & 1) : 0;
            if (k > 0) __syncthreads();  // the previous step is done with Cs / cf (j == 0) and buffer buf ^ 1
            if (j == 0) {
                load_tile_async<SSD_N>(s.Cs, SSD_LDN, a.Cm + (tok_i * a.ngroups + grp) * SSD_N,
                                       (long long)a.ngroups * SSD_N, valid_i);
                cp_async_commit();
                // c_s = 2^(R_i - cs_s) dt'_s for the tokens before the row block
                for (int e = threadIdx.x; e < HB * i * SSD_SUB; e += SSD_THREADS) {
                    const int u = e / (i * SSD_SUB), t = e % (i * SSD_SUB);
                    const float R = s.cs[u * SSD_Q + i * SSD_SUB - 1];
                    s.cf[u * SSD_Q + t] = __fmul_rn(ex2(__fsub_rn(R, s.cs[u * SSD_Q + t])), s.dtv[u * SSD_Q + t]);
                }
            }
            if (NBUF == 2) {
                const int ni = j < i ? i : ssd_next_row<ROWS>(part, i), nj = j < i ? j + 1 : 0;  // the next step
                if (ni < nsub) {
                    issue_bx<HB, SSD_N>(a, s, buf ^ 1, ctok + nj * SSD_SUB, min(SSD_SUB, l - nj * SSD_SUB), grp, u0, 0);
                    cp_async_wait<1>();
                } else {
                    cp_async_wait<0>();
                }
            } else {
                issue_bx<HB, SSD_N>(a, s, 0, ctok + j * SSD_SUB, min(SSD_SUB, l - j * SSD_SUB), grp, u0, 0);
                cp_async_wait<0>();
            }
            __syncthreads();
            if (j == 0) {
                // acc = 2^R_i (C_i S_prev^T)
#pragma unroll
                for (int u = 0; u < HB; ++u) zero_tiles<8>(y[u]);
                gemm_inter<HB, S_F32>(y, s.Cs, m0, s.S);
                if (i > 0) scale_by_row_decay<HB>(y, s.cs, i);
            }
            // CB = C_i B_j^T for the strip (diagonal block: only the n-tiles at or left of the strip's diagonal)
            const bool diag = j == i;
            float cb[8][4];
            gemm_cb(cb, s.Cs, sB(s, buf), m0, diag ? 2 * w + 2 : 8);
            if (!diag) {
#pragma unroll
                for (int u = 0; u < HB; ++u) {
                    const MOff f{s.cf + u * SSD_Q + j * SSD_SUB};
                    gemm_mx(y[u], cb, sX(s, buf, u), 4, f);
                }
            } else {
                output_diagonal_step<HB>(y, cb, s, buf, i, m0, g, w, [] {});
            }
        }
        ssd_epilogue<HB>(a, s, y, sX(s, buf, 0), tok_i, valid_i, u0, [] {});
    }
}
#endif  // SSD_WG
