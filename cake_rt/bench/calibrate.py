"""``cake-rt calibrate``: fit the SSD family-selection cost model to this GPU and save it.

Both SSD families are timed on every row of the SSD suite (the bench's timer: GPU time of one
synchronized call, cold L2), next to the time each family's ``predict_us`` gives with the current model.
``predict_us`` is affine in each linear constant of ``CostModel`` (all but the workspace bandwidth), so the
fit is a least-squares solve per family on features read off ``predict_us`` itself, in relative residuals
(each row divided by its measured time: the selection compares the families' ratio, and the rows span 30 us
to 4 ms): the op keeps the one formula, this module only measures. A constant no row exercises keeps its
current value; the solve is non-negative (a constant the rows do not need comes out 0, never negative: a
negative one would predict less time for more work), and only when no non-negative solution exists does the
fit fall back to scaling the current constants by one factor per family. The workspace
bandwidth (the one constant ``predict_us`` divides by) is searched on a log grid around its current value:
the linear fit is made at each candidate, and the one whose predictions are nearest the measurements in
relative terms is kept.

The walk schedule (the chunk-parallel kernel's other schedule) is timed too, on the rows where the planner weighs it
(a ring, and a tile for every CTA). Its two constants (``w_chain``, ``w_tiles``; ``predict_walk_us`` is the larger of
two terms, so not affine in them) are fitted after the families' by a search over a log grid, in the same relative
terms.

The fit is saved as JSON at ``cake_rt.ops.ssd.cost_model_path(gpu name)`` (under the cache directory) and
used by ``ssd_combined`` / ``ssd_plan`` on every GPU of that model from then on.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import math

import numpy as np

FAMILIES = ("exact", "chunkpar")


def linear_fields(model, predict) -> list:
    """Names of the float fields of ``model`` in which ``predict(model)`` (a dict of family -> us) is affine."""
    out = []
    for f in dataclasses.fields(model):
        if f.type not in (float, "float"):
            continue
        v = getattr(model, f.name)
        try:
            p = [predict(dataclasses.replace(model, **{f.name: x})) for x in (0.0, v or 1.0, 2 * (v or 1.0))]
        except (ZeroDivisionError, OverflowError, ValueError):
            continue
        if all(math.isclose(p[2][k] - p[1][k], p[1][k] - p[0][k], rel_tol=1e-9, abs_tol=1e-9) for k in p[0]):
            out.append(f.name)
    return out


def features(model, predict, names: list) -> tuple:
    """({family: base us}, {family: {field: d us / d field}}) of ``predict`` at ``model``."""
    zero = dataclasses.replace(model, **{n: 0.0 for n in names})
    base = predict(zero)
    grad = {fam: {} for fam in base}
    for n in names:
        one = predict(dataclasses.replace(zero, **{n: 1.0}))
        for fam in base:
            grad[fam][n] = one[fam] - base[fam]
    return base, grad


BW_FIELD = "bw_bytes_per_us"
BW_GRID = [2.0 ** (k / 4.0) for k in range(-12, 17)]  # factors of the current bandwidth: 1/8 .. 16, 19% apart


def fit(model, samples: list) -> tuple:
    """Fit ``model``'s constants to ``samples`` = [(predict, {family: measured us})]: the linear ones at each
    workspace bandwidth of ``BW_GRID`` (times the current one), keeping the fit with the smallest sum of squared
    log ratios of predicted to measured time (the current bandwidth wins ties).

    Returns (new model, {family: how it was fitted})."""
    best = None
    bw0 = getattr(model, BW_FIELD)
    for f in sorted(BW_GRID, key=lambda f: abs(math.log(f))):
        new, how = fit_linear(dataclasses.replace(model, **{BW_FIELD: bw0 * f}), samples)
        err = sum(math.log(pr / us) ** 2 for predict, measured in samples
                  for pr, us in ((predict(new)[fam], measured[fam]) for fam in measured) if pr > 0 and us > 0)
        if best is None or err < best[0] * (1 - 1e-9):
            best = (err, new, how)
    _, new, how = best
    bw = getattr(new, BW_FIELD)
    how = {fam: f"{h}; workspace bandwidth {bw:.3g} B/us" + (" (searched)" if bw != bw0 else " (kept)")
           for fam, h in how.items()}
    return new, how


def nonnegative_lstsq(A, b):
    """``x >= 0`` minimizing ``|A x - b|`` (None when no column gives a non-negative solution). The optimum is the
    unconstrained least squares on its own support, so among the column subsets whose solution is non-negative the
    one with the smallest residual is it: exact, and cheap for the four or five constants of a family. A constant
    at 0 is one the rows do not need (a negative one would predict less time for more work)."""
    best = None
    n = A.shape[1]
    for mask in range(1, 1 << n):
        cols = [j for j in range(n) if mask >> j & 1]
        x = np.linalg.lstsq(A[:, cols], b, rcond=None)[0]
        if not np.all(np.isfinite(x)) or np.any(x < 0):
            continue
        full = np.zeros(n)
        full[cols] = x
        err = float(np.sum((A @ full - b) ** 2))
        if best is None or err < best[0]:
            best = (err, full)
    return None if best is None else best[1]


def fit_linear(model, samples: list) -> tuple:
    """Fit ``model``'s linear constants to ``samples`` (as ``fit``), the workspace bandwidth as it is."""
    names = linear_fields(model, samples[0][0]) if samples else []
    updates, how = {}, {}
    for fam in FAMILIES:
        rows, rhs, cur = [], [], []
        for predict, measured in samples:  # each row divided by its measured time: relative residuals
            if fam not in measured:
                continue
            base, grad = features(model, predict, names)
            w = 1.0 / measured[fam]
            rows.append([grad[fam][n] * w for n in names])
            rhs.append((measured[fam] - base[fam]) * w)
            cur.append((predict(model)[fam] - base[fam]) * w)
        if not rows:
            how[fam] = "not measured: constants kept"
            continue
        A, b = np.asarray(rows, np.float64), np.asarray(rhs, np.float64)
        used = [j for j in range(len(names)) if np.any(A[:, j] != 0)]
        sol = None
        if len(rows) >= len(used) + 1 and used:
            x = nonnegative_lstsq(A[:, used], b)
            if x is not None:
                sol = dict(zip((names[j] for j in used), x.tolist()))
                zero = [names[j] for j, v in zip(used, x) if v == 0.0]
                how[fam] = (f"least squares on {len(rows)} rows: {', '.join(names[j] for j in used)}"
                            + (f" ({', '.join(zero)} at 0: non-negative)" if zero else ""))
        if sol is None:
            c = np.asarray(cur)
            scale = float(c @ b / (c @ c)) if float(c @ c) > 0 else 1.0
            if not math.isfinite(scale) or scale <= 0:
                scale = 1.0
            sol = {names[j]: getattr(model, names[j]) * scale for j in used}
            how[fam] = f"current constants scaled by {scale:.3f} ({len(rows)} rows)"
        updates.update(sol)
    return dataclasses.replace(model, **updates), how


