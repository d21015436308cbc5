// Split blocks in the same launch: parts plus a last-arrival merge.
//
// A block whose keys are cut into `nparts` units writes one part per unit (its <= topk best candidates per
// query, ascending id) to the workspace, then counts itself on the block's arrival word. Every key a part
// appends is also counted in the block's per-query histogram of top-11-bit digits (global integer atomics;
// layout.cuh SPLIT_WORDS). A part writes only its keys from the floor that the histogram gives when it
// finishes (the other parts are still adding to it: any subset of real candidates gives a valid floor), and
// the unit that arrives last (all other parts are complete and visible) reads the complete histogram for
// the floor of the k-th key's bin, gathers the parts in key order into one candidate buffer, and writes the
// exact top-k of its keys from that floor. The top-k set is unique, so the result does not depend on which unit
// arrives last or on what a part saw of the histogram. The last arrival resets the arrival word and the
// histograms to 0: a completed launch leaves every word at zero (the ticket-word rules).
#pragma once
#include "selection.cuh"
#include "../common/mma.cuh"
#include "../common/grid_barrier.cuh"

namespace dsa {

// Asynchronous 8-byte global -> shared copy (sm_80+): a key of a part, wherever its part starts. An 8-byte copy has
// no .cg form, so it reads through L1; the parts were written by other CTAs, which is safe because the merging CTA
// reads them only after arrive_last's acquire (gpu scope: it invalidates this SM's L1) and the barrier after it.
CAKE_DEVICE void cp_async_8(void* smem, const void* gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_u32(smem)), "l"(gmem) : "memory");
}

CAKE_DEVICE unsigned* split_record(unsigned* arrivals, const Unit& un) {
    return arrivals + (size_t)un.mblock * SPLIT_WORDS;
}

// The block's histograms of appended keys ([BQ][HIST_WORDS]); nullptr for an unsplit unit.
CAKE_DEVICE uint32_t* split_hist(unsigned* arrivals, const Unit& un) {
    return un.slot >= 0 ? split_record(arrivals, un) + SPLIT_HIST_OFF : nullptr;
}

// Called by every thread after the unit wrote its part. Returns (block-uniform) whether this unit merges. One
// thread's acquire-release add is the arrival: its release orders the part's writes and histogram counts of every
// selection thread (before it through the barrier) ahead of the count, and the last arrival's acquire, passed on by
// the barrier after it, orders every other part's writes ahead of the merge's reads (it invalidates this SM's L1,
// which the merge's 8-byte copies read through). A fence by every thread would wait for each thread's stores on its
// own, then the add: one round trip more on the path to the merge (grid_barrier's arrival is built the same way).
CAKE_DEVICE bool arrive_last(unsigned* arrivals, const Unit& un, int* flag) {
    sel_sync();
    if (sel_tid() == 0) {
        unsigned* word = split_record(arrivals, un);
        const int last = atom_add_acq_rel_gpu(word, 1u) == (unsigned)(un.nparts - 1);
        if (last) *word = 0u;  // nobody else touches the word in this launch
        *flag = last;
    }
    sel_sync();
    return *flag != 0;
}

// Keep exactly the topk largest keys of the merge buffer buf[0 .. n) (n > topk), in place, and raise the floor
// past them; returns topk.
CAKE_DEVICE int make_room(const Sel& s, uint64_t* buf, int n, int topk, uint64_t& floor_key) {
    const uint64_t K = block_kth_largest<NT>(buf, n, topk, s.hist, s.st, s.scratch);
    n = ordered_keep(buf, n, K, s.scratch, [&](int pos, uint64_t x) { buf[pos] = x; });
    floor_key = K + 1ull;
    sel_sync();
    return n;
}

constexpr int REACH = NT * 4 * REG_R;  // keys of the register selection (select_keep)
static_assert(CAP - TILE <= REACH, "topk keys fit the register selection");
static_assert(CAP * 8 <= Layout::cand, "a query's candidates as global keys fit below the candidate buffers");

