// scripts/ssd-link-bench's kernel: chains of state steps handed CTA to CTA through L2, the hand-off a
// single-pass SSD schedule needs (docs/ssd.md, "What the bytes say"). Not a library program.
//
// A chain is one (unit u, holder h): a block of B = E / H fp32 elements of unit u's state. Link c of the chain
// steps S_c = fma(decay(c, u), S_{c-1}, S_loc(c, u, e)) over the block. Items are numbered
// i = (c * U + u) * H + h and CTA b takes i = b, b + G, b + 2G, ... in order, so consecutive links of a chain land
// on different CTAs (unless U H is a multiple of G: the script refuses that grid) and the lowest unfinished item
// can always run (its predecessor has a lower number), which with a cooperative launch (every CTA resident) makes
// the waits safe.
//
// The state lives in two slots per unit (link c reads slot (c - 1) & 1, writes slot c & 1): link c + 1 overwrites
// S_{c-1} only after it has seen link c's word, i.e. after link c's loads. A chain's word counts its published
// links (the waiter of link c waits for word >= c); the last link puts the word back to 0, so every launch leaves
// the words at zero. S_loc and the decay are integer formulas (exact in fp32; the script's NumPy reference uses the
// same ones), computed before the wait: the real step's S_loc is in the tile's registers when the chain arrives.
//
// Variants (defines; one program each):
//   LINK_PUBLISH   0: __threadfence() (fence.sc.gpu) + relaxed store of the word   (ssd23's publish)
//                  1: fence.acq_rel.gpu + relaxed store
//                  2: st.release.gpu of the word alone after the CTA barrier
//                  3: red.release.gpu.add of the word alone after the CTA barrier
//   LINK_SLEEP_NS  thread 0 polls the word with ld.relaxed.gpu, __nanosleep(LINK_SLEEP_NS) between polls (0: spin),
//                  then one ld.acquire.gpu; a CTA barrier passes the acquire on to the other threads
//   LINK_LOAD      0: ld.global.cg (16-byte), 1: ld.relaxed.gpu (16-byte), 2: cp.async.bulk of the block into shared
//                  memory on an mbarrier (sm_90+; on older targets the program has no body and the script refuses it)
//   LINK_STAMPS    1: thread 0 records %clock64 / %globaltimer at the parts of each link, with a CTA barrier after
//                  each part so that a stamp means every thread is done (the stamped program is slower than the
//                  plain one by those barriers; its parts are read against the plain program's slope)
//   LINK_CLUSTER   0: the L2 chain (kernel ssd_link_chain). 1-3: kernel ssd_link_cluster (sm_90+), the state handed
//                  through a thread-block cluster's distributed shared memory, no L2 and no GPU-scope fence (the
//                  comment before that kernel says how; LINK_PUBLISH, LINK_SLEEP_NS and LINK_LOAD do not apply):
//                  1: st.shared::cluster of the block into the next CTA's slot, a CTA barrier, one
//                     mbarrier.arrive.release.cluster on the slot's mbarrier in the next CTA
//                  2: st.async of the block into the next CTA's slot, every store completing its 16 bytes on the
//                     slot's mbarrier (the receiver armed the phase with expect_tx: no arrive, no sender barrier)
//                  3: the block stored into the CTA's own shared memory, a proxy fence, a CTA barrier, one
//                     cp.async.bulk shared::cta -> shared::cluster into the next CTA's slot (complete_tx on its
//                     mbarrier)
//                  SASS (sm_90a): cluster scope is GPU scope for fences, so variant 1's release arrive is a
//                  MEMBAR.ALL.GPU (after the remote stores, generic ST.E.128) before SYNCS.ARRIVE; variant 2's stores
//                  are STAS.128 with no fence; variant 3's copy is UBLKCP.S.S after FENCE.VIEW.ASYNC.S
//   LINK_WAIT_CTA  1: the receiver's try_wait acquires at CTA scope (the mbarrier's default) instead of cluster
//                  scope, which costs a CCTL.IVALL (the SM's L1 dropped) after each completed wait. The remote data
//                  is in shared memory, which L1 does not cache: a control of what that invalidation costs
#include "common/mbarrier.cuh"