WALK_GRID = [2.0 ** (k / 8.0) for k in range(-64, 25)]  # 1/256 .. 8, 9% apart
WALK_FINE = [2.0 ** (k / 64.0) for k in range(-8, 9)]   # then around the best, 1% apart


def fit_walk(model, samples: list) -> tuple:
    """Fit ``model``'s walk constants to ``samples`` = [(predict_walk_us's keyword inputs, measured us)]: the pair of
    ``WALK_GRID`` values with the smallest sum of squared log ratios of predicted to measured time, then refined by
    ``WALK_FINE`` around it. No sample: the constants are kept.

    Returns (new model, how it was fitted)."""
    from cake_rt.ops.ssd import predict_walk_us

    samples = [(q, us) for q, us in samples if us > 0]
    if not samples:
        return model, "not measured: constants kept"

    def err(c, t):
        m = dataclasses.replace(model, w_chain=c, w_tiles=t)
        return sum(math.log(predict_walk_us(m, **q) / us) ** 2 for q, us in samples)

    best = min((err(c, t), c, t) for c in WALK_GRID for t in WALK_GRID)
    _, c0, t0 = best
    best = min((err(c0 * fc, t0 * ft), c0 * fc, t0 * ft) for fc in WALK_FINE for ft in WALK_FINE)
    e, c, t = best
    new = dataclasses.replace(model, w_chain=c, w_tiles=t)
    return new, (f"w_chain / w_tiles searched on {len(samples)} rows (rms log ratio "
                 f"{math.sqrt(e / len(samples)):.3f})")


