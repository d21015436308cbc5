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
