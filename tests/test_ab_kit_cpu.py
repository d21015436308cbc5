"""CPU: ``scripts/ab-kit`` stages trees of git revisions and writes the call that benches them in order; the call's plan
(fingerprints of every tree, tests and sanitizers of the arms, the bench runs in order with the file names the A/B
summaries read, traces) is what the device runs."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _kit(tmp_path, names):
    kit = tmp_path / "k1"
    kit.mkdir()
    (kit / "trees.txt").write_text("".join(f"{n} rev{i} abc{i}\n" for i, n in enumerate(names)))
    return kit


def test_the_dsa_plan(tmp_path, load_script):
    ab = load_script("ab-kit")
    kit = _kit(tmp_path, ["base", "a", "b"])
    a = ab.main.__globals__["argparse"].Namespace(kit=kit, op="dsa", order="base,a,b,b,a,base", rows="S1,S2",
                                                  heads="64", trace="S2:64,S1:32", end=200)
    trees, fps, checks, benches, traces = ab.plan(a)
    assert trees == ["base", "a", "b"]
    assert [s[1] for s in fps] == trees and all("scripts/dsa-fingerprint" in s[2] for s in fps)
    assert [(s[0].split()[0], s[1]) for s in checks] == [("tests", "a"), ("sanitize", "a"), ("tests", "b"),
                                                          ("sanitize", "b")]
    assert [s[4] for s in benches] == ["dsa_base_1.log", "dsa_a_1.log", "dsa_b_1.log", "dsa_b_2.log", "dsa_a_2.log",
                                       "dsa_base_2.log"]
    argv = benches[0][2]
    assert argv[argv.index("--json") + 1] == "{W}/dsa_base_1.json"  # scripts/dsa-ab-summary's names
    assert argv[argv.index("--heads") + 1] == "64" and argv[argv.index("--rows") + 1] == "S1,S2"
    assert "--side-stream" in argv and benches[0][5] == {"CAKE_RT_GIT_HASH": "base"}
    assert [s[4] for s in traces] == [f"trace_{t}_{r}.txt" for r in ("S2_H64", "S1_H32") for t in trees]
    # --checks: only the trees named get the tests and sanitizers (a speed-only arm; the base to verify it), '' none
    a.checks = "b"
    assert [(s[0].split()[0], s[1]) for s in ab.plan(a)[2]] == [("tests", "b"), ("sanitize", "b")]
    a.checks = ""
    assert ab.plan(a)[2] == []
    a.checks = "base"
    assert [(s[0].split()[0], s[1]) for s in ab.plan(a)[2]] == [("tests", "base"), ("sanitize", "base")]
    a.checks = "c"
    with pytest.raises(SystemExit, match="not a tree of the kit"):
        ab.plan(a)


def test_the_ssd_plan_and_a_bad_order(tmp_path, load_script):
    ab = load_script("ab-kit")
    kit = _kit(tmp_path, ["base", "arm"])
    ns = ab.main.__globals__["argparse"].Namespace
    a = ns(kit=kit, op="ssd", order="base,arm,arm,base", rows="seed,short", heads=None, trace="S2:64", end=150)
    trees, fps, checks, benches, traces = ab.plan(a)
    # scripts/ssd-ab-summary reads ab_<arm>_<n>.json, n any number: the run's place in the order
    assert [s[2][s[2].index("--json") + 1] for s in benches] == [
        "{W}/ab_base_1.json", "{W}/ab_arm_2.json", "{W}/ab_arm_3.json", "{W}/ab_base_4.json"]
    assert "--heads" not in benches[0][2] and "--side-stream" not in benches[0][2]
    assert traces == []  # traces are dsa's
    assert any("tests/ssd" in s[2] for s in checks)
    with pytest.raises(SystemExit, match="not a tree of the kit"):
        ab.plan(ns(kit=kit, op="ssd", order="base,c", rows=None, heads=None, trace=None, end=150))


def test_tree_arguments(load_script):
    ab = load_script("ab-kit")
    assert ab.parse_trees(["base=main", "a=x"]) == [("base", "main"), ("a", "x")]
    assert ab.parse_trees(["base=main", "a=main+d.diff"]) == [("base", "main"), ("a", "main+d.diff")]
    assert ab.default_order(["base", "a", "b"]) == ["base", "a", "b", "b", "a", "base"]
    for bad in (["base=main"], ["base=main", "base=x"], ["base", "a=x"], ["a/b=main", "c=x"]):
        with pytest.raises(SystemExit):
            ab.parse_trees(bad)


def test_prepare_stages_the_trees_and_the_call(tmp_path, load_script, monkeypatch):
    """Two trees of this repository's HEAD (no compiles: ``warm`` recorded instead), the call line and its limits."""
    # (ROOT must be the checkout's top: a tree unpacked inside another repository's folder is not one)
    top = None if shutil.which("git") is None else subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top is None or top.returncode or pathlib.Path(top.stdout.strip()).resolve() != pathlib.Path(ROOT).resolve():
        pytest.skip("needs the git checkout")
    ab = load_script("ab-kit")
    monkeypatch.setattr(ab, "ROOT", tmp_path)
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(tmp_path)], check=True)
    warmed = []
    monkeypatch.setattr(ab, "warm", lambda tree, op, jobs, shapes=None, lineinfo=False, cache=None:
                        warmed.append((pathlib.Path(tree).name, op, lineinfo)))
    # the arm: HEAD with a diff applied (a line added to the package's __init__)
    init = (tmp_path / "cake_rt" / "__init__.py").read_text()
    (tmp_path / "cake_rt" / "__init__.py").write_text(init + "ARM = 1\n")
    diff = subprocess.run(["git", "-C", str(tmp_path), "diff"], check=True, capture_output=True, text=True).stdout
    subprocess.run(["git", "-C", str(tmp_path), "checkout", "-q", "--", "."], check=True)
    (tmp_path / "arm.diff").write_text(diff)
    ab.main(["prepare", "t1", "--op", "ssd", "--tree", "base=HEAD", "--tree", "arm=HEAD+arm.diff", "--rows", "seed",
             "--end", "150"])
    kit = tmp_path / ".dev" / "t1"
    assert [l.split()[:2] for l in (kit / "trees.txt").read_text().splitlines()] == [["base", "HEAD"],
                                                                                    ["arm", "HEAD+arm.diff"]]
    # the trees travel packed (kit.txz), unpacked by the call on the machine
    assert sorted(p.name for p in kit.iterdir()) == ["call.sh", "kit.txz", "trees.txt"]
    ab.unpack(kit, ["base", "arm"])
    for t in ("base", "arm"):
        assert (kit / t / "cake_rt" / "__init__.py").exists() and (kit / t / "scripts" / "ssd-ab-summary").exists()
        assert not (kit / t / "bench" / "results").exists() and not (kit / t / "docs").exists()
    assert (kit / "base" / "cake_rt" / "__init__.py").read_text() == init
    assert (kit / "arm" / "cake_rt" / "__init__.py").read_text() == init + "ARM = 1\n"
    assert warmed == [("base", "ssd", False), ("arm", "ssd", False), ("arm", "ssd", True)]  # lineinfo: the arms'
    call = (kit / "call.sh").read_text().splitlines()
    assert call[-1] == ("python3 scripts/ab-kit call .dev/t1 --op ssd --end 150 --order base,arm,arm,base "
                        "--rows seed")
    assert 'timeout_s 170' in "\n".join(call)
    # --checks base: the base's lineinfo programs staged too (a call that verifies a tree itself)
    warmed.clear()
    ab.main(["prepare", "t2", "--op", "ssd", "--tree", "base=HEAD", "--tree", "arm=HEAD", "--rows", "seed", "--checks",
             "base", "--end", "150"])
    assert warmed == [("base", "ssd", False), ("base", "ssd", True), ("arm", "ssd", False)]
    # a name that is not a tree: refused before anything is staged (the kit of that name is left as it was)
    warmed.clear()
    with pytest.raises(SystemExit, match="not a tree of the kit"):
        ab.main(["prepare", "t1", "--op", "ssd", "--tree", "base=HEAD", "--tree", "arm=HEAD", "--checks", "b"])
    assert warmed == [] and (kit / "call.sh").exists()
