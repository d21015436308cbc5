"""Figures, table, JSON schema, --compare, processes merge, timing statistics, peer checks (CPU only:
raw records are made here the way cake_rt.bench.cases makes them on a GPU)."""
import json
import math

import numpy as np
import pytest

from cake_rt.bench import cli, report, runner
from cake_rt.bench.cases import _base_record
from cake_rt.bench.peers import check_dsa, check_rows, rel_l2
from cake_rt.bench.suites import build_plan
from cake_rt.bench.timing import combine_processes, repeats_for, summarize

FLOORS = {"copy_tbps": 4.0, "bf16_tflops": 800.0, "copy": {"method": "m"}, "gemm": {"method": "cuBLAS test"}}


def ms(vals):
    s = summarize(vals)
    s["samples"] = list(vals)
    return s


def fake_records(item, scale=1.0):
    """Raw records shaped like cases.run_item's, with made-up times."""
    if item.table == "ssd":
        r = _base_record(item, "ours", flops=10 ** 11, bytes=10 ** 9, dims={k: item.params[k] for k in
                         ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups", "chunk")})
        r["ms"] = ms([scale * 0.5, scale * 0.52, scale * 0.55])
        r["peers"] = {"mamba_ssm-triton": {"ms": ms([2.0, 2.1, 2.2]), "check": {"ok": True}}}
        r["extra"] = {"family": "exact"}
        return [r]
    if item.table == "dsa":
        dims = {"T": 8, "Tkv": 16, "segments": 1, "visible_pairs": 100, "H": item.heads, "D": 128, "topk": 2048}
        out = []
        for arm, t in (("prepared", 1.0), ("eager", 1.1)):
            r = _base_record(item, arm, flops=8 * 10 ** 11, bytes=10 ** 8, dims=dims)
            r["ms"] = ms([scale * t, scale * t * 1.01, scale * t * 1.02])
            r["peers"] = {"torch-eager": {"ms": ms([40.0, 41.0]), "check": {"ok": arm == "prepared"}}}
            out.append(r)
        return out
    out = []
    for hold in (0,) + item.holds:
        for arm in item.schedules:
            r = _base_record(item, arm, hold=hold, flops=10 ** 9, bytes=10 ** 6, dims={})
            t = 1.0 * (1 + (0.1 if arm == "ticket" else 0.8) * (hold > 0))
            r["ms"] = ms([t, t, t])
            out.append(r)
    return out


def fake_doc(plan, scale=1.0):
    recs = [r for it in plan for r in fake_records(it, scale)]
    machine = {"cake_rt": "0.1.0", "git_hash": "abc123", "git_dirty": False, "cupy": "14", "nvrtc": "12.9",
               "cuda_driver": "13.0", "cuda_runtime": "12.9", "driver": "580", "gpu": {"name": "Fake H200", "sm_count": 132}}
    return {"schema": runner.SCHEMA, "machine": machine, "floors": json.loads(json.dumps(FLOORS)), "notes": [], "records": recs,
            "config": {"processes": 1}}


def test_summarize_and_repeats():
    s = summarize([5.0, 1.0, 2.0, 4.0, 3.0])
    assert (s["median"], s["min"], s["max"], s["n"]) == (3.0, 1.0, 5.0, 5)
    assert s["p20"] == pytest.approx(np.percentile([1, 2, 3, 4, 5], 20))
    assert s["p80"] == pytest.approx(4.2)
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])
    assert repeats_for(1.0, 20, budget_s=2.0, min_repeats=5) == 20
    assert repeats_for(200.0, 20, budget_s=2.0, min_repeats=5) == 10
    assert repeats_for(5000.0, 20, budget_s=2.0, min_repeats=5) == 5
    assert repeats_for(5000.0, 3, budget_s=2.0, min_repeats=5) == 3


def test_combine_processes_takes_median_of_medians():
    per = [ms([1.0, 1.0, 9.0]), ms([2.0, 2.0, 2.0]), ms([3.0, 3.5, 3.0])]
    c = combine_processes(per)
    assert c["median"] == 2.0 and c["processes"] == 3 and c["process_medians"] == [1.0, 2.0, 3.0]
    assert c["n"] == 9


