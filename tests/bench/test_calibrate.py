"""cake-rt calibrate's fit (CPU only: the measurements are made up from a known model) and the op loading a
saved fit per GPU model."""
import dataclasses
import json

import numpy as np
import pytest

from cake_rt.bench.calibrate import fit, fit_walk, linear_fields, nonnegative_lstsq
from cake_rt.ops import ssd as op

QUANTITIES = [  # (nseg, nheads, headdim, dstate, chunk, max_chunks, total_chunks, ws_bytes): suite-like calls
    (1, 8, 64, 128, 256, 128, 128, 50 << 20), (1, 80, 64, 128, 256, 32, 32, 80 << 20),
    (8, 80, 64, 128, 256, 8, 64, 150 << 20), (1, 128, 64, 128, 128, 128, 128, 200 << 20),
    (1, 8, 64, 128, 256, 2, 2, 1 << 20), (16, 64, 64, 128, 128, 133, 520, 300 << 20),
    (2, 4, 128, 64, 64, 40, 60, 4 << 20),
]


def _predictor(q):
    nseg, H, P, N, Q, mx, tot, ws = q
    return lambda m: op.predict_us(m, nseg=nseg, nheads=H, headdim=P, dstate=N, chunk=Q, max_chunks=mx,
                                   total_chunks=tot, sm_count=132, ws_bytes=ws)


def test_linear_fields_are_the_fitted_constants():
    names = linear_fields(op.COST_MODELS[(9, 0)], _predictor(QUANTITIES[0]))
    assert "bw_bytes_per_us" not in names and "source" not in names
    assert {"e0", "p0", "p1"} <= set(names)


def test_fit_recovers_a_known_model():
    start = op.COST_MODELS[(9, 0)]
    truth = dataclasses.replace(start, e0=7.0, e_step=2.2, e_chunk=4.0, p_slice=3.1, p0=12.0, p1=2.5, p2=0.2)
    samples = [(pr, {k: v for k, v in pr(truth).items()}) for pr in map(_predictor, QUANTITIES)]
    new, how = fit(start, samples)
    for pr, meas in samples:
        for fam, us in pr(new).items():
            assert us == pytest.approx(meas[fam], rel=1e-6), (fam, how)


def test_fit_searches_the_workspace_bandwidth():
    # a truth whose workspace term is twice as fast (on the search grid): the predictions are recovered, with it
    start = op.COST_MODELS[(9, 0)]
    truth = dataclasses.replace(start, p0=9.0, p1=0.7, p2=0.05, p_slice=4.0,
                                bw_bytes_per_us=2.0 * start.bw_bytes_per_us)
    samples = [(pr, {k: v for k, v in pr(truth).items()}) for pr in map(_predictor, QUANTITIES)]
    new, how = fit(start, samples)
    assert new.bw_bytes_per_us == pytest.approx(truth.bw_bytes_per_us) and "searched" in how["chunkpar"]
    for pr, meas in samples:
        assert pr(new)["chunkpar"] == pytest.approx(meas["chunkpar"], rel=1e-6)


def test_fit_weighs_rows_by_their_time():
    # the longest row (7 ms) measured 10% over the truth must not pull the short rows (0.1-0.4 ms) off: the fit is
    # relative, so they stay within 3% (an absolute fit puts them 10-35% over)
    start = op.COST_MODELS[(9, 0)]
    truth = dataclasses.replace(start, e0=7.0, e_step=2.2, e_chunk=4.0)
    prs = list(map(_predictor, QUANTITIES))
    longest = max(prs, key=lambda pr: pr(truth)["exact"])
    samples = [(pr, {"exact": pr(truth)["exact"] * (1.1 if pr is longest else 1.0)}) for pr in prs]
    new, _ = fit(start, samples)
    for pr, meas in samples:
        if meas["exact"] < 500:
            assert pr(new)["exact"] == pytest.approx(meas["exact"], rel=0.03)


def test_fit_of_noisy_data_never_goes_negative():
    start = op.COST_MODELS[(9, 0)]
    samples = [(pr, {"exact": 5.0, "chunkpar": 500.0}) for pr in map(_predictor, QUANTITIES[:3])]
    new, _ = fit(start, samples)
    assert all(getattr(new, f) >= 0 for f in ("e0", "e_step", "e_chunk", "p0", "p1", "p2"))
    for pr, meas in samples:
        assert all(v > 0 for v in pr(new).values())


def test_nonnegative_lstsq_is_the_constrained_optimum():
    # b is explained by column 0 alone; the unconstrained solve takes a negative column 1 for a smaller residual
    rng = np.random.default_rng(4)
    A = np.abs(rng.standard_normal((8, 3))) + 0.1
    b = A[:, 0] * 2.0 - 0.3 * A[:, 1] + 0.01 * rng.standard_normal(8)
    assert np.any(np.linalg.lstsq(A, b, rcond=None)[0] < 0)
    x = nonnegative_lstsq(A, b)
    assert np.all(x >= 0) and x[0] > 1.0
    err = np.sum((A @ x - b) ** 2)
    for _ in range(2000):  # no non-negative point nearby does better
        y = np.maximum(x + 0.05 * rng.standard_normal(3), 0.0)
        assert np.sum((A @ y - b) ** 2) >= err - 1e-12
    assert nonnegative_lstsq(np.ones((3, 1)), -np.ones(3)) is None  # only a negative solution: none


