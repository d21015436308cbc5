# dsa-tail-trace of the split-tail rows (staged by bench/results/dsa_cpu_tail_prepare.sh)
export CAKE_RT_CACHE_DIR=$PWD/.dev/tail/cubins PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
timeout 100 python3 scripts/dsa-tail-trace A3 --H 32,64 --runs 6 2>&1 | tee $OUT/tail_trace.txt
