"""The record call's scripts refuse bad arguments before doing any work (CPU)."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(argv, tmp_path, **env):
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, OUT=str(tmp_path / "out"), **env))


def test_record_prepare_needs_a_record_with_fingerprints(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RECORD"}
    r = subprocess.run(["bash", "scripts/record-prepare"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0 and "RECORD" in r.stderr
    r = _run(["bash", "scripts/record-prepare"], tmp_path, RECORD="bench/results/no_such_record")
    assert r.returncode == 2 and "no_such_record_fingerprints.txt" in r.stderr
    r = _run(["bash", "scripts/record-prepare"], tmp_path, RECORD="bench/results/h200_2026-12-02j", OPS="fast")
    assert r.returncode == 2 and "OPS" in r.stderr
    assert not (ROOT / ".dev" / "record" / "GIT_HASH").exists() or r.returncode == 2  # nothing staged on refusal


def test_device_bench_refuses_an_unknown_ops(tmp_path):
    r = _run(["bash", "scripts/device-bench.sh"], tmp_path, OPS="everything")
    assert r.returncode == 2 and "OPS" in r.stderr
    log = tmp_path / "out" / "bench.log"
    assert not log.exists() or "bench " not in log.read_text()  # no bench command ran


def test_clock_drift_help():
    r = subprocess.run([sys.executable, "scripts/clock-drift", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "usage: scripts/clock-drift" in r.stdout and "--calls" in r.stdout
