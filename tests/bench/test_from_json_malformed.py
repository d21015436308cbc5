"""``cake-rt bench --from-json`` (and ``--compare``) on a JSON file that parses but does not follow the schema:
exit status 2 and one line naming what is wrong, never a traceback (no GPU needed)."""
import copy
import json

import pytest

from cake_rt.bench import cli, report
from cake_rt.bench.suites import build_plan
from test_bench_report import fake_doc


def _doc():
    """A valid document (an SSD and a DSA row with peers) as strict JSON reads it back."""
    doc = report.finalize(fake_doc(build_plan("all", rows=["varlen", "S1"], heads=(64,))))
    return json.loads(json.dumps(doc, allow_nan=False))


def _set(path, value):
    def edit(doc):
        *head, last = path
        d = doc
        for k in head:
            d = d[k]
        d[last] = value
        return doc
    return edit


def _del(path):
    def edit(doc):
        *head, last = path
        d = doc
        for k in head:
            d = d[k]
        del d[last]
        return doc
    return edit


MALFORMED = {
    "a list": lambda d: [1, 2],
    "a string": lambda d: "run",
    "null": lambda d: None,
    "machine.gpu a string": _set(("machine", "gpu"), "H200"),
    "floors a list": _set(("floors",), [1]),
    "a record that is a number": _set(("records", 0), 7),
    "a record key that is a list": _set(("records", 0, "key"), ["a"]),
    "ms a list": _set(("records", 0, "ms"), [1, 2]),
    "peers a list": _set(("records", 0, "peers"), [1]),
    "a peer that is a number": _set(("records", 0, "peers"), {"x": 3}),
    "a peer ms that is a list": _set(("records", 0, "peers"), {"x": {"ms": [1]}}),
    # what the tables and finalize read beyond the timings
    "a record without dims": _del(("records", 0, "dims")),
    "a host view without a median": _set(("records", 0, "ms", "host"), {}),
    "a wall view that is a number": _set(("records", 0, "ms", "wall"), 3),
    "floors without the gemm method": _del(("floors", "gemm")),
    "a zero copy floor": _set(("floors", "copy_tbps"), 0),
    "a zero time": _set(("records", 0, "ms"), {"median": 0, "p20": 0, "p80": 0, "n": 5}),
    "error false": _set(("records", 0, "error"), False),
    "a target bound that is a string": _set(("records", 0, "target"), {"max_ms": "1"}),
    "notes a number": _set(("notes",), 3),
    "record notes null": _set(("records", 0, "notes"), None),
    "a peer check that is null": _set(("records", 0, "peers"), {"x": {"ms": {"median": 1.0}, "check": None}}),
    "git_hash a number": _set(("machine", "git_hash"), 7),
    "flops a string": _set(("records", 0, "flops"), "many"),
    "extra a string": _set(("records", 0, "extra"), "x"),
    "a row that is a list": _set(("records", 0, "row"), ["S1"]),
    "argv a string": _set(("config", "argv"), "bench ssd"),
    "a compare block without rows": _set(("compare",), {"path": "old.json"}),
    # integers JSON reads exactly that no float holds (float arithmetic on them raises OverflowError)
    "flops beyond the float range": _set(("records", 0, "flops"), 10 ** 400),
    "times beyond the float range": lambda d: _set(("records", 0, "ms", "p80"), 10 ** 401)(
        _set(("records", 0, "ms", "median"), 10 ** 400)(d)),
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_from_json_malformed_document_is_a_usage_error(tmp_path, capsys, monkeypatch, what):
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no GPU (test)")
    doc = _doc()
    assert doc["records"] and doc["records"][0]["error"] is None  # the edits reach a timed record
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(MALFORMED[what](copy.deepcopy(doc))))
    assert cli.main(["--from-json", str(bad)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("cake-rt bench: --from-json: ") and "Traceback" not in err, err
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc))
    assert cli.main(["--from-json", str(good), "--compare", str(bad)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("cake-rt bench: --compare: ") and "Traceback" not in err, err


def test_json_nested_deeper_than_the_parser_reads_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no GPU (test)")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    good = _write(tmp_path / "good.json", _doc())
    for argv, flag in ((["--from-json", str(deep)], "--from-json"), (["--from-json", good, "--compare", str(deep)],
                                                                      "--compare")):
        assert cli.main(argv) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"cake-rt bench: {flag}: ") and "Traceback" not in err, err


def test_from_json_derives_the_figures_again_from_the_raw_times(tmp_path, capsys, monkeypatch):
    """Derived figures saved in the file (tflops, floor fractions, peer speedups, side-stream ratios) are not read:
    --from-json shows those of the raw times, whatever the file holds for them."""
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no GPU (test)")
    doc = _doc()
    want = cli.main(["--from-json", _write(tmp_path / "good.json", doc)])
    good = capsys.readouterr().out
    for r in doc["records"]:
        r.update(tflops="stale", floor_fraction=[1], static_over_ticket={}, target_result=3)
        for p in r["peers"].values():
            p["speedup"] = "stale"
    assert want == cli.main(["--from-json", _write(tmp_path / "stale.json", doc)]) == cli.EXIT_OK
    assert capsys.readouterr().out.replace("stale.json", "good.json") == good


def _write(path, doc):
    path.write_text(json.dumps(doc))
    return str(path)
