"""CPU: ``scripts/ssd-link-bench`` (the chunk-state hand-off microbenchmark): its help, its kernels compiling spill-free
for every variant (the cluster ones on sm_90+ only), its NumPy reference of the chain against a direct loop in exact arithmetic, and its host side
(timing table, checks, stamps) driven by a NumPy stand-in of the kernel. No GPU is used or pretended: the stand-in
checks the script's bookkeeping, the device's numbers come from a real run."""
import fractions
import sys
import types

import numpy as np
import pytest

from cake_rt.launch.compile import available_targets, compile_report, load_source


@pytest.fixture(scope="module")
def bench():  # conftest's load_script, at module scope
    import importlib.machinery
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ssd-link-bench"
    loader = importlib.machinery.SourceFileLoader("ssd_link_bench", str(path))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(mod)
    return mod


def test_help(script_help):
    out = script_help("ssd-link-bench")
    assert "--quick" in out and "--stamps" in out and "--compile-only" in out
    assert "--quick-l2" in out and "--cluster-sizes" in out


def test_source_constants_match_the_script(bench):
    text = bench.SOURCE.read_text()
    assert f"#define LINK_THREADS {bench.THREADS}\n" in text
    assert f"#define LINK_VEC4 {bench.VEC4} " in text
    assert f"#define LINK_STAMP_SLOTS {bench.STAMP_SLOTS}\n" in text


@pytest.mark.parametrize("target", [t for t in ("sm_90a", "sm_80") if t in available_targets()])
def test_every_variant_compiles_spill_free(bench, target):
    source = load_source(bench.SOURCE)
    for variant in bench.VARIANTS:
        if bench.is_cluster(variant) and target == "sm_80":
            continue  # clusters are sm_90+: test_cluster_variants_need_sm90 checks the refusal
        for stamps in (False, True):
            rep = compile_report(source, name=bench.SOURCE.name, target=target,
                                 defines=bench.defines(variant, stamps))
            name = bench.kernel_name(variant)
            assert set(rep) == {name}, (variant, stamps)
            r = rep[name]
            assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack_bytes"] == 0, (variant, stamps, r)
            if bench.is_cluster(variant) and target == "sm_90a":
                # 2 CTAs an SM (the tiles' own occupancy): at most 65536 / (2 x 128) registers a thread
                assert r["registers"] <= 256 and r["shared_bytes"] <= 1024, (variant, stamps, r)


def test_cluster_variants_need_sm90(bench, capsys, monkeypatch):
    import cake_rt.launch.compile as compile_mod

    compiled = []
    monkeypatch.setattr(compile_mod, "compile_cubin", lambda *a, **k: compiled.append(k["defines"]))
    bench.compile_only("sm_80", ("cluster.st.async", "st.release"), ())
    out = capsys.readouterr().out
    assert "skipped cluster.st.async: it needs sm_90+, the target is sm_80" in out
    assert compiled == [bench.defines("st.release")]
    b = object.__new__(bench.Bench)
    b.info = types.SimpleNamespace(capability=(8, 0), target="sm_80")
    with pytest.raises(RuntimeError, match="clusters need sm_90"):
        b.kernel("cluster.bulk", False)


def test_cluster_launch_structures_match_the_driver(bench):
    import ctypes

    cfg = bench._cluster_config(48, 8, 128, 65536, 0)
    assert ctypes.sizeof(cfg) == 56 and ctypes.sizeof(cfg._attr) == 72  # CUlaunchConfig, CUlaunchAttribute (64-bit)
    assert cfg._attr.id == 4 and (cfg._attr.value.cluster.x, cfg._attr.value.cluster.y) == (8, 1)
    assert tuple(cfg.grid) == (48, 1, 1) and tuple(cfg.block) == (128, 1, 1) and cfg.smem == 65536
    assert bench.shared_bytes("cluster.bulk", 1, 8192) == 3 * 32768
    assert bench.shared_bytes("cluster.st.async", 4, 8192) == 2 * 8192
    assert bench.shared_bytes("st.release+bulk", 16, 8192) == 2048 and bench.shared_bytes("st.release", 1, 8192) == 0


def _round_f32(x: fractions.Fraction) -> np.float32:
    """The fp32 nearest to x, ties to even (x exact)."""
    r = np.float32(float(x))
    best = None
    for cand in (np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))):
        d = abs(fractions.Fraction(float(cand)) - x)
        key = (d, int(np.array(cand).view(np.uint32)) & 1)  # nearer first, then the even significand
        if best is None or key < best[0]:
            best = (key, cand)
    return best[1]


