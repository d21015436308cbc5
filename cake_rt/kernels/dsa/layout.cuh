// DSA indexer program configuration, work units and the shared-memory layout.
//
// One program per (architecture, H, D): the host (cake_rt/ops/dsa.py, DsaConfig) passes
//   DSA_H     heads, any multiple of 8 from 8 to 128
//   DSA_D     head dim, 64 or 128
//   DSA_BQ    queries per block (BQ * H <= 128 (query, head) pairs; 256 on the wgmma loop: two product passes)
//   DSA_TILE  keys per tile (128; 64 on small-shared-memory parts, mma.sync only)
//   DSA_CAP   candidate capacity per query (a multiple of 256, <= 4096: the register selection's reach)
//   DSA_WGMMA 1 on sm_90a (warp-specialized wgmma tile loop), else the mma.sync tile loop
//   DSA_CB    queries per joint compaction (wgmma, BQ <= 4; 1: query by query): CB histograms of 2048 bins
//   DSA_WINDOWS 1 where a unit spans more than one 65,536-key window (select.cuh WinView); 0: every unit fits one, and
//             the windows' code is compiled out
//   DSA_RFLOOR 1 (wgmma, one window) where a one-query split part has RFLOOR_TILES tiles or more: such a part raises its
//             floor from its block's histogram part of the way through (selection.cuh raise_split_floor); 0: the code
//             is compiled out, so the programs of calls without such parts are not touched by it
// None of them changes the float32 operations of a score (see the head sum in tile_common.cuh).
#pragma once
#include "../common/types.cuh"

#ifndef DSA_H
#define DSA_H 32
#endif
#ifndef DSA_D
#define DSA_D 128
#endif
#ifndef DSA_BQ
#define DSA_BQ (128 / DSA_H)
#endif
#ifndef DSA_TILE
#define DSA_TILE 128
#endif
#ifndef DSA_CAP
#define DSA_CAP 4096
#endif
#if defined(DSA_WGMMA) && DSA_WGMMA
#define DSA_USE_WGMMA 1
#else
#define DSA_USE_WGMMA 0
#endif
#ifndef DSA_CB
#define DSA_CB 1
#endif
#ifndef DSA_WINDOWS
#define DSA_WINDOWS 0
#endif
#ifndef DSA_RFLOOR
#define DSA_RFLOOR 0
#endif