#ifndef LINK_PUBLISH
#define LINK_PUBLISH 2
#endif
#ifndef LINK_SLEEP_NS
#define LINK_SLEEP_NS 0
#endif
#ifndef LINK_LOAD
#define LINK_LOAD 0
#endif
#ifndef LINK_STAMPS
#define LINK_STAMPS 0
#endif
#ifndef LINK_CLUSTER
#define LINK_CLUSTER 0
#endif
#ifndef LINK_WAIT_CTA
#define LINK_WAIT_CTA 0
#endif
#define LINK_POLL_LIMIT (1u << 22)  // ~1-4 s of polls at an L2 round trip each
#define LINK_WAIT_LIMIT_NS 200000000ull  // the cluster kernel's give-up: a legitimate wait is a few links (us)
#define LINK_THREADS 128
#define LINK_VEC4 16  // float4s a thread holds at most: a 32 KB block (H = 1 of an 8192-element state) over 128 threads

// Stamp slots of one item (u64 each): clock64 at start (S_loc ready), wait done, loads + step done, stores issued,
// published; globaltimer at start, wait done, published. After the items' rows, a row per CTA: clock64 and
// globaltimer at its start and its end, for the clock's rate (clock64 counts per SM; a CTA's own span is long
// enough for a coarse globaltimer, one link is not).
#define LINK_STAMP_SLOTS 8

CAKE_DEVICE unsigned link_ld_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
CAKE_DEVICE unsigned link_ld_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
CAKE_DEVICE void link_st_relaxed(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// S(c) = fma(decay, S(c-1), S_loc): phase 2's ssd_state_step on a thread's share of the block.
CAKE_DEVICE void link_step(float4 (&S)[LINK_VEC4], const float4 (&loc)[LINK_VEC4], float decay) {
#pragma unroll
    for (int k = 0; k < LINK_VEC4; ++k) {
        S[k].x = __fmaf_rn(decay, S[k].x, loc[k].x);
        S[k].y = __fmaf_rn(decay, S[k].y, loc[k].y);
        S[k].z = __fmaf_rn(decay, S[k].z, loc[k].z);
        S[k].w = __fmaf_rn(decay, S[k].w, loc[k].w);
    }
}

// A thread's share of the block stored to global memory past L1 (the next holder reads it from L2).
CAKE_DEVICE void link_store_cg(float4* dst, const float4 (&S)[LINK_VEC4], int nvec, int tid) {
#pragma unroll
    for (int k = 0; k < LINK_VEC4; ++k) {
        const int q = tid + k * LINK_THREADS;
        if (q < nvec) __stcg(dst + q, S[k]);
    }
}

CAKE_DEVICE float4 link_load4(const float4* p) {
#if LINK_LOAD == 1
    float4 v;
    asm volatile("ld.relaxed.gpu.global.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
#else
    return __ldcg(p);
#endif
}

// The chain's formulas (the script's `chain_operands` is the same arithmetic): S_loc in [-1/8, 1/8) and the decay
// in [7/8, 1), both exact in fp32, so the reference needs no rounding but the fma's.
CAKE_DEVICE float link_loc(int c, int u, int e) {
    return (float)((int)((unsigned)(c * 1103 + u * 12289 + e * 7) & 1023u) - 512) * (1.0f / 4096.0f);
}
CAKE_DEVICE float link_decay(int c, int u) { return (float)(((c * 37 + u * 11) & 63) + 448) * (1.0f / 512.0f); }

// Holds v in registers from here on: the compiler would otherwise compute S_loc after the wait (it is cheap to
// recompute and costs 64 registers to keep), where the real step's S_loc is already there.
CAKE_DEVICE void link_pin(float4& v) { asm volatile("" : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)); }

CAKE_DEVICE unsigned long long link_clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
    return t;
}
CAKE_DEVICE unsigned long long link_gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
    return t;
}

