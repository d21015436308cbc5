"""CPU: ``scripts/dsa-placement`` times one suite row's prepared call by several runners, alternated in one process:
runners that place their own buffers, or one runner per workspace offset in a shared buffer; the outputs compared."""
import sys
import types

import numpy as np
import pytest


def test_dsa_placement_help(script_help):
    out = script_help("dsa-placement")
    assert "--offsets" in out and "--runners" in out and "--records" in out


class _Buf:
    """Stands in for a CuPy uint8 buffer: slicing keeps the device address."""

    def __init__(self, ptr, n):
        self.data, self.n = types.SimpleNamespace(ptr=ptr), n

    def __getitem__(self, s):
        return type(self)(self.data.ptr + s.start, s.stop - s.start)


class _Runner:
    """Stands in for a prepared runner: its buffers' addresses, and a call that writes ``value`` into its indices; its
    first call packs its launch arguments through ``cake_rt.ops.dsa._launch_args`` (as a real runner's does)."""

    def __init__(self, workspace, tickets, indices, value):
        self.workspace, self.tickets, self.indices, self.value = workspace, tickets, indices, value
        self.args = None

    def __call__(self, stream):
        import cake_rt.ops.dsa as dsa_op

        if self.args is None:
            self.args = dsa_op._launch_args(None, ("q", "k", "w"), self.indices, None, self.workspace, self.tickets,
                                            "ticket")
        self.indices[...] = self.value


