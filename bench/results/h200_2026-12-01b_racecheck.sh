#!/usr/bin/env bash
# racecheck of the one-unit 313-tile DSA case: main vs per-thread EMPTY arrivals (rcA); compile_report probe; quick A/B
R=$(pwd); export CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1
mkdir -p $OUT/r
rcrun() { n=$1; tree=$2; cache=$3; shift 3; ( cd $OUT/r; PYTHONPATH=$tree CAKE_RT_CACHE_DIR=$cache CAKE_RT_DSA_LINEINFO=1 timeout 90 compute-sanitizer --tool racecheck --print-limit 10 python3 $R/.dev/rc_case.py "$@" > $n.log 2>&1; echo "$n rc=$? $(grep SUMMARY $n.log)"; ) }
rcrun main_static $R $R/.dev/maincache 1 40000 32 128 2048 static:1000000
rcrun A_static $R/.dev/rcA $R/.dev/rcA/.cubins 1 40000 32 128 2048 static:1000000
rcrun A_mixed $R/.dev/rcA $R/.dev/rcA/.cubins 9 700 32 128 100 ticket:none static:1000000 ticket:128 static:256
rcrun A_syncchk $R/.dev/rcA $R/.dev/rcA/.cubins 1 40000 32 128 2048 static:1000000 ticket:128
( cd $OUT/r; PYTHONPATH=$R/.dev/rcA CAKE_RT_CACHE_DIR=$R/.dev/rcA/.cubins CAKE_RT_DSA_LINEINFO=1 timeout 90 compute-sanitizer --tool synccheck python3 $R/.dev/rc_case.py 1 40000 32 128 2048 static:1000000 ticket:128 > A_sync.log 2>&1; echo "A_sync rc=$? $(grep SUMMARY A_sync.log)" )
( cd $OUT/r; PYTHONPATH=$R/.dev/rcA CAKE_RT_CACHE_DIR=$R/.dev/rcA/.cubins CAKE_RT_DSA_LINEINFO=1 timeout 90 compute-sanitizer --tool memcheck python3 $R/.dev/rc_case.py 1 40000 32 128 2048 static:1000000 ticket:128 > A_mem.log 2>&1; echo "A_mem rc=$? $(grep SUMMARY A_mem.log)" )
cd $R; PYTHONPATH=$R/.dev/rcA timeout 120 python3 - > $OUT/r/probe3.log 2>&1 <<'PY'
from cake_rt.launch import compile as c
from cake_rt.ops import dsa
path, d = dsa.programs("sm_90a")[0]
c.compile_cubin(c.load_source(path), name="indexer.cu", target="sm_90a", defines=d)
for i in range(2): print(c.compile_report(c.load_source(path), name="indexer.cu", target="sm_90a", defines=d))
PY
echo "probe3 rc=$?"; tail -2 $OUT/r/probe3.log
b() { PYTHONPATH=$1 CAKE_RT_CACHE_DIR=$2 timeout 60 python3 -m cake_rt.cli bench dsa --no-peers --heads 32 --repeats 6 --warmup 1 --budget-s 0.2 --side-stream none --rows S1,C1,A2 --json $OUT/r/$3.json > $OUT/r/$3.log 2>&1; echo "$3 rc=$?"; }
b $R $R/.dev/maincache main1; b $R/.dev/rcA $R/.dev/rcA/.cubins A1; b $R/.dev/rcA $R/.dev/rcA/.cubins A2; b $R $R/.dev/maincache main2
python3 - <<'PY'
import json,os
O=os.environ["OUT"]+"/r/"
for n in ("main1","A1","A2","main2"):
    try:
        j=json.load(open(O+n+".json"))
        print(n, [(r["row"], r["heads"], r["arm"][:4], round(r["ms"]["median"]*(1000 if r["row"].startswith("A") else 1),4)) for r in j["records"] if r.get("ms")])
    except Exception as e: print(n, "ERR", e)
PY
cd $OUT && tar czf r.tgz r && rm -rf r
