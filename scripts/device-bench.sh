#!/usr/bin/env bash
# The recorded benchmark run on a GPU machine, in four commands of `cake-rt bench`:
#   1. the DSA suite, prepared and eager, no peers;
#   1b. the DSA side-stream table (1 SM held; the suite file's side-stream rows and heads), each row in SIDE_PROCS fresh processes
#      (default 3) and their median: in one process C1's slowdown lands on one of two levels, 1.10x or 1.19x;
#   2. the SSD suite's rows with both peers (mamba_ssm and vLLM's Triton SSD, .peers/ beside the tree, see
#      bench/peers/README.md) in the same process, after mamba_ssm's accuracy test on the same inputs (which also warms
#      Triton's cache);
#   3. the SSD varlen row without the peers (theirs take minutes there).
# On a fresh machine Triton compiles the peers' kernels first (~2 min: the accuracy step hits its 120 s limit, as in the
# 12-02c and 12-02e calls; the suite's accuracy test covers it; with ACCURACY=0 the peer step compiles them itself, so
# its limit is longer: the 12-04f call's first row took 112 s). The compiled cache is ~160 MB, over what a call carries.
# Each writes NAME.json, NAME.md and NAME.log (NAME: dsa, ssd, ssd_varlen), compared with a recorded run when RECORD
# names one (RECORD=bench/results/h200_2026-12-01c: its _dsa.json, _ssd.json and _ssd_varlen.json; RECORD_DSA=... for
# the DSA suite's, when it is another record's).
# OPS=dsa runs steps 1 and 1b only (for a session that changed no SSD program, whose SSD record stands), OPS=ssd 2-3.
# Usage (repo root): CAKE_RT_GIT_HASH=<hash> [OUT=dir] [RECORD=bench/results/PREFIX] [RECORD_DSA=...] [ACCURACY=0]
#     [OPS=all|dsa|ssd] [SIDE_PROCS=3] bash scripts/device-bench.sh
# Leaves $OUT/bench.log (the summary) and $OUT/bench.tgz (every file). Plots: `cake-rt bench --from-json NAME.json
# --plot ... --speedup-plot ...` anywhere.
set -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH=$here:$here/.peers PYTHONUNBUFFERED=1 CAKE_RT_QUIET=${CAKE_RT_QUIET:-1}
OUT=${OUT:-$here/device-out}; mkdir -p "$OUT"
DIR=$(mktemp -d)
LOG=$OUT/bench.log
say() { echo "[$SECONDS s] $*" | tee -a "$LOG"; }
compare() {  # NAME: the record's NAME.json; RECORD_DSA names another record for the DSA suite (the two ops' records can
    local rec=${RECORD:-}  # come from different calls, as 12-02e's SSD and 12-02f's DSA)
    case $1 in dsa | dsa_side) rec=${RECORD_DSA:-$rec} ;; esac
    [ -n "$rec" ] && [ -f "${rec}_$1.json" ] && echo "--compare ${rec}_$1.json"
}
run() {  # run NAME TIMEOUT ARGS...: one bench command, its files under $DIR
    local name=$1 limit=$2; shift 2
    timeout "$limit" python3 -m cake_rt bench "$@" --json "$DIR/$name.json" --markdown "$DIR/$name.md" $(compare "$name") \
        > "$DIR/$name.log" 2>&1
    echo "bench $name rc=$?" | tee -a "$LOG"
    grep "^| " "$DIR/$name.md" 2>/dev/null | cut -c1-400 | head -80 >> "$LOG"
    tar czf "$OUT/bench.tgz" -C "$DIR" .  # after every step: a call cut short keeps the steps it finished
}
cd "$here"
OPS=${OPS:-all}
case $OPS in all | dsa | ssd) ;; *) echo "OPS: all, dsa or ssd, got '$OPS'" >&2; exit 2 ;; esac
if [ "$OPS" != ssd ]; then
say "dsa"; run dsa 150 dsa --no-peers --repeats 10 --warmup 2 --budget-s 0.5 --side-stream none --time-limit 120
say "dsa side stream, ${SIDE_PROCS:-3} processes a row"
# the suite file's side-stream rows and heads (the bench has no flag for the side table alone: its rows run too)
side=$(python3 -c 'import json; d = json.load(open("cake_rt/bench/suites/dsa.json"))["side_stream"]
print(",".join(d["rows"]), ",".join(str(h) for h in d["heads"]))')
run dsa_side 170 dsa --no-peers --rows "${side% *}" --heads "${side#* }" --side-stream 1 --processes "${SIDE_PROCS:-3}" \
    --repeats 10 --warmup 2 --budget-s 0.4 --time-limit 150
fi
if [ "$OPS" != dsa ]; then
if [ "${ACCURACY:-1}" = 1 ]; then  # ACCURACY=0 leaves it to the suite's test (device-verify.sh runs it)
say "mamba_ssm accuracy"
timeout 120 python3 -m pytest -q -ra -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k mamba > "$DIR/mamba_accuracy.log" 2>&1
tail -1 "$DIR/mamba_accuracy.log" | tee -a "$LOG"
fi
peer_limit=$([ "${ACCURACY:-1}" = 1 ] && echo 200 || echo 320)  # (ACCURACY=0: Triton's compiles land here)
say "ssd with peers"; run ssd "$peer_limit" ssd --repeats 10 --warmup 2 --budget-s 0.6 --rows seed,m2-2.7b,m2-2.7b-b8,nemotron-h,short
say "ssd varlen"; run ssd_varlen 60 ssd --no-peers --repeats 10 --warmup 2 --budget-s 0.6 --rows varlen
fi
say "done"
# The device tool brings back at most 8 files from $OUT: everything in one archive, the summary beside it.
tar czf "$OUT/bench.tgz" -C "$DIR" . && rm -rf "$DIR"
