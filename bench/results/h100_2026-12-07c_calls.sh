# The 57th session's device calls (docs/dsa.md round 66), each run as "bash <file>" from the tree root

# ==== .dev/call1.sh
#!/usr/bin/env bash
# 57th session, call 1: the tail trace of main's programs with every CTA's records dumped (which parts' finishes are
# slow), then on an H200 the DSA record of main (.dev/record).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
CAKE_RT_CACHE_DIR=$PWD/.dev/tt/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 120 python3 scripts/dsa-tail-trace A3 A2 A1 --H 32,64 --runs 5 --dump $OUT/tt > $OUT/trace.txt 2>&1
echo "trace rc=$? [$SECONDS s]"; grep -E "^A|merging CTAs|slow tenth|loop end|part's finish" $OUT/trace.txt | head -60
if [[ $name == *H200* ]]; then
    timeout 540 bash .dev/record/record.sh
fi
echo "[$SECONDS s]"

# ==== .dev/h57/call2.sh
#!/usr/bin/env bash
# 57th session, call 2: main against regmerge (the merge's keys loaded from the parts straight into registers) on the six
# A rows, one process a row, records spread; then regmerge's tail trace (its own script and traced programs).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1; date -u
K=$PWD/.dev/h57/k
T=main=$K/main/cake_rt/kernels,regmerge=$K/regmerge/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h57/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    echo "== $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > $OUT/ab_${row}_${h}.txt 2>&1
    grep -E "^tree|outputs|records left|Error" $OUT/ab_${row}_${h}.txt; echo "[$SECONDS s]"
done
)
(cd .dev/h57/tree && CAKE_RT_CACHE_DIR=$OLDPWD/.dev/h57/tt CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 90 python3 scripts/dsa-tail-trace A3 A2 A1 --H 32 --runs 5 --dump $OUT/tt > $OUT/trace_regmerge.txt 2>&1)
echo "trace rc=$? [$SECONDS s]"

# ==== .dev/h57/call3.sh
#!/usr/bin/env bash
# 57th session, call 3: main against regmerge2 (the merge's keys loaded from the parts straight into registers) on the six
# A rows, one process a row, records spread; then regmerge's tail trace (its own script and traced programs).
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1; date -u
K=$PWD/.dev/h57/k
T=main=$K/main/cake_rt/kernels,regmerge2=$K/regmerge2/cake_rt/kernels
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h57/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    echo "== $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab_${row}_${h}.txt 2>&1
    cat /tmp/ab_${row}_${h}.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|Error" /tmp/ab_${row}_${h}.txt; echo "[$SECONDS s]"
done
)
(cd .dev/h57/tree2 && CAKE_RT_CACHE_DIR=$OLDPWD/.dev/h57/tt2 CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 90 python3 scripts/dsa-tail-trace A3 A2 A1 --H 32 --runs 5 --dump /tmp/tt > $OUT/trace_regmerge2.txt 2>&1)
echo "trace rc=$? [$SECONDS s]"
tar -czf $OUT/tt.tgz -C /tmp tt

# ==== .dev/h57/call4.sh
#!/usr/bin/env bash
# 57th session, call 4: tail traces of main and regmerge2 with a stamp after the merge's part-count scan (and regmerge2's
# offsets computed), A3 A1 at H = 32.
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1; date -u
for t in treemain tree2; do
(cd .dev/h57/$t && CAKE_RT_CACHE_DIR=$OLDPWD/.dev/h57/tt_$t CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
    timeout 60 python3 scripts/dsa-tail-trace A3 A1 --H 32 --runs 5 --dump /tmp/tt_$t > $OUT/trace_$t.txt 2>&1)
echo "$t rc=$? [$SECONDS s]"
done
tar -czf $OUT/tt.tgz -C /tmp tt_treemain tt_tree2

# ==== .dev/call5.sh
#!/usr/bin/env bash
# 57th session: the DSA record of main on an H200 (.dev/record); on any other card, nothing.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
if [[ $name == *H200* ]]; then
    timeout 560 bash .dev/record/record.sh
fi
echo "[$SECONDS s]"

# ==== .dev/call6.sh
#!/usr/bin/env bash
# 57th session: the GPU suite on main with ticket words only where a launch reads them (the record's cubins; kernels
# unchanged). On an H200 first the DSA record (.dev/record/record.sh runs the bench and device-verify, suite included).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
if [[ $name == *H200* ]]; then
    timeout 560 bash .dev/record/record.sh
    exit
