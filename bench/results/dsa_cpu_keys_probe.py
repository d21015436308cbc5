#!/usr/bin/env python3
"""Issue #12, docs/dsa.md round 72: do the A rows' shapes survive degenerate keys, and does a CuPy elementwise copy of
a bfloat16 array (what scripts/dsa-placement --keys did first) give the same bits? Each (row, case) in a process of its
own with CUDA_LAUNCH_BLOCKING=1 (a fault names its call); H = 32, D = 128, topk 2048, the suite's q and weights:

    zeros        every key 0 (every score 0: one tie over all keys; the top-k are the largest ids)
    const        every key 1.0 (every query's scores equal)
    bits         random 16-bit patterns (NaN, inf, subnormals)
    finite       random 16-bit patterns with the all-ones exponent cleared (finite, wide range)
    copy         the suite's keys through `k2[...] = k` (CuPy's elementwise copy of the bfloat16 dtype)

Checks a row: the call returns, no poison is left, each row's ids are -1 or distinct ids in range; `copy` also against
the call on the original keys, bit for bit. A failing case is rerun under compute-sanitizer memcheck.

    python3 bench/results/dsa_cpu_keys_probe.py [ROWS] [CASES]       (the driver)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROWS = {"A1": 22018, "A2": 30466, "A3": 41986}
CASES = ("zeros", "const", "bits", "finite", "copy")


def child(row: str, case: str) -> int:
    import cupy
    import numpy as np

    import cake_rt
    from cake_rt.bench.arrays import bf16_dtype, random_normal

    T, L, H, D, topk = 4, ROWS[row], 32, 128, 2048
    seed = 1234 + 17 * H
    q = random_normal((T, H, D), "bfloat16", seed=seed + 1)
    w = random_normal((T, H), "float32", seed=seed + 3, scale=H ** -0.5)
    bf = bf16_dtype()
    k0 = random_normal((L, D), "bfloat16", seed=seed + 2)
    if case == "zeros":
        k = cupy.zeros((L, D), cupy.uint16).view(bf)
    elif case == "const":
        k = cupy.full((L, D), 0x3F80, cupy.uint16).view(bf)
    elif case in ("bits", "finite"):
        u = cupy.random.RandomState(7).randint(0, 65536, (L, D), dtype=cupy.int32).astype(cupy.uint16)
        if case == "finite":
            u = cupy.where((u & 0x7F80) == 0x7F80, u & 0xBFFF, u).astype(cupy.uint16)
        k = u.view(bf)
    else:
        k = cupy.empty_like(k0)
        k[...] = k0
    outs = []
    for kk in ((k, k0) if case == "copy" else (k,)):
        ind = cupy.full((T, topk), -7, dtype=cupy.int32)
        sc = cupy.full((T, topk), np.nan, dtype=cupy.float32)
        cake_rt.dsa_indexer_det_topk(q, kk, w, topk, indices=ind, scores=sc)
        cupy.cuda.Device().synchronize()
        outs.append((cupy.asnumpy(ind), cupy.asnumpy(sc)))
    i, s = outs[0]
    ok = not (i == -7).any()
    for t in range(T):
        r = i[t][i[t] >= 0]
        ok &= bool(((r < L) & (i[t] >= -1)).all()) and len(np.unique(r)) == len(r)
    if case == "copy":
        same_k = bool((k.view(cupy.uint16) == k0.view(cupy.uint16)).all())
        same = np.array_equal(i, outs[1][0]) and np.array_equal(s.view(np.uint32), outs[1][1].view(np.uint32))
        print(f"copy: keys equal {same_k}, outputs equal {same}")
        ok &= same_k and same
    print(f"{row} {case}: {'OK' if ok else 'BAD'} (rows' first ids {i[:, 0].tolist()}, kept {(i >= 0).sum(1).tolist()})")
    return 0 if ok else 1


def main() -> int:
    rows = sys.argv[1].split(",") if len(sys.argv) > 1 else list(ROWS)
    cases = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CASES)
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    bad = 0
    for row in rows:
        for case in cases:
            cmd = [sys.executable, os.path.abspath(__file__), "--child", row, case]
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
            print(f"== {row} {case}: rc {r.returncode}\n  " + "\n  ".join(tail), flush=True)
            if r.returncode:
                bad += 1
                if bad <= 2:
                    m = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--print-limit", "4"] + cmd,
                                       env=env, capture_output=True, text=True, timeout=300)
                    print("  memcheck:\n  " + "\n  ".join((m.stdout + m.stderr).strip().splitlines()[-40:]),
                          flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[3]))
    sys.exit(main())
