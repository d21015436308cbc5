#### .dev/h53/call4.sh
# 53rd session, call 4: main / pw (a part's keep writes its workspace row from registers, through the merge's own
# select_keep) / pk again, the A rows in one process a row (records spread over their pages), one pass; then pw
# verified when it is faster than main on A3 and A2 at H = 32 in the first pass; first the merge run twice on main
# (.dev/tail2), between them ncu of A3 on main (.dev/h53/ncu/ncu.sh): the merge's instruction fetch.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
bash .dev/tail2/call.sh > /dev/null 2>&1  # main's merge run twice (scripts/dsa-tail-trace --merge-twice), H = 32
grep -E "^A|merge" $OUT/tail2_trace.txt | grep -v "keys in the\|counted\|digits\|streamed"
K=$PWD/.dev/h53/k
T=main=$K/main/cake_rt/kernels,pw=$K/pw/cake_rt/kernels,pk=$K/pk/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in A3:32:16:1 A2:32:8:1 A1:32:8:1 A3:64:8:1 A2:64:8:1 A1:64:8:1; do
    IFS=: read row h n p <<< "$r"
    [ $SECONDS -gt 95 ] && { echo "time: stop before $r"; break; }
    echo "== $row H$h (pass $p)"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > $OUT/ab4_${row}_${h}_$p.txt 2>&1
    grep -E "^tree|outputs|records left|Error" $OUT/ab4_${row}_${h}_$p.txt; echo "[$SECONDS s]"
done
)
bash .dev/h53/ncu/ncu.sh  # main's kernels: before verify_pw.sh puts pw's in place
med() { grep "^tree $2:" $OUT/ab4_$1_1.txt | sed 's/.*medians \([0-9.]*\) us.*/\1/'; }
win=$(python3 -c "import sys; a=[float(x) for x in sys.argv[1:]]; print(int(a[1] < a[0] and a[3] < a[2]))" $(med A3_32 main) $(med A3_32 pw) $(med A2_32 main) $(med A2_32 pw) 2>/dev/null)
echo "pw faster on A3 and A2 (H = 32): ${win:-?}"
[ "$win" = 1 ] && bash .dev/h53/verify_pw.sh
cd $OUT && tar czf ab4.tgz --exclude=ab4.tgz . && find . -type f ! -name ab4.tgz -delete; ls -la
#### .dev/h53/verify_pw.sh
# pw (a part keeps straight to its workspace row through select_keep) verified: DSA fingerprints against 12-06b, the DSA GPU tests, the DSA kernels under compute-sanitizer.
# Its kernels replace this copy's cake_rt/kernels (the host is main's).
if [ ! -d .dev/h53/wrec/cubins ]; then mkdir -p .dev/h53/wrec && tar -xJf .dev/h53/wrec.txz -C .dev/h53/wrec || exit 1; fi
rm -rf cake_rt/kernels && cp -r .dev/h53/k/pw/cake_rt/kernels cake_rt/kernels
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/wrec/cubins PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
timeout 40 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "dsa fingerprints rc=$?: $(grep -vc '^#' $OUT/fp_dsa.txt) lines, not in 12-06b's: $(grep -v '^#' $OUT/fp_dsa.txt | awk 'NR==FNR{a[$0];next} !($0 in a)' bench/results/h200_2026-12-06b_fingerprints.txt - | wc -l)"
timeout 150 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/dsa/test_dsa_tail_trace_cpu.py --ignore=tests/dsa/test_dsa_product_trace_cpu.py tests/dsa tests/acceptance/test_dsa_contract_gpu.py > $OUT/suite.log 2>&1
echo "suite rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/suite.log | tail -8
OUT=$OUT timeout 80 bash scripts/sanitize dsa 2>&1 | grep -E "rc=|SUMMARY|equal"
#### .dev/h53/ncu/ncu.sh
# ncu of A3 at H = 32 on main's kernels (lineinfo programs of .dev/h53/ncu/cubins): SpeedOfLight, WarpStateStats and the
# source counters of 3 launches (ncu flushes the caches before each, as the bench flushes L2), then the per-instruction
# page as CSV: where the merging CTAs' warps stall for instructions ("no instruction") against their data.
export CAKE_RT_LINEINFO=1 CAKE_RT_CACHE_DIR=$PWD/.dev/h53/ncu/cubins CAKE_RT_QUIET=1 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 150 ncu --clock-control none -k regex:dsa_scan -s 2 -c 3 --section SpeedOfLight --section WarpStateStats \
    --section SourceCounters -o $OUT/a3_ncu python3 scripts/dsa-row A3 --heads 32 --calls 6 > $OUT/a3_ncu.log 2>&1
echo "ncu rc=$?"; tail -3 $OUT/a3_ncu.log
timeout 60 ncu -i $OUT/a3_ncu.ncu-rep --page details > $OUT/a3_ncu_details.txt 2>&1
grep -E "Duration|No Instruction|Warp Cycles Per Issued|Stall" $OUT/a3_ncu_details.txt | head -20
timeout 90 ncu -i $OUT/a3_ncu.ncu-rep --page source --csv --print-source sass > $OUT/a3_ncu_sass.csv 2>&1
echo "sass csv: $(wc -l < $OUT/a3_ncu_sass.csv) lines"; gzip -f $OUT/a3_ncu_sass.csv
rm -f $OUT/a3_ncu.ncu-rep  # (large: the CSV and the details page are what come back)
