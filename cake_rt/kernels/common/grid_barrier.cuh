// Grid-wide barrier for a kernel launched cooperatively (cuLaunchCooperativeKernel guarantees every CTA
// is co-resident, so spinning cannot deadlock). Two words: words[0] counts arrivals over the whole launch, and the
// k-th barrier is passed once it reaches k x CTAs (each CTA reads k from the count its own arrival returned), so the
// last CTA to arrive releases the others with its arrival alone: nothing is reset or bumped between barriers, and a
// CTA already at the next barrier only adds to a count the late ones compare with >=. words[1] counts the CTAs that
// have left (grid_barrier_exit, at the end of every CTA of a kernel that calls grid_barrier): the last resets both
// words to zero, so they are valid for the next launch without any host-side reset.
#pragma once
#include "types.cuh"

CAKE_DEVICE unsigned ld_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
CAKE_DEVICE unsigned atom_add_acq_rel_gpu(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
CAKE_DEVICE unsigned ld_relaxed_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
CAKE_DEVICE void red_release_gpu(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
CAKE_DEVICE void st_release_gpu(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// *p = max(*p, v), ordered after everything the thread has seen (a count two threads publish stays monotonic).
CAKE_DEVICE void red_release_max_gpu(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.max.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// A word of the CTA's shared memory handed between its warpgroups (generic addresses; atomics, which
// compute-sanitizer's racecheck does not take for a race, as it does strong loads and stores).
CAKE_DEVICE void exch_release_cta(unsigned* p, unsigned v) {
    unsigned old;
    asm volatile("atom.release.cta.exch.b32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
}
CAKE_DEVICE unsigned read_acquire_cta(unsigned* p) {
    unsigned v;
    asm volatile("atom.acquire.cta.or.b32 %0, [%1], 0;\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
// One thread waits until *w >= v (relaxed polls, then one acquire: an acquire poll invalidates the SM's L1 each try).
CAKE_DEVICE void wait_at_least(const unsigned* w, unsigned v) {
    while (ld_relaxed_gpu(w) < v) __nanosleep(64);
    (void)ld_acquire_gpu(w);
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
        // release: the CTA's writes (ordered before by the CTA barrier above) before its count; acquire: the last
        // arrival, which does not poll, sees every other CTA's writes through the counts it adds to
        const unsigned arrived = atom_add_acq_rel_gpu(&words[0], 1u);
        const unsigned target = arrived - arrived % nblocks + nblocks;  // (barriers x CTAs of a launch: no wrap)
        if (arrived + 1 != target) {
            while (ld_acquire_gpu(&words[0]) < target) {
                __nanosleep(32);
            }
        }
    }
    cta_part_sync(threads);
}

// The end of a CTA of a kernel that calls grid_barrier (its thread 0 after its last barrier): the last CTA to leave
// resets the words; every CTA has passed its last wait on the count before it counts its exit.
CAKE_DEVICE void grid_barrier_exit(unsigned* words) {
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned nblocks = gridDim.x * gridDim.y * gridDim.z;
        if (atom_add_acq_rel_gpu(&words[1], 1u) == nblocks - 1) {
            words[0] = 0;
            words[1] = 0;
        }
    }
}
