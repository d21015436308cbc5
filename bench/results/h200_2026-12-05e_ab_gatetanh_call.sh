# gatetanh: scripts/ab-kit's call (prepared 2026-12-05 17:31 UTC). Trees (name rev sha):
#   base d2641f9 d2641f9
#   a gatetanh 36a77df
# run command "bash .dev/gatetanh/call.sh", carry [".dev/gatetanh"], timeout_s 350
python3 scripts/ab-kit call .dev/gatetanh --op ssd --end 330 --order base,a,a,base --rows nemotron-h,m2-2.7b,seed,short,m2-2.7b-b8 --checks a

#!/usr/bin/env bash
# After call.sh (the trees unpacked): the arm's error against mamba_ssm's on the same inputs (the contract's accuracy
# clause; tests/ssd/test_ssd_gpu.py::test_accuracy_vs_mamba_ssm_triton prints both errors and asserts ours <= 1.1x
# theirs; main passes it in every record's suite). carry [".dev/gatetanh", ".peers"]; Triton compiles mamba_ssm's
# kernels on a fresh machine (~2 min).
R=$PWD
cd .dev/gatetanh/a && PYTHONPATH=$PWD:$R/.peers CAKE_RT_CACHE_DIR=$PWD/.cubins CAKE_RT_QUIET=1 timeout 220 \
    python3 -m pytest -q -s -p no:cacheprovider tests/ssd/test_ssd_gpu.py -k accuracy_vs_mamba 2>&1 | grep -E "ACC-vs|passed|failed|Error"
