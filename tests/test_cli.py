"""The cake-rt command: one parser, real help, --version, validated numbers and the documented exit codes
(0 ok, 1 failed or an output not written, 2 bad arguments, 3 no usable GPU). CPU only."""
import json
import subprocess
import sys

import pytest

import cake_rt
from cake_rt import cli


def run(*argv):
    return subprocess.run([sys.executable, "-m", "cake_rt", *argv], capture_output=True, text=True, timeout=120)


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"cake-rt {cake_rt.__version__}"
    r = run("--help")
    assert r.returncode == 0
    for sub in ("info", "selftest", "bench", "calibrate", "warmup", "cache"):
        assert sub in r.stdout
    assert "3 no usable GPU" in r.stdout


@pytest.mark.parametrize("sub, flag", [("calibrate", "--repeats"), ("warmup", "--shapes"), ("bench", "--plot"),
                                       ("cache", "--clear"), ("selftest", "--verbose")])
def test_every_subcommand_has_real_help(capsys, sub, flag):
    assert cli.main([sub, "--help"]) == 0
    assert flag in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["bench", "--time-limit", "-1", "--dry-run"], ["bench", "--repeats", "0"],
                                  ["calibrate", "--repeats", "0"], ["calibrate", "--no-save", "--output", "f.json"],
                                  ["warmup", "--jobs", "-2"], ["nope"],
                                  ["warmup", "--target", "sm_90a", "--shapes", "headdim"],
                                  ["warmup", "--target", "sm_42"], ["warmup", "dsa", "--target", "sm_90"]])
def test_bad_numbers_and_names_are_usage_errors(argv):
    assert cli.main(argv) == cli.EXIT_USAGE


@pytest.mark.parametrize("rows, named", [("seed,shrot", "'shrot'"), ("S1", "'S1'"), (",", "at least one row")])
def test_calibrate_rows_are_checked_before_the_gpu(monkeypatch, capsys, rows, named):
    # a misspelt row is a usage error naming it (was: status 3 here, and on a GPU the row silently left out, or
    # "no row could be measured", status 1, after timing nothing)
    probed = []
    monkeypatch.setattr(cli, "gpu_problem", lambda: probed.append(1) or "no CUDA GPU found (test)")
    assert cli.main(["calibrate", "--rows", rows]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--rows" in err and named in err and "nemotron-h" in err and not probed


def test_no_gpu_is_status_3_for_every_gpu_subcommand(monkeypatch, capsys):
    monkeypatch.setattr(cli, "gpu_problem", lambda: "no CUDA GPU found (test)")
    for argv in (["bench", "ssd"], ["selftest"], ["calibrate"], ["calibrate", "--rows", "seed,short"], ["warmup"]):
        assert cli.main(argv) == cli.EXIT_NO_GPU, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no CUDA GPU found" in err[0]


@pytest.mark.parametrize("cap, target, says", [((12, 0), "sm_120", "not one of the targets"),
                                               ((9, 0), "sm_90a", "cannot compile for sm_90a")])
def test_info_says_why_a_gpu_target_is_not_compiled_for(monkeypatch, capsys, cap, target, says):
    # a target outside cake-rt's list (an RTX 50's sm_120) was told to install a newer NVRTC, which changes nothing
    import cupy

    from cake_rt.launch import arch
    from cake_rt.launch import compile as cc

    info = arch.DeviceInfo(index=0, name="stand-in", capability=cap, sm_count=84, smem_per_block_optin=101376,
                           smem_per_sm=102400, regs_per_sm=65536, cooperative_launch=True, l2_bytes=64 << 20,
                           target=target)
    monkeypatch.setattr(cli, "gpu_problem", lambda: None)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 1)
    monkeypatch.setattr(arch, "device_info", lambda device=None: info)
    monkeypatch.setattr(cc, "available_targets", lambda: ("sm_80", "sm_86", "sm_89"))
    assert cli.main(["info"]) == cli.EXIT_OK
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("gpu 0")][0]
    assert says in line and (target == "sm_90a") == ("newer NVRTC" in line), line


def test_plot_without_matplotlib_exits_1_before_running(monkeypatch, tmp_path, capsys):
    from cake_rt.bench import plot

    monkeypatch.setattr(plot, "matplotlib_available", lambda: False)
    assert cli.main(["bench", "ssd", "--plot", str(tmp_path / "x.png")]) == cli.EXIT_FAILED
    assert "matplotlib" in capsys.readouterr().err and not (tmp_path / "x.png").exists()


