"""The walk programs' output tile counted from their SASS (thirty-seventh session, docs/ssd.md "The output tile's
instructions counted against a budget"): instructions a warp executes per output tile, by step, for nemotron-h's and
m2-2.7b's walk programs (sm_90a, bf16, dstate 128, headdim 64; chunk 128 / 256).

    PYTHONPATH=<tree> python bench/results/ssd_cpu_tilebudget_count.py build DIR     (NVRTC; nvdisasm on PATH or NVDISASM)
    python bench/results/ssd_cpu_tilebudget_count.py count DIR TREE [DIR2 TREE2 ...]
                                                          (TREE: main, arm, arm2, arm3_6 or arm3)

`build` compiles both programs with -lineinfo into DIR (cubins, `nvdisasm -gi` text, the program's full source text
for the line numbers). `count` sums each step's instructions over the straight-line address ranges a tile executes
(ssd_cpu_tilebudget_ranges.json, read off each tree's control flow by hand: the row-block loop's trip count, the
diagonal step's k-tiles taken by 1, 3/4, 1/2, 1/4 of the warps, the epilogue's D-per-head-with-z variant, full
sub-blocks, the draw and the elected thread's copies a quarter of the producer's warps; mbarrier spin loops once).
arm2, the thirty-eighth session's tilebudget2 (main 0bec86c's kernels), was mapped from arm's by aligning the two
listings, its loop heads, draw and sub-block loops by hand; arm3_6 (tilebudget3's prep copy alone) and arm3 (the arm
tilebudget3) from arm2's by ssd_cpu_tilebudget_mapranges.py (main -> arm3_6 -> arm3), the prep copy read by hand.
A step is its source line's (the inlined call chain); an asynchronous product's issue goes to the product before it,
and an instruction of no step (barrier, loop, kernel-level values) to the step of its first reader."""
import collections
import json
import os
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
CASES = {"nemo": (0, 2, 2, 64, 128, 128, 16), "m2": (0, 2, 2, 64, 128, 256, 80)}
ANN = re.compile(r'//## File ".*?", line (\d+)')
INS = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*$")
PROD = ("C S_prev^T", "C B^T", "M X off-diagonal", "M X diagonal", "chain step (chunk 256)")
NOSTEP = ("barriers, fences", "loop, address, other")
KEEP = re.compile(r"^(SYNCS|BRA|BAR|MEMBAR|FENCE|BSSY|BSYNC|WARPSYNC|@!PT LDS|NOP|EXIT|ISETP|PLOP3|UISETP|VOTEU)")


def build(out: pathlib.Path):
    from cake_rt.launch.compile import _full_text, compile_cubin, load_source
    from cake_rt.ops import ssd

    out.mkdir(parents=True, exist_ok=True)
    src = load_source(ssd.KERNEL_PATH)
    tool = os.environ.get("NVDISASM", "nvdisasm")
    for name, case in CASES.items():
        d = ssd.walk_defines(ssd.program_defines(*case, target="sm_90a", family="chunkpar"))
        cub = compile_cubin(src, name="ssd_combined.cu", target="sm_90a", defines=d, options=("-lineinfo",))
        (out / f"{name}.cubin").write_bytes(cub)
        (out / f"{name}.gi.sass").write_text(subprocess.run([tool, "-gi", "-c", str(out / f"{name}.cubin")],
                                                            check=True, capture_output=True, text=True).stdout)
        (out / f"{name}.cu").write_text(_full_text(src, d))


def parse(path):
    """[(address, text, inline chain of source lines, innermost first)]"""
    ins, acc, cur = [], [], []
    for t in open(path):
        m = ANN.search(t)
        if m:
            acc.append(int(m.group(1)))
            continue
        m = INS.match(t)
        if m:
            if acc:
                cur, acc = acc, []
            ins.append((int(m.group(1), 16), m.group(2), list(cur)))
    return ins


