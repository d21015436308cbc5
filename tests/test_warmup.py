"""cake-rt warmup / cache: the programs each op lists, --shapes, and compiling into a fresh cache (CPU only)."""
import pytest

from cake_rt import warmup
from cake_rt.ops import dsa, ssd


def test_programs_have_the_documented_signature():
    for op in (ssd, dsa):
        progs = op.programs("sm_90a")
        assert progs and all(isinstance(p, str) and isinstance(d, dict) for p, d in progs)
        assert len({tuple(sorted(d.items())) for _, d in progs}) == len(progs)  # no duplicates


def test_shapes_narrow_the_list():
    shapes = warmup.parse_shapes(["dtype=bfloat16,headdim=64,dstate=128,chunk=256"])
    progs = warmup.programs(("ssd",), "sm_90a", shapes)
    assert progs and all(d["SSD_T"] == 0 and d["SSD_P"] == 64 and d["SSD_N"] == 128 and d["SSD_Q"] == 256
                         for _, _, d in progs)
    fams = {d["SSD_FAMILY"] for _, _, d in progs}
    assert fams == {0, 1}  # a program per family
    for name, code in (("exact", 0), ("chunkpar", 1)):
        one = warmup.programs(("ssd",), "sm_90a", warmup.parse_shapes([f"family={name},dstate=128"]))
        assert one and all(d["SSD_FAMILY"] == code and d["SSD_N"] == 128 for _, _, d in one)
    with pytest.raises(ValueError, match="family"):
        warmup.programs(("ssd",), "sm_90a", warmup.parse_shapes(["family=both"]))
    both = warmup.programs(("ssd", "dsa"), "sm_90a", warmup.parse_shapes(["heads=64,head_dim=128"]))
    assert both and all(op == "dsa" and d["DSA_H"] == 64 for op, _, d in both)
    with pytest.raises(ValueError, match="--shapes"):
        warmup.programs(("ssd",), "sm_90a", warmup.parse_shapes(["heads=64"]))
    # an entry no listed op knows (a misspelt key) is an error for several ops too, not "warm nothing for it"
    for entries in (["headim=64"], ["heads=64", "headim=64"], ["headdim=64,heads=64"]):
        with pytest.raises(ValueError, match="--shapes: no ssd or dsa program knows"):
            warmup.programs(("ssd", "dsa"), "sm_90a", warmup.parse_shapes(entries))
    # DSA windows: 0 the programs of one-window units (no DSA_WINDOWS define; with and without the running floor), 1
    # the other; all without the key
    all64 = warmup.programs(("dsa",), "sm_90a", warmup.parse_shapes(["heads=64,head_dim=128"]))
    for val in (0, 1):
        one = warmup.programs(("dsa",), "sm_90a", warmup.parse_shapes([f"heads=64,head_dim=128,windows={val}"]))
        assert one and all(d.get("DSA_WINDOWS", 0) == val and d["DSA_H"] == 64 for _, _, d in one)
        assert sorted(map(str, one)) == sorted(str(x) for x in all64 if x[2].get("DSA_WINDOWS", 0) == val)
    assert len(all64) == 5  # the wgmma programs (one window, its running floor, several) and the mma.sync pair
    with pytest.raises(ValueError, match="windows"):
        warmup.programs(("dsa",), "sm_90a", warmup.parse_shapes(["windows=yes"]))
    for bad in ("headdim", "=3", ","):
        with pytest.raises(ValueError, match="--shapes"):
            warmup.parse_shapes([bad])


def test_dsa_warmup_of_any_head_count_and_dim():
    """H is any multiple of 8 from 8 to 128 and D 64 or 128 (the contract): a warmup narrowed to a workload's heads
    and head_dim holds the programs such a call loads (every variant), tested shape or not. The plain warmup
    keeps the tested shapes' list, and shapes that name no head count do not widen it."""
    as_set = lambda progs: {tuple(sorted(d.items())) for _, _, d in progs}
    for H in dsa.HEADS:
        for D in dsa.HEAD_DIMS:
            cfg = dsa.config_for(H, D, dsa.TARGET_SMEM["sm_90a"], "sm_90a")
            want = {tuple(sorted(d.items())) for d in cfg.program_variants()}
            narrowed = as_set(warmup.programs(("dsa",), "sm_90a", warmup.parse_shapes([f"heads={H},head_dim={D}"])))
            assert want <= narrowed, (H, D)
            assert all(dict(d)["DSA_H"] == H and dict(d)["DSA_D"] == D for d in narrowed), (H, D)
    assert as_set(warmup.programs(("dsa",), "sm_90a")) == {tuple(sorted(d.items())) for _, d in dsa.programs("sm_90a")}
    one_window = as_set(warmup.programs(("dsa",), "sm_90a", warmup.parse_shapes(["windows=0"])))
    assert one_window == {tuple(sorted(d.items())) for _, d in dsa.programs("sm_90a") if "DSA_WINDOWS" not in d}


def test_warmup_compiles_once_then_finds_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    shapes = warmup.parse_shapes(["family=exact,dtype=float32,SSD_DT=2,SSD_SD=2,headdim=64,dstate=64,chunk=64"])
    first = warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)
    assert first["programs"] == 1 and first["compiled"] == 1 and not first["failed"]
    again = warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)
    assert again["cached"] == 1 and again["compiled"] == 0
    c = warmup.cache_summary()
    assert c["files"] == 1 and c["bytes"] > 0
    assert warmup.clear_cache() == 1 and warmup.cache_summary()["files"] == 0


