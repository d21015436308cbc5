// Streaming exact top-k of a unit: one candidate buffer per query, appended in ascending key id.
//
// Candidate key x = (float_order_key(score) << 32) | (j - klo), j's offset from the unit's first key (a unit spans
// at most MAX_SPAN keys; the buffers hold the score keys, 16-bit offsets in a window and the windows apart, select.cuh
// CandView, and a part or a row gets j back). Query qq keeps cand[qq][0 .. cnt[qq]) in ascending j and a floor
// lo[qq]: only x >= lo enters.
// When a buffer could not take another tile, a radix select finds a K with topk .. topk + compact_slack keys >= K;
// the buffer keeps those (stable) and lo = K + 1; the final selection is exact (exactly topk keys >= K). The top-k
// set under a total order is unique, so any key split, any schedule and any compaction moment or floor give the same
// set, and buffer order gives ascending ids.
#pragma once
#include "layout.cuh"
#include "select.cuh"
#include "../common/float_key.cuh"

namespace dsa {

CAKE_DEVICE float score_of(uint64_t x) { return float_from_order_key((uint32_t)(x >> 32)); }

// The shared-memory state of the selection (pointers into Layout).
struct Sel {
    uint32_t* cand;    // [BQ] candidate blocks (select.cuh CandView)
    int* cnt;          // [BQ]
    uint64_t* lo;      // [BQ]
    uint32_t* hist;    // [2048]
    DsaSelState* st;
    int* scratch;
    uint32_t* chist;   // CB > 1: [CB][2048], through hist
    uint64_t* pscratch;  // a joint compaction's states (128 bytes) and scan words (NQ * NT / 32 uint64)
};

// Query q's candidates.
CAKE_DEVICE CandView cand(const Sel& s, int q) { return {s.cand + q * CAND_WORDS}; }

// A unit's start, by the selection threads (a barrier follows before the first append): every query's buffer empty,
// one window.
CAKE_DEVICE void reset_queries(const Sel& s, int tid, int nthreads) {
    if constexpr (WINDOWS)
        for (int i = tid; i < BQ * MAX_WIN; i += nthreads) cand(s, i / MAX_WIN).reset(i % MAX_WIN);
    if (tid < BQ) {
        s.cnt[tid] = 0;
        s.lo[tid] = 0ull;
    }
}

// Tile `it` of a unit, first of a window past the first (block-uniform): every query's candidates from here on are in
// it; then a barrier (the compaction and the append that follow read the windows). Before the tile's compaction.
CAKE_DEVICE void open_windows(const Sel& s, int it) {
    if (!WINDOWS || it == 0 || (it * TILE) % WIN_KEYS != 0) return;
    if (sel_tid() < BQ) cand(s, sel_tid()).open_window(it * TILE / WIN_KEYS, s.cnt[sel_tid()]);
    sel_sync();
}

// The global keys of query q's n candidates (the id offsets plus klo) into out[0 .. n): the buffer select_keep ranks
// for a part and for an unsplit unit's one-query final selection (the merge's routine, on global keys). Ends with a
// barrier.
template <class V>
CAKE_DEVICE void view_to_global(const V c, int n, int klo, uint64_t* out) {
    for (int i = sel_tid(); i < n; i += NT) out[i] = c.get(i) + (uint64_t)(uint32_t)klo;
}
CAKE_DEVICE void cand_to_global(const Sel& s, int q, int n, int klo, uint64_t* out) {
    const CandView c = cand(s, q);
    if (windowed(c)) view_to_global(win_view(c), n, klo, out);
    else view_to_global(c, n, klo, out);
    sel_sync();
}

// All queries of a block select together (select.cuh multi_*) when they fit the register reach: one
// histogram per query, the passes' barriers and scans shared. The final selection takes its histograms from
// the key tiles and q (no product runs then); the compactions, which run beside the product, go in batches of CB
// queries with histograms of their own (Layout::chist, through the radix histogram).
constexpr bool MULTI = BQ <= 4;
constexpr int MULTI_HIST_BYTES = BQ * 2048 * 4;
constexpr bool MULTI_COMPACT = MULTI && CB > 1;
static_assert(!MULTI || MULTI_HIST_BYTES <= Layout::cand,
              "the final selection's histograms fit in the key tiles and q");
static_assert(sizeof(DsaSelState) <= Layout::scratch - Layout::st, "the selection's state before the scan scratch");
static_assert(4 * sizeof(DsaMultiState) <= 128, "four queries' states before the scan words (pscratch, finish_unit)");

// Stable in-order write of the keys x >= K among buf[0..n) (shared-memory version, any n; buf 16-byte
// aligned). Sink(pos, x) receives each kept key with its output position. Safe in place: every round reads
// before its barriers and writes only at positions <= those it read.
constexpr int KEEP_E = 4;  // the register layout of dsa_load4
template <class Sink>
CAKE_DEVICE int ordered_keep(const uint64_t* buf, int n, uint64_t K, int* scratch, Sink sink) {
    int base = 0;
    for (int r0 = 0; r0 < n; r0 += NT * KEEP_E) {
        const int i0 = r0 + sel_tid() * KEEP_E;
        uint64_t x[KEEP_E];
        dsa_load4<NT>(x, buf, n, r0 / (NT * KEEP_E));  // buf[i0 .. i0 + 4), 0 past n
        int mine = 0;
#pragma unroll
        for (int e = 0; e < KEEP_E; ++e) mine += (i0 + e < n && x[e] >= K) ? 1 : 0;
        int total;
        int pos = base + block_excl_scan<NT>(mine, scratch, total);
#pragma unroll
        for (int e = 0; e < KEEP_E; ++e) {
            if (i0 + e < n && x[e] >= K) sink(pos++, x[e]);
        }
        base += total;
    }
    return base;
}

// The word of bin b (a key's top 11 bits) in a query's split histogram: bin 8 m + i at word 256 i + m, so 8
// consecutive bins lie in 8 different 1 KiB blocks. A query's keys crowd into a few consecutive bins and every part of
// the query adds one global atomic a key to them: in 8 blocks those atomics spread over 8 L2 slices where one block
// would queue them at one (docs/dsa.md round 48). The counts, and so the floors and the bits, are the same in any
// layout; load_split_hist copies the words as they lie and hist_floor reads a bin at its word. The several-window
// programs keep bin b at word b: there the spread's instructions spill the selection at H = 64 (docs/dsa.md round 49),
// and their split units are the long rows', whose time the parts' tiles set.
constexpr bool SPLIT_SPREAD = !WINDOWS;
CAKE_DEVICE unsigned split_bin_word(unsigned b) { return SPLIT_SPREAD ? ((b & 7u) << 8) | (b >> 3) : b; }
static_assert(HIST_WORDS == 2048, "8 blocks of 256 words");

// Query qq's histogram of its block's appended keys into s.hist (read at L2: other parts may still be adding
// to it); `clear` (the last arrival, when every part has added its counts) also zeroes it. Every load of a
// thread is issued before the first store (one L2 round trip). Ends with a barrier.
CAKE_DEVICE void load_split_hist(const Sel& s, uint32_t* gh, int qq, bool clear) {
    constexpr int PER = HIST_WORDS / NT;
    static_assert(HIST_WORDS % NT == 0, "whole histogram words per thread");
    uint32_t* h = gh + qq * HIST_WORDS + sel_tid();
    uint32_t v[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) v[k] = __ldcg(h + k * NT);
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        s.hist[sel_tid() + k * NT] = v[k];
        if (clear) h[k * NT] = 0u;
    }
    sel_sync();
}