def test_fit_keeps_the_measured_faster_family_when_an_unconstrained_fit_goes_negative():
    # the 2026-12-04 H200 measurements (tests/ssd/test_ssd_args.py: H200_ROWS): the chunk-parallel least squares
    # wants negative constants (p_slice among them); the non-negative fit puts every row within 4% (exact) and 7%
    # (chunk-parallel) and on its faster family
    from tests.ssd.test_ssd_args import H200_ROWS

    start = dataclasses.replace(op.COST_MODELS[(9, 0)], e0=7.702, e_step=1.005, e_chunk=3.275, e_pair=0.2191,
                                p_slice=5.569, p0=6.240, p1=1.022, p2=0.08996, bw_bytes_per_us=8.485e6)
    samples = []
    for nseg, H, Q, mx, tot, ws, slices, rows, cols, ex, cp in H200_ROWS.values():
        q = dict(nseg=nseg, nheads=H, headdim=64, dstate=128, chunk=Q, max_chunks=mx, total_chunks=tot, sm_count=132,
                 ws_bytes=ws, coop_slots=264, slices=slices, rows=rows, cols=cols)
        samples.append(((lambda m, q=q: op.predict_us(m, **q)), {"exact": ex, "chunkpar": cp}))
    new, how = fit(start, samples)
    assert "scaled" not in how["chunkpar"], how
    for pr, meas in samples:
        p = pr(new)
        assert p["exact"] == pytest.approx(meas["exact"], rel=0.04)
        assert p["chunkpar"] == pytest.approx(meas["chunkpar"], rel=0.07)
        assert (p["chunkpar"] < p["exact"]) == (meas["chunkpar"] < meas["exact"])


def test_saved_fit_is_used_for_its_gpu_model_only(monkeypatch, tmp_path):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    op.forget_cost_models()
    model, note = op.cost_model_for("NVIDIA H100 80GB HBM3", (9, 0))
    assert model == op.COST_MODELS[(9, 0)] and "no saved fit for NVIDIA H100" in note and "calibrate" in note
    assert op.cost_model_for("NVIDIA H200", (9, 0))[1] == ""
    fitted = dataclasses.replace(model, e0=1.5, source="test fit")
    path = op.cost_model_path("NVIDIA H100 80GB HBM3")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": op.COST_MODEL_SCHEMA, "gpu": "NVIDIA H100 80GB HBM3",
                                "kernels": op.kernels_fingerprint(), "model": dataclasses.asdict(fitted)}))
    op.forget_cost_models()
    assert op.cost_model_for("NVIDIA H100 80GB HBM3", (9, 0)) == (fitted, "")
    path.write_text("{broken")
    op.forget_cost_models()
    with pytest.warns(UserWarning, match="ignoring the SSD cost model"):
        model, note = op.cost_model_for("NVIDIA H100 80GB HBM3", (9, 0))
    assert model == op.COST_MODELS[(9, 0)] and note
    op.forget_cost_models()


WALK_QUANTITIES = [  # predict_walk_us's inputs: nemotron-h, m2-2.7b (tile-bound) and seed (its long walks bind)
    dict(nseg=1, nheads=128, headdim=64, dstate=128, chunk=128, max_chunks=128, total_chunks=128, slots=264),
    dict(nseg=1, nheads=80, headdim=64, dstate=128, chunk=256, max_chunks=32, total_chunks=32, slots=264),
    dict(nseg=1, nheads=8, headdim=64, dstate=128, chunk=256, max_chunks=128, total_chunks=128, slots=264),
]


def test_fit_walk_recovers_known_constants():
    start = op.COST_MODELS[(9, 0)]
    truth = dataclasses.replace(start, w_chain=0.3, w_tiles=1.7)
    samples = [(q, op.predict_walk_us(truth, **q)) for q in WALK_QUANTITIES]
    new, how = fit_walk(start, samples)
    assert "3 rows" in how
    assert new.w_chain == pytest.approx(0.3, rel=0.02) and new.w_tiles == pytest.approx(1.7, rel=0.02), how
    for q, us in samples:
        assert op.predict_walk_us(new, **q) == pytest.approx(us, rel=0.02)
    # every other constant as it was
    assert dataclasses.replace(new, w_chain=start.w_chain, w_tiles=start.w_tiles) == start


def test_fit_walk_without_samples_keeps_the_constants():
    start = op.COST_MODELS[(9, 0)]
    new, how = fit_walk(start, [])
    assert new == start and "kept" in how


