#!/usr/bin/env bash
# One call on a GPU machine that verifies everything (the recorded benchmark is scripts/device-bench.sh):
#   1. the programs compiled ahead into the cache (scripts/prewarm; skipped ones compile on first use);
#   2. the whole test suite but the compile tests, GPU tests included (JUnit + log), the compat tests against mamba_ssm when the
#      peers are on PYTHONPATH;
#   3. every kernel under compute-sanitizer (scripts/sanitize).
# Usage (repo root): [OUT=dir] bash scripts/device-verify.sh       (carry .peers for the peer comparisons)
# Leaves $OUT/verify.log (the summary) and $OUT/verify.tgz (every log, the JUnit file).
set -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=$here:$here/.peers PYTHONUNBUFFERED=1
OUT=${OUT:-$here/device-out}; mkdir -p "$OUT"
LOG=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a "$LOG"; }
cd "$here"
say "info"; python3 -m cake_rt info >> "$LOG" 2>&1
say "prewarm"; timeout 180 python3 scripts/prewarm "$(python3 -c 'from cake_rt.launch.arch import device_info; print(device_info().target)')" > "$OUT/prewarm.log" 2>&1; tail -1 "$OUT/prewarm.log" | tee -a "$LOG"
say "test suite"
# Four workers, one test file per worker (side-stream tests keep their file's order). The compile tests are CPU
# work (NVRTC's ptxas report of every program for two targets) and run in CI; here they would only spend device
# time.
timeout 400 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --junitxml="$OUT/junit.xml" \
    --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py tests > "$OUT/suite.log" 2>&1
echo "suite rc=$?" >> "$OUT/suite.log"; grep -E "passed|failed|error|FAILED|ERROR|rc=" "$OUT/suite.log" | tail -25 | tee -a "$LOG"
say "compute-sanitizer"
OUT=$OUT timeout 300 bash scripts/sanitize all 2>&1 | tee -a "$LOG"
say "done"
# The device tool brings back at most 8 files from $OUT: everything in one archive, the summary beside it.
pack=$(mktemp --suffix .tgz)
tar czf "$pack" -C "$OUT" --exclude ./verify.log . && mv "$pack" "$OUT/verify.tgz" \
    && find "$OUT" -type f ! -name verify.tgz ! -name verify.log -delete