// The floor the digit counts in s.hist give: the lowest key of the bin (top 11 key bits) that holds the
// topk-th largest counted key (0 when at most topk keys are counted), and how many counted keys lie in the bins
// above it (fewer than topk; 0 with a floor of 0). Every counted key is a real candidate of the query, so at
// least topk candidates are >= the floor and no key below it is in the top-k.
struct SplitFloor {
    uint64_t key;
    int above;
};
// A thread's bins of s.hist (its count of them is hist_floor's to scan): thread t owns bins [2048 - 8 (t + 1),
// 2048 - 8 t), counted from the top digit down: bins 8 m + i, m = 255 - t, at words 256 i + m where the bins are spread
// (split_bin_word; lanes on consecutive m, so on different banks), else at words 8 m + i.
constexpr int SPLIT_PER = HIST_WORDS / NT, SPLIT_STRIDE = SPLIT_SPREAD ? HIST_WORDS / SPLIT_PER : 1;
static_assert(SPLIT_PER == 8, "a thread's bins: one word in each 1 KiB block");
CAKE_DEVICE int owned_split_top() { return HIST_WORDS - sel_tid() * SPLIT_PER; }  // one past the thread's top bin
CAKE_DEVICE const uint32_t* owned_split_words(const Sel& s) {
    const int top = owned_split_top();
    return s.hist + (SPLIT_SPREAD ? top / SPLIT_PER - 1 : top - SPLIT_PER);
}
CAKE_DEVICE int owned_split_count(const Sel& s) {
    const uint32_t* words = owned_split_words(s);
    int cnt = 0;
    if constexpr (SPLIT_SPREAD) {
#pragma unroll
        for (int i = 0; i < SPLIT_PER; ++i) cnt += (int)words[i * SPLIT_STRIDE];
    } else {
        cnt = owned_bins_sum(s.hist, owned_split_top(), SPLIT_PER);
    }
    return cnt;
}