def test_the_families_fit_leaves_the_walk_constants():
    # predict_us does not read them: the least squares keeps them, whatever the rows say
    start = op.COST_MODELS[(9, 0)]
    truth = dataclasses.replace(start, e0=7.0, e_step=2.2, p1=2.5)
    samples = [(pr, pr(truth)) for pr in map(_predictor, QUANTITIES)]
    new, _ = fit(start, samples)
    assert (new.w_chain, new.w_tiles) == (start.w_chain, start.w_tiles)


def test_a_fit_saved_before_the_walk_constants_is_ignored(monkeypatch, tmp_path):
    # schema 2 (no w_chain / w_tiles) was measured on kernels before the walk schedule: none of those run now
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    op.forget_cost_models()
    builtin = op.COST_MODELS[(9, 0)]
    old = {k: v for k, v in dataclasses.asdict(dataclasses.replace(builtin, e0=2.5, source="old fit")).items()
           if k not in ("w_chain", "w_tiles")}
    path = op.cost_model_path("NVIDIA H100 80GB HBM3")
    path.parent.mkdir(parents=True)
    for schema in ("cake-rt-ssd-cost-model/2", "cake-rt-ssd-cost-model/1"):
        path.write_text(json.dumps({"schema": schema, "gpu": "NVIDIA H100 80GB HBM3", "model": old}))
        op.forget_cost_models()
        with pytest.warns(UserWarning, match="schema"):
            model, note = op.cost_model_for("NVIDIA H100 80GB HBM3", (9, 0))
        assert model == builtin and note
    op.forget_cost_models()


def test_a_saved_fit_of_another_gpu_model_is_ignored(monkeypatch, tmp_path):
    # the file at this GPU's path holds another GPU's times (copied over, or another name of the same slug)
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    op.forget_cost_models()
    fitted = dataclasses.replace(op.COST_MODELS[(9, 0)], e0=1.5, source="an A100's fit")
    path = op.cost_model_path("NVIDIA H100 80GB HBM3")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": op.COST_MODEL_SCHEMA, "gpu": "NVIDIA A100-SXM4-80GB",
                                "kernels": op.kernels_fingerprint(), "model": dataclasses.asdict(fitted)}))
    with pytest.warns(UserWarning, match="fitted on 'NVIDIA A100-SXM4-80GB', not on 'NVIDIA H100 80GB HBM3'"):
        model, note = op.cost_model_for("NVIDIA H100 80GB HBM3", (9, 0))
    assert model == op.COST_MODELS[(9, 0)] and note
    op.forget_cost_models()


def test_a_saved_fit_of_other_kernels_is_ignored(monkeypatch, tmp_path):
    # a fit made before an upgrade changed the SSD kernels times kernels that no longer run: the built-in constants
    # (refitted with the kernels) are used, and the warning asks for `cake-rt calibrate` again
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    op.forget_cost_models()
    fitted = dataclasses.replace(op.COST_MODELS[(9, 0)], e0=1.5, source="a fit of the old kernels")
    path = op.cost_model_path("NVIDIA H200")
    path.parent.mkdir(parents=True)
    doc = {"schema": op.COST_MODEL_SCHEMA, "gpu": "NVIDIA H200", "model": dataclasses.asdict(fitted)}
    for kernels in ("0" * 64, None):  # other kernels; a fit that does not say
        path.write_text(json.dumps(dict(doc, **({"kernels": kernels} if kernels else {}))))
        op.forget_cost_models()
        with pytest.warns(UserWarning, match="other SSD kernels.*calibrate"):
            model, _ = op.cost_model_for("NVIDIA H200", (9, 0))
        assert model == op.COST_MODELS[(9, 0)]
    op.forget_cost_models()


def test_calibrate_saves_what_the_planner_reads(monkeypatch, tmp_path):
    from cake_rt.bench.calibrate import fit_document, save_fit
    from cake_rt.launch.arch import DeviceInfo

    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path / "cache"))
    op.forget_cost_models()
    fitted = dataclasses.replace(op.COST_MODELS[(9, 0)], e0=1.5, source="test fit")
    info = DeviceInfo(index=0, name="NVIDIA H100 80GB HBM3", capability=(9, 0), sm_count=132,
                      smem_per_block_optin=232448, smem_per_sm=233472, regs_per_sm=65536, cooperative_launch=True,
                      l2_bytes=50 << 20, target="sm_90a")
    q = dict(nseg=1, nheads=8, headdim=64, dstate=128, chunk=256, max_chunks=8, total_chunks=8, sm_count=132,
             ws_bytes=1 << 20)
    doc = fit_document(info, fitted, [("seed", {"exact": 10.0}, {}, q, None)])
    save_fit(doc, op.cost_model_path(info.name), in_cache=True)
    assert op.cost_model_for(info.name, (9, 0)) == (fitted, "")
    op.forget_cost_models()