def _fma_exact(a, b, c) -> np.float32:
    return _round_f32(fractions.Fraction(float(a)) * fractions.Fraction(float(b)) + fractions.Fraction(float(c)))


def test_fma32_rounds_once(bench):
    f32 = np.float32
    # a b = 1 + 2^-11 + 2^-24 is the midpoint of two fp32 neighbours and c = +-2^-80 is lost in the float64 sum:
    # rounding twice gives the even neighbour, the fma the one on c's side.
    a = b = f32(1 + 2.0 ** -12)
    for c, want in ((f32(2.0 ** -80), 1 + 2.0 ** -11 + 2.0 ** -23), (f32(-(2.0 ** -80)), 1 + 2.0 ** -11),
                    (f32(0.0), 1 + 2.0 ** -11)):
        got = bench.fma32(np.array([a]), np.array([b]), np.array([c]))[0]
        assert got == f32(want) == _fma_exact(a, b, c)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4000)).astype(np.float32) * np.float32(2.0) ** rng.integers(-40, 40, (3, 4000))
    x = x.astype(np.float32)
    got = bench.fma32(x[0], x[1], x[2])
    want = np.array([_fma_exact(*x[:, k]) for k in range(x.shape[1])], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_reference_equals_a_direct_loop(bench):
    units, elems, links = 3, 12, 40
    init = bench.chain_init(units, elems, seed=3)
    ref = bench.chain_reference(init, (7, links))
    for u in range(units):
        for e in range(elems):
            s = init[u, e]
            for c in range(links):
                loc = np.float32((((c * 1103 + u * 12289 + e * 7) & 1023) - 512) / 4096)
                decay = np.float32((((c * 37 + u * 11) & 63) + 448) / 512)
                s = _fma_exact(decay, s, loc)
                if c + 1 == 7:
                    assert ref[7][u, e].view(np.uint32) == np.float32(s).view(np.uint32)
            assert ref[links][u, e].view(np.uint32) == np.float32(s).view(np.uint32), (u, e)


def test_the_operands_match_the_kernels_formulas(bench):
    text = bench.SOURCE.read_text()
    assert "(c * 1103 + u * 12289 + e * 7) & 1023u) - 512) * (1.0f / 4096.0f)" in text
    assert "(((c * 37 + u * 11) & 63) + 448) * (1.0f / 512.0f)" in text
    assert "__fmaf_rn(decay, S[k].x, loc[k].x)" in text
    loc = bench.chain_loc(5, 2, 8)
    assert loc[1, 3] == np.float32((((5 * 1103 + 12289 + 21) & 1023) - 512) / 4096)
    assert bench.chain_decay(5, 2)[1] == np.float32((((5 * 37 + 11) & 63) + 448) / 512)


def test_shapes_the_kernel_cannot_hold_are_refused(bench):
    bench.check_shape(80, 16, 8192, 128)
    with pytest.raises(ValueError):
        bench.check_shape(1, 3, 8192, 16)  # 8192 is not a multiple of 12
    with pytest.raises(ValueError):
        bench.check_shape(1, 1, 16384, 16)  # 64 KB a holder: more than 128 threads x 16 float4s


# --- the host side on a NumPy stand-in of the kernel -------------------------------------------------------------

class _Event:
    clock = [0.0]

    def record(self, stream=None):
        self.t = _Event.clock[0]

    def synchronize(self):
        pass


def _fake_cupy():
    cuda = types.SimpleNamespace(
        Event=_Event,
        get_elapsed_time=lambda a, b: b.t - a.t,
        get_current_stream=lambda: types.SimpleNamespace(synchronize=lambda: None),
        Device=lambda *a: types.SimpleNamespace(pci_bus_id=""),  # (no bus id: the timer reads no clock)
    )
    return types.SimpleNamespace(zeros=np.zeros, asarray=np.asarray, asnumpy=np.asarray, count_nonzero=np.count_nonzero,
                                 float32=np.float32, uint32=np.uint32, uint64=np.uint64, cuda=cuda)


def _stand_in(bench, stale_at=None):
    """launch_cooperative's stand-in: the kernel's items in order (a valid schedule), fake time 1 us a link + 5 us,
    stamps 100 ns apart; stale_at=(c, chain) reads that link's input from the wrong slot (a broken hand-off)."""
    def launch(kernel, grid, block, args, shared_mem=0):
        state, words, links, units, holders, elems, stamps = args
        links, units, holders, elems = int(links), int(units), int(holders), int(elems)
        chains, blk = units * holders, elems // holders
        for i in range(links * chains):
            c, r = divmod(i, chains)
            u, h = divmod(r, holders)
            assert c == 0 or words[r] >= c
            sl = slice(h * blk, (h + 1) * blk)
            src = (c + 1) & 1 if (c, r) != stale_at else c & 1
            e = np.arange(h * blk, (h + 1) * blk)
            loc = ((((c * 1103 + u * 12289 + e * 7) & 1023) - 512).astype(np.float32) / np.float32(4096)).astype(
                np.float32)
            state[c & 1, u, sl] = bench.fma32(np.full(blk, bench.chain_decay(c, units)[u]), state[src, u, sl], loc)
            words[r] = 0 if c == links - 1 else c + 1
            if stamps is not None:
                t0 = 1000 * c + 10 * r
                stamps[i] = [t0, t0 + 100, t0 + 200, t0 + 300, t0 + 400, t0, t0 + 100, t0 + 400]
        if stamps is not None:  # each CTA's row: 2 clocks a ns
            stamps[links * chains:] = [[0, 0, 2 * 1000 * links, 1000 * links, 0, 0, 0, 0]] * grid
            stamps[:links * chains, :5] *= 2
        _Event.clock[0] += (5.0 + links) / 1000.0  # ms, as CUDA events give it
    return launch


@pytest.fixture
def stand_in(bench, monkeypatch):
    import cake_rt.launch.arch as arch
    import cake_rt.launch.compile as compile_mod
    import cake_rt.launch.grid as grid_mod

    info = types.SimpleNamespace(name="stand-in", target="sm_90a", sm_count=4, capability=(9, 0))
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setattr(arch, "device_info", lambda device=None: info)
    monkeypatch.setattr(compile_mod, "get_kernel", lambda *a, **k: object())
    monkeypatch.setattr(grid_mod, "launch_cooperative", _stand_in(bench))
    launch = _stand_in(bench)
    clusters = []

    def launch_cluster(kernel, csize, grid, block, args, shared_mem=0):
        clusters.append((csize, grid, shared_mem))
        launch(kernel, grid, block, args, shared_mem)
    monkeypatch.setattr(bench, "launch_cluster", launch_cluster)
    monkeypatch.setattr(bench, "max_active_clusters", lambda kernel, csize, block, smem: 16 // csize)
    grid_mod.cluster_launches = clusters
    return grid_mod


def test_host_side_on_the_stand_in(bench, stand_in, capsys, tmp_path):
    rc = bench.main(["--variants", "st.release,st.release+bulk", "--units", "1,3", "--holders", "1,4",
                     "--links", "4,8,16", "--elems", "64", "--repeats", "2", "--warmup", "1", "--stamps",
                     "--json", str(tmp_path / "x.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "WRONG" not in out and "every chain bitwise equal" in out
    assert "| **1.000** |" in out  # the stand-in's 1 us a link, read back as the slope
    import json

    data = json.loads((tmp_path / "x.json").read_text())
    assert len(data["timed"]) == 2 * 2 * 2 and all(r["ok"] for r in data["timed"])
    s = data["stamped"][0]
    assert s["parts_ns"] == {"wait": 100.0, "loads+step": 100.0, "stores": 100.0, "publish": 100.0}
    assert s["link_ns_median"] == 1000.0 and s["ok"]
    assert {r["grid"] for r in data["timed"]} == {8}


def test_a_stale_read_shows_as_wrong(bench, stand_in, monkeypatch, capsys):
    monkeypatch.setattr(stand_in, "launch_cooperative", _stand_in(bench, stale_at=(5, 1)))
    rc = bench.main(["--variants", "st.release", "--units", "1", "--holders", "4", "--links", "4,8",
                     "--elems", "64", "--repeats", "1", "--warmup", "0"])
    out = capsys.readouterr().out
    assert rc == 1 and "WRONG" in out


def test_a_grid_dividing_the_chains_is_moved_off(bench, stand_in):
    b = bench.Bench(None)
    assert b.grid == 8 and b.grid_for(16) == 7 and b.grid_for(4) == 8


def test_cluster_rows_on_the_stand_in(bench, stand_in, capsys, tmp_path):
    rc = bench.main(["--variants", "cluster.st.async,cluster.bulk", "--cluster-sizes", "2,4", "--units", "1,fit",
                     "--holders", "1,4", "--links", "4,8,16", "--elems", "64", "--repeats", "2", "--warmup", "1",
                     "--stamps", "--json", str(tmp_path / "x.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "WRONG" not in out and "every chain bitwise equal" in out
    import json

    data = json.loads((tmp_path / "x.json").read_text())
    # fit: 16 / C clusters resident (the stand-in's occupancy), U = that // H; C 4 H 4 gives U 1 = the U 1 row
    got = {(r["variant"], r["cluster"], r["units"], r["holders"]) for r in data["timed"]}
    want = {(v, c, u, h) for v in ("cluster.st.async", "cluster.bulk")
            for c, h, u in ((2, 1, 1), (2, 1, 8), (2, 4, 1), (2, 4, 2), (4, 1, 1), (4, 1, 4), (4, 4, 1))}
    assert got == want and len(data["timed"]) == len(want)
    assert all(r["grid"] == r["cluster"] * r["units"] * r["holders"] and r["ok"] for r in data["timed"])
    assert all(r["slope_us"] == pytest.approx(1.0) for r in data["timed"])
    assert "| cluster.st.async | 2 | 8 | 1 | 256 B |" in out and "| 8 | ok |" in out  # U / slope = 8 unit links a us
    launches = stand_in.cluster_launches
    assert (2, 16, 3 * 256) in launches and (4, 16, 2 * 64) in launches  # cluster.bulk C 2 U 8 H 1; st.async C 4 H 4
    s = [x for x in data["stamped"] if x["variant"] == "cluster.bulk" and x["cluster"] == 2 and x["units"] == 8]
    assert s and s[0]["parts_ns"]["wait"] == 100.0 and s[0]["ok"]
    fits = {(f["variant"], f["cluster"], f["holders"]): f["units"] for f in data["fit_units"]}
    assert fits[("cluster.st.async", 2, 4)] == 2 and fits[("cluster.bulk", 4, 1)] == 4


def test_a_cluster_size_not_resident_is_skipped(bench, stand_in, monkeypatch, capsys):
    monkeypatch.setattr(bench, "max_active_clusters", lambda kernel, csize, block, smem: 0 if csize == 16 else 4)
    rc = bench.main(["--variants", "cluster.st+arrive", "--cluster-sizes", "2,16", "--units", "fit",
                     "--holders", "1", "--links", "4,8", "--elems", "64", "--repeats", "1", "--warmup", "0"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "# skipped cluster.st+arrive C 16 H 1: no cluster of this size is resident" in out
    assert "| cluster.st+arrive | 2 | 4 | 1 |" in out


def test_stamp_parts_maps_cluster_items_to_their_ctas(bench):
    links, chains, csize = 6, 2, 3
    grid = chains * csize
    st = np.zeros((links * chains + grid, bench.STAMP_SLOTS), dtype=np.int64)
    for i in range(links * chains):
        st[i] = [10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3, 10 * i + 4, 0, 0, 0]
    # only the CTAs that carry links count towards the clock rate: rank < links of each chain's cluster (all here)
    st[links * chains:, 2] = 200
    st[links * chains:, 3] = 100
    out = bench.stamp_parts(st, links, chains, grid, csize)
    assert out["clock_per_ns"] == 2.0 and out["parts_ns"]["wait"] == 0.5


def test_references_slice_the_longest_chain(bench):
    refs = bench.References(types.SimpleNamespace(asarray=np.asarray), 5, 16, (3, 6))
    init, ref = refs.get(2)
    direct = bench.chain_reference(bench.chain_init(5, 16)[:2], (3, 6))
    assert init.shape == (2, 16) and np.array_equal(ref[6].view(np.uint32), direct[6].view(np.uint32))


def test_a_broken_cluster_variant_is_timed_no_further(bench, stand_in, monkeypatch, capsys):
    stale = _stand_in(bench, stale_at=(5, 1))
    monkeypatch.setattr(bench, "launch_cluster", lambda kernel, csize, grid, block, args, shared_mem=0: stale(
        kernel, grid, block, args, shared_mem))
    rc = bench.main(["--variants", "cluster.st.async,st.release", "--cluster-sizes", "2,4", "--units", "1",
                     "--holders", "4", "--links", "4,8", "--elems", "64", "--repeats", "1", "--warmup", "0",
                     "--stamps"])
    out = capsys.readouterr().out
    assert rc == 1
    rows = [line for line in out.splitlines() if line.startswith("| cluster.st.async |")]
    assert len(rows) == 1 and "| nan |" in rows[0] and "WRONG" in rows[0]  # C 2 only; no C 4 row, no stamps
    assert "| st.release | - | 1 | 4 |" in out