// hist_floor's steps after its scan, for callers that put other work between them: split_floor_reset (before a
// barrier), split_floor_pick (after it: this thread's bins, cnt of them, with `above` counted keys in the bins above and
// `total` in all; the thread whose bins hold the topk-th key writes the floor), then, after another barrier,
// split_floor_read.
CAKE_DEVICE void split_floor_reset(const Sel& s) {
    if (sel_tid() == 0) {
        s.st->result = 0ull;
        s.st->need = 0;
    }
}
CAKE_DEVICE void split_floor_pick(const Sel& s, int topk, int cnt, int above, int total) {
    if (total > topk && above < topk && above + cnt >= topk) {
        const uint32_t* words = owned_split_words(s);
        const int top = owned_split_top();
        int cum = above;
        for (int b = top - 1; b >= top - SPLIT_PER; --b) {
            const int c = (int)words[(b & 7) * SPLIT_STRIDE];
            if (cum + c >= topk) {
                s.st->result = (uint64_t)b << 53;
                s.st->need = b ? cum : 0;  // bin 0: the floor is 0, no key is known to be above it
                break;
            }
            cum += c;
        }
    }
}
CAKE_DEVICE SplitFloor split_floor_read(const Sel& s) { return SplitFloor{s.st->result, s.st->need}; }

CAKE_DEVICE SplitFloor hist_floor(const Sel& s, int topk) {
    const int cnt = owned_split_count(s);
    int total;
    const int above = block_excl_scan<NT>(cnt, s.scratch, total);
    split_floor_reset(s);
    sel_sync();
    split_floor_pick(s, topk, cnt, above, total);
    sel_sync();
    const SplitFloor f = split_floor_read(s);
    sel_sync();
    return f;
}

// A one-query split part's running floor (RUNNING_FLOOR programs): every part of its block counts the keys it appends
// in the block's global histogram, so part of the way through its tiles (the other parts about as far) the counts so far
// give a floor (hist_floor: from any subset of real counts, a valid one), and from then on only keys from it are
// appended and counted. Every key of the top-k lies at or above every floor a part can see, so it is appended and
// counted by its part; the floors of a part's end and of the merge are of the same counts or more, never lower: a key
// dropped here is below them. The A rows' parts write 6-9% of the keys they append (docs/dsa.md round 52). The part's
// query is its block's query 0. Ends with a barrier.
CAKE_DEVICE void raise_split_floor(const Sel& s, uint32_t* gh, int topk) {
    load_split_hist(s, gh, 0, false);
    const SplitFloor f = hist_floor(s, topk);
    if (sel_tid() == 0 && f.key > s.lo[0]) s.lo[0] = f.key;
    sel_sync();
}

// Output row `row` from its kept keys cb[0 .. kept) (ascending id, <= topk of them), padded to topk with
// -1 / -inf. Consecutive lanes take consecutive entries, so every store of a warp is coalesced. (Writing
// straight from an ordered keep is not: a thread's kept keys are consecutive but neighbouring lanes' start
// about 4 * topk / n entries apart, ~4x the ideal global sectors.)
// id_base: added to the key's low half (a unit's first key for its candidates, 0 for global keys).
template <class B>
CAKE_DEVICE void write_out_row(const B& cb, int kept, int row, int topk, int* out_idx, float* out_sc,
                               uint32_t id_base) {
    int* oi = out_idx + (size_t)row * topk;
    float* os = out_sc + (size_t)row * topk;
    for (int i = sel_tid(); i < topk; i += NT) {
        if (i < kept) {
            const uint64_t x = buf_get(cb, i);
            oi[i] = (int)((uint32_t)x + id_base);
            os[i] = score_of(x);
        } else {
            oi[i] = -1;
            os[i] = __int_as_float(0xff800000);  // -inf
        }
    }
}

