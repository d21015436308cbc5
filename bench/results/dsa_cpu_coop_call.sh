#!/usr/bin/env bash
# Issue #12, docs/dsa.md round 73 (staged by dsa_cpu_coop_prepare.sh; not run in the 63rd session): arm coop (every part of a one-query split block finishes the block's selection with the others, in a
# cooperative launch: no merge) against main on the A rows, one process a checkout, alternated main / coop / coop /
# main a row; then, when coop is faster by 0.3% or more, its verification (scripts/device-verify.sh on its tree: the
# fingerprints against 12-06b's, the GPU suite, the sanitizers). On an H200 where coop loses: the DSA record of main.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
root=$PWD; LIMIT=${LIMIT:-560}
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
C=/tmp/coop; mkdir -p $C/.dev/record && tar -xzf .dev/h73/coop/tree.tgz -C $C && tar -xJf .dev/h73/coop/cubins.txz -C $C/.dev/record \
  && ln -sfn $root/bench/results $C/bench/results || exit 1
ab() {  # ab TREE ROW H N: one process of scripts/dsa-placement in TREE's checkout, its cache
    local d=$1; [ $d = main ] && d=$root || d=$C
    (cd $d && CAKE_RT_CACHE_DIR=$d/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$d timeout 60 \
        python3 scripts/dsa-placement $2 --heads $3 --records spread:$4 --repeats 10) > /tmp/ab1.txt 2>&1
    local rc=$?
    echo "== $1 $2 H$3" >> $OUT/ab.txt; cat /tmp/ab1.txt >> $OUT/ab.txt
    local med=$(grep -oE "^  *records [^:]*: *[0-9.]+" /tmp/ab1.txt | awk '{print $NF}' | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
    echo "$1 $2 H$3 median $med rc $rc $(grep -oE 'outputs equal: \w+|records left at zero: \w+' /tmp/ab1.txt | tr '\n' ' ')" | tee -a $OUT/ab_summary.txt
    [ $rc = 0 ] || { tail -20 /tmp/ab1.txt; return 1; }
}
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    ab main $row $h $n; ab coop $row $h $n || break; ab coop $row $h $n || break; ab main $row $h $n
done; echo "[ab $SECONDS s]"
verdict=$(python3 - $OUT/ab_summary.txt <<'PY'
import sys, math, collections
m = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t = line.split()
    if len(t) > 4 and t[3] == "median": m[(t[1], t[2], t[0])].append(float(t[4]))
rows = sorted({(r, h) for r, h, _ in m})
rs = []
for r, h in rows:
    a, b = sum(m[(r, h, "main")]) / 2, sum(m[(r, h, "coop")]) / 2
    rs.append(a / b); print(f"{r} {h}: main {a:.2f} coop {b:.2f} us, main/coop {a / b:.3f}x", file=sys.stderr)
print(f"{math.exp(sum(map(math.log, rs)) / len(rs)):.4f}")
PY
)
echo "A/B geomean main/coop: $verdict [$SECONDS s]"
if [ $((LIMIT - SECONDS)) -lt 300 ]; then
  echo "coop's verification: no time left in this call ($((LIMIT - SECONDS)) s)"
elif python3 -c "import sys; sys.exit(0 if float('$verdict') >= 1.003 else 1)"; then
  cd $C && CAKE_RT_CACHE_DIR=$C/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat $root/.dev/h73/coop/GIT_HASH) PYTHONUNBUFFERED=1 \
     CAKE_RT_QUIET=1 OUT=$OUT/cv FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt \
     timeout $((LIMIT - SECONDS)) bash scripts/device-verify.sh > /dev/null 2>&1
  cat $OUT/cv/verify.log
else
  echo "coop not faster by 0.3%: not verified"
  case "$name" in *H200*)
    export CAKE_RT_CACHE_DIR=$root/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
    OUT=$OUT/b OPS=dsa RECORD=bench/results/h200_2026-12-06b ACCURACY=0 timeout $((LIMIT - SECONDS)) bash scripts/device-bench.sh > /dev/null 2>&1
    cat "$OUT/b/bench.log" ;;
  esac
fi
cd $root
echo "== keys probe [$SECONDS s]"
CAKE_RT_CACHE_DIR=$root/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$root \
  timeout $((LIMIT + 30 - SECONDS)) python3 bench/results/dsa_cpu_keys_probe.py A2,A1,A3 zeros,const,bits,finite,copy 2>&1 | tee $OUT/keys_probe.txt
echo "[call3 $SECONDS s]"
