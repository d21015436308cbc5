#### .dev/h54/call5.sh (main / pw on the A rows, the merge run twice; ROWS and TRACE_ROWS choose the rows; pw's verification a second call: bash .dev/h53/verify_pw.sh)
# 54th session, call 5: main / pw on the A rows in one process a row (records spread over their pages), then main's
# merge run twice (.dev/tail2's programs, H = 32). ROWS (ROW:H:record offsets) and TRACE_ROWS choose the rows: the
# defaults take ~150 s of command; ROWS="A3:32:16 A2:32:8" TRACE_ROWS=A3 ~100 s. pw's verification is its own call
# (verify_pw.sh).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
K=$PWD/.dev/h53/k
T=main=$K/main/cake_rt/kernels,pw=$K/pw/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    [ $SECONDS -gt 80 ] && { echo "time: stop before $r"; break; }
    echo "== $row H$h"
    timeout 50 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > $OUT/ab5_${row}_${h}.txt 2>&1
    grep -E "^tree|outputs|records left|Error" $OUT/ab5_${row}_${h}.txt; echo "[$SECONDS s]"
done
)
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/tail2/cubins PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
timeout 100 python3 scripts/dsa-tail-trace ${TRACE_ROWS:-A3 A1 A2} --H 32 --runs 3 --merge-twice > $OUT/tail2_trace.txt 2>&1
)
grep -E "^A|merge" $OUT/tail2_trace.txt | grep -v "keys in the\|counted\|digits\|streamed"; echo "[$SECONDS s]"
cd $OUT && tar czf ab5.tgz --exclude=ab5.tgz . && find . -type f ! -name ab5.tgz -delete; ls -la
#### .dev/h54/rec_pw.sh (on an H200 only: the DSA bench of pw against 12-06b, after its verification)
#!/usr/bin/env bash
# 54th session: the DSA bench of arm pw (branch pw 4d5da9e: main 4879622's host with pw's kernels) on the targets' card
# only, compared with 12-06b; pw's verification ran in call4 (verify_pw.sh). Carry .dev/h53/wrec.txz, .dev/h53/k, .dev/h54.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
if [ ! -d .dev/h53/wrec/cubins ]; then mkdir -p .dev/h53/wrec && tar -xJf .dev/h53/wrec.txz -C .dev/h53/wrec || exit 1; fi
rm -rf cake_rt/kernels && cp -r .dev/h53/k/pw/cake_rt/kernels cake_rt/kernels
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/wrec/cubins CAKE_RT_GIT_HASH=4d5da9e PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout 420 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"
