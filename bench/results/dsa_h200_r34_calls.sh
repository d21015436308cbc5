# slack arms: compact_slack (CAP - TILE - topk) / 2 (a), / 5 (b) against main 03d845a (/ 3); the diffs are one line each (selection.cuh compact_slack)
# slack: scripts/ab-kit's call (prepared 2026-12-02 15:53 UTC). Trees (name rev sha):
#   base main 03d845a
#   a main+.dev/slack2.diff 03d845a+slack2.diff
#   b main+.dev/slack5.diff 03d845a+slack5.diff
# run command "bash .dev/slack/call.sh", carry [".dev/slack"], timeout_s 350
python3 scripts/ab-kit call .dev/slack --op dsa --end 330 --order base,a,b,b,a,base --rows S1,S2,C1,Z2cp,Z3cp,A3 --heads 32,64 --checks ""

# count_apart arm (dsa41 5d8f6fd = main 270cb4a + bench/results/dsa_h200_r34_count_apart_arm.diff): a one-query unit's split count on warps 1-4
# a41: scripts/ab-kit's call (prepared 2026-12-02 16:11 UTC). Trees (name rev sha):
#   base main 270cb4a
#   a dsa41 5d8f6fd
# run command "bash .dev/a41/call.sh", carry [".dev/a41"], timeout_s 320
python3 scripts/ab-kit call .dev/a41 --op dsa --end 300 --order base,a,a,base --rows A1,A2,A3,S1,C1 --heads 32,64 --checks a

# part_count arm (dsa42 245ca69 = main 7d13cdb + bench/results/dsa_h200_r34_part_count_arm.diff): a one-query part counts in shared memory, one flush at its end; then the traces (--first-units) of both trees
python3 scripts/ab-kit call .dev/a42 --op dsa --end 230 --order base,a,a,base --rows A1,A2,A3,S1 --heads 32,64 --checks a
bash .dev/a42/call.sh
for t in base a; do (cd .dev/a42/$t && CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 timeout 60 python3 scripts/dsa-product-trace A3 A1 --H 32,64 --runs 3 --first-units > $OUT/trace_$t.txt 2>&1; echo "trace $t rc=$?"); done
grep -E "^A|sel: (compaction|append|period)|wg0: (period|key rows)" $OUT/trace_a.txt | head -40

# count_parity arm (dsa43 a07ca0b = main 4420b34 + bench/results/dsa_h200_r34_count_parity_arm.diff): counts by tile parity, no barrier in compact_full when nothing is compacted
python3 scripts/ab-kit call .dev/a43 --op dsa --end 330 --order base,a,a,base --rows S1,S2,C1,Z2cp,Z3cp,A3 --heads 32,64 --checks a