// Query qq's part of a split unit (its kept keys cb[0 .. kept), ascending id) and its count, to the workspace.
CAKE_DEVICE void write_part(const uint64_t* cb, int kept, const Unit& un, int qq, int topk, uint64_t* ws_ent,
                            int* ws_cnt) {
    uint64_t* part = ws_ent + ((size_t)un.slot * BQ + qq) * topk;
    for (int i = sel_tid(); i < kept; i += NT) part[i] = cb[i];
    if (sel_tid() == 0) ws_cnt[(size_t)un.slot * BQ + qq] = kept;
}

// The exact top-k of one query's keys buf[0 .. n) (n <= REG_R * NT * 4: read once into registers), kept in
// place in buffer order (ascending id); returns how many. from.key != 0: the first digit of the k-th key is
// known (the floor of a complete histogram of the keys) and the from.above keys in the bins above it are all
// in buf and in the top-k, so only the bin's keys are ranked (the topk - above largest of them, passes from the
// second digit on). Keys below `floor` are not kept. Block-uniform; ends with a barrier (the keys are in place).
CAKE_DEVICE int select_keep(const Sel& s, uint64_t* buf, int n, int topk, SplitFloor from, uint64_t floor) {
    uint64_t x[REG_R][4];
    dsa_reg_load<NT, REG_R>(x, buf, n);
    uint64_t K =
        n > topk ? reg_kth_largest<NT, REG_R>(x, n, topk - from.above, s.hist, s.st, s.scratch, 0, from.key) : 0ull;
    if (floor > K) K = floor;
    const int kept = reg_ordered_keep<NT, REG_R>(x, n, K, s.scratch, [&](int pos, uint64_t v) { buf[pos] = v; });
    sel_sync();
    return kept;
}

// Keys a compaction may keep above topk: its radix select stops at the first digit whose bucket leaves at
// most this many (usually the first: a bucket of the top 11 bits holds a few dozen to a few hundred keys
// near the k-th), for a third of the room a compaction makes. The buffers keep ascending ids and the
// floor only ever drops keys with topk larger ones, so the output does not change.
CAKE_DEVICE int compact_slack(int topk) { return (CAP - TILE - topk) / 3; }

// Cut query qq's buffer (cb: its view) to topk .. topk + compact_slack keys and raise its floor. Block-uniform; ends
// with a barrier.
template <class V>
CAKE_DEVICE void compact_view(const Sel& s, int qq, int topk, const V cb) {
    const int n = s.cnt[qq];
    uint64_t x[REG_R][4];
    dsa_reg_load<NT, REG_R>(x, cb, n);
    const uint64_t K = reg_kth_largest<NT, REG_R>(x, n, topk, s.hist, s.st, s.scratch, compact_slack(topk));
    const int kept = reg_ordered_keep<NT, REG_R>(x, n, K, s.scratch, [&](int pos, uint64_t v) {
        cb.put(pos, v);
        cb.tally(v);
    });
    sel_sync();
    if (sel_tid() == 0) {
        s.cnt[qq] = kept;
        s.lo[qq] = K + 1ull;
        cb.retally();
    }
    sel_sync();
}
// compact_view with the view query qq's buffer needs.
CAKE_DEVICE void compact_query(const Sel& s, int qq, int topk) {
    const CandView c = cand(s, qq);
    if (windowed(c)) compact_view(s, qq, topk, win_view(c));
    else compact_view(s, qq, topk, c);
}

