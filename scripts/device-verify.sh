#!/usr/bin/env bash
# One call on a GPU machine that verifies everything (the recorded benchmark is scripts/device-bench.sh):
#   1. the self-test and the programs compiled ahead into the cache (scripts/prewarm; a warm $CAKE_RT_CACHE_DIR
#      makes this a lookup);
#   2. the output fingerprints (scripts/dsa-fingerprint, scripts/ssd-fingerprint), compared with a recorded file
#      when FINGERPRINTS names one;
#   3. the whole test suite but the CPU-only compile and trace-patch tests, GPU tests included (JUnit + log), the
#      compat tests against mamba_ssm when the peers are on PYTHONPATH;
#   4. every kernel under compute-sanitizer (scripts/sanitize);
#   5. host time per call (scripts/host_time.py, real launches) and the cold compile time of the bench shapes'
#      programs (scripts/compile-time).
# Usage (repo root): [OUT=dir] [FINGERPRINTS=bench/results/NAME_fingerprints.txt] bash scripts/device-verify.sh
# (carry .peers for the peer comparisons). Leaves $OUT/verify.log (the summary) and $OUT/verify.tgz (every log, the
# fingerprints, the JUnit file).
set -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=$here:$here/.peers PYTHONUNBUFFERED=1 CAKE_RT_QUIET=${CAKE_RT_QUIET:-1}
OUT=${OUT:-$here/device-out}; mkdir -p "$OUT"
LOG=$OUT/verify.log
# The device tool brings back at most 8 files from $OUT: at the start of each step the files of the steps before it go
# into one archive, verify.tgz (the summary, verify.log, beside it), so that whenever a limit stops the call only the
# running step's files lie loose beside the two.
STAGE=$(mktemp -d)
pack() {
    find "$OUT" -mindepth 1 -maxdepth 1 ! -name verify.tgz ! -name verify.log ! -name bench.tgz ! -name bench.log \
        -exec mv -f -t "$STAGE" {} +
    tar czf "$STAGE.tgz" -C "$STAGE" . && mv -f "$STAGE.tgz" "$OUT/verify.tgz"
}
say() { pack; echo "[$SECONDS s] $*" | tee -a "$LOG"; }
trap 'say "stopped by a signal"; exit 143' TERM
cd "$here"
say "info"; python3 -m cake_rt info >> "$LOG" 2>&1
say "self-test"; timeout 60 python3 -m cake_rt > "$OUT/selftest.log" 2>&1; echo "self-test rc=$?" | tee -a "$LOG"
target=$(python3 -c 'from cake_rt.launch.arch import device_info; print(device_info().target)')
say "prewarm"; timeout 180 python3 scripts/prewarm "$target" > "$OUT/prewarm.log" 2>&1; tail -1 "$OUT/prewarm.log" | tee -a "$LOG"
say "fingerprints"
timeout 90 python3 scripts/dsa-fingerprint > "$OUT/fp_dsa.txt" 2>&1; echo "dsa fingerprints rc=$? lines=$(wc -l < "$OUT/fp_dsa.txt")" | tee -a "$LOG"
timeout 120 python3 scripts/ssd-fingerprint > "$OUT/fp_ssd.txt" 2>&1; echo "ssd fingerprints rc=$? lines=$(wc -l < "$OUT/fp_ssd.txt")" | tee -a "$LOG"
cat "$OUT/fp_dsa.txt" "$OUT/fp_ssd.txt" > "$OUT/fingerprints.txt"
if [ -n "${FINGERPRINTS:-}" ]; then
    # Every recorded line must come back; a case added since the record has no recorded line and is listed as new.
    old=$(mktemp); new=$(mktemp)
    grep -v "^#" "$FINGERPRINTS" | sort > "$old"; grep -v "^#" "$OUT/fingerprints.txt" | sort > "$new"
    comm -23 "$old" "$new" > "$OUT/fingerprints_diff.txt"; comm -13 "$old" "$new" > "$OUT/fingerprints_new.txt"
    if [ ! -s "$OUT/fingerprints_diff.txt" ]; then
        echo "fingerprints EQUAL to $FINGERPRINTS ($(wc -l < "$old") lines; $(wc -l < "$OUT/fingerprints_new.txt") new lines)" | tee -a "$LOG"
        tee -a "$LOG" < "$OUT/fingerprints_new.txt"
    else
        echo "fingerprints DIFFER from $FINGERPRINTS ($(wc -l < "$OUT/fingerprints_diff.txt") recorded lines not reproduced)" | tee -a "$LOG"
        head -20 "$OUT/fingerprints_diff.txt" | tee -a "$LOG"
        echo "this run's lines that differ or are new:" | tee -a "$LOG"; head -20 "$OUT/fingerprints_new.txt" | tee -a "$LOG"
    fi
fi
say "test suite"
# Five workers, one test file per worker (side-stream tests keep their file's order). The compile tests and the
# trace scripts' tests are CPU work (NVRTC reports and patched programs) and run in CI; here they would only spend
# device time.
timeout 400 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile --junitxml="$OUT/junit.xml" \
    --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py \
    --ignore=tests/dsa/test_dsa_tail_trace_cpu.py tests > "$OUT/suite.log" 2>&1
echo "suite rc=$?" >> "$OUT/suite.log"; grep -E "passed|failed|error|FAILED|ERROR|rc=" "$OUT/suite.log" | tail -25 | tee -a "$LOG"
say "compute-sanitizer"
OUT=$OUT timeout 300 bash scripts/sanitize all > "$OUT/sanitize.log" 2>&1; echo "sanitize rc=$?" >> "$OUT/sanitize.log"
grep -E "rc=|SUMMARY|equal" "$OUT/sanitize.log" | tee -a "$LOG"
say "host time"
timeout 60 python3 scripts/host_time.py --calls 500 --entry-costs > "$OUT/host_time.log" 2>&1; echo "host time rc=$?" | tee -a "$LOG"
grep -E "real launch" "$OUT/host_time.log" | tee -a "$LOG"
say "cold compile time (fresh texts)"
timeout 90 python3 scripts/compile-time --shapes dstate=128,chunk=256,headdim=64,dtype=bfloat16,dt_dtype=float32,state_dtype=float32 \
    --shapes dtype=float32,dt_dtype=float32,state_dtype=float32,headdim=128,dstate=128,chunk=256 --shapes heads=64,head_dim=128 \
    --shapes heads=32,head_dim=128 "$target" \
    > "$OUT/compile_time.log" 2>&1; echo "compile-time rc=$?" >> "$OUT/compile_time.log"; tee -a "$LOG" < "$OUT/compile_time.log"
say "done"
pack