fi
[ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
timeout 420 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile \
    --ignore=tests/ssd/test_ssd_compile.py --ignore=tests/dsa/test_dsa_compile.py \
    --ignore=tests/ssd/test_ssd_phase_trace_cpu.py --ignore=tests/ssd/test_ssd_step_trace_cpu.py \
    --ignore=tests/dsa/test_dsa_tail_trace_cpu.py tests > $OUT/suite.log 2>&1
echo "suite rc=$? [$SECONDS s]"; grep -E "passed|failed|error|FAILED|ERROR" $OUT/suite.log | tail -25

# ==== .dev/h57/call7.sh
#!/usr/bin/env bash
# 57th session, call 7: on an H200 the DSA record of main (.dev/record); on any other card main against arm onescan (one
# scan for the split floor and the merge's part starts) on the six A rows, one process a row, records spread.
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
if [[ $name == *H200* ]]; then
    timeout 560 bash .dev/record/record.sh
    exit
fi
K=$PWD/.dev/h57/k
T=main=$K/main/cake_rt/kernels,${ARM:-onescan}=$K/${ARM:-onescan}/cake_rt/kernels
export CAKE_RT_CACHE_DIR=$PWD/.dev/h57/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for pass in 1 2; do
for r in ${ROWS:-A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8}; do
    IFS=: read row h n <<< "$r"
    echo "== pass $pass $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
    cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|Error" /tmp/ab.txt
done
done
echo "[$SECONDS s]"

# ==== .dev/h58/call8.sh
#!/usr/bin/env bash
# 57th session, call 8: main against onescan (54ad1f3: one pair scan for the split floor and the merge's part starts) on
# the A rows, one process a row, records spread; then onescan's checks from .dev/record (staged on 54ad1f3 against
# 12-06b): on an H200 the whole record (the DSA bench, then device-verify), elsewhere device-verify alone (the DSA
# fingerprints against 12-06b's, the GPU suite, compute-sanitizer, host time).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
K=$PWD/.dev/h58/k
T=main=$K/main/cake_rt/kernels,onescan2=$K/onescan2/cake_rt/kernels
rows="A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8"; passes="1 2"
[[ $name == *H200* ]] && { rows="A3:32:16 A2:32:8"; passes=1; }
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h58/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for pass in $passes; do
for r in $rows; do
    IFS=: read row h n <<< "$r"
    echo "== pass $pass $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
    cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|Error" /tmp/ab.txt
done
done
)
echo "[$SECONDS s]"
if [[ $name == *H200* ]]; then
    timeout 530 bash .dev/record/record.sh
else
    [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
    export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
    OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout 520 bash scripts/device-verify.sh > /dev/null 2>&1
    cat "$OUT/v/verify.log"
fi
echo "[$SECONDS s]"

# ==== .dev/call9.sh
#!/usr/bin/env bash
# 57th session, call 9: on an H200 the DSA record of main (.dev/record, staged on 54ad1f3); on any other card the tail
# trace of main's programs with the report's first run apart and the dump trimmed (scripts/dsa-tail-trace as landed).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
if [[ $name == *H200* ]]; then
    timeout 560 bash .dev/record/record.sh
else
    CAKE_RT_CACHE_DIR=$PWD/.dev/tt/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD \
        timeout 120 python3 scripts/dsa-tail-trace A3 A2 --H 32 --runs 4 --dump /tmp/tt > $OUT/trace.txt 2>&1
    echo "trace rc=$?"; tar -czf $OUT/tt.tgz -C /tmp tt; head -40 $OUT/trace.txt
fi
echo "[$SECONDS s]"

# ==== .dev/h59/call10.sh
#!/usr/bin/env bash
# 57th session, call 10: main against onescan (onescan3: a part scans its bins alone, the merge the pair) on
# the A rows, one process a row, records spread; then onescan's checks from .dev/record (staged on onescan3 against
# 12-06b): on an H200 the whole record (the DSA bench, then device-verify), elsewhere device-verify alone (the DSA
# fingerprints against 12-06b's, the GPU suite, compute-sanitizer, host time).
name=$(nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1); echo "$name"; date -u
K=$PWD/.dev/h59/k
T=main=$K/main/cake_rt/kernels,onescan3=$K/onescan3/cake_rt/kernels
rows="A3:32:16 A2:32:8 A1:32:8 A3:64:8 A2:64:8 A1:64:8"; passes="1 2"
[[ $name == *H200* ]] && { rows="A3:32:16 A2:32:8"; passes=1; }
(
export CAKE_RT_CACHE_DIR=$PWD/.dev/h59/abc CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
for pass in $passes; do
for r in $rows; do
    IFS=: read row h n <<< "$r"
    echo "== pass $pass $row H$h"
    timeout 60 python3 scripts/dsa-placement $row --heads $h --records spread:$n --repeats 10 --trees $T > /tmp/ab.txt 2>&1
    cat /tmp/ab.txt >> $OUT/ab.txt; grep -E "^tree|outputs|records left|Error" /tmp/ab.txt
done
done
)
echo "[$SECONDS s]"
# verify only an arm faster than main on A3 at H = 32 in every pass and on the geomean of every row (medians of the
# runners' medians)
python3 - "$OUT/ab.txt" <<'PY' || { echo "onescan3 not faster: not verified"; exit 0; }
import re, sys
t = open(sys.argv[1]).read()
rows = re.findall(r"(A\d) H=(\d+).*?\ntree main: median of its runners' medians ([\d.]+).*?\ntree onescan3: median of its runners' medians ([\d.]+)", t, re.S)
import math
g = math.exp(sum(math.log(float(m) / float(a)) for r, h, m, a in rows) / max(1, len(rows)))
ok = all(float(a) < float(m) for r, h, m, a in rows if h == "32" and r == "A3") and g > 1.0
print("geomean main / arm %.4f" % g)
print("rows", [(r, h, m, a) for r, h, m, a in rows]); sys.exit(0 if ok else 1)
PY
if [[ $name == *H200* ]]; then
    timeout 530 bash .dev/record/record.sh
else
    [ -d .dev/record/cubins ] || tar -xJf .dev/record/cubins.txz -C .dev/record || exit 1
    export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_GIT_HASH=$(cat .dev/record/GIT_HASH) PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
    OUT=$OUT/v FINGERPRINTS=bench/results/h200_2026-12-06b_fingerprints.txt timeout 520 bash scripts/device-verify.sh > /dev/null 2>&1
    cat "$OUT/v/verify.log"
fi
echo "[$SECONDS s]"
