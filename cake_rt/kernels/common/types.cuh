// Fixed-width integer types and bf16/fp16 <-> float conversions, self-contained (no toolkit headers,
// so a program compiles in milliseconds and never depends on the NVRTC version's header set).
#pragma once

typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;

// bf16 / fp16 values travel as their raw 16-bit patterns.
typedef unsigned short bf16_t;
typedef unsigned short fp16_t;

#define CAKE_DEVICE __device__ __forceinline__

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
CAKE_DEVICE float bf16_to_float(bf16_t v) { return __uint_as_float(((uint32_t)v) << 16); }

CAKE_DEVICE bf16_t float_to_bf16_rn(float f) {
    uint16_t r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
}

CAKE_DEVICE float fp16_to_float(fp16_t v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
    return f;
}

CAKE_DEVICE fp16_t float_to_fp16_rn(float f) {
    uint16_t r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
    return r;
}

// Two floats -> one 32-bit register of two 16-bit values, `lo` in the low half (the layout mma expects).
CAKE_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

CAKE_DEVICE uint32_t pack_fp16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

CAKE_DEVICE float bf16x2_lo(uint32_t v) { return __uint_as_float(v << 16); }
CAKE_DEVICE float bf16x2_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// Element type traits: one template body serves bf16, fp16 and fp32 programs.
struct ElemBF16 {
    typedef bf16_t storage;
    static CAKE_DEVICE float to_float(bf16_t v) { return bf16_to_float(v); }
    static CAKE_DEVICE bf16_t from_float(float f) { return float_to_bf16_rn(f); }
};
struct ElemFP16 {
    typedef fp16_t storage;
    static CAKE_DEVICE float to_float(fp16_t v) { return fp16_to_float(v); }
    static CAKE_DEVICE fp16_t from_float(float f) { return float_to_fp16_rn(f); }
};
struct ElemF32 {
    typedef float storage;
    static CAKE_DEVICE float to_float(float v) { return v; }
    static CAKE_DEVICE float from_float(float f) { return f; }
};