@pytest.fixture
def placement(load_script, monkeypatch):
    cupy = pytest.importorskip("cupy")
    import cake_rt
    from cake_rt.bench import cases, timing

    script = load_script("dsa-placement")
    made = []

    def setup(item, opts):
        layout = types.SimpleNamespace(T=4, Tkv=41986, segments=1)
        return item.heads, 128, 2048, layout, "q", "k", "w", {"cu_seqlens_q": "cq"}

    def prepare(q, k, w, topk, *, indices, scores, workspace, stream, **meta):
        assert (q, k, w, topk, meta) == ("q", "k", "w", 2048, {"cu_seqlens_q": "cq"})
        i = len(made)
        run = _Runner(workspace if workspace is not None else _Buf(0x7000000 + i * 0x100000, 10),
                      types.SimpleNamespace(ptr=0x9000000 + 512 * i, nwords=4 + 4 * 8208), indices, 7)
        made.append(run)
        return run

    class FakeTimer:
        def __init__(self, stream, **kw):
            self.kw = kw

        def time_arms(self, arms, wall=True):
            assert wall is False
            out = {}
            for j, (name, fn) in enumerate(arms):
                fn()
                out[name] = {"median": 0.028 + 0.001 * j, "min": 0.027, "max": 0.03, "clock_mhz": [1980, 1890]}
            return out

    class Stream:
        def __init__(self, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            pass

    monkeypatch.setattr(cases, "_dsa_setup", setup)
    monkeypatch.setattr(cases, "_dsa_outputs", lambda T, topk: (np.zeros((T, topk), np.int32),
                                                                 np.ones((T, topk), np.float32)))
    monkeypatch.setattr(cake_rt, "dsa_indexer_workspace_bytes", lambda *a, **kw: 1000)
    monkeypatch.setattr(cake_rt, "prepare_dsa_indexer_det_topk", prepare)
    monkeypatch.setattr(timing, "Timer", FakeTimer)
    monkeypatch.setattr(cupy.cuda, "Stream", Stream)
    monkeypatch.setattr(cupy.cuda, "Device", lambda *a: types.SimpleNamespace(attributes={"L2CacheSize": 1 << 20},
                                                                                 synchronize=lambda: None))
    monkeypatch.setattr(cupy, "empty", lambda n, dtype=None: _Buf(0x5000000, n))
    monkeypatch.setattr(cupy, "zeros", lambda n, dtype=None: _Buf(0x6100000, n))
    monkeypatch.setattr(cupy, "count_nonzero", lambda a: 0)
    import cake_rt.ops.dsa as dsa_op

    def launch_args(dp, qkw, indices, scores, workspace, tickets, schedule):  # a split plan: records after the ticket
        return qkw + (tickets.ptr, tickets.ptr + 16, 1, 2, 3, 4)

    monkeypatch.setattr(dsa_op, "_launch_args", launch_args)
    monkeypatch.setattr(cupy, "asnumpy", np.asarray)
    return script, made


def test_dsa_placement_runners_and_offsets(placement, monkeypatch, capsys):
    script, made = placement
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--runners", "3"])
    assert script.main() == 0
    out = capsys.readouterr().out
    assert "3 runners alternated" in out and "outputs equal: True" in out
    assert "runner 2:    30.00 us" in out and "1890-1980 MHz" in out and "tickets 0x9000400" in out
    assert "workspace 0x7200000 (+0x0 in its 2 MiB page)" in out
    made.clear()
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--offsets", "0,4096,2097152"])
    assert script.main() == 0
    out = capsys.readouterr().out
    assert [r.workspace.data.ptr for r in made] == [0x5000000, 0x5001000, 0x5200000]
    assert [r.workspace.n for r in made] == [1000] * 3
    assert "offset 4096" in out and "(+0x1000 in its 2 MiB page)" in out
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--offsets", "0,100"])
    with pytest.raises(SystemExit):
        script.main()


def test_dsa_placement_says_when_outputs_differ(placement, monkeypatch, capsys):
    script, made = placement
    import cake_rt

    real = cake_rt.prepare_dsa_indexer_det_topk

    def prepare(*a, **kw):
        run = real(*a, **kw)
        run.value = 7 if len(made) == 1 else 8
        return run

    monkeypatch.setattr(cake_rt, "prepare_dsa_indexer_det_topk", prepare)
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--runners", "2"])
    assert script.main() == 1
    assert "outputs equal: False" in capsys.readouterr().out


def test_dsa_placement_records(placement, monkeypatch, capsys):
    """--records: runner i's launch gets its records at the offset in page i of one zeroed buffer (2 MiB-aligned); the
    ticket word stays in its own words; the library's _launch_args is restored after."""
    script, made = placement
    import cake_rt.ops.dsa as dsa_op

    before = dsa_op._launch_args
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", "0x10,0x60010,4096"])
    assert script.main() == 0
    out = capsys.readouterr().out
    base = 0x6200000  # the first 2 MiB boundary at or after the fake buffer's 0x6100000
    assert [r.args[4] for r in made] == [base + 0x10, base + 0x200000 + 0x60010, base + 0x400000 + 4096]
    assert [r.args[3] for r in made] == [0x9000000 + 512 * i for i in range(3)]
    assert dsa_op._launch_args is before
    assert "records 0x60010" in out and "records 0x6460010 (+0x60010 in its 2 MiB page)" in out
    assert "records left at zero: True" in out
    for bad in ("0x18", "2097152", "x"):
        monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", bad])
        with pytest.raises(SystemExit):
            script.main()
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", "0x10", "--offsets", "0"])
    with pytest.raises(SystemExit):
        script.main()
    # spread:N, N offsets over the room 131,328 bytes of records leave in the page (an untimed runner sizes them)
    made.clear()
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", "spread:4"])
    assert script.main() == 0
    room = (2 << 20) - 131328 - 16
    want = [16 + (i * room // 4) // 16 * 16 for i in range(4)]
    assert want[0] == 16 and want[-1] + 131328 <= 2 << 20 and all(o % 16 == 0 for o in want)
    assert [r.args[4] for r in made[1:]] == [base + i * 0x200000 + off for i, off in enumerate(want)]
    assert "records left at zero: True" in capsys.readouterr().out
    for bad in ("spread:0", "spread:x"):
        monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", bad])
        with pytest.raises(SystemExit):
            script.main()
    # records that would pass the end of their page (4 records of 8,208 words: 131,328 bytes)
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", hex((2 << 20) - 131312)])
    with pytest.raises(SystemExit, match="pass the page's end"):
        script.main()


def _tree(tmp_path, name):
    d = tmp_path / name / "kernels"
    (d / "dsa").mkdir(parents=True)
    (d / "dsa" / "indexer.cu").write_text(f"// {name}\n")
    return d


def test_dsa_placement_trees(placement, monkeypatch, capsys, tmp_path):
    """--trees: every runner once per tree, prepared while KERNEL_PATH names that tree's indexer.cu (restored after);
    with --records each (tree, offset) in a page of its own; a summary line a tree."""
    script, made = placement
    import cake_rt
    import cake_rt.ops.dsa as dsa_op

    before = dsa_op.KERNEL_PATH
    real, seen = cake_rt.prepare_dsa_indexer_det_topk, []

    def prepare(*a, **kw):
        seen.append(dsa_op.KERNEL_PATH)
        return real(*a, **kw)

    monkeypatch.setattr(cake_rt, "prepare_dsa_indexer_det_topk", prepare)
    a, b = _tree(tmp_path, "a"), _tree(tmp_path, "b")
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--runners", "2", "--trees", f"old={a},new={b}"])
    assert script.main() == 0
    out = capsys.readouterr().out
    assert seen == [str(a / "dsa" / "indexer.cu")] * 2 + [str(b / "dsa" / "indexer.cu")] * 2
    assert dsa_op.KERNEL_PATH == before
    assert "4 runners alternated" in out and "old runner 1:" in out and "new runner 0:" in out
    # FakeTimer: runner j (in order) reads 28 + j us
    assert "tree old: median of its runners' medians 28.50 us, mean 28.50, range 28.00-29.00" in out
    assert "tree new: median of its runners' medians 30.50 us, mean 30.50, range 30.00-31.00" in out
    made.clear()
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--records", "0x10,0x20", "--trees", f"old={a},new={b}"])
    assert script.main() == 0
    base = 0x6200000
    assert [r.args[4] for r in made] == [base + i * 0x200000 + off for i, off in enumerate((0x10, 0x20, 0x10, 0x20))]
    assert dsa_op.KERNEL_PATH == before
    for bad in (f"old={tmp_path}", "old", f"x={a},x={b}"):
        monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--trees", bad])
        with pytest.raises(SystemExit):
            script.main()


def test_dsa_placement_compile_only(load_script, monkeypatch, capsys, tmp_path):
    """--compile-only: each tree's three sm_90a programs of the row's H and D (one window, with the running floor,
    several windows), nothing timed."""
    script = load_script("dsa-placement")
    import cake_rt.ops.dsa as dsa_op
    import cake_rt.warmup as warmup

    jobs = []
    monkeypatch.setattr(warmup, "_compile_one", lambda job: jobs.append(job) or 0.0)
    a = _tree(tmp_path, "a")
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--heads", "64", "--trees", f"a={a}", "--compile-only"])
    assert script.main() == 0
    cfg = dsa_op._try_config(64, 128, dsa_op.TARGET_SMEM["sm_90a"], True)
    assert jobs == [(str(a / "dsa" / "indexer.cu"), d, "sm_90a") for d in cfg.program_variants()]
    assert len(jobs) == 3
    assert "tree a: the sm_90a programs of H = 64, D = 128" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--compile-only"])
    with pytest.raises(SystemExit):
        script.main()


def test_dsa_placement_keys(placement, monkeypatch, capsys):
    """--keys: runner i's call gets the row's keys copied to offset i of one shared buffer (the same values); with
    --records, runner i's records at the (i mod n)-th records offset."""
    script, made = placement
    import cake_rt
    from cake_rt.bench import cases

    class KeyBuf(_Buf):  # a slice of it viewed as the keys, with what was copied into it
        def __init__(self, ptr, n):
            super().__init__(ptr, n)
            self.data.copy_from_device = self.copy_from_device
            self.nbytes, self.copied = n, None
            self.dtype, self.shape = "bfloat16", (n // 256, 128)

        def copy_from_device(self, src, nbytes):
            self.copied = (src.ptr, nbytes)

        def view(self, dtype):
            return self

        def reshape(self, shape):
            return self

    keys = KeyBuf(0x3000000, 41986 * 256)
    real_setup = cases._dsa_setup
    monkeypatch.setattr(cases, "_dsa_setup", lambda item, opts: real_setup(item, opts)[:5] + (keys,)
                        + real_setup(item, opts)[6:])
    monkeypatch.setattr(pytest.importorskip("cupy"), "empty", lambda n, dtype=None: KeyBuf(0x5000000, n))
    seen = []
    real = cake_rt.prepare_dsa_indexer_det_topk

    def prepare(q, k, w, topk, **kw):
        seen.append(k)
        return real(q, "k", w, topk, **kw)

    monkeypatch.setattr(cake_rt, "prepare_dsa_indexer_det_topk", prepare)
    monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", "--keys", "0,0x10000,0x100000", "--records", "0x10,0x20"])
    assert script.main() == 0
    out = capsys.readouterr().out
    assert [k.data.ptr for k in seen] == [0x5000000, 0x5010000, 0x5100000]
    assert all(k.copied == (keys.data.ptr, keys.nbytes) and k.nbytes == keys.nbytes for k in seen)
    base = 0x6200000
    assert [r.args[4] for r in made] == [base + 0x10, base + 0x200000 + 0x20, base + 0x400000 + 0x10]
    assert "keys +0x10000" in out and "keys buffer at 0x5000000" in out and "outputs equal: True" in out
    for argv in (["--keys", "100"], ["--keys", "-256"], ["--keys", "0", "--offsets", "0"]):
        monkeypatch.setattr(sys, "argv", ["dsa-placement", "A3", *argv])
        with pytest.raises(SystemExit):
            script.main()
