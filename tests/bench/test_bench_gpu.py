"""The bench runner on a GPU: SM holder, floors, one small row of each table, worker processes, main().
No timing is asserted (performance is what the bench reports, not what a test checks)."""
import json

import pytest

from cake_rt.bench import cli, report, runner
from cake_rt.bench.cases import run_item
from cake_rt.bench.suites import Item, build_plan

pytestmark = pytest.mark.gpu

OPTS = {"repeats": 3, "warmup": 1, "warm_l2": False, "peers": True, "budget_s": 0.5, "seed": 7, "min_repeats": 2}
DSA_DEFAULTS = {"head_dim": 128, "topk": 64}


def _ok(recs):
    errs = [r["error"] + "\n" + r.get("traceback", "") for r in recs if r.get("error")]
    assert not errs, errs[0]
    for r in recs:
        assert r["ms"]["median"] > 0 and r["ms"]["p20"] <= r["ms"]["median"] <= r["ms"]["p80"]
    return recs


def test_sm_holder_holds_distinct_sms():
    import cupy

    from cake_rt.bench.spinner import SMHolder

    h = SMHolder()

    def other_work():
        x = cupy.arange(1 << 20, dtype=cupy.int64)
        assert int(x.sum()) == (1 << 20) * ((1 << 20) - 1) // 2

    # Load the other work's kernels before holding: a module load waits for the GPU to go idle, i.e. for
    # a hold to time out (seen on the H200: the first hold of a process timed out exactly then).
    other_work()
    for n in (1, 32, h.info.sm_count - 1):
        with h.hold(n) as info:
            assert info["held"] == n and info["distinct_sms"] == n
            other_work()  # other work still runs beside the hold
        assert info["timed_out"] == 0
    with pytest.raises(ValueError, match="hold"):
        with h.hold(0):
            pass


def test_floors_are_measured():
    import cupy

    from cake_rt.bench.floors import measure_floors

    s = cupy.cuda.Stream(non_blocking=True)
    f = measure_floors(s)
    assert f["copy_tbps"] > 0 and f["bf16_tflops"] > 0
    assert "median" in f["gemm"]["method"]


def test_selfcheck_item():
    recs = _ok(run_item(build_plan("selfcheck")[0], dict(OPTS, selfcheck_holds=(1, 4))))
    assert [r["hold"] for r in recs] == [0, 1, 4]
    assert [r["extra"]["hold_info"].get("distinct_sms", 0) for r in recs] == [0, 1, 4]


def test_small_dsa_row_and_side_stream():
    params = {"name": "tiny", "layout": "tail", "T": 37, "Tkv": 3001, "target": {"max_ms": 1.0}}
    recs = _ok(run_item(Item("dsa", "tiny", params, heads=32, defaults=DSA_DEFAULTS), OPTS))
    assert [r["arm"] for r in recs] == ["prepared", "eager"]
    assert recs[0]["extra"]["eager_bitwise_equal"] is True
    peer = recs[0]["peers"].get("torch-eager")
    if peer is not None:
        assert peer["check"]["ok"], peer["check"]
    zz = {"name": "tinyzz", "layout": "zigzag", "documents": [512, 256], "cp": 4, "rank": 1}
    _ok(run_item(Item("dsa", "tinyzz", zz, heads=64, defaults=DSA_DEFAULTS), OPTS))
    side = _ok(run_item(Item("side_stream", "tiny", params, heads=32, holds=(1, 8), schedules=("ticket", "static"),
                             defaults=DSA_DEFAULTS), OPTS))
    assert [(r["hold"], r["arm"]) for r in side] == [(0, "ticket"), (0, "static"), (1, "ticket"), (1, "static"),
                                                     (8, "ticket"), (8, "static")]
    assert all(r["extra"]["schedules_bitwise_equal"] for r in side)


def test_small_ssd_rows():
    for extra in ({}, {"cu_seqlens_lengths": [100, 300, 400, 200], "return_varlen_states": True}):
        params = {"name": "tiny", "batch": 1, "seqlen": 1000, "nheads": 8, "headdim": 64, "dstate": 128, "ngroups": 2,
                  "chunk": 128, **extra}
        defaults = {"dtype": "bfloat16", "z": True, "return_final_states": True}
        (rec,) = _ok(run_item(Item("ssd", "tiny", params, defaults=defaults), OPTS))
        assert rec["ms"]["wall"]["median"] > 0 and rec["ms"]["host"]["median"] > 0  # both views, host time
        for name in ("mamba_ssm-triton", "vllm-triton"):
            peer = rec["peers"].get(name)
            if peer is not None:
                assert peer["check"]["ok"], (name, peer["check"])
                assert peer["ms"]["wall"]["median"] > 0


def test_worker_processes_and_merge():
    item = build_plan("selfcheck")[0]
    per = [runner.run_worker(item, dict(OPTS, selfcheck_holds=(2,)), order) for order in (0, 1)]
    for recs in per:
        _ok(recs)
    merged = runner.merge_processes(per)
    assert [r["hold"] for r in merged] == [0, 2] and merged[0]["ms"]["processes"] == 2
    assert [o[0] for o in merged[0]["arm_order"]] == ["copy-kernel", "memcpy"]


def test_main_selfcheck_end_to_end(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert cli.main(["selfcheck", "--repeats", "3", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    report.validate_doc(doc)
    assert doc["machine"]["gpu"]["sm_count"] > 0 and doc["floors"]["copy_tbps"] > 0
    assert "Runner self-check" in capsys.readouterr().out
