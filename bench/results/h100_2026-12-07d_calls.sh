# The fifty-eighth session's device calls (docs/dsa.md round 67), as run: call 1 (.dev/call1.sh), call 2 (.dev/h60/call2.sh),
# call 3 (.dev/h61/call4.sh, run as LIMIT=300 bash .dev/h61/call4.sh). Each file below starts at its #!/usr/bin/env bash.
# Their kits: .dev/pt (scripts/dsa-product-trace's programs, --ctas 132, .dev/pt/prepare.sh), .dev/h60 and .dev/h61
# (k/<tree>/cake_rt of each arm, their cubins by scripts/dsa-placement --compile-only, the arm's trace programs).
#!/usr/bin/env bash
# 58th session, call 1: on an H200 the DSA record of main (.dev/record, staged on 877e379) then the A rows' per-tile
# trace; on any other card the trace alone (scripts/dsa-product-trace, every CTA, cold and warm L2).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
trace() {  # $1: the modes
    for mode in $1; do
        CAKE_RT_CACHE_DIR=$PWD/.dev/pt/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
            timeout 100 python3 scripts/dsa-product-trace A3 A2 A1 --H 32,64 --runs 5 --first-units --ctas 132 ${mode#cold} \
            --dump /tmp/pt >> $OUT/trace.txt 2>&1
        echo "trace $mode rc=$? [$SECONDS s]"; [ $SECONDS -lt 500 ] || break
    done
    tar -czf $OUT/pt.tgz -C /tmp pt; cat $OUT/trace.txt
}
if [[ $name == *H200* ]]; then
    timeout 470 bash .dev/record/record.sh
    echo "[$SECONDS s]"
    [ $SECONDS -lt 480 ] && trace cold
else
    trace "cold --warm"
fi
echo "[$SECONDS s]"
#!/usr/bin/env bash
# 58th session, call 2: main against early (a unit of fewer than PAIRS columns copies tile it + 1 before waiting for
# tile it: two key copies in flight) on the A rows and S1, one process a row, records spread; then early's per-tile
# trace (scripts/dsa-product-trace, every CTA, cold L2). On an H200 the DSA record of main first.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
K=$PWD/.dev/h60/k
T=main=$K/main/cake_rt/kernels,early=$K/early/cake_rt/kernels
rows1="A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8 S1:32:4"; rows2="A3:32:16 A2:32:8 A1:32:8"
if [[ $name == *H200* ]]; then
    timeout 440 bash .dev/record/record.sh; echo "[$SECONDS s]"; rows1="A3:32:16 A2:32:8"; rows2=""
fi
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h60/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for pass in 1 2; do
    rows=$rows1; [ $pass = 2 ] && rows=$rows2
    for r in $rows; do
        IFS=: read row h n <<< "$r"
        echo "== pass $pass $row H$h"
        timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
        cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|Error" /tmp/ab.txt
    done
done
)
echo "[$SECONDS s]"
CAKE_RT_CACHE_DIR=$PWD/.dev/h60/pt CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 90 python3 scripts/dsa-product-trace A3 A2 A1 --H 32 --runs 5 --first-units --ctas 132 --dump /tmp/pt > $OUT/trace.txt 2>&1
echo "trace rc=$?"; tar -czf $OUT/pt.tgz -C /tmp pt; grep -A26 "^A" $OUT/trace.txt | grep -E "^A|period|rows wait|append|compaction"
echo "[$SECONDS s]"
#!/usr/bin/env bash
# 58th session, call 4: main against solo (a one-query split part's floor raised beside its appends: warp 0 appends,
# 128 selection threads raise at tiles 1 and ntiles / 2) and soloearly (solo + two key copies in flight; this tree) on
# the A rows, one process a row, records spread; soloearly's per-tile trace (every CTA, cold L2); then, where
# soloearly beats main on A3 at H = 32 in both passes and on the geomean, its record kit (.dev/record, staged on this
# tree against 12-06b): on an H200 the whole record (bench + verification), elsewhere the verification alone; where
# it does not, on an H200 the record of main (.dev/record_main).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
K=$PWD/.dev/h61/k
T=main=$K/main/cake_rt/kernels,solo=$K/solo/cake_rt/kernels,soloearly=$K/soloearly/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h61/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in A3:32:16 A3:64:8 A2:32:8 A1:32:8 A3:32:16 A3:64:8; do
    IFS=: read row h n <<< "$r"
    echo "== $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
    cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|rror" /tmp/ab.txt
done
)
echo "[$SECONDS s]"
CAKE_RT_CACHE_DIR=$PWD/.dev/h61/pt CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 90 python3 scripts/dsa-product-trace A3 --H 32,64 --runs 5 --first-units --ctas 132 --dump /tmp/pt > $OUT/trace.txt 2>&1
echo "trace rc=$?"; tar -czf $OUT/pt.tgz -C /tmp pt; grep -A26 "^A" $OUT/trace.txt | grep -E "^A|period|rows wait|append|compaction|rror"
echo "[$SECONDS s]"
python3 - "$OUT/ab.txt" <<'PY'
import math, re, sys
t = open(sys.argv[1]).read()
rows = re.findall(r"(A\d) H=(\d+).*?\ntree main: median of its runners' medians ([\d.]+).*?\ntree solo: median of its runners' medians ([\d.]+).*?\ntree soloearly: median of its runners' medians ([\d.]+)", t, re.S)
for arm, i in (("solo", 3), ("soloearly", 4)):
    g = math.exp(sum(math.log(float(r[2]) / float(r[i])) for r in rows) / max(1, len(rows)))
    print(f"geomean main / {arm} {g:.4f}")
ok = rows and all(float(r[4]) < float(r[2]) for r in rows if r[:2] == ("A3", "32")) and \
    math.exp(sum(math.log(float(r[2]) / float(r[4])) for r in rows) / len(rows)) > 1.0 and \
    all(" outputs equal: True" in b for b in t.split("\n") if "outputs equal" in b)
sys.exit(0 if ok else 1)
PY
win=$?; echo "soloearly wins: $([ $win = 0 ] && echo yes || echo no)"
LIMIT=${LIMIT:-600}; [ $SECONDS -lt $((LIMIT - 360)) ] || { echo "no time left for the verification (LIMIT $LIMIT)"; exit 0; }
if [ $win = 0 ]; then
    if [[ $name == *H200* ]]; then timeout 500 bash .dev/record/record.sh
    else
        [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
        export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
        OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout $((LIMIT - SECONDS - 10)) bash scripts/device-verify.sh > /dev/null 2>&1
        cat "$OUT/v/verify.log"
    fi
elif [[ $name == *H200* ]]; then timeout 480 bash .dev/record_main/record.sh
fi
echo "[$SECONDS s]"
