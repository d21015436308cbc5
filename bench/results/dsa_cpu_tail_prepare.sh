#!/usr/bin/env bash
# Next session's first DSA call (issue #12, A3; docs/dsa.md "Next (after the fifteenth session)", item 3): the split
# tails' timeline by scripts/dsa-tail-trace. Stages, on the CPU, the traced programs (this tree's kernel with the
# script's patches) of H = 32 and 64 at D = 128, the spinner and the self-test into .dev/tail/cubins, and .dev/tail/call.sh.
# CPU, from /work/main with /work/venv:  bash bench/results/dsa_cpu_tail_prepare.sh
# then run command "bash .dev/tail/call.sh", carry [".dev/tail"], timeout_s 120.
# TWICE=1: the --merge-twice programs and call in .dev/tail2, H = 32 only (docs/dsa.md round 62: the merge's second pass
# against its first; at H = 64 the patched DSA_RFLOOR program spills 4 B), then run command "bash .dev/tail2/call.sh",
# carry [".dev/tail2"].
set -e
cd ${R:-/work/main}
source /work/venv/bin/activate
V=.dev/tail; P=PATCHES; X=; HS=32,64; SH='["heads=32,head_dim=128", "heads=64,head_dim=128"]'
if [ "${TWICE:-0}" = 1 ]; then V=.dev/tail2; P=PATCHES_TWICE; X=" --merge-twice"; HS=32; SH='["heads=32,head_dim=128"]'; fi
rm -rf $V; mkdir -p $V
T=$(mktemp -d); cp -r cake_rt $T/
python - "$T" "$P" <<'PY'
import importlib.machinery, importlib.util, pathlib, sys
ld = importlib.machinery.SourceFileLoader("t", "scripts/dsa-tail-trace")
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("t", ld)); ld.exec_module(m)
for rel, patch in getattr(m, sys.argv[2]).items():
    f = pathlib.Path(sys.argv[1]) / "cake_rt" / "kernels" / rel
    f.write_text(patch(f.read_text()))
PY
(cd $T && CAKE_RT_CACHE_DIR=/work/main/$V/cubins PYTHONPATH=$T python -c '
from cake_rt.warmup import warmup, parse_shapes
print(warmup(("dsa",), "sm_90a", jobs=2, shapes=parse_shapes('"$SH"')))
from cake_rt.launch.compile import compile_cubin, load_source
for p in ("bench/spin.cu", "common/selftest.cu"):
    compile_cubin(load_source(p), name=p.split("/")[-1], target="sm_90a")
')
rm -rf $T
cat > $V/call.sh <<SH
# dsa-tail-trace of the split-tail rows (staged by bench/results/dsa_cpu_tail_prepare.sh)
export CAKE_RT_CACHE_DIR=\$PWD/$V/cubins PYTHONUNBUFFERED=1 CAKE_RT_QUIET=1
timeout 100 python3 scripts/dsa-tail-trace A3 A1 A2 --H $HS --runs 3$X 2>&1 | tee \$OUT/$(basename $V)_trace.txt
SH
du -sh $V
