// Order-preserving float -> uint32 keys: a < b (IEEE, NaN excluded) <=> key(a) < key(b).
// -0.0 and +0.0 map to the same key; every NaN maps to 0, below key(-inf) = 0x007FFFFF.
#pragma once
#include "types.cuh"

CAKE_DEVICE uint32_t float_order_key(float f) {
    if (f != f) return 0u;             // NaN ranks below every number
    if (f == 0.0f) f = 0.0f;           // fold -0.0 onto +0.0
    const uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
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