// The merge's keys, query qq, every part complete (the last arrival), when every key of every part fits the register
// selection (one batch of parts; usually, each part having written only its keys from the floor it saw): their copies
// into buf in key order, a warp a part, lanes on consecutive keys (8-byte cp.async: nothing waits in registers, no key
// looks for its part). The caller has written pstart (the parts' starts in buf and their total at pstart[nparts]) before
// a barrier; it waits for the copies (cp_async_wait, a barrier) and select_keep drops the keys below the floor.
// buf: Layout::merge_keys keys of free shared memory.
CAKE_DEVICE void copy_parts(const Unit& un, int qq, int topk, const uint64_t* ws_ent, uint64_t* buf, const int* pstart) {
    const int warp = sel_tid() >> 5, lane = sel_tid() & 31;
#pragma unroll 1
    for (int p = warp; p < un.nparts; p += NWARPS) {
        const uint64_t* part = ws_ent + ((size_t)(un.slot0 + p) * BQ + qq) * topk;
        const int p0 = pstart[p], c = pstart[p + 1] - p0;
#pragma unroll 1
        for (int i = lane; i < c; i += 32) cp_async_8(buf + p0 + i, part + i);
    }
    cp_async_commit();
}

// The merge's keys otherwise: streamed from floor_key into buf in key order, each part from its own start, in
// batches of NT parts; a fuller buffer is cut to the topk largest, raising the floor. Returns how many (at most
// REACH). Arguments as copy_parts'. Ends with a barrier.
CAKE_DEVICE int stream_parts(const Sel& s, const Unit& un, int qq, int topk, const uint64_t* ws_ent,
                             const int* ws_cnt, uint64_t floor_key, int c_first, uint64_t* buf, int* pstart) {
    constexpr int MC = Layout::merge_keys;
    static_assert(MC >= 2 * MERGE_ROUND, "merge capacity");
    const int tid = sel_tid();
    int n = 0;
#pragma unroll 1
    for (int pb = 0; pb < un.nparts; pb += NT) {
        const int nb = min(NT, un.nparts - pb);
        const int c = pb == 0 ? c_first : tid < nb ? __ldcg(ws_cnt + (size_t)(un.slot0 + pb + tid) * BQ + qq) : 0;
        int total;
        const int ex = block_excl_scan<NT>(c, s.scratch, total);
        if (tid < nb) pstart[tid] = ex;
        if (tid == 0) pstart[nb] = total;
        sel_sync();
#pragma unroll 1
        for (int r0 = 0; r0 < total; r0 += MERGE_ROUND) {
            if (n + MERGE_ROUND > MC) n = make_room(s, buf, n, topk, floor_key);  // n > MC - ROUND >= topk
            // Thread tid takes flattened entries i0 .. i0 + E of the batch (parts in key order).
            const int i0 = r0 + tid * MERGE_E;
            uint64_t x[MERGE_E];
            int mine = 0;
            if (i0 < total) {
                int lo_p = 0, hi_p = nb;  // the last part p with pstart[p] <= i0
                while (hi_p - lo_p > 1) {
                    const int mid = (lo_p + hi_p) >> 1;
                    if (pstart[mid] <= i0) lo_p = mid; else hi_p = mid;
                }
                int p = lo_p;
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e) {
                    const int i = i0 + e;
                    x[e] = 0ull;
                    if (i < total) {
                        while (pstart[p + 1] <= i) ++p;
                        x[e] = __ldcg(ws_ent + ((size_t)(un.slot0 + pb + p) * BQ + qq) * topk + (i - pstart[p]));
                    }
                }
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e) mine += (i0 + e < total && x[e] >= floor_key) ? 1 : 0;
            }
            int added;
            int pos = n + block_excl_scan<NT>(mine, s.scratch, added);
            if (i0 < total) {
#pragma unroll
                for (int e = 0; e < MERGE_E; ++e)
                    if (i0 + e < total && x[e] >= floor_key) buf[pos++] = x[e];
            }
            n += added;
        }
        sel_sync();  // pstart is rewritten by the next batch; the keys are in buf
    }
    if (n > REACH) n = make_room(s, buf, n, topk, floor_key);
    return n;
}