// Compact the buffers of queries q0 + q, q in `mask` (each has cnt > topk), together, as compact_query
// (MULTI_COMPACT; NQ <= CB histograms at s.chist). Ends with a barrier.
template <int NQ, class V>
CAKE_DEVICE void compact_multi_view(const Sel& s, int q0, unsigned mask, int topk, const V bufs) {
    DsaMultiState* ms = reinterpret_cast<DsaMultiState*>(s.pscratch);
    uint64_t* scratch64 = s.pscratch + 16;
    int n[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) n[q] = ((mask >> q) & 1u) ? s.cnt[q0 + q] : 0;
    uint64_t K[NQ];
    multi_kth_largest<NT, REG_R, NQ>(bufs, CAP, n, topk, mask, s.chist, ms, scratch64, K, compact_slack(topk));
    int kept[NQ];
    multi_ordered_keep<NT, REG_R, NQ, true>(bufs, CAP, n, mask, K, scratch64, kept, [&](int q, int pos, uint64_t x) {
        buf_at(bufs, q, CAP).put(pos, x);
        buf_at(bufs, q, CAP).tally(x);
    });
    sel_sync();
    if (sel_tid() == 0) {
#pragma unroll
        for (int q = 0; q < NQ; ++q)
            if ((mask >> q) & 1u) {
                s.cnt[q0 + q] = kept[q];
                s.lo[q0 + q] = K[q] + 1ull;
                buf_at(bufs, q, CAP).retally();
            }
    }
    sel_sync();
}
// compact_multi_view with the view the block's buffers need.
template <int NQ>
CAKE_DEVICE void compact_multi(const Sel& s, int q0, unsigned mask, int topk) {
    if constexpr (MULTI_COMPACT) {
        const CandView c = cand(s, q0);
        if (windowed(c)) compact_multi_view<NQ>(s, q0, mask, topk, win_view(c));
        else compact_multi_view<NQ>(s, q0, mask, topk, c);
    }
}

// Compact every buffer that could not take another full tile (MULTI_COMPACT: in batches of CB queries,
// each with its nearly full buffers). Ends with a barrier: every thread has read the counts before the
// appends rewrite them.
CAKE_DEVICE void compact_full(const Sel& s, int topk) {
    unsigned m = 0u;
#pragma unroll
    for (int qq = 0; qq < BQ; ++qq)
        if (s.cnt[qq] > CAP - TILE) m |= 1u << qq;
    if (m) {  // block-uniform
        if constexpr (MULTI_COMPACT) {
#pragma unroll (DSA_ROLL_QUERIES ? 1 : (BQ + CB - 1) / CB)
            for (int b0 = 0; b0 < BQ; b0 += CB) {
                unsigned bm = (m >> b0) & ((1u << CB) - 1u);
                if (!bm) continue;
#pragma unroll
                for (int q = 0; q < CB; ++q) {
                    if (b0 + q >= BQ) break;
                    const int n = s.cnt[b0 + q];
                    if (n > CAP - 2 * TILE && n > topk) bm |= 1u << q;  // nearly full: join the batch
                }
                compact_multi<CB>(s, b0, bm, topk);
            }
        } else {
#pragma unroll 1
            for (int qq = 0; qq < BQ; ++qq)
                if ((m >> qq) & 1u) compact_query(s, qq, topk);
        }
    }
    sel_sync();
}

// Ordered append of one score tile: warp w takes queries w, w + NWARPS, ..., walking the tile's keys in
// ascending id. scores: [BQ][TILE] f32 of keys j0 .. j0 + TILE. COUNT (split units): one global atomic per
// appended key into gh, the block's histograms of appended keys (merge.cuh).
static_assert(WIN_KEYS == 65536 && WIN_KEYS % TILE == 0, "16-bit offsets in a window; a tile in one window");
template <bool COUNT>
CAKE_DEVICE void append_rows(const Sel& s, const Unit& un, const float* scores, int j0, int causal, uint32_t* gh) {
    const int lane = sel_tid() & 31, warp = sel_tid() >> 5;
#pragma unroll 1
    for (int qq = warp; qq < un.nq; qq += NWARPS) {
        int vend = visible_end(un, un.q0 + qq, causal);
        if (vend > un.khi) vend = un.khi;
        const uint64_t floor_key = s.lo[qq];
        const CandView cq = cand(s, qq);
        int c0 = s.cnt[qq];
        // Every chunk's key and ballot before the first candidate is written: the slot and the buffers are both shared
        // memory, so a score read after a store would wait for it (the selection never writes the slot), and the
        // chunks' compares and ballots then overlap. The writes go in chunk order: the same keys at the same places.
        constexpr int NC = TILE / 32;
        uint64_t x[NC];
        unsigned b[NC];
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            const int j = j0 + c * 32 + lane;
            x[c] = score_id_key(scores[qq * TILE + c * 32 + lane], (uint32_t)(j - un.klo));
            b[c] = __ballot_sync(0xffffffffu, j < vend && x[c] >= floor_key);
        }
        const unsigned below = dsa_lanemask_lt();
#pragma unroll
        for (int c = 0; c < NC; ++c) {
            if ((b[c] >> lane) & 1u) {
                cq.put(c0 + __popc(b[c] & below), x[c]);
                if constexpr (COUNT) atomicAdd(gh + qq * HIST_WORDS + split_bin_word((unsigned)(x[c] >> 53)), 1u);
            }
            c0 += __popc(b[c]);
        }
        __syncwarp();  // every lane has read cnt[qq] before lane 0 rewrites it
        if (lane == 0) s.cnt[qq] = c0;
    }
}

