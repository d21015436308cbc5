"""Suite files (package data) and the DSA/SSD row geometry: loaded, validated, and equal to the spec's table."""
import json
from importlib import resources

import numpy as np
import pytest

from cake_rt.bench.layouts import dsa_floor_counts, dsa_layout, ssd_floor_counts, ssd_segments, tail_layout, zigzag_layout
from cake_rt.ops.dsa import visible_pairs
from cake_rt.bench.suites import build_plan, load_suite, suite_rows, validate_suite

# The spec's floors (benchmarks.md): measured on the H200, used to recompute its "floor ms" column.
SPEC_TFLOPS, SPEC_TBPS = 767e12, 4.16e12


def test_suites_ship_as_package_data():
    names = sorted(p.name for p in resources.files("cake_rt.bench").joinpath("suites").iterdir() if p.name.endswith(".json"))
    assert names == ["dsa.json", "ssd.json"]
    for n in ("ssd", "dsa"):
        data = load_suite(n)
        assert data["suite"] == n
        assert data["suites"]["default"] == [r["name"] for r in data["rows"]]


def test_dsa_rows_match_the_spec_table():
    data = load_suite("dsa")
    assert [r["name"] for r in data["rows"]] == ["S1", "S2", "C1", "Z2cp", "Z3cp", "A1", "A2", "A3"]
    for r in data["rows"]:
        lay = dsa_layout(r)
        exp = r["expect"]
        assert (lay.T, lay.Tkv, lay.segments, lay.visible_pairs) == (exp["T"], exp["Tkv"], exp["segments"],
                                                                      exp["visible_pairs"]), r["name"]
        for h, want in r.get("spec_floor_ms", {}).items():
            flops = 2 * int(h) * 128 * lay.visible_pairs  # the spec's floor counts the head dot products
            assert flops / SPEC_TFLOPS * 1e3 == pytest.approx(want, rel=2e-3), (r["name"], h)


def test_ssd_rows_match_the_spec_table():
    data = load_suite("ssd")
    rows = {r["name"]: r for r in data["rows"]}
    assert list(rows) == ["seed", "m2-2.7b", "m2-2.7b-b8", "nemotron-h", "short", "varlen"]
    assert (rows["nemotron-h"]["nheads"], rows["nemotron-h"]["ngroups"], rows["nemotron-h"]["chunk"]) == (128, 8, 128)
    v = rows["varlen"]
    assert len(v["cu_seqlens_lengths"]) == 16 and sum(v["cu_seqlens_lengths"]) == v["seqlen"] == 65536
    assert ssd_segments(v) == v["cu_seqlens_lengths"]
    assert ssd_segments(rows["m2-2.7b-b8"]) == [2048] * 8
    assert rows["seed"]["anchor_peer_ms"] == 0.561


def test_visible_pairs_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(20):
        S = int(rng.integers(1, 5))
        lq = rng.integers(0, 9, S)
        lk = rng.integers(0, 13, S)
        off = rng.integers(-3, 14, S)
        cq = np.concatenate([[0], np.cumsum(lq)])
        ck = np.concatenate([[0], np.cumsum(lk)])
        brute = sum(1 for s in range(S) for i in range(lq[s]) for j in range(lk[s]) if j <= off[s] + i)
        assert visible_pairs(cq, ck, off) == brute


def test_tail_and_zigzag_layouts():
    t = tail_layout(4, 22018)
    assert t.q_causal_offsets.tolist() == [22014] and t.visible_pairs == 88066
    z = zigzag_layout([8, 16], 2, 0)  # the worked example of cake_rt/cp.py
    assert z.cu_seqlens_q.tolist() == [0, 2, 4, 8, 12]
    assert z.cu_seqlens_k.tolist() == [0, 2, 10, 14, 30]
    assert z.q_causal_offsets.tolist() == [0, 6, 0, 12]
    with pytest.raises(ValueError):
        zigzag_layout([30], 4, 0)
    with pytest.raises(ValueError, match="rank"):
        zigzag_layout([32], 4, 4)


