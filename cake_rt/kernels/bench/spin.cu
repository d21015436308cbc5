// Side-stream SM holder for `cake-rt bench` (the side-stream table).
//
// Launched on a second stream with grid = N CTAs and a dynamic shared-memory request larger than half of
// an SM's shared memory, so no two of its CTAs fit on one SM: N CTAs hold exactly N SMs. Each CTA records
// the SM it landed on, counts itself in words[1], then thread 0 sleeps in a loop until words[0] (the stop
// flag, written by the host through a copy on a third stream) becomes non-zero. A CTA that waits longer
// than max_ns stops by itself and counts itself in words[2], so a lost stop flag never hangs the GPU.
//
// words: [0] stop flag, [1] CTAs started, [2] CTAs that timed out, [3] unused. The host zeroes them
// before each hold.

__device__ __forceinline__ unsigned long long spin_now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void __launch_bounds__(32, 1)
cake_bench_spin(unsigned* words, unsigned* sm_ids, unsigned long long max_ns)
{
    extern __shared__ unsigned char held_smem[];  // only reserved: its size is what holds the SM
    if (threadIdx.x != 0) return;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    sm_ids[blockIdx.x] = smid;
    held_smem[0] = (unsigned char)smid;
    __threadfence();
    atomicAdd(&words[1], 1u);
    const unsigned long long t0 = spin_now_ns();
    while (*(volatile unsigned*)&words[0] == 0u) {
        if (spin_now_ns() - t0 > max_ns) {
            atomicAdd(&words[2], 1u);
            break;
        }
        asm volatile("nanosleep.u32 %0;" ::"r"(2000u));
    }
}

// Keeps the timing stream busy for `ns` nanoseconds before the start event of a timed call, so the
// host enqueues the whole call while the GPU waits here: the span between the events then holds the
// call's GPU time and none of its host time (which the bench measures on the host separately).
extern "C" __global__ void __launch_bounds__(32, 1)
cake_bench_delay(unsigned long long ns)
{
    if (threadIdx.x != 0) return;
    const unsigned long long t0 = spin_now_ns();
    while (spin_now_ns() - t0 < ns) {
        asm volatile("nanosleep.u32 %0;" ::"r"(500u));
    }
}