class Source:
    def __init__(self, path):
        self.lines = open(path).read().split("\n")
        rx = re.compile(r"\b(?:__device__|__global__|CAKE_DEVICE)\b.*?\b([A-Za-z_]\w*)\s*\(")
        self.starts = []
        for i, t in enumerate(self.lines, 1):
            s = t.strip()
            if ("__device__" in t or "__global__" in t or t.startswith("CAKE_DEVICE")) and not s.startswith(("//", "#")):
                m = rx.search(t)
                if m:
                    self.starts.append((i, m.group(1)))
        a = next(i for i, t in enumerate(self.lines, 1)
                 if t.startswith("__device__ __forceinline__ void ssd_chunk_output(const SsdArgs& a, const SsdSmem& s, SsdPipe& p"))
        self.co = (a, next(i for i in range(a, len(self.lines) + 1) if self.lines[i - 1].startswith("#else")))

    def func(self, line):
        best = None
        for s, n in self.starts:
            if s > line:
                break
            best = n
        return best or "?"

    def step(self, chain):
        fns = [self.func(l) for l in chain]
        co = [l for l in chain if self.co[0] <= l < self.co[1]]
        if not co:
            return "loop, address, other" if fns and fns[0] == "__launch_bounds__" else "tile hand-off, prep load"
        src = self.lines[co[-1] - 1]  # the line of ssd_chunk_output's own body
        inner = fns[:fns.index("ssd_chunk_output")] if "ssd_chunk_output" in fns else fns
        work = ("ssd_gate_rows", "ssd_epilogue_rows", "chain_step", "gemm_mx", "gemm_cb_issue", "gemm_cb_land", "gemm_inter",
                "gemm_cb")
        if (any(f in ("use_begin", "use_end", "use_end_read", "mbarrier_wait_parity", "mbarrier_arrive",
                      "fence_proxy_async_shared", "math_sync") for f in inner) or re.search(r"use_begin|use_end|\+\+p\.", src)) \
                and not any(f in work for f in fns):
            return "barriers, fences"
        if "chain_step" in fns:
            return "chain step (chunk 256)"
        if "ssd_gate_rows" in fns:
            return "z gate (silu)"
        if "ssd_epilogue_rows" in fns or "ssd_epilogue" in fns:
            return "epilogue (D x, gate, y stores)"
        if "gemm_inter" in fns or re.search(r"zero_tiles<8>\(y", src):
            return "C S_prev^T"
        if "scale_by_row_decay" in fns:
            return "row decay 2^R (off-diagonal rows)"
        if "output_diagonal_step" in fns:
            if any(f in ("pair", "masked", "one", "pack2") for f in fns):
                return "M diagonal (decay, mask, cvt)"
            return "M X diagonal" if "gemm_mx" in fns else "diagonal row scaling 2^(cs_t - R)"
        if re.search(r"gemm_cb\(|gemm_cb_issue|gemm_cb_land", src):
            return "C B^T"
        if "gemm_mx" in fns or re.search(r"MOffWG|gemm_mx\(y\[u\]", src):
            if any(f in ("pair", "column_factors", "pack2", "ex2") for f in fns) or "MOffWG" in src or "s.cs[u * SSD_Q" in src:
                return "M off-diagonal (factors, scale, cvt)"
            return "M X off-diagonal"
        return "loop, address, other"


def regs(text):
    body = re.sub(r"^@!?U?P\w+\s+", "", text)
    parts = body.split(None, 1)
    if len(parts) < 2:
        return None, set()
    ops = [o.strip() for o in parts[1].split(",")]
    dst = re.match(r"^(U?R\d+)$", ops[0])
    src = set(re.findall(r"\[(U?R\d+)", ops[0]))
    for o in ops[1:]:
        src |= set(re.findall(r"\b(U?R\d+)\b", o))
    return (dst.group(1) if dst else None), src


def assign_steps(d: pathlib.Path, name: str, ranges):
    """[((address, text, chain), weight)] of the ranges' instructions, and each one's step."""
    src = Source(d / f"{name}.cu")
    ins = parse(d / f"{name}.gi.sass")
    seq = [(i, f) for lo, hi, f in ranges for i in ins if int(lo, 16) <= i[0] <= int(hi, 16)]
    steps, last = [], None
    for (addr, text, chain), f in seq:
        c = src.step(chain)
        if c in PROD:
            last = c
        elif re.match(r"(HGMMA|WARPGROUP)", text) and last:
            c = last
        steps.append(c)
    orig = list(steps)
    for k in range(len(seq) - 1, -1, -1):
        text = seq[k][0][1]
        if orig[k] not in NOSTEP or KEEP.match(text):
            continue
        dst, _ = regs(text)
        if dst is None:
            continue
        for m in range(k + 1, min(k + 80, len(seq))):
            d2, s2 = regs(seq[m][0][1])
            if dst in s2:
                if steps[m] not in NOSTEP and not (orig[m] in NOSTEP and KEEP.match(seq[m][0][1])):
                    steps[k] = steps[m]
                break
            if d2 == dst:
                break
    return seq, steps


def count(d: pathlib.Path, name: str, ranges):
    seq, steps = assign_steps(d, name, ranges)
    by = collections.Counter()
    for ((addr, text, chain), f), c in zip(seq, steps):
        by[c] += f
    return by


def main():
    if sys.argv[1] == "build":
        build(pathlib.Path(sys.argv[2]))
        return
    ranges = json.load(open(HERE / "ssd_cpu_tilebudget_ranges.json"))
    cols = list(zip(sys.argv[2::2], sys.argv[3::2]))
    for name in CASES:
        for part in ("math", "producer"):
            res = [count(pathlib.Path(d), name, ranges[t][name][part]) for d, t in cols]
            keys = sorted(set().union(*res), key=lambda k: -res[0].get(k, 0))
            print(f"{name} {part} warpgroup, instructions a warp per tile: " + " | ".join(t for _, t in cols))
            for k in keys:
                print(f"  {k:38s}" + "".join(f"{r.get(k, 0):9.1f}" for r in res))
            print(f"  {'total':38s}" + "".join(f"{sum(r.values()):9.1f}" for r in res))


if __name__ == "__main__":
    main()