def save_fit(doc: dict, path, *, in_cache: bool) -> None:
    """Write a fit document to ``path`` atomically (``write_atomic``). ``in_cache``: ``path`` is the cache's
    ``cost_model_path``; the cache directory is then made (``0700``) and checked as for the cubins, and a
    directory that is not trusted is a ``ValueError`` (the fit would be ignored there)."""
    import pathlib

    from cake_rt.launch.compile import trusted_cache_dir, write_atomic

    path = pathlib.Path(path)
    if in_cache:
        if trusted_cache_dir() is None:
            raise ValueError("the cache directory is not trusted (see the warning); pass --output PATH")
        path.parent.mkdir(mode=0o700, exist_ok=True)
    write_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def fit_document(info, model, table: list) -> dict:
    """The saved form of a fit: ``model`` fitted on the GPU ``info`` (``device_info``) from the rows of ``table``
    (name, measured us, predicted us, model inputs, walk sample or None). ``cost_model_for`` uses it only on a GPU of
    the name it holds and with the kernels it was measured on (``kernels_fingerprint``)."""
    from .. import __version__
    from ..ops import ssd as op

    return {"schema": op.COST_MODEL_SCHEMA, "gpu": info.name, "capability": list(info.capability),
            "sm_count": info.sm_count, "kernels": op.kernels_fingerprint(), "cake_rt": __version__,
            "model": dataclasses.asdict(model),
            "rows": [{"row": n, "measured_us": m, "model_inputs": q,
                      **({"walk_us": w[1], "walk_inputs": w[0]} if w else {})} for n, m, _, q, w in table]}


