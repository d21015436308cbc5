#!/usr/bin/env bash
# The GPU tests outside tests/ssd and tests/dsa that call the SSD op (graph capture, robustness, warmup, DLPack streams,
# compat against mamba_ssm), tree c772953 (kernels of 6329831), all programs compiled on the CPU.
export CAKE_RT_CACHE_DIR=$PWD/.dev/record/cubins CAKE_RT_QUIET=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:$PWD/.peers
timeout 420 python3 -m pytest -q -ra -p no:cacheprovider -n 5 --dist loadfile tests/test_capture_metadata_gpu.py tests/test_warmup_gpu.py \
  tests/test_capture_beside_gpu.py tests/test_robustness_gpu.py tests/compat/test_compat_gpu.py tests/test_dlpack_stream_gpu.py \
  > $OUT/rest_tests.log 2>&1; echo "rc=$?"; tail -15 $OUT/rest_tests.log