namespace dsa {

constexpr int H = DSA_H, D = DSA_D, BQ = DSA_BQ, TILE = DSA_TILE, CAP = DSA_CAP;
constexpr bool WG = DSA_USE_WGMMA;
// NT threads run the selection (every routine of select.cuh / selection.cuh / merge.cuh): the whole block
// on the mma.sync loop; on the wgmma loop the block is warp-specialized, threads [0, NT) compute score tiles
// (two warpgroups: key copies, wgmma, head sum) and threads [NT, 2 NT) select (appends, compactions, the
// final selection, the merge), the two meeting on a ring of score tiles guarded by named barriers.
constexpr int NT = 256, NWARPS = NT / 32;
constexpr int BLOCK = WG ? 2 * NT : NT;    // threads per block
constexpr int SEL0 = WG ? NT : 0;         // first selection thread
constexpr int RING = WG ? 4 : 1;          // score tiles between the product and the selection
constexpr int PAIRS = 128;                // (query, head) columns of one product pass, zero-padded: the widest N
// wgmma: a block of more than PAIRS pairs (H = 64: four queries) scores a key tile in two passes of PAIRS columns,
// so the tile's fixed costs (its copies, slot handoffs, turns) are paid once for twice the pairs; its q takes the
// room of the second key buffer (KBUF: the key rows of tile it + 1 are copied once tile it's last pass has read them).
constexpr int QPASS = WG ? (BQ * H + PAIRS - 1) / PAIRS : 1;
constexpr int KBUF = QPASS == 2 ? 1 : 2;  // key tile buffers
constexpr int HB = H / 8;                 // 8-column accumulator blocks per query
constexpr int KS = D / 16;                // k-steps of 16
constexpr int ROWB = D * 2;               // bytes per bf16 row
constexpr int CHUNKS = D / 8;             // 16-byte chunks per row
constexpr int QROWS = WG ? PAIRS * QPASS : (BQ * H + 15) / 16 * 16;  // q rows staged (zero rows pad the product)
constexpr int MMA_WARPS = TILE / 16;      // mma.sync loop: warps computing 16 keys each
constexpr int CB = DSA_CB;                // queries per joint compaction (their histograms: Layout::chist)
constexpr int HIST_WORDS = 2048;
constexpr int REG_R = (CAP + NT * 4 - 1) / (NT * 4);  // register-selection rounds of 4 keys per thread
constexpr int MERGE_E = 16;               // keys per thread per merge append round (loads in flight)
constexpr int MERGE_ROUND = NT * MERGE_E;
constexpr int WIN_KEYS = 65536;           // keys of a window: a candidate's id is its 16-bit offset in its window
constexpr int MAX_WIN = 16;               // windows of a unit (select.cuh CandView)
constexpr int MAX_SPAN = MAX_WIN * WIN_KEYS;  // keys of a unit (1,048,576; a longer block is split into parts)
constexpr bool WINDOWS = DSA_WINDOWS != 0;   // units of several windows (else at most WIN_KEYS keys each)
constexpr bool RUNNING_FLOOR = DSA_RFLOOR != 0;  // split parts' running floor (ops/dsa.py DsaPlan.running_floor)
constexpr int RFLOOR_TILES = 10;          // the fewest tiles of a part that raises its floor (ops/dsa.py mirrors it)
constexpr int CAND_BYTES = CAP * 6 + 2 * MAX_WIN * 4;  // a query's candidate block (select.cuh CandView)

static_assert(H % 8 == 0 && H >= 8 && H <= 128, "H: a multiple of 8 from 8 to 128");
static_assert(D == 64 || D == 128, "D must be 64 or 128");
static_assert(BQ >= 1 && BQ <= 16 && BQ * H <= PAIRS * (WG ? 2 : 1),
              "a block holds at most 128 (query, head) pairs, 256 on wgmma");
static_assert(QPASS == 1 || (BQ * H == 2 * PAIRS && BQ <= 4), "two passes: two full passes of at most 4 queries");
static_assert(!WG || TILE == 128, "wgmma loop: 2 warpgroups x 64 keys");
static_assert(TILE % 16 == 0 && MMA_WARPS <= NWARPS, "mma.sync loop: 16 keys per warp");
static_assert(CAP % NT == 0 && CAP >= 2 * TILE && REG_R <= 4, "candidate capacity");
static_assert(CB >= 1 && CB <= BQ && CB <= 4 && (CB == 1 || WG), "joint compactions: wgmma, up to 4 queries");

// Shared memory, byte offsets from a 1024-byte aligned base (wgmma operands need it). The merge reuses
// everything from `kt` to `sc` as one candidate buffer (no copy or product runs while it merges).
struct Layout {
    static constexpr int kt = 0;                                   // KBUF key tiles [TILE x D] bf16, swizzled
    static constexpr int q = kt + KBUF * TILE * ROWB;              // q of the unit [QROWS x D] bf16, swizzled
    // Candidates in ascending id, a block of CAND_BYTES a query: CAP keys (the score's order key, u32), CAP ids (u16
    // offsets in their 65,536-key window of the unit), the window state (select.cuh CandView).
    static constexpr int cand = q + QROWS * ROWB;
    static constexpr int sc = cand + BQ * CAND_BYTES;              // score tiles [RING][BQ][TILE] f32
    static constexpr int wts = sc + RING * BQ * TILE * 4;          // wgmma: the unit's weights [BQ * H] f32
    // A joint compaction's histograms [CB][2048] u32: CB - 1 here, the last one the radix histogram's.
    static constexpr int chist = wts + (WG ? QROWS * 4 : 0);
    static constexpr int hist = chist + (CB - 1) * 2048 * 4;       // radix histogram [2048] u32
    static constexpr int st = hist + HIST_WORDS * 4;               // DsaSelState
    static constexpr int scratch = st + 64;                        // block-scan scratch (32 ints)
    static constexpr int flags = scratch + 128;                    // ticket slot, last-arrival flag
    static constexpr int kfull = flags + 8;                        // wgmma: FULL mbarriers of the key rows [2]
    static constexpr int empty = flags + 32;                       // wgmma: EMPTY mbarriers of the score slots [RING]
    static constexpr int lo = flags + 64;                          // per-query floors [16] uint64
    static constexpr int cnt = lo + 16 * 8;                        // per-query counts [16] int
    static constexpr int pstart = cnt + 16 * 4;                    // merge: flattened part starts [NT + 1];
                                                                   // a joint compaction's states and scan words
    static constexpr int bytes = pstart + (NT + 4) * 4;
    static constexpr int merge_keys = sc / 8;                      // merge buffer capacity (kt .. sc)
};
static_assert(Layout::q % 1024 == 0 && Layout::cand % 16 == 0 && Layout::sc % 16 == 0, "alignments");
static_assert(Layout::chist % 16 == 0 && Layout::hist % 16 == 0, "the histograms' 16-byte loads (owned_bins_sum)");
static_assert(Layout::pstart % 16 == 0 && 384 <= (NT + 4) * 4, "a joint compaction's states and scan words");
static_assert(Layout::kfull % 8 == 0 && Layout::kfull + 2 * 8 <= Layout::empty, "the key rows' mbarriers");
static_assert(Layout::empty % 8 == 0 && Layout::empty + RING * 8 <= Layout::lo, "the mbarriers");

// A work unit: queries [q0, q0 + nq) of one segment x keys [klo, khi). Split blocks (slot >= 0) write a
// part (their <= topk candidates per query) to the workspace; the last of the block's `nparts` units to
// finish merges the parts `slot0 ..` (mblock: the block's record in the arrival words).
constexpr int UNIT_INTS = 12;
// A split block's record in the arrival words (zero at launch, left at zero; the host sizes them,
// cake_rt/ops/dsa.py DsaPlan.ticket_words): its arrival count, 3 spare words, then per query a histogram
// of the top 11 key bits of every key its parts appended (integer atomics, any order: the same counts; the bins
// in selection.cuh split_bin_word's order).
constexpr int SPLIT_HIST_OFF = 4;
constexpr int SPLIT_WORDS = SPLIT_HIST_OFF + BQ * HIST_WORDS;
struct Unit {
    int q0, nq, ks0, lenk, pbase, klo, khi, slot, mblock, slot0, nparts;
};

// Named barriers of the wgmma loop: the selection threads (BAR_SEL; the block on the mma.sync loop), the
// product threads (BAR_MMA), everyone at a unit's end (BAR_UNIT), a score slot written (BAR_FULL + slot). A slot's
// release (EMPTY) and a product warpgroup's key rows landed (Layout::kfull) are mbarriers: each product warpgroup
// waits for them on its own schedule.
enum : int { BAR_SEL = 1, BAR_MMA = 2, BAR_UNIT = 3, BAR_FULL = 4 };
static_assert(BAR_FULL + RING <= 16, "16 hardware barriers");
CAKE_DEVICE void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
CAKE_DEVICE void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
// For a barrier the roles reach from different instructions (bar.sync promises one instruction per generation).
CAKE_DEVICE void named_sync_unaligned(int id, int n) { asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
CAKE_DEVICE int sel_tid() { return (int)threadIdx.x - SEL0; }
CAKE_DEVICE void sel_sync() {
    if constexpr (WG) named_sync(BAR_SEL, NT);
    else __syncthreads();
}

CAKE_DEVICE Unit load_unit(const int* units, int u) {
    const int* p = units + (size_t)u * UNIT_INTS;
    Unit r;
    r.q0 = p[0]; r.nq = p[1]; r.ks0 = p[2]; r.lenk = p[3];
    r.pbase = p[4]; r.klo = p[5]; r.khi = p[6]; r.slot = p[7];
    r.mblock = p[8]; r.slot0 = p[9]; r.nparts = p[10];
    return r;
}

// Exclusive end of the keys query t sees (global ids; its first key is ks0).
CAKE_DEVICE int visible_end(const Unit& u, int t, int causal) {
    if (!causal) return u.ks0 + u.lenk;
    const long long p = (long long)u.pbase + t;  // causal position of t in its segment's keys
    long long n = p + 1;
    if (n > u.lenk) n = u.lenk;
    if (n < 0) n = 0;
    return u.ks0 + (int)n;
}

// Byte offset of 16-byte chunk c of row r in a tile of `rows` rows. mma.sync: whole rows with the chunk
// XOR-swizzled (conflict-free ldmatrix). wgmma: the 128-byte-swizzle K-major layout of common/wgmma.cuh,
// one [rows x 64-element] block per 64 columns of D.
CAKE_DEVICE int swz_rows(int r, int c, int rows) {
    if (WG) return (c >> 3) * rows * 128 + (r * 128 + (((c & 7) ^ (r & 7)) << 4));
    return r * ROWB + ((c ^ (r & 7)) << 4);
}

}  // namespace dsa