#if LINK_CLUSTER == 0
// state: [2][units][elems] fp32 (slot 1 holds S_{-1} at launch); words: [units * holders], zero at launch;
// stamps: [links * units * holders + gridDim.x][LINK_STAMP_SLOTS] when LINK_STAMPS, else unused.
extern "C" __global__ void __launch_bounds__(LINK_THREADS, 1) ssd_link_chain(
    float* state, unsigned* words, int links, int units, int holders, int elems, unsigned long long* stamps) {
#if LINK_LOAD == 2 && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900)
    return;  // cp.async.bulk needs sm_90: the script launches this variant on sm_90+ only
#else
    const int tid = threadIdx.x;
    const int block = elems / holders;  // floats a holder moves
    const int nvec = block / 4;
    const int chains = units * holders;
    const long long items = (long long)links * chains;
#if LINK_LOAD == 2
    extern __shared__ __align__(128) float4 prev_smem[];
    __shared__ __align__(8) uint64_t bulk_bar;
    if (tid == 0) {
        mbarrier_init(&bulk_bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    unsigned bulk_parity = 0;
#endif
#if LINK_STAMPS
    unsigned long long* cta_st = stamps + (items + blockIdx.x) * LINK_STAMP_SLOTS;
    if (tid == 0) { cta_st[0] = link_clock(); cta_st[1] = link_gtimer(); }
#endif
    for (long long i = blockIdx.x; i < items; i += gridDim.x) {
        const int c = (int)(i / chains), r = (int)(i % chains), u = r / holders, h = r % holders;
        const int e0 = h * block;
        unsigned* word = words + r;
        const float4* src = (const float4*)(state + ((long long)((c + 1) & 1) * units + u) * elems + e0);
        float4* dst = (float4*)(state + ((long long)(c & 1) * units + u) * elems + e0);
        const float decay = link_decay(c, u);
        float4 loc[LINK_VEC4];
#pragma unroll
        for (int k = 0; k < LINK_VEC4; ++k) {  // only the block's vectors: a small block's link pays no idle ALU work
            const int q = tid + k * LINK_THREADS, e = e0 + 4 * q;
            loc[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (q < nvec) loc[k] = make_float4(link_loc(c, u, e), link_loc(c, u, e + 1), link_loc(c, u, e + 2),
                                               link_loc(c, u, e + 3));
            link_pin(loc[k]);
        }
#if LINK_STAMPS
        unsigned long long* st = stamps + i * LINK_STAMP_SLOTS;
        if (tid == 0) { st[0] = link_clock(); st[5] = link_gtimer(); }
#endif
        // The wait: one thread polls (relaxed: no ordering paid per poll), one acquire once the word is there.
        // A wait that never ends (a broken instrument) gives up after LINK_POLL_LIMIT polls, so the launch ends and
        // the check reports the chain wrong instead of the device call hanging.
        if (c > 0 && tid == 0) {
            for (unsigned polls = 0; link_ld_relaxed(word) < (unsigned)c; ++polls) {
                if (polls == LINK_POLL_LIMIT) {
                    atomicOr(word, 0x80000000u);  // the chain's later links pass at once (and leave the word set)
                    break;
                }
#if LINK_SLEEP_NS > 0
                __nanosleep(LINK_SLEEP_NS);
#endif
            }
            (void)link_ld_acquire(word);
        }
#if LINK_LOAD != 2 || LINK_STAMPS
        __syncthreads();  // passes thread 0's acquire on to every thread (the bulk copy's mbarrier does that itself)
#endif
#if LINK_STAMPS
        if (tid == 0) { st[1] = link_clock(); st[6] = link_gtimer(); }
#endif
#if LINK_LOAD == 2
        if (tid == 0) {
            // The block was written by other CTAs' generic stores; the bulk copy reads it through the async proxy.
            // .global only: the plain fence.proxy.async adds a MEMBAR.ALL.GPU (SASS), and the shared slot's last
            // generic reads are ordered before this copy by the CTA barrier after the previous link's stores.
            asm volatile("fence.proxy.async.global;" ::: "memory");
            mbarrier_arrive_expect_tx(&bulk_bar, (uint32_t)(block * 4));
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         ::"r"((uint32_t)__cvta_generic_to_shared(prev_smem)), "l"(src), "r"(block * 4),
                         "r"((uint32_t)__cvta_generic_to_shared(&bulk_bar))
                         : "memory");
        }
        mbarrier_wait_parity(&bulk_bar, bulk_parity);
        bulk_parity ^= 1u;
#endif
        float4 S[LINK_VEC4];
#pragma unroll
        for (int k = 0; k < LINK_VEC4; ++k) {
            const int q = tid + k * LINK_THREADS;
#if LINK_LOAD == 2
            S[k] = q < nvec ? prev_smem[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#else
            S[k] = q < nvec ? link_load4(src + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#endif
        }
        link_step(S, loc, decay);
#if LINK_STAMPS
        // The step consumes every load, so this barrier is passed only once every thread's loads have landed.
        __syncthreads();
        if (tid == 0) st[2] = link_clock();
#endif
        link_store_cg(dst, S, nvec, tid);
        __syncthreads();  // every thread's stores issued (and, for the bulk copy, its reads of the slot done)
#if LINK_STAMPS
        if (tid == 0) st[3] = link_clock();
#endif
        if (tid == 0) {
            if (c == links - 1) {
                link_st_relaxed(word, 0u);  // the chain's last link: nobody waits on it, the next launch finds 0
            } else {
#if LINK_PUBLISH == 0
                __threadfence();
                link_st_relaxed(word, (unsigned)(c + 1));
#elif LINK_PUBLISH == 1
                asm volatile("fence.acq_rel.gpu;" ::: "memory");
                link_st_relaxed(word, (unsigned)(c + 1));
#elif LINK_PUBLISH == 2
                asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(word), "r"((unsigned)(c + 1)) : "memory");
#else
                asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(word) : "memory");
#endif
            }
#if LINK_STAMPS
            st[4] = link_clock();
            st[7] = link_gtimer();
#endif
        }
    }
#if LINK_STAMPS
    if (tid == 0) { cta_st[2] = link_clock(); cta_st[3] = link_gtimer(); }
#endif
#endif
}
#endif  // LINK_CLUSTER == 0

#if LINK_CLUSTER
// The hand-off inside a thread-block cluster. A chain (unit u, holder h) is one cluster of C CTAs (cluster r = u H + h
// of a 1-D grid of C U H CTAs); link c runs on the CTA of rank c mod C, which takes its links c = rank, rank + C, ...
// in order. Link 0 reads S_{-1} from state slot 1 and the last link writes S_{K-1} to state slot (K - 1) & 1 (the L2
// kernel's layout, so the script checks both alike); every other S_c goes from CTA to CTA through shared memory.
//
// Link c >= 1 is its CTA's m-th received link, m = (c - 1) / C (rank 0 receives from link C on): it finds S_{c-1}
// in the CTA's receive slot m & 1 (two slots of the block) and waits on that slot's mbarrier for phase (m >> 1) & 1;
// every thread waits itself (try_wait, a cluster-scope acquire unless LINK_WAIT_CTA), so no CTA barrier passes the
// wait on. The slot is rewritten only by link c - 1 + 2C, which the chain orders after this link's reads (it
// follows link c + 1's wait, which follows this link's hand-off), so neither side needs an "empty" barrier. With
// complete_tx (variants 2, 3) the receiver is the slot phase's one arrival: it arms the phase with expect_tx(block
// bytes) at the start and again once it has read the slot (were bytes to land before the arming, the transaction
// count would go negative in between, which the mbarrier allows).
//
// The words are the chains' error flags here: a wait longer than LINK_WAIT_LIMIT_NS (by %globaltimer; a try_wait
// suspends the thread for a time of the hardware's choosing, so a count of them bounds nothing) sets its chain's
// top bit and the thread waits no more (its chain is then wrong, which the check reports), so a broken instrument
// ends the launch. A cluster barrier at the start (every mbarrier initialised before a remote CTA signals it) and at the
// end (no CTA leaves while another may still write its shared memory).

CAKE_DEVICE uint32_t link_smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
// The address of the same shared-memory location in the cluster's CTA `rank` (a shared::cluster address).
CAKE_DEVICE uint32_t link_mapa(uint32_t addr, unsigned rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
CAKE_DEVICE unsigned link_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
CAKE_DEVICE unsigned link_cluster_size() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}
CAKE_DEVICE unsigned link_cluster_id() {
    unsigned r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}
CAKE_DEVICE void link_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
CAKE_DEVICE bool link_try_wait_cluster(uint32_t bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\n"
#if LINK_WAIT_CTA
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
#else
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
#endif
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    return done != 0;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The block S of this thread into the slot at `slot` (a shared::cluster address in the next CTA), signalled on the
// next CTA's mbarrier `bar` (variant 2) or not at all (variant 1: the caller arrives once every thread has stored).
CAKE_DEVICE void link_store_remote(uint32_t slot, uint32_t bar, int q, const float4& v) {
#if LINK_CLUSTER == 1
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};"
                 ::"r"(slot + 16u * q), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
#else
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                 ::"r"(slot + 16u * q), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar) : "memory");
#endif
}
#endif

