// Tensor-map (TMA) copies, sm_90+: a tensor map is the driver's 128-byte description of a global tensor
// (cuTensorMapEncodeTiled, encoded on the host by cake_rt/launch/tensormap.py) passed as a __grid_constant__ kernel
// parameter; one thread's cp.async.bulk.tensor copies a whole box into shared memory and completes its bytes on an
// mbarrier (mbarrier_arrive_expect_tx announces them).
#pragma once
#include "types.cuh"

// The driver's CUtensorMap: opaque, 64-byte aligned (no toolkit header is included).
struct __align__(64) CakeTensorMap {
    uint64_t opaque[16];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// The box of a 2-D map at element coordinates (c0: innermost, c1) -> shared memory at dst (the map's swizzle
// needs dst aligned to its pattern: 1024 bytes for the 128-byte swizzle), its bytes completed on `bar`.
CAKE_DEVICE void tma_load_2d(void* dst, const CakeTensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1),
        "r"((uint32_t)__cvta_generic_to_shared(bar))
        : "memory");
}

// Fetch a map's descriptor ahead of its first copy (a generic address: a __grid_constant__ parameter's). Without it
// that copy fetches the descriptor itself, holding the issuing thread's warp for the round trip.
CAKE_DEVICE void tma_prefetch_map(const CakeTensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

#endif
