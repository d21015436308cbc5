#!/usr/bin/env python3
# ssd42: small chunk-parallel calls at chunk 256 on the warpgroup path, for compute-sanitizer (scripts/sanitize-case
# ssd has chunks of 64 and 128 only: the programs ssd42 leaves as main's). Each case runs both families and compares
# every output bit for bit (the two families share the arithmetic); the first has more phase-1 items than the grid
# (82 chunks x 4 units on at most 264 CTAs: CTAs with a second item, the producer's prep an item ahead, and phase 3's
# copies continuing the prep sets' ring), the other two also run chunk-parallel under a cap of
# a third of the workspace (slices: each slice's first item's prep on the math warpgroup again, the prep sets' ring
# continuing over phase 3 and the next slice), the last at dstate 256 (phase 1 in two column parts, COLS = 2).
# Prints each case's grid, items and slices; exits 1 when a bitwise claim fails.
#   PYTHONPATH=<tree> python3 ssd_cpu_ssd42_case.py
import os
import sys

import numpy as np


def main() -> int:
    import cupy

    import cake_rt
    from cake_rt.interop import BF16
    from cake_rt.ops import ssd as ops

    rng = np.random.default_rng(42)
    ok = True
    for lens, H, G, N, P, cut in (([0, 17, 20000, 300], 4, 1, 64, 64, False), ([0, 700, 129], 32, 1, 128, 64, True),
                                  ([0, 600, 300], 8, 2, 256, 128, True)):
        L = sum(lens)
        host = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
        cast = lambda a: cupy.asarray(a.astype(BF16).view(np.uint16)).view(BF16)  # noqa: E731
        x, B, C = cast(host(1, L, H, P)), cast(host(1, L, G, N)), cast(host(1, L, G, N))
        dt = cupy.asarray(host(1, L, H) * 0.5)
        A = cupy.asarray(-rng.uniform(1, 8, H).astype(np.float32))
        D = cupy.asarray(host(H, P))
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)

        def run(fam):
            return cake_rt.ssd_combined(x, dt, A, B, C, 256, D=D, z=x, cu_seqlens=cu, dt_softplus=True,
                                        return_final_states=True, return_varlen_states=True,
                                        return_chunk_states=True, family=fam)

        outs = [run("exact"), run("chunkpar")]
        plan = ops.last_plan()
        chunks = sum((n + 255) // 256 for n in lens)
        info = f"grid {plan.grid}, {chunks} chunks x {H * P // 64} units"
        if cut:
            kept = os.environ.get(ops.ENV_CAP)
            os.environ[ops.ENV_CAP] = str(plan.workspace_bytes // 3)
            try:
                outs.append(run("chunkpar"))
                sliced = ops.last_plan()
                info += f"; also in slices of {sliced.slice_units} units (grid {sliced.grid})"
                ok = ok and 0 < sliced.slice_units < H * P // 64
            finally:
                if kept is None:
                    del os.environ[ops.ENV_CAP]
                else:
                    os.environ[ops.ENV_CAP] = kept
        cupy.cuda.Device().synchronize()
        same = all(bool((o[0].view(cupy.uint8) == b.view(cupy.uint8)).all()) for o in zip(*outs) for b in o[1:])
        print(f"ssd bfloat16 chunk 256 headdim {P} dstate {N}, {len(lens)} sequences, {info}: families bitwise equal: "
              f"{same}", flush=True)
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
