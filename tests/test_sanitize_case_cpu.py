"""CPU: ``scripts/sanitize-case`` exits 1 when a check or bitwise claim of its calls does not hold: printed alone,
a run under compute-sanitizer would pass whatever the bits."""


def test_sanitize_case_fails_on_a_claim_that_does_not_hold(load_script, monkeypatch):
    script = load_script("sanitize-case")
    ran = []
    for name in ("selftest", "ssd", "dsa"):
        monkeypatch.setattr(script, name, lambda name=name: ran.append(name) or True)
    assert script.main(["all"]) == 0 and ran == ["selftest", "ssd", "dsa"]
    monkeypatch.setattr(script, "ssd", lambda: ran.append("ssd") or False)
    ran.clear()
    assert script.main(["all"]) == 1 and ran == ["selftest", "ssd", "dsa"]  # the others still run
    assert script.main(["dsa"]) == 0 and script.main(["ssd"]) == 1


def test_sanitize_case_selftest_fails_on_a_failed_check(load_script, monkeypatch):
    from cake_rt import selftest as st

    script = load_script("sanitize-case")
    checks = {n: (lambda: (True, "ok")) for n in st.CHECKS}
    monkeypatch.setattr(st, "CHECKS", checks)
    monkeypatch.setattr(st, "check_grid_barrier", lambda rounds: (True, "ok"))
    assert script.selftest() is True
    checks["float_key"] = lambda: (False, "broken")
    assert script.selftest() is False


def test_warm_shapes_are_the_kits_lineinfo_shapes(load_script, capsys):
    """`--warm-shapes OP` prints the warmup shapes of OP's cases, which the kits compile with lineinfo."""
    from cake_rt.warmup import parse_shapes

    script = load_script("sanitize-case")
    for op in ("dsa", "ssd"):
        assert script.main(["--warm-shapes", op]) == 0
        printed = capsys.readouterr().out.split()
        assert printed == script.WARM_SHAPES[op] and parse_shapes(printed)
    ab = load_script("ab-kit")
    assert ab.sanitize_shapes("dsa") == script.WARM_SHAPES["dsa"]
