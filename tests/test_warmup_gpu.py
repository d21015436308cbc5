"""`cake-rt warmup` then a first call of each op in a fresh process that compiles nothing (GPU)."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

CALL = r"""
import numpy as np, cupy
import cake_rt
from cake_rt.launch import compile as cc
from cake_rt.interop import BF16

def refuse(*a, **k):
    raise AssertionError("NVRTC was called: the program was not in the cache")
cc._run_nvrtc = refuse
rng = np.random.default_rng(0)
b = lambda *s: cupy.asarray(rng.standard_normal(s).astype(np.float32).astype(BF16).view(np.uint16)).view(BF16)
L, H, P, N = 700, 4, 64, 128
x, B, C, z = b(1, L, H, P), b(1, L, 1, N), b(1, L, 1, N), b(1, L, H, P)
dt = cupy.asarray(rng.standard_normal((1, L, H)).astype(np.float32))
A = cupy.asarray(-rng.uniform(1, 8, H).astype(np.float32))
D = cupy.asarray(rng.standard_normal(H).astype(np.float32))
for fam in ("exact", "chunkpar"):
    cake_rt.ssd_combined(x, dt, A, B, C, 256, D=D, z=z, dt_softplus=True, return_final_states=True, family=fam)
q, k = b(64, 32, 128), b(3000, 128)
w = cupy.asarray(rng.standard_normal((64, 32)).astype(np.float32))
cake_rt.dsa_indexer_det_topk(q, k, w, 2048)
cupy.cuda.Device().synchronize()
print("first calls compiled nothing")
"""


def test_warmup_then_first_calls_compile_nothing(tmp_path):
    env = dict(os.environ, CAKE_RT_CACHE_DIR=str(tmp_path))
    w = subprocess.run([sys.executable, "-m", "cake_rt", "warmup", "--shapes", "dtype=bfloat16,headdim=64,dstate=128,chunk=256",
                        "--shapes", "heads=32,head_dim=128"], env=env, capture_output=True, text=True, timeout=600)
    assert w.returncode == 0, w.stdout + w.stderr
    r = subprocess.run([sys.executable, "-c", CALL], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "compiled nothing" in r.stdout, r.stdout + r.stderr
    assert "compiling" not in r.stderr  # no progress line either
