// Tiny kernels that exercise each common building block; used by tests/test_common_gpu.py and by the
// CPU compile checks. Not part of any op.
#include "types.cuh"
#include "mma.cuh"
#include "grid_barrier.cuh"
#include "ticket.cuh"
#include "float_key.cuh"

// Round-trip conversions: out_f[i] = float(bf16_rn(in[i])), out_h[i] = float(fp16_rn(in[i])).
extern "C" __global__ void selftest_convert(const float* in, float* out_bf16, float* out_fp16,
                                            uint32_t* packed, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out_bf16[i] = bf16_to_float(float_to_bf16_rn(in[i]));
        out_fp16[i] = fp16_to_float(float_to_fp16_rn(in[i]));
        packed[i] = pack_bf16x2(in[i], -in[i]);
    }
}

// One warp: D[16x8] = A[16x16] * B[16x8] (+ D), A row-major bf16/fp16 bits, B given as [8][16] (n, k),
// i.e. column-major B. Loaded with plain per-lane loads following the fragment layout.
template <bool FP16>
__device__ void mma_tile(const uint16_t* A, const uint16_t* Bt, float* D) {
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    uint32_t a[4], b[2];
    auto pair = [](const uint16_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 16); };
    a[0] = pair(A + g * 16 + 2 * t);
    a[1] = pair(A + (g + 8) * 16 + 2 * t);
    a[2] = pair(A + g * 16 + 2 * t + 8);
    a[3] = pair(A + (g + 8) * 16 + 2 * t + 8);
    b[0] = pair(Bt + g * 16 + 2 * t);
    b[1] = pair(Bt + g * 16 + 2 * t + 8);
    float d[4];
    d[0] = D[g * 8 + 2 * t];
    d[1] = D[g * 8 + 2 * t + 1];
    d[2] = D[(g + 8) * 8 + 2 * t];
    d[3] = D[(g + 8) * 8 + 2 * t + 1];
    if (FP16) mma_fp16_16816(d, a, b); else mma_bf16_16816(d, a, b);
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

extern "C" __global__ void selftest_mma_bf16(const uint16_t* A, const uint16_t* Bt, float* D) {
    mma_tile<false>(A, Bt, D);
}
extern "C" __global__ void selftest_mma_fp16(const uint16_t* A, const uint16_t* Bt, float* D) {
    mma_tile<true>(A, Bt, D);
}

// Same product through ldmatrix from shared memory (A via x4, B via x2 from the [n][k] layout).
extern "C" __global__ void selftest_ldmatrix_mma_bf16(const uint16_t* A, const uint16_t* Bt, float* D) {
    __shared__ __align__(16) uint16_t sA[16 * 16];
    __shared__ __align__(16) uint16_t sB[8 * 16];
    const int lane = threadIdx.x & 31;
    for (int i = lane; i < 256; i += 32) sA[i] = A[i];
    for (int i = lane; i < 128; i += 32) sB[i] = Bt[i];
    __syncwarp();
    uint32_t a[4], b[2];
    // x4: lanes 0-15 address rows 0-15 at column 0, lanes 16-31 rows 0-15 at column 8.
    ldmatrix_x4(a, sA + (lane & 15) * 16 + (lane >> 4) * 8);
    // x2: lanes 0-7 rows (n) 0-7 at k 0, lanes 8-15 rows 0-7 at k 8.
    ldmatrix_x2(b, sB + (lane & 7) * 16 + ((lane >> 3) & 1) * 8);
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    mma_bf16_16816(d, a, b);
    const int g = lane >> 2, t = lane & 3;
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// Grid barrier: `rounds` rounds; in round r every CTA adds to slot[(b + r) % nblocks] and after the
// barrier reads slot[(b + r + 1) % nblocks] which must hold r + 1 contributions... simpler and stronger:
// each round every CTA increments counter[r]; after the barrier each CTA checks counter[r] == nblocks.
extern "C" __global__ void selftest_grid_barrier(unsigned* words, unsigned* counters, unsigned* errors,
                                                 int rounds) {
    const unsigned nblocks = gridDim.x;
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0) atomicAdd(&counters[r], 1u);
        grid_barrier(words);
        if (threadIdx.x == 0) {
            unsigned v = *((volatile unsigned*)&counters[r]);
            if (v != nblocks) atomicAdd(errors, 1u);
        }
    }
    grid_barrier_exit(words);
}

// Ticket draw: every unit is claimed exactly once (claims[u] += 1); the last drawer resets the word.
extern "C" __global__ void selftest_ticket(unsigned* word, unsigned* claims, int nunits) {
    __shared__ unsigned slot;
    unsigned t;
    while ((t = ticket_draw(word, &slot)) < (unsigned)nunits) {
        if (threadIdx.x == 0) atomicAdd(&claims[t], 1u);
    }
    if (threadIdx.x == 0) ticket_done(word, t, (unsigned)nunits);
}

extern "C" __global__ void selftest_float_key(const float* in, uint32_t* keys, float* back, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        keys[i] = float_order_key(in[i]);
        back[i] = float_from_order_key(keys[i]);
    }
}

#include "wgmma.cuh"
// One warpgroup: D[64x64] = A[64x64] * B[64x64]^T-style product with both operands K-major:
// A is [64 m][64 k], B is [64 n][64 k] (bf16 bits), D is [64][64] f32 row-major = A @ B^T.
// Loads both tiles into the 128-byte-swizzled layout, runs 4 wgmma k-steps of 16.
extern "C" __global__ void __launch_bounds__(128) selftest_wgmma_bf16(const uint16_t* A, const uint16_t* B,
                                                                      float* D) {
#if defined(CAKE_HAS_WGMMA)
    __shared__ __align__(1024) uint8_t sA[64 * 128];
    __shared__ __align__(1024) uint8_t sB[64 * 128];
    const int tid = threadIdx.x;
    for (int i = tid; i < 64 * 8; i += 128) {  // 64 rows x 8 chunks of 16 bytes
        const int r = i >> 3, c = i & 7;
        const uint4 va = *reinterpret_cast<const uint4*>(A + r * 64 + c * 8);
        const uint4 vb = *reinterpret_cast<const uint4*>(B + r * 64 + c * 8);
        *reinterpret_cast<uint4*>(sA + swizzle128_offset(r, c)) = va;
        *reinterpret_cast<uint4*>(sB + swizzle128_offset(r, c)) = vb;
    }
    fence_proxy_async_shared();
    __syncthreads();
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) d[i] = 0.f;
    const uint64_t da = wgmma_desc_sw128(sA), db = wgmma_desc_sw128(sB);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        wgmma_m64n64k16_bf16(d, wgmma_desc_advance_k(da, 16 * k), wgmma_desc_advance_k(db, 16 * k), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(d);
    const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = 16 * warp + (lane >> 2), col = 8 * i + 2 * (lane & 3);
        D[row * 64 + col] = d[4 * i];
        D[row * 64 + col + 1] = d[4 * i + 1];
        D[(row + 8) * 64 + col] = d[4 * i + 2];
        D[(row + 8) * 64 + col + 1] = d[4 * i + 3];
    }
#else
    // Not an sm_90a build: report "not available" with NaN so a caller cannot mistake it for a result.
    for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) D[i] = __int_as_float(0x7fc00000);
#endif
}
