#!/bin/bash
# review32's GPU tests (not run in the session that wrote them: its device time was spent). Run from the root of the
# tree to test (the branch, or main after the merge) on the device; writes the JUnit file under $OUT.
# Expected: tests/test_capture_beside_gpu.py 27 passed + 21 xfailed. The 21 xfails are the "plain" arms, the premise
# measured: 16 of test_library_work_beside_a_capture (pool growth, an upload, ticket words, a program's load, each beside
# 4 captures, in the thread's own mode), 1 of test_program_load_under_the_calls_own_capture, 4 of
# test_torch_export_to_another_stream_inside_torch_cuda_graph (its check removed). A "plain" arm that passes is no
# failure: the driver allowed that work in the thread's mode. Regression guards: review31's
# tests/test_capture_metadata_gpu.py (14 passed + 4 xfailed) and tests/test_robustness_gpu.py (all passed). The torch
# tests skip without torch. Predicted under 90 s with the compiles of the small SSD and DSA programs.
OUT=${OUT:-/tmp}
timeout 300 python3 -m pytest -q -p no:cacheprovider -rxXfs tests/test_capture_beside_gpu.py \
    tests/test_capture_metadata_gpu.py tests/test_robustness_gpu.py --junitxml "$OUT/review32_junit.xml" 2>&1 | tail -60