def test_combine_processes_keeps_the_host_probe():
    """Each process records its host Python speed beside its host time; the combined host figure carries their
    median (the report prints it beside the host ms), and none where a process (an older record) has none."""
    per = [ms([1.0, 1.1]), ms([2.0, 2.1]), ms([3.0, 3.1])]
    for s, (host, probe) in zip(per, ((0.02, 8.0), (0.03, 12.0), (0.025, 9.0))):
        s["host"] = {**summarize([host]), "probe_us": probe, "gc_collections": [0, 0, 0]}
    c = combine_processes(per)
    assert c["host"]["median"] == pytest.approx(0.025) and c["host"]["probe_us"] == pytest.approx(9.0)
    del per[1]["host"]["probe_us"]
    assert "probe_us" not in combine_processes(per)["host"]


def test_finalize_figures():
    plan = build_plan("all", rows=["seed", "S1"], heads=(64,), side_stream=(1, 32))
    doc = report.finalize(fake_doc(plan))
    by = {r["key"]: r for r in doc["records"]}
    s = by["ssd/seed/ours"]
    assert s["tflops"] == pytest.approx(1e11 / 0.52e-3 / 1e12)
    assert s["tbps"] == pytest.approx(1e9 / 0.52e-3 / 1e12)
    assert s["floor_bound"] == "bytes" and s["floor_ms"] == pytest.approx(1e9 / 4e12 * 1e3)
    assert s["floor_fraction"] == pytest.approx(s["floor_ms"] / 0.52)
    assert s["peers"]["mamba_ssm-triton"]["speedup"] == pytest.approx(2.1 / 0.52)
    assert s["target_result"]["checks"]["min_peer_speedup"] is True  # 2.1 / 0.52 >= 4
    assert s["target_result"]["checks"]["max_ms"] is False and s["target_result"]["met"] is False  # 0.52 > 0.063
    p = by["dsa/S1/H64/prepared"]
    assert p["floor_bound"] == "flops" and p["floor_ms"] == pytest.approx(8e11 / 800e12 * 1e3)
    assert p["peers"]["torch-eager"]["speedup"] == pytest.approx(40.5 / 1.01)
    assert by["dsa/S1/H64/eager"]["peers"]["torch-eager"]["speedup"] is None  # its check failed
    t1 = by["side_stream/S1/H64/ticket/hold1"]
    assert t1["slowdown"] == pytest.approx(1.1) and t1["static_over_ticket"] == pytest.approx(1.8 / 1.1)
    assert t1["target_result"]["met"] is True  # 1.1 <= 1.15
    assert by["side_stream/S1/H64/static/hold1"]["target_result"] is None
    assert by["side_stream/S1/H64/ticket/hold32"]["target_result"] is None


def test_json_roundtrip_and_schema(tmp_path):
    plan = build_plan("all", rows=["seed", "S1"], heads=(64,))
    doc = report.finalize(fake_doc(plan))
    doc["records"][0]["extra"]["nan"] = float("nan")
    report.validate_doc(doc)
    path = tmp_path / "r.json"
    report.write_json(doc, str(path))
    back = json.loads(path.read_text())  # strict JSON: no NaN tokens
    assert "NaN" not in path.read_text()
    report.validate_doc(back)
    assert back["records"][0]["extra"]["nan"] is None
    assert back["machine"]["gpu"]["sm_count"] == 132


@pytest.mark.parametrize("mutate, msg", [
    (lambda d: d.__setitem__("schema", "x"), "schema"),
    (lambda d: d["machine"].pop("git_hash"), "machine"),
    (lambda d: d["machine"]["gpu"].pop("sm_count"), "sm_count"),
    (lambda d: d["floors"].__setitem__("copy_tbps", None), "copy_tbps"),
    (lambda d: d.pop("config"), "config"),
    (lambda d: d["records"].append(dict(d["records"][0])), "twice"),
    (lambda d: d["records"][0].pop("ms"), "'ms'"),
    (lambda d: d["records"][0]["ms"].__setitem__("p20", 99.0), "p20"),
    (lambda d: d["records"][0].pop("error"), "missing"),
])
def test_schema_violations(mutate, msg):
    doc = report.finalize(fake_doc(build_plan("ssd", suite="quick")))
    mutate(doc)
    with pytest.raises(ValueError, match=msg):
        report.validate_doc(doc)


