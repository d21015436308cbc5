#### .dev/h53/call1.sh (the first call: the trace with ad05bdc's stamps, each a global read)
# 53rd session, call 1: the record of main if the card is an H200, then the stamped tail trace.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
case "$name" in *H200*) timeout 450 bash .dev/record/record.sh > $OUT/record.txt 2>&1; tail -60 $OUT/record.txt ;; esac
bash .dev/tail/call.sh
cd $OUT && tar czf rec.tgz --exclude=rec.tgz . 2>/dev/null; ls
#### .dev/h53/call3.sh
# 53rd session, call 3: on an H200 the record of main first; then the stamped tail trace of main (ad05bdc's programs,
# stamps without a global read); then main / pk / wv / pkwv on the A rows and (time allowing) pkwv verified.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
case "$name" in
  *H200*) timeout 450 bash .dev/record/record.sh > $OUT/record.txt 2>&1; tail -70 $OUT/record.txt
          export SKIP_VERIFY=1 AB_END=$((530 - SECONDS - 20)) ;;
esac
echo "[record done at $SECONDS s]"
bash .dev/tail/call.sh > /dev/null 2>&1
grep -v "^  merge: \(keys in\|counted\|digits\|streamed\)\|tiles a unit\|part: " $OUT/tail_trace.txt
echo "[trace done at $SECONDS s]"
bash .dev/h53/call2.sh
#### .dev/h53/call2.sh
# 53rd session, call 2: main against pk (a part keeps its candidates from registers straight to the workspace), wv (the
# merge's row written 16 bytes a lane) and pkwv (both), the A rows in one process a row (scripts/dsa-placement --trees:
# the runners' split records spread over their pages, as scripts/dsa-trees), then pkwv verified.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1
python3 -m pip install --no-deps --no-build-isolation -e . > /dev/null 2>&1
K=$PWD/.dev/h53/k
T=main=$K/main/cake_rt/kernels,pk=$K/pk/cake_rt/kernels,wv=$K/wv/cake_rt/kernels,pkwv=$K/pkwv/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in A3:32:16 A3:64:8 A2:32:8 A1:32:8 A2:64:8 A1:64:8; do
    IFS=: read row h n <<< "$r"
    [ $SECONDS -gt ${AB_END:-270} ] && { echo "time: stop before $r"; break; }
    echo "== $row H$h"
    timeout 90 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > $OUT/ab_${row}_$h.txt 2>&1
    grep -E "^tree|outputs|records left|Error" $OUT/ab_${row}_$h.txt; echo "[$SECONDS s]"
done
)
[ -n "$SKIP_VERIFY" ] || bash .dev/h53/verify_pkwv.sh
cd $OUT && tar czf ab.tgz --exclude=ab.tgz . ; ls
#### .dev/h53/verify_pkwv.sh
# pkwv (pk + wv) verified: DSA fingerprints against 12-06b, the GPU suite, the DSA kernels under compute-sanitizer.
# Its kernels replace this copy's cake_rt/kernels (the host is main's).
if [ ! -d .dev/h53/vrec/cubins ]; then mkdir -p .dev/h53/vrec && tar -xJf .dev/h53/vrec.txz -C .dev/h53/vrec || exit 1; fi
rm -rf cake_rt/kernels && cp -r .dev/h53/k/pkwv/cake_rt/kernels cake_rt/kernels
export CAKE_RT_CACHE_DIR=$PWD/.dev/h53/vrec/cubins PYTHONPATH=$PWD PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
timeout 40 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1
echo "dsa fingerprints rc=$?: $(grep -vc '^#' $OUT/fp_dsa.txt) lines, not in 12-06b's: $(grep -v '^#' $OUT/fp_dsa.txt | awk 'NR==FNR{a[$0];next} !($0 in a)' bench/results/h200_2026-12-06b_fingerprints.txt - | wc -l)"
timeout 170 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile \
    --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py \
    --ignore=tests/dsa/test_dsa_tail_trace_cpu.py --ignore=tests/dsa/test_dsa_product_trace_cpu.py tests > $OUT/suite.log 2>&1
echo "suite rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/suite.log | tail -8
OUT=$OUT timeout 80 bash scripts/sanitize dsa 2>&1 | grep -E "rc=|SUMMARY|equal"
