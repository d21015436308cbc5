"""`cake-rt bench` argument parsing, --dry-run and the no-GPU behaviour (CPU only)."""
import subprocess
import sys

import pytest

from cake_rt.bench import cli
from cake_rt.bench.cli import build_parser, main, plan_from_args


def parse(*argv):
    return build_parser().parse_args(list(argv))


def test_defaults():
    a = parse()
    assert a.target == "all" and a.processes == 1 and a.repeats == 20 and a.warmup == 3
    assert not a.warm_l2 and not a.dry_run and a.json is None and a.plot is None and a.compare is None
    assert a.suite is None and a.rows is None and a.heads is None and a.side_stream is None


def test_every_flag():
    a = parse("dsa", "--rows", "S1,C1", "--heads", "32,64", "--processes", "4", "--repeats", "7", "--warm-l2",
              "--json", "x.json", "--plot", "x.png", "--compare", "old.json", "--side-stream", "1,32",
              "--time-limit", "400", "--no-peers", "--seed", "9", "--warmup", "1", "--budget-s", "0.5")
    assert (a.target, a.rows, a.heads, a.processes, a.repeats, a.warm_l2) == ("dsa", "S1,C1", "32,64", 4, 7, True)
    assert (a.json, a.plot, a.compare, a.side_stream, a.time_limit) == ("x.json", "x.png", "old.json", "1,32", 400.0)
    assert (a.no_peers, a.seed, a.warmup, a.budget_s) == (True, 9, 1, 0.5)
    plan = plan_from_args(a)
    assert [it.key for it in plan] == ["dsa/S1/H32", "dsa/C1/H32", "dsa/S1/H64", "dsa/C1/H64",
                                       "side_stream/S1/H32", "side_stream/C1/H32",
                                       "side_stream/S1/H64", "side_stream/C1/H64"]


@pytest.mark.parametrize("argv, flag", [
    (["--heads", "32,x"], "--heads"),
    (["--heads", "0"], "--heads"),
    (["--side-stream", "1,-4"], "--side-stream"),
    (["--rows", "S1,Q9"], "--rows"),
    (["--rows", ","], "--rows"),
    (["--suite", "nope"], "--suite"),
    (["--processes", "0"], "--processes"),
    (["--repeats", "0"], "--repeats"),
    (["--budget-s", "0"], "--budget-s"),
])
def test_bad_values_name_the_flag(argv, flag, capsys):
    assert main(argv + ["--dry-run"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cake-rt bench: ") and flag in err[0]


def test_usage_errors_from_argparse(capsys):
    assert main(["--suite", "quick", "--rows", "S1"]) == 2  # mutually exclusive
    assert "not allowed with" in capsys.readouterr().err
    assert main(["gemm"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "--side-stream" in capsys.readouterr().out


def test_compare_and_output_paths_checked_before_running(tmp_path, capsys):
    assert main(["--compare", str(tmp_path / "missing.json"), "--dry-run"]) == cli.EXIT_USAGE
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    assert main(["--compare", str(bad), "--dry-run"]) == cli.EXIT_USAGE
    assert "not a cake-rt bench JSON" in capsys.readouterr().err
    assert main(["--json", str(tmp_path / "no" / "dir.json"), "--dry-run"]) == cli.EXIT_USAGE
    assert "--json" in capsys.readouterr().err


def test_side_stream_none():
    plan = plan_from_args(parse("dsa", "--side-stream", "none"))
    assert plan and all(it.table == "dsa" for it in plan)


def test_dry_run_lists_rows(capsys):
    assert main(["all", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "26 items"
    assert any(line.startswith("ssd") and "varlen" in line and "16 segments" in line for line in out)
    assert any(line.startswith("dsa") and " Z2cp " in line and "270336" in line and "268,443,648" in line for line in out)
    assert any(line.startswith("side_stream") and "holds 0,1,32" in line for line in out)


def test_no_gpu_is_one_line_and_nonzero(monkeypatch, capsys):
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no CUDA GPU found (test)")
    assert main(["all"]) == cli.EXIT_NO_GPU
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU found" in lines[0] and "--dry-run" in lines[0]


def test_no_gpu_here_for_real():
    """On a machine without a GPU (CI), the real command says so in one line and exits non-zero."""
    if cli.gpu_problem() is None:
        pytest.skip("a GPU is present")
    p = subprocess.run([sys.executable, "-m", "cake_rt.bench", "all"], capture_output=True, text=True, timeout=120)
    assert p.returncode == cli.EXIT_NO_GPU
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([sys.executable, "-m", "cake_rt.bench", "all", "--dry-run"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("26 items")


def test_bench_entry_of_the_package():
    import cake_rt.bench

    assert callable(cake_rt.bench.main)
    assert cake_rt.bench.main(["--dry-run", "--rows", "A1", "--side-stream", "none"]) == 0
