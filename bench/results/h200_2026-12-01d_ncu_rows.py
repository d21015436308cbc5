"""Two calls of an SSD suite row (the suite's inputs, family auto), for ncu to profile the second launch:
    ncu ... -k regex:ssd_ -s 1 -c 1 python3 ncu_rows.py ROW"""
import json
import pathlib
import sys

import cupy

import cake_rt
from cake_rt.bench import cases

row = sys.argv[1]
suite = json.loads((pathlib.Path(cases.__file__).parent / "suites" / "ssd.json").read_text())
p = dict(suite["defaults"])
p.update(next(r for r in suite["rows"] if r["name"] == row))
inp = cases.ssd_inputs(p, 1234)
cu = None if inp["cu_seqlens"] is None else cupy.asnumpy(inp["cu_seqlens"])
kw = dict(D=inp["D"], z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True,
          return_final_states=True, return_varlen_states=bool(p.get("return_varlen_states")))
for _ in range(2):
    cake_rt.ssd_combined(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]), **kw)
cupy.cuda.Device().synchronize()
from cake_rt.ops import ssd as ops
print(row, ops.last_plan().family, ops.last_plan().reason)
