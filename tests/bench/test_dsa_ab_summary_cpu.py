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