def _time_walk(op, args, kw, y, stream, timer, out, name):
    """(predict_walk_us's inputs, measured us) of the walk schedule on a row where the planner would weigh it (a ring,
    and a tile for every CTA), else None."""
    schedule, op._SCHEDULE = op._SCHEDULE, "walk"
    try:
        with stream:
            plan = op.ssd_plan(*args, **kw, family="chunkpar")
            units = plan.nheads * (plan.model_inputs["headdim"] // op.UNIT_ROWS)
            if not plan.walk_ring or plan.total_chunks * units < plan.grid:
                return None  # (fewer tiles than CTAs: forced only; the planner never takes the walk there)
            us = timer.time(lambda: op.ssd_combined(*args, **kw, family="chunkpar", out=y, stream=stream))["median"]
        stream.synchronize()
    except Exception as exc:  # no cooperative launch here
        out(f"{name}: the walk not runnable ({exc.__class__.__name__}: {exc})")
        return None
    finally:
        op._SCHEDULE = schedule
    q = {k: plan.model_inputs[k] for k in ("nseg", "nheads", "headdim", "dstate", "chunk", "max_chunks",
                                          "total_chunks")}
    return {**q, "slots": int(plan.grid)}, us * 1e3


def calibrate(*, rows=None, repeats: int = 7, save: bool = True, output: str | None = None, out=print) -> int:
    """Measure, fit, print and save (see the module docstring). Returns an exit status: 0 saved (or not
    asked to), 1 the fit could not be written."""
    import cupy

    from cake_rt.launch.arch import device_info
    from cake_rt.ops import ssd as op

    from .cases import ssd_inputs
    from .suites import suite_rows
    from .timing import Timer

    info = device_info()
    model, _ = op.cost_model_for(info.name, info.capability)
    stream = cupy.cuda.Stream(non_blocking=True)
    timer = Timer(stream, repeats=repeats, warmup=2, l2_bytes=info.l2_bytes, budget_s=1.0, min_repeats=3)
    samples, table, walk_samples = [], [], []
    want = set(rows) if rows else None
    for p in suite_rows("ssd"):
        if want and p["name"] not in want:
            continue
        inp = ssd_inputs(p, 1234)
        cu = None if inp["cu_seqlens"] is None else cupy.asnumpy(inp["cu_seqlens"])
        kw = dict(D=inp["D"], z=inp["z"], dt_bias=inp["dt_bias"], cu_seqlens=cu, dt_softplus=True,
                  return_final_states=True)
        args = (inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], int(p["chunk"]))
        y = cupy.empty_like(inp["x"])
        measured, plans = {}, {}
        schedule, op._SCHEDULE = op._SCHEDULE, "phases"  # the model's chunk-parallel constants are the three phases'
        try:
            with stream:
                for fam in FAMILIES:
                    try:
                        plans[fam] = op.ssd_plan(*args, **kw, family=fam)
                        measured[fam] = timer.time(lambda f=fam, y=y: op.ssd_combined(*args, **kw, family=f, out=y,
                                                                                      stream=stream))["median"] * 1e3
                    except Exception as exc:  # chunkpar over its workspace cap, or no cooperative launch
                        out(f"{p['name']}: {fam} not runnable ({exc.__class__.__name__}: {exc})")
            stream.synchronize()
        finally:
            op._SCHEDULE = schedule
        if not plans:
            continue
        plan = plans.get("chunkpar") or plans["exact"]
        q = plan.model_inputs
        def predict(m, q=q):
            return op.predict_us(m, **q)

        samples.append((predict, measured))
        walk = _time_walk(op, args, kw, y, stream, timer, out, p["name"])
        if walk is not None:
            walk_samples.append(walk)
        table.append((p["name"], measured, predict(model), q, walk))
        del inp, y
        cupy.get_default_memory_pool().free_all_blocks()
    if not samples:
        out("cake-rt calibrate: no row could be measured")
        return 1
    new, how = fit(model, samples)
    new, how["walk"] = fit_walk(new, walk_samples)
    out(f"{'row':<12} {'exact us':>9} {'chunkpar us':>12} {'walk us':>8}   predicted before -> after "
        f"(exact / chunkpar / walk)")
    for name, meas, before, _, walk in table:
        after = [pr for pr, mm in samples if mm is meas][0](new)
        cell = lambda d, k: f"{d[k]:.1f}" if k in d else "-"  # noqa: E731
        wcell = f"{walk[1]:.1f}" if walk else "-"
        wpred = (f" / {op.predict_walk_us(model, **walk[0]):.1f} -> {op.predict_walk_us(new, **walk[0]):.1f}"
                 if walk else "")
        out(f"{name:<12} {cell(meas, 'exact'):>9} {cell(meas, 'chunkpar'):>12} {wcell:>8}   "
            f"{before['exact']:.1f} / {before['chunkpar']:.1f} -> {after['exact']:.1f} / {after['chunkpar']:.1f}"
            + wpred)
    for fam, h in how.items():
        out(f"{fam}: {h}")
    new = dataclasses.replace(new, source=f"{info.name}, cake-rt calibrate "
                                          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}")
    out("model: " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                              for k, v in dataclasses.asdict(new).items()))
    if not save:
        return 0
    path = output or op.cost_model_path(info.name)
    if path is None:
        out("cake-rt calibrate: the disk cache is off (CAKE_RT_CACHE_DIR=off): the fit was not saved; "
            "pass --output PATH to keep it")
        return 1
    doc = fit_document(info, new, table)
    try:
        save_fit(doc, path, in_cache=output is None)
    except (OSError, ValueError) as exc:
        out(f"cake-rt calibrate: could not write {path}: {exc}")
        return 1
    op.forget_cost_models()
    out(f"saved {path} (used for every {info.name} from now on)")
    return 0
