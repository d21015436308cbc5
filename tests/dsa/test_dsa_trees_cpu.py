"""CPU: ``scripts/dsa-trees`` runs scripts/dsa-placement once a row for the trees given: the A rows with their records
spread over a page, then the big rows named, 2 runners each; a bad row argument is refused before anything runs."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(path, *args):
    return subprocess.run(["bash", "scripts/dsa-trees", *args], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PATH=path))


def test_every_row_once_with_the_trees(fake_python):
    trees = "main=/k/main,arm=/k/arm"
    r = _run(fake_python(), trees, "S1:32", "C1:64")
    assert r.returncode == 0, r.stderr
    calls = [line.split("dsa-placement ", 1)[1] for line in r.stdout.splitlines() if "dsa-placement" in line]
    want = (["A3 --heads 32 --records spread:16 --repeats 10"]
            + [f"{row} --heads {h} --records spread:8 --repeats 10"
               for row, h in (("A3", 64), ("A2", 32), ("A1", 32), ("A2", 64), ("A1", 64))]
            + ["S1 --heads 32 --runners 2 --repeats 8", "C1 --heads 64 --runners 2 --repeats 8"])
    assert calls == [f"{w} --trees {trees}" for w in want]
    assert r.stdout.count("== ") == 8 and "== C1 H64" in r.stdout


def test_bad_arguments_are_refused(fake_python):
    r = _run(fake_python())
    assert r.returncode != 0 and "usage" in r.stderr
    r = _run(fake_python(), "main=/k/main", "S1")
    assert r.returncode == 2 and "ROW:H" in r.stderr and "dsa-placement" not in r.stdout
