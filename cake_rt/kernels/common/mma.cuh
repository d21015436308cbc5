// Warp-level tensor-core building blocks for sm_80+ (mma.sync m16n8k16, ldmatrix, cp.async).
// Fragment layouts follow the PTX ISA "mma.m16n8k16" figures: a[4] holds the 16x16 A tile (row-major),
// b[2] the 16x8 B tile (column-major), c/d[4] the 16x8 f32 accumulator:
//   d[0], d[1] -> row (lane / 4),     columns 2 * (lane % 4) + {0, 1}
//   d[2], d[3] -> row (lane / 4) + 8, same columns
#pragma once
#include "types.cuh"

CAKE_DEVICE uint32_t smem_u32(const void* p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// D += A * B, bf16 operands, f32 accumulate.
CAKE_DEVICE void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D += A * B, fp16 operands, f32 accumulate.
CAKE_DEVICE void mma_fp16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ldmatrix: each lane passes the shared address of one 16-byte row (lanes 0-7 matrix 0, 8-15 matrix 1, ...).
CAKE_DEVICE void ldmatrix_x4(uint32_t r[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(smem_row)));
}
CAKE_DEVICE void ldmatrix_x2(uint32_t r[2], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(smem_row)));
}
CAKE_DEVICE void ldmatrix_x4_trans(uint32_t r[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(smem_row)));
}
#if __CUDA_ARCH__ >= 900
// stmatrix (sm_90+): the inverse of ldmatrix_x4; r[i] is the lane's pair of matrix i (an mma accumulator fragment's
// row lane / 4, columns 2 (lane % 4) and + 1, packed), lanes 8i..8i+7 pass the addresses of matrix i's rows.
CAKE_DEVICE void stmatrix_x4(const uint32_t r[4], void* smem_row) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(smem_u32(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
#endif

// Asynchronous 16-byte global -> shared copy (sm_80+), bypassing L1.
CAKE_DEVICE void cp_async_16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(smem_u32(smem)), "l"(gmem));
}
// Same, but copies `src_bytes` (0..16) and zero-fills the rest: out-of-range rows read nothing.
CAKE_DEVICE void cp_async_16_zfill(void* smem, const void* gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(smem_u32(smem)), "l"(gmem), "r"(src_bytes));
}
CAKE_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
CAKE_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }
