// Block-wide exact selection on 64-bit candidate keys (score_id_key: score first, larger id first).
//
// Every routine here is called by all NT threads of the selection (layout.cuh: the block, or its selection
// warpgroups; local index dsa::sel_tid(), barrier dsa::sel_sync()) with uniform arguments. Candidate
// buffers are kept in ascending key-id order (appends are ordered, compaction is stable), so the final
// output needs no sort: selecting "key >= K" in buffer order yields ascending ids.
#pragma once
#include "../common/types.cuh"
#include "layout.cuh"

struct DsaSelState {
    uint64_t prefix;  // bits of the k-th largest key decided so far
    uint64_t mask;    // which bits are decided
    int need;         // rank of the k-th largest among keys matching `prefix` on `mask`
    int done;         // the bucket just chosen holds exactly `need` keys: K = prefix (low bits 0)
    uint64_t result;
    uint32_t sink;    // hist_count's add for the keys outside a pass (never read)
};

CAKE_DEVICE unsigned dsa_lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// Sum of the `per` histogram words hist[top - per .. top) a thread owns in the bin scans below (per = 4 or 8: a
// digit's 1024 or 2048 bins over the 256 selection threads; top - per a multiple of per, hist 16-byte aligned), in
// 16-byte loads: one for 4 words, two for 8. Owners' ranges lie side by side, so a warp's 16-byte loads of 4 words
// cover its 512 bytes without a bank conflict; with 8 words lanes with bit 2 set load their halves in the other
// order (dsa_load4's), so each load's 8-lane phases cover 128 distinct bytes. Integer adds: the sum does not depend
// on the order.
static_assert(dsa::NT == 256, "a digit's 1024 or 2048 bins are 4 or 8 a selection thread");
CAKE_DEVICE int owned_bins_sum(const uint32_t* hist, int top, int per) {
    const uint4* h = reinterpret_cast<const uint4*>(hist + top - per);
    if (per == 4) {
        const uint4 a = h[0];
        return (int)(a.x + a.y + a.z + a.w);
    }
    const int first = (dsa::sel_tid() >> 2) & 1;
    const uint4 a = h[first], b = h[1 - first];
    return (int)(a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w);
}

// Zero the bins owned_bins_sum reads (hist[top - per .. top), the same 16-byte accesses in the same order): the
// owners' ranges cover a digit's bins.
CAKE_DEVICE void zero_owned_bins(uint32_t* hist, int top, int per) {
    uint4* h = reinterpret_cast<uint4*>(hist + top - per);
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    if (per == 4) {
        h[0] = z;
        return;
    }
    const int first = (dsa::sel_tid() >> 2) & 1;
    h[first] = z;
    h[1 - first] = z;
}

// Count a key into its bin (in: the key takes part in this pass). Plain shared-memory atomics with no
// result used: independent from key to key (no vote or match chain per key), and lanes of a warp on one
// word are combined by the hardware (ATOMS.POPC.INC), so a plateau of equal digits costs one add a warp.
// A key outside the pass adds to `sink` (a shared word nobody reads) instead of skipping the add: ptxas
// branches around a conditional or predicated POPC.INC (BSSY / BRA / BSYNC, a divergence region per key
// of every radix count), where a select of the address is one instruction; the keys outside a pass share
// the one sink word, so a warp's adds to it are one combined add.
CAKE_DEVICE void hist_count(uint32_t* hist, bool in, unsigned bin, uint32_t* sink) {
    atomicAdd(in ? hist + bin : sink, 1u);
}

// Inclusive prefix sum of x over the lanes of a warp, in lane order (5 shuffle steps); V: int or uint64_t.
template <class V>
CAKE_DEVICE V warp_incl_scan(V x, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const V y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    return x;
}

// Exclusive prefix sums of N ints per thread at once, in thread order, on one set of barriers: ex[i] and the block
// sum tot[i] of v[i]. `scratch` holds at least N * NT/32 ints. Starts with a barrier, so back-to-back calls are safe.
template <int NT, int N>
CAKE_DEVICE void block_excl_scan_n(const int (&v)[N], int* scratch, int (&ex)[N], int (&tot)[N]) {
    constexpr int NW = NT / 32;
    const int lane = dsa::sel_tid() & 31, warp = dsa::sel_tid() >> 5;
    int x[N];
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = warp_incl_scan(v[i], lane);
    dsa::sel_sync();
    if (lane == 31) {
#pragma unroll
        for (int i = 0; i < N; ++i) scratch[i * NW + warp] = x[i];
    }
    dsa::sel_sync();
    if (warp == 0) {
        int s[N];
#pragma unroll
        for (int i = 0; i < N; ++i) s[i] = warp_incl_scan(lane < NW ? scratch[i * NW + lane] : 0, lane);
        if (lane < NW) {
#pragma unroll
            for (int i = 0; i < N; ++i) scratch[i * NW + lane] = s[i];
        }
    }
    dsa::sel_sync();
#pragma unroll
    for (int i = 0; i < N; ++i) tot[i] = scratch[i * NW + NW - 1];
#pragma unroll
    for (int i = 0; i < N; ++i) ex[i] = (warp ? scratch[i * NW + warp - 1] : 0) + x[i] - v[i];
}

// block_excl_scan_n of one int per thread: its exclusive prefix sum, `total` the block sum (scratch: NT/32 ints).
template <int NT>
CAKE_DEVICE int block_excl_scan(int v, int* scratch, int& total) {
    const int vs[1] = {v};
    int ex[1], tot[1];
    block_excl_scan_n<NT, 1>(vs, scratch, ex, tot);
    total = tot[0];
    return ex[0];
}

// One radix pass's choice: the bin among a thread's owned bins [top - per, top) of `hist` (nb bins of the digit at
// `shift`) that holds the need-th largest counted key, `above` counted keys lying above these bins (the caller
// checked above < need <= above + their sum). Writes the next pass's state to st: prefix and mask extended by the
// bin's digit, need ranked within the bin, done = stops(c, nneed) for the bin's c keys of which the nneed-th largest
// is wanted (its lowest key is then K). multi_kth_largest's per-query walk is the same logic, but through take_bin
// its machine code changes (scripts/sass-diff), so it keeps its own loop.
template <class Stops>
CAKE_DEVICE void take_bin(DsaSelState* st, const uint32_t* hist, int top, int per, int above, int need, uint64_t prefix,
                          uint64_t mask, int shift, int nb, Stops stops) {
    int cum = above;
    for (int b = top - 1; b >= top - per; --b) {
        const int c = (int)hist[b];
        if (cum + c >= need) {
            const int nneed = need - cum;
            st->prefix = prefix | ((uint64_t)b << shift);
            st->mask = mask | ((uint64_t)(nb - 1) << shift);
            st->need = nneed;
            st->done = stops(c, nneed) ? 1 : 0;
            break;
        }
        cum += c;
    }
}

// The k-th largest key K of buf[0..n) (1 <= k <= n): exactly k keys are >= K, or K may be lowered to
// the bucket floor when the bucket holding the k-th key is taken whole (still exactly k keys >= K).
// MSB-first radix select, 11/11/10-bit digits per 32-bit half; stops as soon as the boundary bucket
// is taken whole. `hist` holds 2048 uint32. Keys are unique (the id is in the low half), so the
// selection is exact and does not depend on the order of buf.
template <int NT>
CAKE_DEVICE uint64_t block_kth_largest(const uint64_t* buf, int n, int k, uint32_t* hist, DsaSelState* st,
                                       int* scratch) {
    const int tid = dsa::sel_tid();
    if (tid == 0) {
        st->prefix = 0ull;
        st->mask = 0ull;
        st->need = k;
        st->done = (k >= n) ? 1 : 0;
    }
    dsa::sel_sync();
    if (st->done) {  // everything is kept
        dsa::sel_sync();
        return 0ull;
    }
#pragma unroll 1
    for (int p = 0; p < 6; ++p) {
        const int shift = (p == 0) ? 53 : (p == 1) ? 42 : (p == 2) ? 32 : (p == 3) ? 21 : (p == 4) ? 10 : 0;
        const int bits = (p == 2 || p == 5) ? 10 : 11;
        const int nb = 1 << bits;
        // Thread t owns the t-th chunk of bins counted from the top digit down.
        const int per = nb / NT;  // every thread owns bins (owned_bins_sum)
        const int top = nb - tid * per;  // bins [top - per, top)
        zero_owned_bins(hist, top, per);
        const uint64_t prefix = st->prefix, mask = st->mask;
        const int need = st->need;
        dsa::sel_sync();
        constexpr int E = 4;  // loads in flight per thread
        for (int base = 0; base < n; base += NT * E) {
            uint64_t xs[E];
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const int i = base + e * NT + tid;
                xs[e] = i < n ? buf[i] : 0ull;
            }
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const int i = base + e * NT + tid;
                const bool in = i < n && (xs[e] & mask) == prefix;
                hist_count(hist, in, (unsigned)(xs[e] >> shift) & (unsigned)(nb - 1), &st->sink);
            }
        }
        dsa::sel_sync();
        const int s = owned_bins_sum(hist, top, per);
        int total;
        const int above = block_excl_scan<NT>(s, scratch, total);
        if (above < need && above + s >= need)
            take_bin(st, hist, top, per, above, need, prefix, mask, shift, nb,
                     [](int c, int nneed) { return c == nneed; });  // the bin holds exactly the keys still needed
        dsa::sel_sync();
        if (st->done) break;
    }
    const uint64_t K = st->prefix;
    dsa::sel_sync();
    return K;
}

// ---------------------------------------------------------------------------------------------------
// Register-resident selection. The buffer is read from shared memory once, into registers: R rounds of 4 consecutive keys per thread,
// entry i = (r * NT + tid) * 4 + e (the order of ordered_keep). The radix passes then count from
// registers (no reload), and the ordered keep writes from the same registers with ONE block scan (the R
// rounds' counts packed in 16-bit fields of a uint64) instead of one scan per round. Same selection rule as block_kth_largest:
// exactly k keys are >= the returned K, so the kept set (hence every output) is the same.
// ---------------------------------------------------------------------------------------------------

// Exclusive prefix sums of NQ uint64 per thread at once, in thread order; tot[q] gets the block sum of v[q]. One
// barrier pair for all: every thread sums the warp totals it needs. `scratch64` holds NQ * NT/32 uint64 (8-byte
// aligned). Starts with a barrier, so it may follow any other use of the scratch words.
template <int NT, int NQ>
CAKE_DEVICE void multi_scan_u64(const uint64_t (&v)[NQ], uint64_t* scratch64, uint64_t (&ex)[NQ],
                                uint64_t (&tot)[NQ]) {
    constexpr int NW = NT / 32;
    const int lane = dsa::sel_tid() & 31, warp = dsa::sel_tid() >> 5;
    uint64_t x[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) x[q] = warp_incl_scan(v[q], lane);
    dsa::sel_sync();
    if (lane == 31) {
#pragma unroll
        for (int q = 0; q < NQ; ++q) scratch64[q * NW + warp] = x[q];
    }
    dsa::sel_sync();
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        uint64_t before = 0ull, all = 0ull;
#pragma unroll
        for (int w = 0; w < NW; ++w) {
            const uint64_t s = scratch64[q * NW + w];
            if (w < warp) before += s;
            all += s;
        }
        ex[q] = before + x[q] - v[q];
        tot[q] = all;
    }
}

// One uint64 per thread: multi_scan_u64 of one value (scratch64: NT/32 uint64).
template <int NT>
CAKE_DEVICE uint64_t block_excl_scan_u64(uint64_t v, uint64_t* scratch64, uint64_t& total) {
    const uint64_t vs[1] = {v};
    uint64_t ex[1], tot[1];
    multi_scan_u64<NT, 1>(vs, scratch64, ex, tot);
    total = tot[0];
    return ex[0];
}

// Four keys of round r of a buffer (the register layout above: buf[(r * NT + tid) * 4 + e]), 0 past n.
// Two 16-byte loads (buf is 16-byte aligned). Lanes' keys are 32 bytes apart, so if every lane loaded its
// first half and then its second, lanes l and l + 4 of each 8-lane phase of a 16-byte load would share
// banks (2-way conflict: 8 wavefronts a load instead of 4); lanes with bit 2 set load their halves in the
// other order, so each load's 8 lanes of a phase cover 128 distinct bytes. ORDERED: x[e] = buf[i0 + e];
// otherwise the four keys in some order (for counts and histograms, which do not depend on it; when
// i0 + 4 <= n every x[e] is a key of the round, when not x[e] = buf[i0 + e] as in the ordered case).
template <int NT, bool ORDERED = true>
CAKE_DEVICE void dsa_load4(uint64_t (&x)[4], const uint64_t* buf, int n, int r) {
    const int i0 = (r * NT + dsa::sel_tid()) * 4;
    if (i0 + 4 <= n) {
        const int h = (dsa::sel_tid() >> 2) & 1;
        const ulonglong2 a = *reinterpret_cast<const ulonglong2*>(buf + i0 + 2 * h);
        const ulonglong2 b = *reinterpret_cast<const ulonglong2*>(buf + i0 + 2 - 2 * h);
        if (ORDERED) {
            x[0] = h ? b.x : a.x;
            x[1] = h ? b.y : a.y;
            x[2] = h ? a.x : b.x;
            x[3] = h ? a.y : b.y;
        } else {
            x[0] = a.x; x[1] = a.y; x[2] = b.x; x[3] = b.y;
        }
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = (i0 + e < n) ? buf[i0 + e] : 0ull;
    }
}

// One query's candidate buffer (layout.cuh Layout::cand): CAP keys (u32), CAP 16-bit ids, then its window state; read
// and written as one 64-bit key (key << 32 | id), id the candidate's offset from the unit's first key, which orders a
// unit's candidates as (score, global id) does. A unit spans up to MAX_WIN windows of WIN_KEYS keys; a stored id is
// the offset in its window, and a candidate's window is the run of buffer positions it lies in (ids ascend in a
// buffer): window w starts at position start[w] (w >= 1; start[0] is 0), nwin windows are open, the same number in
// every buffer of a block (a window opens at its first tile: selection.cuh open_windows). CandView reads a buffer of
// one window (every id is its offset: a unit of at most WIN_KEYS keys, or before its second window opens); WinView
// reads one of several, adding each position's window, and its keeps tally their kept keys by window so that retally
// moves the starts. `windowed` says which view a block's buffers need. One pointer (the ids and the state are CAP keys
// further), so a joint pass over four queries holds four.
constexpr int CAND_KEY_WORDS = dsa::CAP * 3 / 2;                 // u32 words of a query's keys and ids
constexpr int CAND_WORDS = CAND_KEY_WORDS + 2 * dsa::MAX_WIN;    // + nwin, start[1 .. MAX_WIN), count[MAX_WIN]
static_assert(CAND_WORDS * 4 == dsa::CAND_BYTES && CAND_WORDS % 4 == 0, "16-byte aligned candidate blocks");
struct CandView {
    static constexpr bool WIN = false;
    uint32_t* key;
    CAKE_DEVICE uint16_t* ids() const { return reinterpret_cast<uint16_t*>(key + dsa::CAP); }
    CAKE_DEVICE int* state() const { return reinterpret_cast<int*>(key + CAND_KEY_WORDS); }  // [0]: nwin, [w]: start[w]
    CAKE_DEVICE int* count() const { return state() + dsa::MAX_WIN; }                         // a keep's tally a window
    CAKE_DEVICE int nwin() const { return state()[0]; }
    CAKE_DEVICE uint64_t get(int i) const { return ((uint64_t)key[i] << 32) | ids()[i]; }
    CAKE_DEVICE void put(int i, uint64_t x) const {
        key[i] = (uint32_t)(x >> 32);
        ids()[i] = (uint16_t)x;
    }
    CAKE_DEVICE void tally(uint64_t) const {}  // one window: no starts to move (WinView's do)
    CAKE_DEVICE void retally() const {}
    // Windows up to w open at position c (the next candidate's), by one thread (selection.cuh open_windows).
    CAKE_DEVICE void open_window(int w, int c) const {
        const int nw = nwin();
        for (int v = nw; v <= w; ++v) state()[v] = c;
        if (w >= nw) state()[0] = w + 1;
    }
    // A unit's start, word v < MAX_WIN of the state: one window, no tallies.
    CAKE_DEVICE void reset(int v) const {
        count()[v] = 0;
        if (v == 0) state()[0] = 1;
    }
};
struct WinView : CandView {
    static constexpr bool WIN = true;
    // The windows of positions i .. i + 3, one a byte (byte e: position i + e's): a start s at t = s - i adds one to
    // the bytes e >= t.
    CAKE_DEVICE uint32_t windows4(int i) const {
        const int nw = nwin();
        uint32_t w = 0;
#pragma unroll 1
        for (int v = 1; v < nw; ++v) w += (uint32_t)(0x01010101ull << (8 * min(max(state()[v] - i, 0), 4)));
        return w;
    }
    CAKE_DEVICE uint64_t get(int i) const { return CandView::get(i) | (uint64_t)(windows4(i) & 0xffu) << 16; }
    // A keep's sink: count kept key x in its window, one atomic per window of the lanes here (a warp's lanes mostly
    // share one window; shared atomics on one word would serialize).
    CAKE_DEVICE void tally(uint64_t x) const {
        const unsigned w = (uint32_t)x >> 16;
        const unsigned same = __match_any_sync(__activemask(), w);
        if ((threadIdx.x & 31) == __ffs(same) - 1) atomicAdd(count() + w, __popc(same));
    }
    // After a keep (its barrier passed), by one thread: the starts from the tallies, the tallies back to 0.
    CAKE_DEVICE void retally() const {
        const int nw = nwin();
        int at = 0;
        for (int v = 0; v < nw; ++v) {
            if (v) state()[v] = at;
            at += count()[v];
            count()[v] = 0;
        }
    }
};
// Whether a block's buffers need WinView (several windows open; c one of them): block-uniform, every buffer of a
// block has the same windows. Never in a program of one-window units (DSA_WINDOWS 0: WinView's code is not emitted).
CAKE_DEVICE bool windowed(const CandView& c) { return dsa::WINDOWS && c.nwin() > 1; }
CAKE_DEVICE WinView win_view(const CandView& c) { return {{c.key}}; }
// Query q's buffer of a block of buffers: 64-bit keys `stride` apart, or candidate blocks (CAND_WORDS apart).
CAKE_DEVICE const uint64_t* buf_at(const uint64_t* b, int q, int stride) { return b + (size_t)q * stride; }
CAKE_DEVICE CandView buf_at(const CandView& b, int q, int) { return {b.key + q * CAND_WORDS}; }
CAKE_DEVICE WinView buf_at(const WinView& b, int q, int) { return {{b.key + q * CAND_WORDS}}; }
CAKE_DEVICE uint64_t buf_get(const uint64_t* b, int i) { return b[i]; }
CAKE_DEVICE uint64_t buf_get(const CandView& b, int i) { return b.get(i); }
CAKE_DEVICE uint64_t buf_get(const WinView& b, int i) { return b.get(i); }

// dsa_load4 of a candidate buffer: one 16-byte load of four keys and one 8-byte load of their ids (consecutive
// lanes, consecutive bytes: no bank conflict), in order.
template <int NT, bool ORDERED = true>
CAKE_DEVICE void dsa_load4(uint64_t (&x)[4], const CandView& buf, int n, int r) {
    const int i0 = (r * NT + dsa::sel_tid()) * 4;
    if (i0 + 4 <= n) {
        const uint4 k = *reinterpret_cast<const uint4*>(buf.key + i0);
        const uint2 d = *reinterpret_cast<const uint2*>(buf.ids() + i0);
        x[0] = ((uint64_t)k.x << 32) | (d.x & 0xffffu);
        x[1] = ((uint64_t)k.y << 32) | (d.x >> 16);
        x[2] = ((uint64_t)k.z << 32) | (d.y & 0xffffu);
        x[3] = ((uint64_t)k.w << 32) | (d.y >> 16);
    } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) x[e] = (i0 + e < n) ? buf.get(i0 + e) : 0ull;
    }
}
// Of a buffer of several windows: the same, each key with its window (0 past n as before).
template <int NT, bool ORDERED = true>
CAKE_DEVICE void dsa_load4(uint64_t (&x)[4], const WinView& buf, int n, int r) {
    dsa_load4<NT, ORDERED>(x, static_cast<const CandView&>(buf), n, r);
    const int i0 = (r * NT + dsa::sel_tid()) * 4;
    if (i0 < n) {
        const uint32_t w = buf.windows4(i0);
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (i0 + e < n) x[e] |= (uint64_t)((w >> (8 * e)) & 0xffu) << 16;
    }
}

// Load buf[0..n) into the register layout above (0 past n).
template <int NT, int R, class B>
CAKE_DEVICE void dsa_reg_load(uint64_t (&x)[R][4], const B& buf, int n) {
#pragma unroll
    for (int r = 0; r < R; ++r) dsa_load4<NT>(x[r], buf, n, r);
}

// block_kth_largest on the register copy (same digits; slack = 0: the same rule and result). slack > 0: a
// floor, not the k-th key: the passes stop at the first bucket that holds the k-th key and has at most slack
// keys below it, and K is that bucket's lowest key (k .. k + slack keys are >= K). A compaction needs only
// that (every key below K has k larger ones, so it is out of the top-k); the final selection is exact.
// top != 0: the first digit is known (top is the lowest key of its bucket): K is the k-th largest of the keys
// in that bucket (the others are not counted), and the passes start at the second digit (the caller knows how
// many keys lie above the bucket).
template <int NT, int R>
CAKE_DEVICE uint64_t reg_kth_largest(const uint64_t (&x)[R][4], int n, int k, uint32_t* hist, DsaSelState* st,
                                     int* scratch, int slack = 0, uint64_t top = 0ull) {
    const int tid = dsa::sel_tid();
    if (k >= n) return 0ull;  // block-uniform: everything is kept
    if (tid == 0) {
        st->prefix = top;
        st->mask = top ? (0x7ffull << 53) : 0ull;
        st->need = k;
        st->done = 0;
    }
#pragma unroll 1
    for (int p = top ? 1 : 0; p < 6; ++p) {
        const int shift = (p == 0) ? 53 : (p == 1) ? 42 : (p == 2) ? 32 : (p == 3) ? 21 : (p == 4) ? 10 : 0;
        const int bits = (p == 2 || p == 5) ? 10 : 11;
        const int nb = 1 << bits;
        const int per = nb / NT;  // every thread owns bins (owned_bins_sum)
        const int bins_top = nb - tid * per;  // bins [bins_top - per, bins_top), counted from the top digit down
        zero_owned_bins(hist, bins_top, per);
        dsa::sel_sync();  // hist zeroed; st of the previous pass (or the init) visible
        const uint64_t prefix = st->prefix, mask = st->mask;
        const int need = st->need;
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = (r * NT + tid) * 4 + e;
                const bool in = i < n && (x[r][e] & mask) == prefix;
                hist_count(hist, in, (unsigned)(x[r][e] >> shift) & (unsigned)(nb - 1), &st->sink);
            }
        }
        dsa::sel_sync();
        const int s = owned_bins_sum(hist, bins_top, per);
        int total;
        const int above = block_excl_scan<NT>(s, scratch, total);
        if (above < need && above + s >= need)
            take_bin(st, hist, bins_top, per, above, need, prefix, mask, shift, nb,
                     [slack](int c, int nneed) { return c - nneed <= slack; });  // keys of the bin below the k-th
        dsa::sel_sync();
        if (st->done) break;
    }
    const uint64_t K = st->prefix;
    dsa::sel_sync();  // everyone has read st before a later call rewrites it
    return K;
}

// Stable in-order write of the register keys >= K (sink(pos, x)); returns how many. One block scan.
// Safe in place: every thread's keys were loaded before the scan's first barrier.
template <int NT, int R, class Sink>
CAKE_DEVICE int reg_ordered_keep(const uint64_t (&x)[R][4], int n, uint64_t K, int* scratch, Sink sink) {
    static_assert(R >= 1 && R <= 4, "four 16-bit round counts per uint64");
    static_assert(NT * 4 < 65536, "a round's count fits 16 bits");
    unsigned keep = 0u;  // bit 4r + e
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = (r * NT + dsa::sel_tid()) * 4 + e;
            if (i < n && x[r][e] >= K) keep |= 1u << (4 * r + e);
        }
    uint64_t v = 0ull;
#pragma unroll
    for (int r = 0; r < R; ++r) v |= (uint64_t)__popc((keep >> (4 * r)) & 15u) << (16 * r);
    uint64_t tot;
    const uint64_t ex = block_excl_scan_u64<NT>(v, reinterpret_cast<uint64_t*>(scratch), tot);
    int base = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        int pos = base + (int)((ex >> (16 * r)) & 0xffffull);
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (keep & (1u << (4 * r + e))) sink(pos++, x[r][e]);
        base += (int)((tot >> (16 * r)) & 0xffffull);
    }
    return base;
}

// ---- Several queries at once: the passes of NQ buffers share their barriers and scans. ----
//
// Where a block holds more than two queries (DSA_ROLL_QUERIES), the per-query loops of the passes and of the keep's
// count are not unrolled (one copy of each body, the query a register): the routines are inlined in two places of the
// selection role (the compactions, NQ = CB; the final selection, NQ = BQ), and unrolled, their code at H = 32 is more
// than the role's instruction fetch keeps up with (S1 +5% rolled, docs/dsa.md round 17). At two queries a block
// (H = 48, 64) the unrolled code is half as large and the rolled loops' extra selects and lost overlap between queries
// cost more than the fetch gains (S1 / S2 -2%), so they stay unrolled. The keep's write loop stays unrolled
// everywhere: rolled, its live per-query scans tip ptxas into spilling the product role's unit loop (H = 48,
// D = 128). A rolled body reads a query's count, need and bin sum from 16-bit fields of one word (pick16) and its
// prefix and mask from its state; other per-query values held in registers through pick() and put().
constexpr bool DSA_ROLL_QUERIES = dsa::BQ > 2;

// a[q] for a block-uniform q: a select per entry where the loops are rolled (q known only at run time), the entry
// itself where they are unrolled (q a constant).
template <class T, int NQ>
CAKE_DEVICE T pick(const T (&a)[NQ], int q) {
    if constexpr (!DSA_ROLL_QUERIES) return a[q];
    T v = a[0];
#pragma unroll
    for (int i = 1; i < NQ; ++i)
        if (q == i) v = a[i];
    return v;
}

// q's 16-bit field of `packed` (the values of a[] below 65536, a[q] << 16 q), where the loops are rolled: a shift of a
// register, no select per entry; a[q] itself where they are unrolled.
template <int NQ>
CAKE_DEVICE int pick16(const int (&a)[NQ], uint64_t packed, int q) {
    if constexpr (!DSA_ROLL_QUERIES) return a[q];
    return (int)((packed >> (16 * q)) & 0xffffull);
}

// The 16-bit fields of a[] (each value below 65536) in one word, for pick16.
template <int NQ>
CAKE_DEVICE uint64_t pack16(const int (&a)[NQ]) {
    static_assert(NQ <= 4, "four 16-bit fields per uint64");
    uint64_t v = 0ull;
#pragma unroll
    for (int q = 0; q < NQ; ++q) v |= (uint64_t)a[q] << (16 * q);
    return v;
}

// a[q] = v, the same way as pick.
template <class T, int NQ>
CAKE_DEVICE void put(T (&a)[NQ], int q, T v) {
    if constexpr (!DSA_ROLL_QUERIES) {
        a[q] = v;
        return;
    }
#pragma unroll
    for (int i = 0; i < NQ; ++i)
        if (q == i) a[i] = v;
}

struct DsaMultiState {
    uint64_t prefix, mask;
    int need, done;
    uint32_t sink;  // as DsaSelState's
};

// block_kth_largest for the NQ buffers bufs + q * stride (n[q] keys, n[q] <= R * NT * 4) whose bit is set in
// `active` (block-uniform; each needs n[q] > k): the same digits and rule, so each K[q] is the one
// block_kth_largest returns (slack > 0: the floor of reg_kth_largest). K[q] = 0 for the others. hists: NQ * 2048 words; ms: NQ states;
// scratch64: NT/32 uint64. All passes of all queries share their barriers and scans.
template <int NT, int R, int NQ, class B>
CAKE_DEVICE void multi_kth_largest(const B& bufs, int stride, const int (&n)[NQ], int k, unsigned active,
                                   uint32_t* hists, DsaMultiState* ms, uint64_t* scratch64, uint64_t (&K)[NQ],
                                   int slack = 0) {
    static_assert(NQ >= 1 && NQ <= 4, "four 16-bit bin sums per uint64");
    const int tid = dsa::sel_tid();
    if (tid < NQ) {
        ms[tid].prefix = 0ull;
        ms[tid].mask = 0ull;
        ms[tid].need = k;
        ms[tid].done = ((active >> tid) & 1u) ? 0 : 1;
    }
    const uint64_t ns = pack16(n);  // n[q] <= R * NT * 4 < 65536
    unsigned todo = active;
#pragma unroll 1
    for (int p = 0; p < 6 && todo; ++p) {
        const int shift = (p == 0) ? 53 : (p == 1) ? 42 : (p == 2) ? 32 : (p == 3) ? 21 : (p == 4) ? 10 : 0;
        const int bits = (p == 2 || p == 5) ? 10 : 11;
        const int nb = 1 << bits;
        const int per = nb / NT;  // every thread owns bins (owned_bins_sum)
        const int top = nb - tid * per;  // bins [top - per, top), counted from the top digit down
#pragma unroll (DSA_ROLL_QUERIES ? 1 : NQ)
        for (int q = 0; q < NQ; ++q)
            if ((todo >> q) & 1u) zero_owned_bins(hists + q * 2048, top, per);
        dsa::sel_sync();  // hists zeroed; the states of the previous pass (or the init) visible
        // Where the loops are rolled, a query's prefix and mask are read from its state where they are used (the count,
        // and the one thread that takes its bin: nobody writes the states before the decision), and the needs are
        // packed for pick16, so the rolled bodies select nothing; unrolled, the registers are read.
        uint64_t prefix[NQ], mask[NQ];
        int need[NQ];
#pragma unroll
        for (int q = 0; q < NQ; ++q) {
            prefix[q] = ms[q].prefix;
            mask[q] = ms[q].mask;
            need[q] = ms[q].need;
        }
        const uint64_t needs = pack16(need);  // need[q] <= n[q]
#pragma unroll (DSA_ROLL_QUERIES ? 1 : NQ)
        for (int q = 0; q < NQ; ++q) {
            if (!((todo >> q) & 1u)) continue;  // block-uniform
            const auto buf = buf_at(bufs, q, stride);
            const int nq = pick16(n, ns, q);
            const uint64_t pq = DSA_ROLL_QUERIES ? ms[q].prefix : prefix[q], mq = DSA_ROLL_QUERIES ? ms[q].mask : mask[q];
            uint32_t* hq = hists + q * 2048;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                uint64_t x[4];
                dsa_load4<NT, false>(x, buf, nq, r);  // a histogram: the keys' order is free
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int i = (r * NT + tid) * 4 + e;
                    const bool in = i < nq && (x[e] & mq) == pq;
                    hist_count(hq, in, (unsigned)(x[e] >> shift) & (unsigned)(nb - 1), &ms[q].sink);
                }
            }
        }
        dsa::sel_sync();
        int s[NQ];
        uint64_t v = 0ull;
