#!/usr/bin/env bash
# Final verification of the merged tree .dev/v3 (fourth session of 2026-11-30): self-test, SSD and DSA
# fingerprints, GPU suite (peers carried: the mamba_ssm accuracy comparison runs), the two once-flaky tests
# under -n 8, host time, device compile time, the DSA bench (side stream 1 SM), then the SSD bench
# (with peers when SSD_PEERS=1, else --no-peers). Run from the repo root of the copied tree.
set -o pipefail
R=$(pwd)
cd .dev/v3
export PYTHONPATH=$PWD:$R/.peers PYTHONUNBUFFERED=1 CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_GIT_HASH=$(cat GIT_HASH)
M=$OUT/verify.log
say() { echo "[$SECONDS s] $*" | tee -a $M; }
say "tree $(cat GIT_HASH)"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> $M
say "selftest"; timeout 40 python3 -m cake_rt >> $M 2>&1; echo "cake-rt rc=$?" >> $M
say "fingerprints"; timeout 60 python3 scripts/dsa-fingerprint > $OUT/fp_dsa.txt 2>&1; echo "dsa fp rc=$? lines=$(wc -l < $OUT/fp_dsa.txt)" >> $M
timeout 90 python3 scripts/ssd-fingerprint > $OUT/fp_ssd.txt 2>&1; echo "ssd fp rc=$? lines=$(wc -l < $OUT/fp_ssd.txt)" >> $M
say "GPU suite"
timeout 330 python3 -m pytest -q -ra -p no:cacheprovider -n 4 --dist loadfile --timeout=250 \
  --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
  tests > $OUT/suite.log 2>&1; echo "suite rc=$?" >> $OUT/suite.log
grep -E "passed|failed|FAILED|ERROR|rc=" $OUT/suite.log | tail -30 | tee -a $M
say "once-flaky modules under -n 8"
timeout 90 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_foundation_gpu.py tests/acceptance/test_dsa_contract_gpu.py \
  2>&1 | tail -3 >> $M
say "host time"; timeout 60 python3 scripts/host_time.py --calls 1000 --entry-costs --pieces >> $M 2>&1
say "device compile time (empty cache)"
CAKE_RT_CACHE_DIR=$(mktemp -d) timeout 120 python3 - >> $M 2>&1 <<'PY'
import time
from cake_rt.warmup import programs, parse_shapes
from cake_rt.launch.compile import get_kernel
for op, shapes in (("ssd", "dstate=128,chunk=256,headdim=64,dtype=bfloat16"), ("ssd", "dstate=128,chunk=128,headdim=64,dtype=float32"),
                   ("dsa", "heads=32,head_dim=128"), ("dsa", "heads=64,head_dim=128")):
    for _, path, defs in programs((op,), "sm_90a", parse_shapes([shapes]))[:2]:
        kern = "ssd_chunkpar" if op == "ssd" else "dsa_scan"
        t = time.perf_counter(); get_kernel(path, kern, defines=defs); dt = time.perf_counter() - t
        print(f"compile {op} {path} {sorted(defs.items())}: {dt:.2f} s")
PY
say "bench dsa"
timeout 150 python3 -m cake_rt bench dsa --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --side-stream 1 --time-limit 70 \
  --json $OUT/dsa.json --markdown $OUT/dsa.md --compare bench/results/dsa_h200_copies.json > $OUT/bench_dsa.log 2>&1
echo "bench dsa rc=$?" >> $M; grep -iE "S1|A1|side|held" $OUT/bench_dsa.log | cut -c1-220 | head -30 >> $M
if [ "${SSD_PEERS:-0}" = skip ]; then
  say "bench ssd: next call"
elif [ "${SSD_PEERS:-0}" = 1 ]; then
  say "bench ssd with peers"
  timeout 260 python3 -m cake_rt bench ssd --repeats 10 --warmup 2 --budget-s 0.6 --rows seed,m2-2.7b,m2-2.7b-b8,nemotron-h,short \
    --json $OUT/ssd.json > $OUT/bench_ssd.log 2>&1; echo "bench ssd rc=$?" >> $M
  timeout 120 python3 -m cake_rt bench ssd --repeats 10 --warmup 2 --budget-s 0.6 --rows varlen \
    --json $OUT/ssd_varlen.json >> $OUT/bench_ssd.log 2>&1; echo "bench ssd varlen rc=$?" >> $M
else
  say "bench ssd no peers"
  timeout 120 python3 -m cake_rt bench ssd --no-peers --repeats 10 --warmup 2 --budget-s 0.6 \
    --json $OUT/ssd.json > $OUT/bench_ssd.log 2>&1; echo "bench ssd rc=$?" >> $M
fi
say "done"
tail -120 $M
