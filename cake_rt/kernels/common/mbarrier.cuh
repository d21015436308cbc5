// Shared-memory mbarriers, CTA scope (sm_90+). A phase completes when `count` arrivals have been made;
// waiters name the phase by its parity (0 for the first, then alternating), so any number of threads may
// wait on a phase without arriving, each on its own schedule.
#pragma once
#include "types.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// Before any arrival or wait; a block barrier must follow (makes the initialised word visible).
CAKE_DEVICE void mbarrier_init(uint64_t* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(count)
                 : "memory");
}

// Release: this thread's earlier shared-memory accesses happen before the phase completes.
CAKE_DEVICE void mbarrier_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}

// Acquire: returns once the phase of parity `parity` has completed (at most one phase behind the barrier).
// A fresh barrier's "previous" phase (parity 1) counts as complete, so a producer's first wait on an empty
// slot passes.
CAKE_DEVICE void mbarrier_wait_parity(uint64_t* bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nWAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
        "r"(parity)
        : "memory");
}

// Arrive on `bar` once every cp.async this thread issued before has landed (the arrival is pre-counted in the
// barrier's init count: .noinc).
CAKE_DEVICE void mbarrier_arrive_cp_async(uint64_t* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}

// Arrive on `bar` and add `bytes` to the transfer count its current phase waits for (the bulk copies that name
// `bar` complete that many bytes: the phase completes once every arrival is made and every byte has landed).
CAKE_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 ::"r"((uint32_t)__cvta_generic_to_shared(bar)), "r"(bytes)
                 : "memory");
}

#endif