#pragma unroll
        for (int q = 0; q < NQ; ++q) {
            s[q] = 0;
            if ((todo >> q) & 1u)
                s[q] = owned_bins_sum(hists + q * 2048, top, per);
            v |= (uint64_t)s[q] << (16 * q);  // a bin sum is at most n[q] < 65536
        }
        uint64_t total;
        const uint64_t ex = block_excl_scan_u64<NT>(v, scratch64, total);
#pragma unroll (DSA_ROLL_QUERIES ? 1 : NQ)
        for (int q = 0; q < NQ; ++q) {
            const int above = (int)((ex >> (16 * q)) & 0xffffull);
            const int nd = pick16(need, needs, q), sq = pick16(s, v, q);
            if (((todo >> q) & 1u) && above < nd && above + sq >= nd) {
                int cum = above;
                for (int b = top - 1; b >= top - per; --b) {
                    const int c = (int)hists[q * 2048 + b];
                    if (cum + c >= nd) {
                        const int nneed = nd - cum;
                        ms[q].prefix = (DSA_ROLL_QUERIES ? ms[q].prefix : prefix[q]) | ((uint64_t)b << shift);
                        ms[q].mask = (DSA_ROLL_QUERIES ? ms[q].mask : mask[q]) | ((uint64_t)(nb - 1) << shift);
                        ms[q].need = nneed;
                        ms[q].done = (c - nneed <= slack) ? 1 : 0;
                        break;
                    }
                    cum += c;
                }
            }
        }
        dsa::sel_sync();
        todo = 0u;
#pragma unroll
        for (int q = 0; q < NQ; ++q)
            if (!ms[q].done) todo |= 1u << q;
    }
#pragma unroll
    for (int q = 0; q < NQ; ++q) K[q] = ((active >> q) & 1u) ? ms[q].prefix : 0ull;
    dsa::sel_sync();  // every thread has read the states before a later call rewrites them
}

// Stable in-order keep of the keys >= K[q] of the buffers with bit q of `todo` (block-uniform), one scan for
// all of them: sink(q, pos, x); kept[q] gets the count (0 for the others). IN_PLACE (the sink writes into
// buffer q): each buffer is reloaded and a barrier separates the reload from the writes.
template <int NT, int R, int NQ, bool IN_PLACE, class B, class Sink>
CAKE_DEVICE void multi_ordered_keep(const B& bufs, int stride, const int (&n)[NQ], unsigned todo,
                                    const uint64_t (&K)[NQ], uint64_t* scratch64, int (&kept)[NQ], Sink sink) {
    static_assert(R >= 1 && R <= 4, "four 16-bit round counts per uint64");
    const uint64_t ns = pack16(n);  // n[q] <= R * NT * 4 < 65536
    uint64_t v[NQ];
#pragma unroll
    for (int q = 0; q < NQ; ++q) v[q] = 0ull;
#pragma unroll (DSA_ROLL_QUERIES ? 1 : NQ)
    for (int q = 0; q < NQ; ++q) {
        if (!((todo >> q) & 1u)) continue;  // block-uniform
        const auto buf = buf_at(bufs, q, stride);
        const int nq = pick16(n, ns, q);
        const uint64_t Kq = pick(K, q);
        uint64_t vq = 0ull;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            uint64_t x[4];
            dsa_load4<NT, false>(x, buf, nq, r);  // a count: the keys' order is free
            int c = 0;
#pragma unroll
            for (int e = 0; e < 4; ++e) c += ((r * NT + dsa::sel_tid()) * 4 + e < nq && x[e] >= Kq) ? 1 : 0;
            vq |= (uint64_t)c << (16 * r);
        }
        put(v, q, vq);
    }
    uint64_t ex[NQ], tot[NQ];
    multi_scan_u64<NT, NQ>(v, scratch64, ex, tot);
#pragma unroll
    for (int q = 0; q < NQ; ++q) kept[q] = 0;
#pragma unroll
    for (int q = 0; q < NQ; ++q) {
        if (!((todo >> q) & 1u)) continue;  // block-uniform
        const auto buf = buf_at(bufs, q, stride);
        const int nq = pick(n, q);
        const uint64_t Kq = pick(K, q), exq = pick(ex, q), totq = pick(tot, q);
        uint64_t x[R][4];
#pragma unroll
        for (int r = 0; r < R; ++r) dsa_load4<NT>(x[r], buf, nq, r);
        if (IN_PLACE) dsa::sel_sync();
        int base = 0;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int pos = base + (int)((exq >> (16 * r)) & 0xffffull);
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if ((r * NT + dsa::sel_tid()) * 4 + e < nq && x[r][e] >= Kq) sink(q, pos++, x[r][e]);
            base += (int)((totq >> (16 * r)) & 0xffffull);
        }
        put(kept, q, base);
    }
}
