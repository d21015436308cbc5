// Test/benchmark helper, not part of the op: each CTA occupies one SM (the launch gives it more than
// half of an SM's shared memory) and spins until the global timer passes `ns` nanoseconds after its
// start, so a side stream can hold a known number of SMs while another stream runs.
#include "../common/types.cuh"

CAKE_DEVICE uint64_t dsa_globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void dsa_hold_sm(unsigned long long ns, unsigned* started) {
    extern __shared__ unsigned char smem_hold[];
    if (threadIdx.x == 0) {
        smem_hold[0] = 1;
        if (started != nullptr) atomicAdd(started, 1u);
        const uint64_t t0 = dsa_globaltimer();
        while (dsa_globaltimer() - t0 < ns) {
            __nanosleep(1000);
        }
    }
}
