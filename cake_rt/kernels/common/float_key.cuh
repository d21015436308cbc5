// Order-preserving float -> uint32 keys: a < b (IEEE, NaN excluded) <=> key(a) < key(b).
// -0.0 and +0.0 map to the same key; every NaN maps to 0, below key(-inf) = 0x007FFFFF.
#pragma once
#include "types.cuh"

// No branch and one select (the appends convert every score): f + 0.0f folds -0.0 onto +0.0 and keeps every other
// value's bits (round to nearest, no flush to zero: compile.py's --ftz=false); one three-input logic op then flips a
// negative value's bits or sets a positive one's sign bit.
CAKE_DEVICE uint32_t float_order_key(float f) {
    const uint32_t u = __float_as_uint(__fadd_rn(f, 0.0f));
    const uint32_t k = u ^ ((uint32_t)((int32_t)u >> 31) | 0x80000000u);
    return f != f ? 0u : k;  // NaN ranks below every number
}

// Inverse for keys of non-NaN floats (a NaN key 0 decodes to a NaN).
CAKE_DEVICE float float_from_order_key(uint32_t k) {
    if (k == 0u) return __uint_as_float(0x7fc00000u);
    const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    return __uint_as_float(u);
}

// 64-bit candidate key: score first, then the larger key id first on ties.
CAKE_DEVICE uint64_t score_id_key(float score, uint32_t id) {
    return ((uint64_t)float_order_key(score) << 32) | (uint64_t)id;
}