def test_floor_counts_come_from_the_ops():
    from cake_rt.ops.dsa import dsa_flops_bytes
    from cake_rt.ops.ssd import ssd_flops_bytes

    row = {"name": "t", "batch": 2, "seqlen": 300, "nheads": 4, "headdim": 64, "dstate": 128, "ngroups": 2,
           "chunk": 256, "dtype": "bfloat16", "z": True, "return_final_states": True}
    flops, nbytes, source = ssd_floor_counts(row)
    assert (flops, nbytes) == ssd_flops_bytes(batch=2, seqlen=300, nheads=4, headdim=64, dstate=128, ngroups=2,
                                              chunk_size=256, nseq=2)
    assert source == "cake_rt.ops.ssd.ssd_flops_bytes"
    lay = tail_layout(4, 22018)
    assert dsa_floor_counts(lay, 32, 128, 2048)[:2] == dsa_flops_bytes(4, 22018, 32, 128, 2048, 88066)


def test_validate_suite_rejects_broken_files():
    good = load_suite("dsa")
    for mutate, msg in ((lambda d: d["rows"].append(dict(d["rows"][0])), "unique"),
                        (lambda d: d["suites"].pop("default"), "default"),
                        (lambda d: d["suites"].__setitem__("x", ["nope"]), "unknown rows"),
                        (lambda d: d["side_stream"].__setitem__("rows", ["nope"]), "side_stream"),
                        (lambda d: d["rows"][0].pop("layout"), "lacks")):
        bad = json.loads(json.dumps(good))
        mutate(bad)
        with pytest.raises(ValueError, match=msg):
            validate_suite(bad, "dsa")
    with pytest.raises(ValueError, match="suite"):
        load_suite("nope")


def test_plan_default_all():
    plan = build_plan("all")
    keys = [it.key for it in plan]
    assert keys[:6] == [f"ssd/{n}" for n in ("seed", "m2-2.7b", "m2-2.7b-b8", "nemotron-h", "short", "varlen")]
    assert sum(1 for it in plan if it.table == "dsa") == 16  # 8 rows x H 32, 64
    side = [it for it in plan if it.table == "side_stream"]
    assert [it.row for it in side] == load_suite("dsa")["side_stream"]["rows"]
    assert all(it.holds == (1, 32) and it.schedules == ("ticket", "static") and it.heads == 64 for it in side)
    assert len(set(keys)) == len(keys)


def test_plan_selection():
    plan = build_plan("dsa", rows=["S1", "A1"], heads=(64,), side_stream=())
    assert [it.key for it in plan] == ["dsa/S1/H64", "dsa/A1/H64"]
    plan = build_plan("all", rows=["seed", "C1"], heads=(32,))
    assert [it.key for it in plan] == ["ssd/seed", "dsa/C1/H32", "side_stream/C1/H32"]
    plan = build_plan("dsa", suite="tails", side_stream=(2,))
    assert [it.key for it in plan if it.table == "side_stream"] == ["side_stream/A1/H64"]
    assert build_plan("ssd", suite="quick")[0].row == "seed"
    assert [it.table for it in build_plan("selfcheck")] == ["selfcheck"]
    with pytest.raises(ValueError, match="--rows: unknown row"):
        build_plan("dsa", rows=["seed"])
    with pytest.raises(ValueError, match="--suite: unknown suite"):
        build_plan("ssd", suite="tails")
    with pytest.raises(ValueError, match="target"):
        build_plan("gemm")


def test_suite_rows_merge_the_defaults_under_each_row():
    for name in ("ssd", "dsa"):
        suite = load_suite(name)
        rows = suite_rows(name)
        assert [p["name"] for p in rows] == [r["name"] for r in suite["rows"]]
        for p, r in zip(rows, suite["rows"]):
            assert {k: p[k] for k in r} == r  # a row's own field wins
            assert all(p[k] == v for k, v in suite.get("defaults", {}).items() if k not in r)
