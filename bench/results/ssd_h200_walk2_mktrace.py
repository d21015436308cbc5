"""Writes the walk trace (clock stamps) into a copy of the current ssd_combined.cu: python3 mktrace.py SRC DST."""
import sys, pathlib
t = pathlib.Path(sys.argv[1]).read_text()
def rep(a, b):
    global t
    assert t.count(a) == 1, a[:80]
    t = t.replace(a, b)
rep('extern "C" __global__ void __launch_bounds__(SSD_CTA_THREADS, SSD_MINB) ssd_chunkpar(',
'''#if SSD_WALK
__device__ unsigned long long walk_tr[264 * 160 * 12];
__device__ unsigned long long tile_tr[264 * 8];
__device__ __forceinline__ unsigned long long wclk() { unsigned long long v; asm volatile("mov.u64 %0, %%clock64;" : "=l"(v)::"memory"); return v; }
__device__ __forceinline__ unsigned long long wgt() { unsigned long long v; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)::"memory"); return v; }
#define WST(cc, k) do { if (threadIdx.x == 0 && (cc) < 160) walk_tr[((long long)blockIdx.x * 160 + (cc)) * 12 + (k)] = wclk(); } while (0)
#define PST(cc, k) do { if (ptid == 0 && (cc) < 160) walk_tr[((long long)blockIdx.x * 160 + (cc)) * 12 + (k)] = wclk(); } while (0)
#endif
extern "C" __global__ void __launch_bounds__(SSD_CTA_THREADS, SSD_MINB) ssd_chunkpar(''')
rep('''                    if (ptid == 0) walk_publish(s, words + blockIdx.x);
                }''', '''                    PST(cc, 10);
                    if (ptid == 0) walk_publish(s, words + blockIdx.x);
                }''')
rep('''                    for (int j = 0; j < nsub; ++j) {  // produce_state''', '''                    PST(cc, 9);
                    for (int j = 0; j < nsub; ++j) {  // produce_state''')
rep('''                    if (it < ntiles) wait_at_least(w, need);
''', '''                    if (it < ntiles) { const unsigned long long q0 = wclk(); wait_at_least(w, need); tile_tr[blockIdx.x * 8 + 6] += wclk() - q0; }
''')
rep('''                if (cc >= ring) {''', '''                WST(cc, 0);
                if (cc >= ring) {''')
rep('''                walk_store_prev<NB1>(''', '''                WST(cc, 1);
                walk_store_prev<NB1>(''')
i = t.index('walk_store_prev<NB1>(S,'); j = t.index('\n', i)
t = t[:j + 1] + '                WST(cc, 2);\n' + t[j + 1:]
i = t.index('// S <- fma(decay, S, S_loc)'); t = t[:i] + 'WST(cc, 5);\n                ' + t[i:]
i = t.index('ssd_chunk_state<1, NBUF, NB1, 1>(a, s', t.index('WST(cc, 5)')); j = t.index('\n', i)
t = t[:j + 1] + '                WST(cc, 6);\n' + t[j + 1:]
rep('''        grid_barrier(barrier, GRID_THREADS);
        if ((int)blockIdx.x < items) {  // the walk''', '''        grid_barrier(barrier, GRID_THREADS);
        if (threadIdx.x == 0) tile_tr[blockIdx.x * 8 + 7] = wgt();
        if ((int)blockIdx.x < items) {  // the walk''')
rep('''        // phase 3's tiles, as the producer hands them over
''', '''        // phase 3's tiles, as the producer hands them over
        if (threadIdx.x == 0) { tile_tr[blockIdx.x * 8 + 0] = wclk(); tile_tr[blockIdx.x * 8 + 2] = wgt(); }
''')
rep('''            mbarrier_wait_parity(s.bar + BAR_TILE_FULL, k & 1u);
''', '''            { const unsigned long long q0 = wclk(); mbarrier_wait_parity(s.bar + BAR_TILE_FULL, k & 1u); if (threadIdx.x == 0) tile_tr[blockIdx.x * 8 + 5] += wclk() - q0; }
''')
rep('''            if (it >= ntiles) break;
            const ChunkTile t = chunk_tile<1>(a, it, units, 0);''', '''            if (it >= ntiles) { if (threadIdx.x == 0) { tile_tr[blockIdx.x * 8 + 1] = wclk(); tile_tr[blockIdx.x * 8 + 3] = wgt(); tile_tr[blockIdx.x * 8 + 4] = k; } break; }
            const ChunkTile t = chunk_tile<1>(a, it, units, 0);''')
pathlib.Path(sys.argv[2]).write_text(t)