// The end of a split unit, per query: its part (the exact top-k of its keys from the floor its block's
// histogram gives now, to the workspace); then it counts itself on the arrival word, and the last of the
// block's parts to arrive merges, per query: the complete histogram's floor, the parts' keys (copy_parts / stream_parts),
// the exact top-k of those from the floor, the output row. The part and the merge run the same steps (the
// histogram's floor, select_keep, a write), so the merging CTA runs code it has just run. The merge ranks only
// the floor bin's keys: every counted key above the bin is in the buffer (no part drops a key at or above the
// floor of the complete histogram: the floor a part saw is never higher) and in the top-k (a floor of 0, bin 0
// or none, ranks every key). mbuf: Layout::merge_keys keys of free shared memory; pstart: NT + 1 ints; flag: a
// shared int.
CAKE_DEVICE void finish_split_unit(const Sel& s, const Unit& un, int topk, unsigned* arrivals, int* flag,
                                   int* out_idx, float* out_sc, uint64_t* ws_ent, int* ws_cnt, uint64_t* mbuf,
                                   int* pstart) {
    uint32_t* gh = split_hist(arrivals, un);
    const int tid = sel_tid();
    bool merging = false;
#pragma unroll 1
    for (int qq = 0;; ++qq) {
        if (qq == un.nq) {  // block-uniform
            if (merging || !arrive_last(arrivals, un, flag)) return;
            merging = true;
            qq = 0;
        }
        // The merge reads the first batch's part counts with the histogram (one round trip for both) and
        // zeroes the histogram (every part has added to it).
        const int c_first =
            merging && tid < min(NT, un.nparts) ? __ldcg(ws_cnt + (size_t)(un.slot0 + tid) * BQ + qq) : 0;
        load_split_hist(s, gh, qq, merging);
        // The histogram's floor (hist_floor's steps) and, merging, the part starts from one scan of the thread's bins'
        // counts and its part's count (a part scans its bins' counts alone: the pair scan's second warp scan would
        // only lengthen its path); the floor's bin picked and the parts' copies issued between the same two barriers.
        const int counts[2] = {c_first, owned_split_count(s)};
        int ex[2] = {0, 0}, tot[2] = {0, 0};
        if (merging) block_excl_scan_n<NT, 2>(counts, s.scratch, ex, tot);
        else ex[1] = block_excl_scan<NT>(counts[1], s.scratch, tot[1]);
        const int nkeys = tot[0];
        const bool copy = merging && un.nparts <= NT && nkeys <= REACH;  // block-uniform; else stream_parts
        split_floor_reset(s);
        if (copy) {
            if (tid < un.nparts) pstart[tid] = ex[0];
            if (tid == 0) pstart[un.nparts] = nkeys;
        }
        sel_sync();
        split_floor_pick(s, topk, counts[1], ex[1], tot[1]);
        if (copy) copy_parts(un, qq, topk, ws_ent, mbuf, pstart);
        int n = copy ? nkeys : merging ? -1 : s.cnt[qq];
        sel_sync();
        const SplitFloor bin = split_floor_read(s);  // (the merge's copies in flight)
        sel_sync();
        if (merging) {  // block-uniform
            if (n >= 0) {
                cp_async_wait<0>();
                sel_sync();  // the keys are in mbuf
            } else {
                n = stream_parts(s, un, qq, topk, ws_ent, ws_cnt, bin.key, c_first, mbuf, pstart);
            }
        }
        // A part's candidates go to mbuf as global keys (mbuf[0 .. CAP) lies below the candidate buffers), so the part
        // and the merge run one select_keep.
        if (!merging) cand_to_global(s, qq, n, un.klo, mbuf);
        const int kept = select_keep(s, mbuf, n, topk, merging ? bin : SplitFloor{0ull, 0}, bin.key);
        if (merging) write_out_row(mbuf, kept, un.q0 + qq, topk, out_idx, out_sc, 0u);
        else write_part(mbuf, kept, un, qq, topk, ws_ent, ws_cnt);
        sel_sync();  // hist, st, scratch and the buffers are reused by the next query
    }
}

}  // namespace dsa
