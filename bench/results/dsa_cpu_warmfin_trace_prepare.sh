#!/usr/bin/env bash
# Round 65 (docs/dsa.md): the tail traces of main and arm warmfin side by side (Next item 2: did the part's finish
# shorten, did the selection's first tile wait for the warm pass). Stages, on the CPU, each tree's cake_rt and scripts
# (git archive of the branch) and its traced programs of H = 32, D = 128 (that tree's scripts/dsa-tail-trace patches)
# into .dev/tw/<tree>. Branch warmfin: bench/results/dsa_cpu_warmfin_prepare.sh makes it where missing.
# CPU, from /work/main with /work/venv (~1 min):  bash bench/results/dsa_cpu_warmfin_trace_prepare.sh
# then run command (carry [".dev/tw"], timeout_s 160):
#   for t in main warmfin; do (cd .dev/tw/$t && CAKE_RT_CACHE_DIR=$PWD/cubins CAKE_RT_QUIET=1 PYTHONPATH=$PWD \
#     timeout 70 python3 scripts/dsa-tail-trace A3 A2 --H 32 --runs 3 > $OUT/trace_$t.txt 2>&1); done
set -e
cd ${R:-/work/main}
source /work/venv/bin/activate
rm -rf .dev/tw
for t in main warmfin; do
    mkdir -p .dev/tw/$t && git archive $t cake_rt scripts | tar -x -C .dev/tw/$t
    T=$(mktemp -d); cp -r .dev/tw/$t/cake_rt $T/
    python - "$T" .dev/tw/$t/scripts/dsa-tail-trace <<'PY'
import importlib.machinery, importlib.util, pathlib, sys
ld = importlib.machinery.SourceFileLoader("t", sys.argv[2])
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("t", ld)); ld.exec_module(m)
for rel, patch in m.PATCHES.items():
    f = pathlib.Path(sys.argv[1]) / "cake_rt" / "kernels" / rel
    f.write_text(patch(f.read_text()))
PY
    (cd $T && CAKE_RT_CACHE_DIR=$OLDPWD/.dev/tw/$t/cubins PYTHONPATH=$T python -c '
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes(["heads=32,head_dim=128"])))
from cake_rt.launch.compile import compile_cubin, load_source
for p in ("bench/spin.cu", "common/selftest.cu"):
    compile_cubin(load_source(p), name=p.split("/")[-1], target="sm_90a")
')
    rm -rf $T
done
du -sh .dev/tw/*