// The append of an unsplit unit (gh == nullptr) keeps the counting out of its loop.
CAKE_DEVICE void append_tile(const Sel& s, const Unit& un, const float* scores, int j0, int causal, uint32_t* gh) {
    if (gh) append_rows<true>(s, un, scores, j0, causal, gh);
    else append_rows<false>(s, un, scores, j0, causal, nullptr);
}

// finish_unit's final selection of every query together (MULTI), on the block's buffers `all`: each query's exact
// top-k kept in place, then its row written out coalesced (write_out_row).
template <class V>
CAKE_DEVICE void finish_joint(const Sel& s, const Unit& un, int topk, int* out_idx, float* out_sc, uint32_t* hists,
                              const int (&n)[BQ], unsigned todo, unsigned active, const V all) {
    DsaMultiState* ms = reinterpret_cast<DsaMultiState*>(s.hist);
    uint64_t* scratch64 = reinterpret_cast<uint64_t*>(s.hist) + 32;
    uint64_t K[BQ];
    multi_kth_largest<NT, REG_R, BQ>(all, CAP, n, topk, active, hists, ms, scratch64, K);
    // A query of at most topk candidates keeps them all, where they are: only the active ones are rewritten. The
    // programs of windowed units keep every query (a windowed buffer's keep also tallies its windows for the retally,
    // and there the per-query counts spill the H = 64 program); their long rows seldom have such a query.
    const unsigned keep = WINDOWS ? todo : active;
    int kept[BQ];
    multi_ordered_keep<NT, REG_R, BQ, true>(all, CAP, n, keep, K, scratch64, kept, [&](int q, int pos, uint64_t x) {
        buf_at(all, q, CAP).put(pos, x);
        buf_at(all, q, CAP).tally(x);
    });
#pragma unroll
    for (int q = 0; q < BQ; ++q)
        if (((todo & ~keep) >> q) & 1u) kept[q] = n[q];
    sel_sync();  // the kept keys of every query are in place
    if (all.WIN) {
        if (sel_tid() < un.nq) buf_at(all, sel_tid(), CAP).retally();  // the windows' starts at the kept keys
        sel_sync();
    }
#pragma unroll (DSA_ROLL_QUERIES ? 1 : BQ)
    for (int q = 0; q < (DSA_ROLL_QUERIES ? un.nq : BQ); ++q)
        if (q < un.nq)
            write_out_row(buf_at(all, q, CAP), pick(kept, q), un.q0 + q, topk, out_idx, out_sc, (uint32_t)un.klo);
}

// Final selection of all queries of an unsplit unit: its output rows. hists: MULTI_HIST_BYTES of free shared
// memory (the key tiles: nothing is in flight after the loop). (A split unit's end: merge.cuh.)
CAKE_DEVICE void finish_unit(const Sel& s, const Unit& un, int topk, int* out_idx, float* out_sc, uint32_t* hists) {
    if constexpr (MULTI) {
        int n[BQ];
        unsigned todo = 0u, active = 0u;
#pragma unroll
        for (int q = 0; q < BQ; ++q) {
            n[q] = q < un.nq ? s.cnt[q] : 0;
            if (q < un.nq) todo |= 1u << q;
            if (q < un.nq && n[q] > topk) active |= 1u << q;
        }
        const CandView c = cand(s, 0);
        if (windowed(c)) finish_joint(s, un, topk, out_idx, out_sc, hists, n, todo, active, win_view(c));
        else finish_joint(s, un, topk, out_idx, out_sc, hists, n, todo, active, c);
        sel_sync();
    } else {
        // The global keys in the free key tiles (hists: CAP keys fit below the candidates), select_keep's buffer.
        uint64_t* cb = reinterpret_cast<uint64_t*>(hists);
#pragma unroll 1
        for (int qq = 0; qq < un.nq; ++qq) {
            cand_to_global(s, qq, s.cnt[qq], un.klo, cb);
            const int kept = select_keep(s, cb, s.cnt[qq], topk, SplitFloor{0ull, 0}, 0ull);
            write_out_row(cb, kept, un.q0 + qq, topk, out_idx, out_sc, 0u);
            sel_sync();  // hist, st and scratch are reused by the next query
        }
    }
}

}  // namespace dsa
