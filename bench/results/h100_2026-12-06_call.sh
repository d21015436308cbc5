# h100_2026-12-06: run bash .dev/next/call2.sh (this file), carry [".dev/record", ".dev/next", ".peers"]; .dev/record staged by
# RECORD=bench/results/h200_2026-12-04b OPS=dsa scripts/record-prepare on 732b1bf. The machine lent was an H100 (the call named no kind).
#!/usr/bin/env bash
# A shorter call (device budget ~600 s after failed starts): the DSA record's bench (clock readings), the new head-count
# GPU tests, the placement probe of A3, the SSD host pieces.
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins PYTHONPATH=$PWD:$PWD/.peers PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
export CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH)
python3 -m pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-04b timeout 200 bash scripts/device-bench.sh > /dev/null 2>&1
cat "$OUT/b/bench.log"; echo "[$((SECONDS-t0)) s] bench done"
timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/dsa/test_dsa_gpu.py -k "any_head_count" > $OUT/htests.txt 2>&1
tail -n 5 $OUT/htests.txt; echo "[$((SECONDS-t0)) s] tests done"
{ echo "== runners 6"; timeout 40 python3 scripts/dsa-placement A3 --heads 32 --runners 6 2>&1
  echo "== offsets"; timeout 40 python3 scripts/dsa-placement A3 --heads 32 --offsets 0,256,4096,65536,1048576,2097152 2>&1
} > $OUT/placement.txt
tail -n 30 $OUT/placement.txt; echo "[$((SECONDS-t0)) s] placement done"
{ timeout 30 python3 .dev/next/probe_alloc.py 2>&1
  echo "== host_time --only ssd --pieces"; timeout 40 python3 scripts/host_time.py --only ssd --pieces --calls 1000 2>&1
} > $OUT/host.txt
head -n 40 $OUT/host.txt; echo "[$((SECONDS-t0)) s] end"