def test_an_output_that_cannot_be_written_exits_1(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from tests.bench.test_bench_report import fake_doc
    from cake_rt.bench.suites import build_plan

    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(fake_doc(build_plan("all", rows=["seed", "S1"]))))
    out = tmp_path / "plots"
    out.mkdir()
    assert cli.main(["bench", "--from-json", str(saved), "--plot", str(out / "a.png"),
                     "--speedup-plot", str(out / "b.png")]) == cli.EXIT_OK
    assert (out / "a.png").read_bytes()[:4] == b"\x89PNG" and (out / "b.png").read_bytes()[:4] == b"\x89PNG"
    (out / "c.png").mkdir()  # a folder where the file should go
    assert cli.main(["bench", "--from-json", str(saved), "--plot", str(out / "c.png")]) == cli.EXIT_FAILED
    assert "--plot" in capsys.readouterr().err


def test_cache_and_warmup_without_gpu(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    assert cli.main(["cache"]) == 0 and str(tmp_path) in capsys.readouterr().out
    # a known key with a value no program has (the DSA head counts are multiples of 8 up to 128): a usage error
    assert cli.main(["warmup", "dsa", "--target", "sm_90a", "--shapes", "heads=99"]) == cli.EXIT_USAGE
    assert "heads=99" in capsys.readouterr().err
    assert cli.main(["cache", "--clear"]) == 0


def test_warmup_shows_the_nvrtc_log_of_a_failed_compile_and_keeps_no_file(monkeypatch, tmp_path, capsys):
    from cake_rt import warmup

    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path / "cache"))
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void k() { undefined_thing_xyz(); }\n')
    monkeypatch.setattr(warmup, "programs", lambda ops, target, shapes=(), every=None: [("ssd", str(broken), {})])
    assert cli.main(["warmup", "ssd", "--target", "sm_80", "--jobs", "1"]) == cli.EXIT_FAILED
    captured = capsys.readouterr()
    assert "1 FAILED" in captured.out
    assert "broken.cu" in captured.err and "undefined_thing_xyz" in captured.err, captured.err  # the log's line
    assert list((tmp_path / "cache").iterdir()) == []


def test_interop_bf16_as_the_docs_write_it():
    r = subprocess.run([sys.executable, "-c", "import cake_rt; print(cake_rt.interop.BF16)"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "bfloat16", r.stderr


# The user's pages: every `cake-rt ...` they show names a subcommand, flags and choices the parser has, and a
# shown command with no placeholder parses.
_DOCS = ("README.md", "docs/index.md", "docs/design.md", "docs/multi-gpu.md", "docs/benchmarks.md")


def _shown_commands():
    import pathlib
    import re

    root = pathlib.Path(cli.__file__).resolve().parents[1]
    out = []
    for doc in _DOCS:
        text = (root / doc).read_text()
        out += [(doc, m.group(1), False) for m in re.finditer(r"`(cake-rt(?: [^`]*)?)`", text)]  # prose: flags named
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("    ") and line.strip().startswith("cake-rt"):
                shown = line.strip()
                while i + 1 < len(lines) and lines[i + 1].strip().startswith("[") and lines[i + 1].startswith("     "):
                    i += 1
                    shown += " " + lines[i].strip()  # a synopsis continued on the next lines
                out.append((doc, re.split(r"\s{2,}|\s#", shown)[0], True))  # a command line
    return out


def _subparsers():
    import argparse

    p = cli.build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return p, sub.choices


def test_the_docs_show_commands():
    assert len(_shown_commands()) > 40


@pytest.mark.parametrize("doc, shown, line", _shown_commands())
def test_every_command_the_docs_show_has_its_flags(doc, shown, line):
    import re

    top, subs = _subparsers()
    words = shown.split()[1:]
    cmd = words[0] if words and not words[0].startswith(("-", "[")) else None
    if cmd is None:
        parsers = [top]
    elif cmd.isupper():  # COMMAND: any subcommand
        parsers = list(subs.values())
    else:
        assert cmd in subs, f"{doc}: `{shown}`: no subcommand {cmd!r}"
        parsers = [subs[cmd]]
    for parser in parsers:
        for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", " ".join(words[1:] if cmd else words)):
            assert flag in parser._option_string_actions, f"{doc}: `{shown}`: {flag} is not a flag of {parser.prog}"
    positional = [a for a in parsers[0]._actions if not a.option_strings and a.choices]
    for alts in re.findall(r"\[([a-z|]+)\]", shown):  # [ssd|dsa|all]: the choices of the positional argument
        assert positional and set(alts.split("|")) <= set(positional[0].choices), f"{doc}: `{shown}`: {alts}"
    concrete = not re.search(r"[\[|]|\.\.\.|\b[A-Z]+(?:\.json)?\b", shown)
    if line and concrete and cmd is not None:
        try:
            top.parse_args(words)
        except SystemExit as exc:  # --help exits 0; an argument the parser refuses exits 2
            assert exc.code == 0, f"{doc}: `{shown}` does not parse"