// Dynamic shared memory: [2][block] fp32, the receive slots, then (variant 3) [block] fp32, the bulk copy's source.
extern "C" __global__ void __launch_bounds__(LINK_THREADS, 1) ssd_link_cluster(
    float* state, unsigned* words, int links, int units, int holders, int elems, unsigned long long* stamps) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 900
    return;  // clusters need sm_90: the script launches these variants on sm_90+ only
#else
    const int tid = threadIdx.x;
    const int block = elems / holders;
    const int nvec = block / 4;
    const int chains = units * holders;
    const unsigned csize = link_cluster_size(), rank = link_cluster_rank();
    const int r = (int)link_cluster_id(), u = r / holders, h = r % holders, e0 = h * block;
    extern __shared__ __align__(128) float4 link_smem[];
    __shared__ __align__(8) uint64_t slot_bar[2];
    const uint32_t bar0 = link_smem_addr(&slot_bar[0]);
    const unsigned next = rank + 1 == csize ? 0u : rank + 1;
    const uint32_t next_slots = link_mapa(link_smem_addr(link_smem), next);
    const uint32_t next_bar0 = link_mapa(bar0, next);
    if (tid == 0) {
        mbarrier_init(&slot_bar[0], 1);
        mbarrier_init(&slot_bar[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#if LINK_CLUSTER != 1
        mbarrier_arrive_expect_tx(&slot_bar[0], (uint32_t)(block * 4));
        mbarrier_arrive_expect_tx(&slot_bar[1], (uint32_t)(block * 4));
#endif
    }
    link_cluster_sync();
#if LINK_STAMPS
    const long long items = (long long)links * chains;
    unsigned long long* cta_st = stamps + (items + blockIdx.x) * LINK_STAMP_SLOTS;
    if (tid == 0) { cta_st[0] = link_clock(); cta_st[1] = link_gtimer(); }
#endif
    bool waiting = true;  // false once a wait gave up
    for (int c = (int)rank; c < links; c += (int)csize) {
        const int m = (c - 1) / (int)csize, slot = m & 1;  // (c = 0 receives nothing)
        const float decay = link_decay(c, u);
        float4 loc[LINK_VEC4];
#pragma unroll
        for (int k = 0; k < LINK_VEC4; ++k) {
            const int q = tid + k * LINK_THREADS, e = e0 + 4 * q;
            loc[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (q < nvec) loc[k] = make_float4(link_loc(c, u, e), link_loc(c, u, e + 1), link_loc(c, u, e + 2),
                                               link_loc(c, u, e + 3));
            link_pin(loc[k]);
        }
#if LINK_STAMPS
        unsigned long long* st = stamps + ((long long)c * chains + r) * LINK_STAMP_SLOTS;
        if (tid == 0) { st[0] = link_clock(); st[5] = link_gtimer(); }
#endif
        float4 S[LINK_VEC4];
        if (c == 0) {
            const float4* src = (const float4*)(state + ((long long)units + u) * elems + e0);
#pragma unroll
            for (int k = 0; k < LINK_VEC4; ++k) {
                const int q = tid + k * LINK_THREADS;
                S[k] = q < nvec ? __ldcg(src + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        } else {
            if (waiting) {
                unsigned long long t0 = 0;
                while (!link_try_wait_cluster(bar0 + 8u * slot, (m >> 1) & 1)) {
                    const unsigned long long now = link_gtimer();
                    if (t0 == 0) {
                        t0 = now;
                    } else if (now - t0 > LINK_WAIT_LIMIT_NS) {
                        atomicOr(words + r, 0x80000000u);
                        waiting = false;
                        break;
                    }
                }
            }
#if LINK_STAMPS
            __syncthreads();
            if (tid == 0) { st[1] = link_clock(); st[6] = link_gtimer(); }
#endif
            const float4* in = link_smem + slot * nvec;
#pragma unroll
            for (int k = 0; k < LINK_VEC4; ++k) {
                const int q = tid + k * LINK_THREADS;
                S[k] = q < nvec ? in[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#if LINK_CLUSTER != 1
            // The slot's next phase (link c + 2C's input): this thread has passed the wait, so the phase it arms is
            // the next one, and no byte of it can land before this link's hand-off.
            if (tid == 0) mbarrier_arrive_expect_tx(&slot_bar[slot], (uint32_t)(block * 4));
#endif
        }
#if LINK_STAMPS
        if (c == 0 && tid == 0) { st[1] = link_clock(); st[6] = link_gtimer(); }
#endif
        link_step(S, loc, decay);
#if LINK_STAMPS
        __syncthreads();
        if (tid == 0) st[2] = link_clock();
#endif
        if (c == links - 1) {
            float4* dst = (float4*)(state + ((long long)(c & 1) * units + u) * elems + e0);
            link_store_cg(dst, S, nvec, tid);
#if LINK_STAMPS
            __syncthreads();
            if (tid == 0) st[3] = link_clock();
#endif
        } else {
            const int next_slot = (c / (int)csize) & 1;  // link c + 1 is the next CTA's (c / C)-th received link
            const uint32_t dst_slot = next_slots + 16u * (uint32_t)(next_slot * nvec);
            const uint32_t dst_bar = next_bar0 + 8u * next_slot;
#if LINK_CLUSTER == 3
            float4* out = link_smem + 2 * nvec;
#pragma unroll
            for (int k = 0; k < LINK_VEC4; ++k) {
                const int q = tid + k * LINK_THREADS;
                if (q < nvec) out[q] = S[k];
            }
            // The copy reads the block through the async proxy. This buffer is rewritten at this CTA's next link,
            // after link c + 1's wait passed, i.e. after every byte of this copy landed.
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncthreads();
#if LINK_STAMPS
            if (tid == 0) st[3] = link_clock();
#endif
            if (tid == 0)
                asm volatile(
                    "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                    ::"r"(dst_slot), "r"(link_smem_addr(out)), "r"(block * 4), "r"(dst_bar)
                    : "memory");
#else
#pragma unroll
            for (int k = 0; k < LINK_VEC4; ++k) {
                const int q = tid + k * LINK_THREADS;
                if (q < nvec) link_store_remote(dst_slot, dst_bar, q, S[k]);
            }
#if LINK_CLUSTER == 1
            __syncthreads();  // every thread's remote stores issued: thread 0's release covers them
#if LINK_STAMPS
            if (tid == 0) st[3] = link_clock();
#endif
            if (tid == 0)
                asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(dst_bar) : "memory");
#elif LINK_STAMPS
            __syncthreads();
            if (tid == 0) st[3] = link_clock();
#endif
#endif
        }
#if LINK_STAMPS
        if (tid == 0) { st[4] = link_clock(); st[7] = link_gtimer(); }
#endif
    }
#if LINK_STAMPS
    if (tid == 0) { cta_st[2] = link_clock(); cta_st[3] = link_gtimer(); }
#endif
    link_cluster_sync();
#endif
}
#endif  // LINK_CLUSTER
