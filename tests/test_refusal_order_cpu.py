"""A DSA call refused for its caller-owned workspace allocates and uploads nothing (the size is checked on the
host plan, before its work table goes to the device), eager or prepared, and under CUDA graph capture it is the
same ``ValueError`` naming ``workspace`` (not a capture error about the upload it never needed). Runs in a
subprocess: the CPU stand-ins of ``scripts/host_time.py --cpu`` replace module attributes of CuPy for good."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("cupy")

ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = r'''
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("host_time", sys.argv[1])
ht = importlib.util.module_from_spec(spec); spec.loader.exec_module(ht)
make, s = ht.install_cpu_stubs()
import cupy
from cupy_backends.cuda.api import runtime
import cake_rt
import cake_rt.ops.dsa as dsa
from cake_rt.interop import BF16

uploads = []
runtime.memcpyAsync = lambda *a: uploads.append(a)
allocs = []
empty = cupy.empty
def counting_empty(*a, **k):
    allocs.append(a)
    return empty(*a, **k)

T, Tkv, H, D = 64, 8192, 32, 64
q = make(np.empty((T, H, D), BF16)); k = make(np.empty((Tkv, D), BF16)); w = make(np.empty((T, H), np.float32))
need = cake_rt.dsa_indexer_workspace_bytes(q, k, w, 8, key_split=256)
assert need > 0, need
small = make(np.empty(need - 16, np.uint8))
idx = make(np.empty((T, 8), np.int32)); sc = make(np.empty((T, 8), np.float32))

def refused(fn):
    uploads.clear(); allocs.clear()
    cupy.empty = counting_empty
    try:
        fn()
    except ValueError as exc:
        assert str(exc).startswith("workspace: expected at least"), exc
    else:
        raise AssertionError("not refused")
    finally:
        cupy.empty = empty
    assert uploads == [] and allocs == [], (uploads, allocs)

refused(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small, indices=idx, scores=sc,
                                             stream=s))
refused(lambda: cake_rt.prepare_dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small, indices=idx,
                                                     scores=sc, stream=s))
assert len(dsa._plan_cache) == 0  # nothing cached by the refused calls
runtime.streamIsCapturing = lambda handle: runtime.streamCaptureStatusActive
refused(lambda: cake_rt.dsa_indexer_det_topk(q, k, w, 8, key_split=256, workspace=small, indices=idx, scores=sc,
                                             stream=s))
print("OK")
'''


def test_dsa_small_workspace_is_refused_before_any_upload(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script), str(ROOT / "scripts" / "host_time.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout + r.stderr
