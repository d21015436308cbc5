#!/usr/bin/env bash
# After call.sh (the trees unpacked): each tree's error against mamba_ssm's on the same inputs (the contract's accuracy
# clause; tests/ssd/test_ssd_gpu.py::test_accuracy_vs_mamba_ssm_triton prints both). carry [".dev/gatetanh", ".peers"].
R=$PWD
for t in base a; do
  echo "== $t"
  (cd .dev/gatetanh/$t && PYTHONPATH=$PWD:$R/.peers CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_QUIET=1 timeout 200 \
     python3 -m pytest -q -s -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k accuracy_vs_mamba 2>&1 | grep -E "ACC-vs|passed|failed|Error")
done
