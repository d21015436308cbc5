// Grid-wide barrier for a kernel launched cooperatively (cuLaunchCooperativeKernel guarantees every CTA
// is co-resident, so spinning cannot deadlock). Two words: words[0] counts arrivals, words[1] is the
// generation. The last CTA to arrive resets the count to 0 and bumps the generation, so the words are
// valid for the next barrier and the next launch without any host-side reset.
#pragma once
#include "types.cuh"

CAKE_DEVICE unsigned ld_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// `threads` > 0: only the CTA's first `threads` threads take part (named barrier 1), for a warp-specialized
// kernel whose other warps never wait on the grid; 0: every thread (__syncthreads).
CAKE_DEVICE void cta_part_sync(int threads) {
    if (threads > 0) asm volatile("bar.sync 1, %0;\n" ::"r"(threads) : "memory");
    else __syncthreads();
}

CAKE_DEVICE void grid_barrier(unsigned* words, int threads = 0) {
    cta_part_sync(threads);
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned nblocks = gridDim.x * gridDim.y * gridDim.z;
        const unsigned gen = ld_acquire_gpu(&words[1]);
        __threadfence();  // publish this CTA's writes before it is counted
        const unsigned arrived = atomicAdd(&words[0], 1u);
        if (arrived == nblocks - 1) {
            atomicExch(&words[0], 0u);
            __threadfence();
            atomicAdd(&words[1], 1u);  // release everyone
        } else {
            while (ld_acquire_gpu(&words[1]) == gen) {
                __nanosleep(32);
            }
        }
        __threadfence();
    }
    cta_part_sync(threads);
}
