"""The record call's scripts refuse bad arguments before doing any work (CPU)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The scripts' own arguments, dropped from the inherited environment: the device's verification runs this suite
# under device-verify.sh, whose FINGERPRINTS (and the record call's RECORD, OPS) would otherwise reach the scripts
# tested here.
_SCRIPT_ARGS = {"RECORD", "RECORD_DSA", "FINGERPRINTS", "OPS", "ACCURACY", "SIDE_PROCS", "JOBS", "STAGE"}
_ENV = {k: v for k, v in os.environ.items() if k not in _SCRIPT_ARGS}


def _run(argv, tmp_path, **env):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=dict(_ENV, OUT=str(tmp_path / "out"), **env))


def test_record_prepare_needs_a_record_with_fingerprints(tmp_path):
    r = subprocess.run(["bash", "scripts/record-prepare"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=_ENV)
    assert r.returncode != 0 and "RECORD" in r.stderr
    r = _run(["bash", "scripts/record-prepare"], tmp_path, RECORD="bench/results/no_such_record")
    assert r.returncode == 2 and "no_such_record_fingerprints.txt" in r.stderr
    r = _run(["bash", "scripts/record-prepare"], tmp_path, RECORD="bench/results/h200_2026-12-02j", OPS="fast")
    assert r.returncode == 2 and "OPS" in r.stderr
    assert not (ROOT / ".dev" / "record" / "GIT_HASH").exists() or r.returncode == 2  # nothing staged on refusal
    r = _run(["bash", "scripts/record-prepare"], tmp_path, RECORD="bench/results/h200_2026-12-02j",
             FINGERPRINTS="bench/results/no_such_fingerprints.txt")
    assert r.returncode == 2 and "no_such_fingerprints.txt" in r.stderr


def test_device_bench_refuses_an_unknown_ops(tmp_path):
    r = _run(["bash", "scripts/device-bench.sh"], tmp_path, OPS="everything")
    assert r.returncode == 2 and "OPS" in r.stderr
    log = tmp_path / "out" / "bench.log"
    assert not log.exists() or "bench " not in log.read_text()  # no bench command ran


def test_clock_drift_help():
    r = subprocess.run([sys.executable, "scripts/clock-drift", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage: scripts/clock-drift" in r.stdout and "--calls" in r.stdout


def _archived(tgz):
    import tarfile

    with tarfile.open(tgz) as t:
        return {pathlib.Path(n).name for n in t.getnames()}


def test_device_verify_leaves_the_summary_and_one_archive(tmp_path, fake_python):
    """At most 8 files come back from a device call: each step's files go into verify.tgz when the next starts."""
    r = _run(["bash", "scripts/device-verify.sh"], tmp_path, PATH=fake_python(0))
    out = tmp_path / "out"
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["verify.log", "verify.tgz"]
    assert {"selftest.log", "prewarm.log", "fp_dsa.txt", "fp_ssd.txt", "suite.log", "sanitize.log", "host_time.log",
            "compile_time.log"} <= _archived(out / "verify.tgz")
    assert "[" in (out / "verify.log").read_text() and "done" in (out / "verify.log").read_text()


def test_device_verify_stopped_by_a_limit_packs_what_ran(tmp_path, fake_python):
    """timeout's TERM during the suite: the trap packs the steps so far (the suite's log too) and exits 143."""
    r = subprocess.run(["timeout", "2", "bash", "scripts/device-verify.sh"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=dict(_ENV, OUT=str(tmp_path / "out"), PATH=fake_python(4)))
    out = tmp_path / "out"
    assert r.returncode == 124  # (timeout's own code; the script's 143 behind it)
    assert sorted(p.name for p in out.iterdir()) == ["verify.log", "verify.tgz"]
    assert {"selftest.log", "fp_dsa.txt", "suite.log"} <= _archived(out / "verify.tgz")
    log = (out / "verify.log").read_text()
    assert "stopped by a signal" in log and "compute-sanitizer" not in log
