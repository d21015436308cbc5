"""CPU: ``scripts/dsa-ab-summary`` reads an A/B call's bench runs (``dsa_<arm>_<n>.json``) and prints, per row and head
count, each arm's median over all its samples, base / arm, the geometric mean and the best arm; with the SM clock of
the samples where the runs read it."""
import json


def _run(path, arm, n, rows):
    records = [{"row": row, "heads": H, "arm": entry, "ms": dict({"samples": samples}, **extra)}
               for row, H, entry, samples, extra in rows]
    (path / f"dsa_{arm}_{n}.json").write_text(json.dumps({"records": records}))


def test_dsa_ab_summary_medians_speedups_and_clocks(tmp_path, load_script, capsys):
    _run(tmp_path, "base", 1, [("A3", 32, "prepared", [0.028, 0.030], {"clock_mhz": [1980, 1980]}),
                               ("Z2cp", 32, "prepared", [4.8, 4.8], {"clock_mhz": [1755, 1755]}),
                               ("A3", 32, "eager", [0.5], {})])
    _run(tmp_path, "base", 2, [("A3", 32, "prepared", [0.029], {"clock_mhz": [1980]}),
                               ("Z2cp", 32, "prepared", [4.8], {"clock_mhz": [1755]})])
    _run(tmp_path, "a", 1, [("A3", 32, "prepared", [0.0261, 0.0261, 0.0261], {"clock_mhz": [1980, 1980, 1980]}),
                            ("Z2cp", 32, "prepared", [4.5, 4.5, 4.5], {})])  # a run that read no clock
    load_script("dsa-ab-summary").main(str(tmp_path), "prepared")
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "row H | base | a"
    z2, a3 = out[2], out[3]  # (rows in the suite's order: Z2cp before A3)
    assert z2.startswith("Z2cp 32 | 4.8 (4.8, n=3) @1755 MHz | 4.5 (4.5, n=3) 1.067x") and "@" not in z2.split("|")[2]
    assert a3 == "A3 32 | 0.029 (0.028, n=3) @1980 MHz | 0.0261 (0.0261, n=3) 1.111x @1980 MHz"
    assert out[-1] == "BEST a" and "geomean over the 2 rows: a 1.0887x" in out[-2]


def test_dsa_ab_summary_reads_placement_logs(tmp_path, load_script, capsys):
    """A file: ``scripts/dsa-placement --trees`` calls appended; speedups against the first tree, a row timed twice
    counts twice in the geometric mean, a call without the first tree gives no speedup."""
    log = tmp_path / "ab.txt"
    log.write_text(
        "A3 H=32 D=128 topk=2048: T=4 Tkv=41986, workspace 8653056 bytes, 32 runners alternated; outputs equal: True\n"
        "runner 0 ...\n"
        "tree main: median of its runners' medians 26.00 us, mean 26.2, range 25.6-28.8\n"
        "tree arm: median of its runners' medians 25.00 us, mean 25.1, range 24.6-27.8\n"
        "tree arm2: median of its runners' medians 27.00 us, mean 27.1, range 26.6-29.8\n"
        "A1 H=64 D=128 topk=2048: T=4 Tkv=22018, ...\n"
        "tree main: median of its runners' medians 20.00 us, mean 20.0, range 20-21\n"
        "tree arm: median of its runners' medians 21.00 us, mean 21.0, range 21-22\n"
        "A3 H=32 D=128 topk=2048: T=4 Tkv=41986, ...\n"
        "tree arm2: median of its runners' medians 26.50 us, mean 27.1, range 26.6-29.8\n")
    load_script("dsa-ab-summary").placement(str(log))
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "row H | main | arm | arm2"
    assert out[2] == "A3 32 | 26.00 | 25.00 1.040x | 27.00 0.963x"
    assert out[3] == "A1 64 | 20.00 | 21.00 0.952x | -"
    assert out[4] == "A3 32 | - | - | 26.50"
    arm = (26 / 25 * 20 / 21) ** 0.5
    assert out[5] == f"geomean: arm {arm:.4f}x over 2 calls, arm2 {26 / 27:.4f}x over 1 calls"
    assert out[6] == "BEST arm"