def test_table_and_compare():
    plan = build_plan("all", rows=["seed", "S1", "A1"], heads=(32,))
    new = report.finalize(fake_doc(plan, scale=1.0))
    old = report.finalize(fake_doc(plan[:2], scale=2.0))
    block = report.compare(new, old, "old.json")
    sp = {r["key"]: r["speedup"] for r in block["rows"]}
    assert sp["ssd/seed/ours"] == pytest.approx(2.0) and sp["dsa/S1/H32/prepared"] == pytest.approx(2.0)
    assert "dsa/A1/H32/prepared" in block["missing"]
    text = report.format_tables(new)
    for needle in ("SSD combined", "DSA indexer top-k", "Side stream", "Compare with old.json", "Fake H200",
                   "4.00 TB/s", "800 TFLOP/s", "check failed", "MISSED", "2.000x"):
        assert needle in text, needle


def test_compare_gives_no_speedup_for_a_row_of_another_problem():
    """A row of the old run with the same key but other dimensions (its suite file edited in between) is another
    problem: its time is no baseline. The row is left out of the compare table with a note saying what differs."""
    plan = build_plan("all", rows=["seed", "S1"], heads=(32,), side_stream=())
    new = report.finalize(fake_doc(plan))
    old = report.finalize(fake_doc(plan, scale=2.0))
    old["records"][0]["dims"]["seqlen"] = 16384
    block = report.compare(new, old, "old.json")
    assert [c["key"] for c in block["rows"]] == ["dsa/S1/H32/prepared", "dsa/S1/H32/eager"]
    report.validate_doc(new)
    text = report.format_tables(new)
    assert "ssd/seed/ours: not compared with old.json: another problem there (seqlen 16384 there, 32768 here)" in text


def test_error_records_reported():
    plan = build_plan("ssd", suite="quick")
    doc = fake_doc(plan)
    bad = _base_record(plan[1], "error")
    bad["error"] = "RuntimeError: boom"
    doc["records"] = doc["records"][:1] + [bad]
    report.finalize(doc)
    report.validate_doc(doc)
    assert "ssd/short/error: ERROR RuntimeError: boom" in report.format_tables(doc)


def test_merge_processes():
    plan = build_plan("dsa", rows=["S1"], heads=(32,), side_stream=())
    per = [fake_records(plan[0], scale=s) for s in (1.0, 3.0, 2.0)]
    merged = runner.merge_processes(per)
    assert [r["key"] for r in merged] == ["dsa/S1/H32/prepared", "dsa/S1/H32/eager"]
    assert merged[0]["ms"]["median"] == pytest.approx(2.0 * 1.01)
    assert merged[0]["ms"]["processes"] == 3
    assert merged[0]["peers"]["torch-eager"]["ms"]["median"] == pytest.approx(40.5)
    assert merged[1]["peers"]["torch-eager"]["check"]["ok"] is False
    err = _base_record(plan[0], "error")
    err["error"] = "x"
    assert runner.merge_processes([per[0], [err]])[-1]["error"] == "x"