@pytest.mark.parametrize("how", ["empty", "truncated"])
def test_warmup_compiles_again_a_bad_cache_file(monkeypatch, tmp_path, how):
    """A cubin file a crash or a full disk left short is not "already cached": warmup replaces it, so the first
    call compiles nothing."""
    from cake_rt.launch import compile as cc

    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    shapes = warmup.parse_shapes(["family=exact,dtype=float32,SSD_DT=2,SSD_SD=2,headdim=64,dstate=64,chunk=64"])
    assert warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)["compiled"] == 1
    f, = tmp_path.glob("*.cubin")
    good = f.read_bytes()
    f.write_bytes(b"" if how == "empty" else good[: len(good) // 2])
    with pytest.warns(cc.CacheWarning, match=f.name):
        again = warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)
    assert again["cached"] == 0 and again["compiled"] == 1 and not again["failed"]
    assert f.read_bytes() == good


def test_warmup_compiles_with_the_options_a_call_loads(monkeypatch, tmp_path):
    """Under CAKE_RT_LINEINFO a call loads its program with -lineinfo: warmup compiles and finds that program, a
    separate cache entry from the plain one."""
    from cake_rt.launch.compile import cache_key, load_source

    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    shapes = warmup.parse_shapes(["family=exact,dtype=float32,SSD_DT=2,SSD_SD=2,headdim=64,dstate=64,chunk=64"])
    (_, path, defines), = warmup.programs(("ssd",), "sm_90a", shapes)
    monkeypatch.setenv("CAKE_RT_LINEINFO", "1")
    assert warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)["compiled"] == 1
    key = cache_key(load_source(path), name="ssd_combined.cu", target="sm_90a", defines=defines,
                    options=("-lineinfo",))
    assert (tmp_path / f"{key}.cubin").is_file()
    monkeypatch.delenv("CAKE_RT_LINEINFO")
    assert not warmup.is_cached(path, defines, "sm_90a")
    assert warmup.warmup(("ssd",), "sm_90a", shapes=shapes, jobs=1)["compiled"] == 1


def test_warmup_refuses_without_a_disk_cache(monkeypatch):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", "off")
    with pytest.raises(RuntimeError, match="cache is off"):
        warmup.warmup(("dsa",), "sm_90a")


def test_warmup_refuses_an_untrusted_cache_directory(monkeypatch, tmp_path):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)  # writable by others: every compile would bypass it
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(d))
    with pytest.warns(Warning), pytest.raises(RuntimeError, match="not used"):
        warmup.warmup(("dsa",), "sm_90a")
    assert not any(d.iterdir())


def test_clear_removes_only_what_the_cache_writes(monkeypatch, tmp_path):
    from cake_rt import cli

    d = tmp_path / "project"  # a cache directory set to a folder that holds other files too
    (d / "cost-models").mkdir(parents=True)
    (d / "sub").mkdir()
    ours = [d / ("ab" * 32 + ".cubin"), d / ".tmp-x1.cubin", d / "cost-models" / "ssd-nvidia-h200.json",
            d / "cost-models" / ".tmp-y2.json"]
    theirs = [d / "notes.json", d / "sub" / "run.json", d / "kernel.cubin", d / "results.tmp",
              d / "cost-models" / "README.json"]
    for f in ours + theirs:
        f.write_text("x")
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(d))
    # `cake-rt info` / `cake-rt cache` count what --clear would remove, not the folder's other files
    assert warmup.cache_summary() == {"path": str(d), "files": len(ours), "bytes": len(ours)}
    stat = type(d).stat

    def vanished(self, *a, **k):  # a compile's temp file renamed by its process between the listing and the stat
        if self.name == ".tmp-x1.cubin":
            raise FileNotFoundError(2, "No such file or directory", str(self))
        return stat(self, *a, **k)

    monkeypatch.setattr(type(d), "stat", vanished)
    assert warmup.cache_summary()["files"] == len(ours) - 1
    monkeypatch.setattr(type(d), "stat", stat)
    assert warmup.clear_cache() == len(ours)
    assert not any(f.exists() for f in ours)
    assert all(f.exists() for f in theirs)
    assert cli.main(["cache", "--clear"]) == 0


def test_every_false_keeps_the_tested_lists_for_tools_that_compare_trees():
    # sass-diff and the kits compare or stage the tested shapes' programs: a named shape outside them is no program
    # there, while a workload's warmup (every=None) finds it among every shape the op takes
    ssd_shape = warmup.parse_shapes(["dtype=float16,headdim=128,dstate=256,chunk=64"])
    assert warmup.programs(("ssd",), "sm_90a", ssd_shape)
    with pytest.raises(ValueError, match="--shapes: no ssd program"):
        warmup.programs(("ssd",), "sm_90a", ssd_shape, every=False)
    dsa_shape = warmup.parse_shapes(["heads=88,head_dim=128"])
    assert warmup.programs(("dsa",), "sm_90a", dsa_shape)
    with pytest.raises(ValueError, match="--shapes: no dsa program"):
        warmup.programs(("dsa",), "sm_90a", dsa_shape, every=False)
    tested = warmup.parse_shapes(["dtype=bfloat16,headdim=64,dstate=128,chunk=256"])
    assert {str(p) for p in warmup.programs(("ssd",), "sm_90a", tested, every=False)} <= \
        {str(p) for p in warmup.programs(("ssd",), "sm_90a", tested)}