def test_main_with_a_fake_gpu_run(monkeypatch, tmp_path, capsys):
    """The whole main(): plan -> run_plan (faked measurement) -> table, JSON, --compare, exit status."""
    import cake_rt.bench.cases as cases
    import cake_rt.bench.floors as floors
    import cake_rt.bench.machine as machine
    import cake_rt.bench.peers as peers

    monkeypatch.setattr(cli, "gpu_problem", lambda: None)
    monkeypatch.setattr(machine, "machine_header", lambda device=None: fake_doc([])["machine"])
    monkeypatch.setattr(peers, "peer_status", lambda: {"torch-eager": None, "mamba_ssm-triton": "not here"})
    monkeypatch.setattr(runner, "_free_pool", lambda: None)
    seen = []

    out = tmp_path / "run.json"
    partial = []
    collect = [True]

    def fake_run_item(item, opts, order=0):
        seen.append((item.key, order, opts["repeats"], opts["warm_l2"]))
        if collect[0] and out.exists():  # the rows before this one are already on disk, marked partial
            d = json.loads(out.read_text())
            partial.append((d["partial"], len(d["records"]), d["config"]["repeats"]))
        return fake_records(item)

    monkeypatch.setattr(cases, "run_item", fake_run_item)
    monkeypatch.setattr(floors, "measure_floors", lambda stream: json.loads(json.dumps(FLOORS)))
    import cupy

    monkeypatch.setattr(cupy.cuda, "Stream", lambda non_blocking=False: _NullStream())
    rc = cli.main(["all", "--rows", "seed,A1", "--heads", "64", "--repeats", "9", "--warm-l2", "--json", str(out)])
    assert rc == 0
    assert partial == [(True, 1, 9), (True, 3, 9)]
    collect[0] = False
    assert "partial" not in json.loads(out.read_text())
    assert seen == [("ssd/seed", 0, 9, True), ("dsa/A1/H64", 0, 9, True), ("side_stream/A1/H64", 0, 9, True)]
    doc = json.loads(out.read_text())
    report.validate_doc(doc)
    assert doc["config"]["repeats"] == 9 and doc["config"]["warm_l2"] is True
    assert any("mamba_ssm-triton not available" in n for n in doc["notes"])
    cap = capsys.readouterr()
    assert "DSA indexer top-k" in cap.out and "3/3" in cap.err
    rc = cli.main(["all", "--rows", "seed", "--compare", str(out), "--side-stream", "none"])
    assert rc == 0 and "Compare with" in capsys.readouterr().out

    # --from-json re-renders a saved run with no GPU: tables, Markdown, --compare against itself.
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no GPU (test)")
    md = tmp_path / "run.md"
    assert cli.main(["--from-json", str(out), "--markdown", str(md), "--compare", str(out)]) == 0
    text = md.read_text()
    assert "| A1 | 64 | prepared |" in text and "**Side stream" in text and "1.000x" in text
    assert "command: cake-rt bench all --rows seed,A1" in text
    assert "method: GPU time of one synchronized call" in text and "warm L2" in text
    assert "SSD combined" in capsys.readouterr().out
    assert cli.main(["--from-json", str(out), "--json", str(out)]) == cli.EXIT_USAGE
    assert cli.main(["--from-json", str(tmp_path / "nope.json")]) == cli.EXIT_USAGE

    def failing(item, opts, order=0):
        r = _base_record(item, "error")
        r["error"] = "RuntimeError: no op"
        return [r]

    def no_floors(stream):
        raise RuntimeError("no cuBLAS")

    monkeypatch.setattr(floors, "measure_floors", no_floors)
    monkeypatch.setattr(cli, "gpu_problem", lambda: None)
    assert cli.main(["ssd", "--rows", "short", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["floors"] is None and "floors not measured: RuntimeError: no cuBLAS" in doc["notes"]
    assert doc["records"][0]["tflops"] > 0 and "floor_ms" not in doc["records"][0]
    capsys.readouterr()

    monkeypatch.setattr(cases, "run_item", failing)
    monkeypatch.setattr(cli, "gpu_problem", lambda: None)
    assert cli.main(["ssd", "--rows", "short"]) == cli.EXIT_FAILED_ROWS


class _NullStream:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def synchronize(self):
        pass


def test_check_rows_and_rel_l2():
    r = check_rows(1000, 10)
    assert r[0] == 0 and r[-1] == 999 and len(r) <= 10 and np.all(np.diff(r) > 0)
    assert check_rows(5).tolist() == [0, 1, 2, 3, 4]
    assert rel_l2([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert rel_l2([1.0, float("nan")], [1.0, 2.0]) == math.inf


def _dsa_case(T=6, lk=9, topk=4, off=3):
    lay = {"rows": list(range(T)), "cu_q": np.array([0, T]), "cu_k": np.array([0, lk]), "offsets": np.array([off])}
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((T, lk)).astype(np.float32)
    idx = np.full((T, topk), -1, np.int32)
    sc = np.full((T, topk), -np.inf, np.float32)
    for t in range(T):
        vis = np.arange(min(off + t + 1, lk))
        top = vis[np.argsort(-scores[t, vis], kind="stable")[:topk]]
        top.sort()
        idx[t, :top.size] = top
        sc[t, :top.size] = scores[t, top]
    return lay, idx, sc


def test_check_dsa_accepts_agreement_and_catches_errors():
    lay, idx, sc = _dsa_case()
    ok = check_dsa(idx, sc, idx[:, ::-1].copy(), sc[:, ::-1].copy(), lay)
    assert ok["ok"] and ok["overlap_mean"] == 1.0 and ok["score_max_rel_diff"] == 0.0
    bad = idx.copy()
    bad[0, 0] = 8  # row 0 sees keys 0..3 only
    assert not check_dsa(bad, sc, idx, sc, lay)["ok"]
    short = idx.copy()
    short[5, 3] = -1  # row 5 has 9 visible keys: all 4 slots must be filled
    assert "expected 4" in check_dsa(short, sc, idx, sc, lay)["problems"][0]
    other = np.where(idx >= 0, (idx + 1) % 9, -1).astype(np.int32)
    assert not check_dsa(idx, sc, other, sc, lay)["ok"]
    assert not check_dsa(idx, sc, idx, sc * 1.5, lay)["ok"]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from cake_rt.bench.plot import write_plot

    doc = report.finalize(fake_doc(build_plan("all", rows=["seed", "S1", "A1"])))
    path = tmp_path / "p.png"
    write_plot(doc, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_torch_eager_peer_against_brute_force():
    """The PyTorch eager DSA peer (CPU torch here when installed) picks the right keys on a small zigzag case."""
    torch = pytest.importorskip("torch")
    from cake_rt.bench.layouts import zigzag_layout
    from cake_rt.bench.peers import torch_dsa_topk

    lay = zigzag_layout([16, 32], 2, 1)
    T, Tkv, H, D, topk = lay.T, lay.Tkv, 4, 16, 6
    g = torch.Generator().manual_seed(0)
    q = torch.randn(T, H, D, generator=g).to(torch.bfloat16)
    k = torch.randn(Tkv, D, generator=g).to(torch.bfloat16)
    w = torch.randn(T, H, generator=g)
    for budget in (1 << 30, 1):  # one block per segment, and one query per block
        idx, sc = torch_dsa_topk(q, k, w, topk, lay.cu_seqlens_q, lay.cu_seqlens_k, lay.q_causal_offsets,
                                 budget_bytes=budget)
        qd, kd, wd = q.double().numpy(), k.double().numpy(), w.double().numpy()
        rows = {"rows": list(range(T)), "cu_q": lay.cu_seqlens_q, "cu_k": lay.cu_seqlens_k, "offsets": lay.q_causal_offsets}
        ref_i = np.full((T, topk), -1, np.int32)
        ref_s = np.full((T, topk), -np.inf, np.float32)
        for s in range(lay.segments):
            q0, q1, k0, k1 = (int(v) for v in (lay.cu_seqlens_q[s], lay.cu_seqlens_q[s + 1], lay.cu_seqlens_k[s],
                                                lay.cu_seqlens_k[s + 1]))
            for t in range(q0, q1):
                p = int(lay.q_causal_offsets[s]) + t - q0
                keys = np.arange(k0, min(k0 + p + 1, k1))
                score = (np.maximum(qd[t] @ kd[keys].T, 0) * wd[t][:, None]).sum(0)
                top = np.sort(keys[np.argsort(-score, kind="stable")[:topk]])
                ref_i[t, :top.size] = top
                ref_s[t, :top.size] = score[np.searchsorted(keys, top)]
        chk = check_dsa(ref_i, ref_s, idx.numpy(), sc.numpy(), rows, min_overlap=0.95, score_tol=2e-2)
        assert chk["ok"], chk


class _FakeEvent:
    def __init__(self, log):
        self.log = log

    def record(self, stream):
        self.log.append(("record", id(self)))

    def synchronize(self):
        self.log.append(("sync", id(self)))


class _FakeGpu:
    """Stands in for the CUDA events and the delay kernel; elapsed time comes from a list."""

    def __init__(self, log, gpu_ms):
        self.log, self.gpu_ms = log, list(gpu_ms)

    def event(self):
        return _FakeEvent(self.log)

    def elapsed_ms(self, start, end):
        return self.gpu_ms.pop(0)

    def delay(self, stream, ms):
        self.log.append(("delay", round(ms, 6)))


def test_timer_order_delay_and_host_time():
    from cake_rt.bench.timing import HOST_BATCH, HOST_BATCHES, Timer, delay_ms_for

    log = []
    warm = [0.0, 0.010, 1.0, 1.002, 2.0, 2.002]
    timed = [10.0 + i * 0.5 + d for i in range(5) for d in (0, 0.001)]
    steady = [20.0 + b + i * 0.01 + d for b in range(HOST_BATCHES) for i in range(HOST_BATCH)
              for d in (0.0, (1 + b % 2) * 1e-3)]  # each call timed alone: 1 ms a call in even batches, 2 ms in odd
    wall = [30.0 + i for i in range(10)]
    host = iter(warm + timed + steady + wall)
    gpu = _FakeGpu(log, [9.0, 5.0, 4.0] + [1.0, 3.0, 2.0, 5.0, 4.0] + [7.0, 6.0, 8.0, 6.5, 7.5])
    t = Timer(stream=None, repeats=5, warmup=3, pieces=gpu, flush=lambda s: log.append(("flush",)), budget_s=10.0)
    t._clock = lambda: next(host)
    out = t.time(lambda: log.append(("call",)))
    assert out["median"] == 3.0 and out["n"] == 5 and out["samples"] == [1.0, 3.0, 2.0, 5.0, 4.0]
    assert out["delay_ms"] == pytest.approx(delay_ms_for(2.0)) == pytest.approx(1.5 * 2.0 + 0.05)
    # Host time: steady state, HOST_BATCH calls back to back per batch behind one delay, HOST_BATCHES batches.
    assert out["host"]["median"] == pytest.approx(1.5) and out["host"]["n"] == HOST_BATCHES * HOST_BATCH
    assert out["host"]["min"] == pytest.approx(1.0) and out["host"]["max"] == pytest.approx(2.0)
    assert out["host"]["calls_per_batch"] == HOST_BATCH
    # Beside it: the collections the interpreter made during the batches (by generation) and the host's Python speed.
    assert len(out["host"]["gc_collections"]) == 3 and all(n >= 0 for n in out["host"]["gc_collections"])
    assert out["host"]["probe_us"] > 0
    # Warm-ups: flush, start, call, end, sync (no delay); timed calls: flush, delay, start, call, end, sync.
    kinds = [e[0] for e in log]
    assert kinds[:5] == ["flush", "record", "call", "record", "sync"] and "delay" not in kinds[:15]
    assert kinds[15:21] == ["flush", "delay", "record", "call", "record", "sync"]
    batch = ["delay"] + ["call"] * HOST_BATCH + ["record", "sync"]
    assert kinds[45:45 + HOST_BATCHES * len(batch)] == HOST_BATCHES * batch
    assert log[45][1] == pytest.approx(delay_ms_for(HOST_BATCH * 1.0))  # covers the batch's host work
    assert sum(1 for e in log if e[0] == "delay") == 5 + HOST_BATCHES
    # Eager wall samples: flush, start, wait for it (idle stream), call, end, sync; no delay kernel.
    w0 = 45 + HOST_BATCHES * len(batch)
    assert kinds[w0:w0 + 6] == ["flush", "record", "sync", "call", "record", "sync"]
    assert out["wall"]["median"] == 7.0 and out["wall"]["n"] == 5
    assert delay_ms_for(1e6) == 20.0 and delay_ms_for(-1) == 0.05


def test_arms_are_timed_in_interleaved_rounds():
    """Two arms of one process sample the same stretch of the GPU's clock: rounds of one call each, the order
    reversed every other round; an arm with fewer calls (its budget) drops out of the later rounds."""
    from cake_rt.bench.timing import Timer

    log = []
    gpu = _FakeGpu(log, [])
    gpu.elapsed_ms = lambda start, end: 4.0 if log[-3] == ("call", "slow") else 1.0
    t = Timer(stream=None, repeats=4, warmup=1, pieces=gpu, flush=lambda s: None, budget_s=0.010, min_repeats=2)
    t._clock = lambda: 0.0
    out = t.time_arms([("fast", lambda: log.append(("call", "fast"))), ("slow", lambda: log.append(("call", "slow")))])
    assert list(out) == ["fast", "slow"]
    assert out["fast"]["samples"] == [1.0] * 4 and out["slow"]["samples"] == [4.0] * 2  # 10 ms of budget: 2 slow calls
    calls = [e[1] for e in log if e[0] == "call"]
    timed = calls[2:2 + 6]  # after one warm-up call each
    assert timed == ["fast", "slow", "slow", "fast", "fast", "fast"]
    # The eager wall samples in rounds too, after the steady host batches.
    assert calls[-6:] == ["fast", "slow", "slow", "fast", "fast", "fast"]
    assert out["fast"]["wall"]["n"] == 4 and out["slow"]["wall"]["n"] == 2
    # One arm: time() is time_arms of that arm.
    log.clear()
    one = t.time(lambda: log.append(("call", "fast")))
    assert one["samples"] == [1.0] * 4 and one["wall"]["n"] == 4


def test_steady_host_batches_shrink_for_slow_calls():
    from cake_rt.bench.timing import HOST_BATCH, HOST_BATCH_MIN, HOST_BATCHES, Timer

    log = []
    t = Timer(stream=None, repeats=2, warmup=1, pieces=_FakeGpu(log, []), flush=lambda s: None, budget_s=0.5)
    clock = iter(range(1000))
    t._clock = lambda: float(next(clock))
    out = t.host_steady(lambda: log.append(("call",)), host_ms=0.05, gpu_ms=15.0)
    assert out["calls_per_batch"] == HOST_BATCH_MIN
    assert sum(1 for e in log if e[0] == "call") == HOST_BATCHES * HOST_BATCH_MIN
    log.clear()
    out = t.host_steady(lambda: log.append(("call",)), host_ms=0.05, gpu_ms=1.0)  # 0.15 * 500 / 1 / 4 = 18.75
    assert out["calls_per_batch"] == HOST_BATCH


def test_timer_warm_l2_has_no_flush():
    from cake_rt.bench.timing import Timer

    log = []
    t = Timer(stream=None, repeats=2, warmup=1, warm_l2=True, pieces=_FakeGpu(log, [1.0] * 5),
              flush=lambda s: log.append(("flush",)), min_repeats=1)
    t.time(lambda: None)
    assert t.flush is None and ("flush",) not in log


def test_git_hash_header(monkeypatch):
    from cake_rt.bench import machine

    h = machine.software_header()
    assert h["cake_rt"] and "python" in h
    monkeypatch.setattr(machine, "git_hash", lambda path=None: ("feedbee", False))  # a copied tree's stale .git
    monkeypatch.setenv("CAKE_RT_GIT_HASH", "0123abc")
    h = machine.software_header()
    assert h["git_hash"] == "0123abc" and h["git_hash_from"] == "CAKE_RT_GIT_HASH"
    monkeypatch.delenv("CAKE_RT_GIT_HASH")
    assert machine.software_header()["git_hash"] == "feedbee"


def test_markdown_between_markers(tmp_path):
    from cake_rt.bench.cli import MD_BEGIN, MD_END, write_markdown

    p = tmp_path / "doc.md"
    p.write_text(f"# Title\n\nintro\n\n{MD_BEGIN}\nold tables\n{MD_END}\n\nafter\n")
    write_markdown("| a |\n", str(p))
    assert p.read_text() == f"# Title\n\nintro\n\n{MD_BEGIN}\n| a |\n{MD_END}\n\nafter\n"
    write_markdown("| b |\n", str(p))
    assert "| a |" not in p.read_text() and p.read_text().count(MD_BEGIN) == 1
    q = tmp_path / "new.md"
    write_markdown("| c |\n", str(q))
    assert q.read_text() == "| c |\n"


def test_docs_page_has_the_markers():
    import pathlib

    from cake_rt.bench.cli import MD_BEGIN, MD_END

    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
    text = doc.read_text()
    assert text.count(MD_BEGIN) == 1 and text.count(MD_END) == 1 and text.index(MD_BEGIN) < text.index(MD_END)


def test_vllm_chunk_metadata_restarts_chunks_at_every_sequence():
    from cake_rt.bench.peers import vllm_chunk_metadata

    cu, cu_chunks, last, seq_idx = vllm_chunk_metadata([100, 300, 5], 128)
    assert cu.tolist() == [0, 100, 400, 405]
    assert cu_chunks.tolist() == [0, 100, 228, 356, 400, 405]
    assert seq_idx.tolist() == [0, 1, 1, 1, 2] and last.tolist() == [0, 3, 4]
    assert all(a.dtype == np.int32 for a in (cu, cu_chunks, last, seq_idx))
    cu, cu_chunks, last, seq_idx = vllm_chunk_metadata([2048] * 8, 256)  # the b8 row as 8 sequences
    assert cu_chunks.tolist() == list(range(0, 8 * 2048 + 1, 256)) and last.tolist() == [8 * i + 7 for i in range(8)]


def test_host_cell_shows_the_probe_where_recorded():
    from cake_rt.bench.report import _host

    assert _host({"ms": {"host": {"median": 0.0247}}}) == "0.0247"  # a record from before the probe
    assert _host({"ms": {"host": {"median": 0.0247, "probe_us": 7.81}}}) == "0.0247 (probe 7.8 us)"
    assert _host({"ms": {}}) == "-"


@pytest.mark.parametrize("ms, peers, met, cell", [
    (0.05, {"p": {"speedup": 5.0}}, True, "met"),
    (0.05, {}, None, "unchecked: min_peer_speedup"),  # no peer: never "met"
    (0.05, {"p": {"speedup": None}}, None, "unchecked: min_peer_speedup"),  # its cross-check failed
    (0.09, {}, False, "MISSED"),  # a checked figure failed: missed whatever is unchecked
    (0.05, {"p": {"speedup": 3.0}}, False, "MISSED"),
])
def test_a_target_reads_met_only_when_every_figure_was_checked(ms, peers, met, cell):
    target = {"min_peer_speedup": 4.0, "max_ms": 0.063}
    rec = {"ms": {"median": ms}, "peers": peers, "target": target}
    rec["target_result"] = report._eval_target(rec, target, "NVIDIA H200")
    assert rec["target_result"]["met"] is met
    assert report._target_cell(rec) == cell
    # the targets are the H200's: another GPU's run is not judged against them
    rec["target_result"] = report._eval_target(rec, target, "NVIDIA H100 80GB HBM3")
    assert rec["target_result"]["met"] is None and report._target_cell(rec) == "n/a (not an H200)"


def test_the_ssd_suite_targets_are_the_issue_s():
    """4x mamba_ssm on every row, each row's time at most a quarter of the anchor's, the long rows within 2x of
    their floor (spec/benchmarks.md)."""
    from cake_rt.bench.suites import load_suite

    rows = {r["name"]: r["target"] for r in load_suite("ssd")["rows"]}
    want = {"seed": 0.063, "m2-2.7b": 0.115, "m2-2.7b-b8": 0.227, "nemotron-h": 0.410, "short": 0.008, "varlen": 0.783}
    assert {n: t["max_ms"] for n, t in rows.items()} == want
    assert all(t["min_peer_speedup"] == 4.0 for t in rows.values())
    assert all(rows[n]["max_floor_ratio"] == 2.0 for n in ("seed", "m2-2.7b", "m2-2.7b-b8", "nemotron-h", "varlen"))
