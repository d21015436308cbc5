"""CPU tests of the foundation: compile layer, targets, launch-argument packing, interop validation, CLI.

None of these need a GPU; they run in CI.
"""
import subprocess
import sys

import numpy as np
import pytest

from cake_rt import interop
from cake_rt.launch import compile as cc
from cake_rt.launch.arch import target_for_capability


def test_targets_for_capabilities():
    assert target_for_capability((9, 0)) == "sm_90a"
    assert target_for_capability((10, 0)) == "sm_100a"
    assert target_for_capability((8, 0)) == "sm_80"
    assert target_for_capability((8, 6)) == "sm_86"
    assert target_for_capability((8, 9)) == "sm_89"
    assert target_for_capability((12, 0)) == "sm_120"


def test_available_targets_cover_the_required_ones():
    t = cc.available_targets()
    for need in ("sm_80", "sm_90a"):
        assert need in t


def test_include_inlining_resolves_each_header_once(tmp_path, monkeypatch):
    (tmp_path / "common").mkdir()
    (tmp_path / "op").mkdir()
    (tmp_path / "common" / "a.cuh").write_text("#pragma once\nint a_marker;\n")
    (tmp_path / "common" / "b.cuh").write_text('#include "a.cuh"\nint b_marker;\n')
    (tmp_path / "op" / "k.cu").write_text('#include "../common/b.cuh"\n#include "common/a.cuh"\nint k;\n')
    monkeypatch.setattr(cc, "KERNEL_ROOT", tmp_path)
    text = cc.load_source("op/k.cu")
    assert text.count("int a_marker;") == 1
    assert text.count("int b_marker;") == 1
    assert "#include" not in text


@pytest.mark.parametrize("tail", [" // the value", "  /* the value */", "\r"])
def test_an_include_with_a_trailing_comment_is_inlined_and_keyed(tmp_path, monkeypatch, tail):
    # The include form tests/test_architecture_rules_cpu.py allows: left for NVRTC to resolve, the header's text would
    # not be in the cache key (an edit of it would load the stale cubin) and would be read relative to the cwd.
    (tmp_path / "a.cuh").write_text("#define VAL 1.0f\n")
    (tmp_path / "k.cu").write_text(f'#include "a.cuh"{tail}\nextern "C" __global__ void k(float* a) {{ a[0] = VAL; }}\n')
    monkeypatch.setattr(cc, "KERNEL_ROOT", tmp_path)
    first = cc.load_source("k.cu")
    assert "#include" not in first and "#define VAL 1.0f" in first
    (tmp_path / "a.cuh").write_text("#define VAL 2.0f\n")
    assert cc.cache_key(cc.load_source("k.cu"), name="k.cu", target="sm_80") != cc.cache_key(first, name="k.cu",
                                                                                            target="sm_80")


def test_missing_include_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "k.cu").write_text('#include "nope.cuh"\n')
    monkeypatch.setattr(cc, "KERNEL_ROOT", tmp_path)
    with pytest.raises(FileNotFoundError, match="nope.cuh"):
        cc.load_source("k.cu")


def test_cache_key_depends_on_text_defines_options_target():
    src = cc.load_source("common/selftest.cu")
    base = cc.cache_key(src, name="s.cu", target="sm_90a")
    assert base == cc.cache_key(src, name="s.cu", target="sm_90a")
    assert base != cc.cache_key(src + "\n// edit", name="s.cu", target="sm_90a")
    assert base != cc.cache_key(src, name="s.cu", target="sm_80")
    assert base != cc.cache_key(src, name="s.cu", target="sm_90a", defines={"X": 1})
    assert base != cc.cache_key(src, name="s.cu", target="sm_90a", options=("-lineinfo",))


def test_compile_error_names_program_and_shows_log():
    with pytest.raises(cc.CompileError) as ei:
        cc.compile_cubin('extern "C" __global__ void k() { undefined_thing(); }', name="broken.cu",
                         target="sm_80")
    msg = str(ei.value)
    assert "broken.cu" in msg and "sm_80" in msg and "undefined_thing" in msg


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_cubin_is_the_whole_elf_image(tmp_path, monkeypatch, target):
    # CuPy's getCUBIN drops the image's last byte (a NUL-terminated-string convention): the cubin must end
    # where its ELF program-header table, section-header table and sections end.
    import struct

    monkeypatch.setenv("CAKE_RT_CACHE_DIR", "off")
    cubin = cc.compile_cubin('extern "C" __global__ void whole(float* x) { x[threadIdx.x] = 2.0f; }',
                             name="whole.cu", target=target)
    assert cubin[:4] == b"\x7fELF"
    phoff, shoff = struct.unpack_from("<QQ", cubin, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", cubin, 0x36)
    assert len(cubin) >= phoff + phentsize * phnum and len(cubin) >= shoff + shentsize * shnum
    short = cubin[:-1]
    assert cc.elf_complete(short) == cubin and cc.elf_complete(cubin) == cubin
    assert cc.elf_complete(b"not an elf") == b"not an elf"


def test_no_forced_ftz():
    assert "--ftz=false" in cc.DEFAULT_OPTIONS
    assert not any(o in ("--ftz=true", "-ftz=true") for o in cc.DEFAULT_OPTIONS)


def test_disk_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("CAKE_RT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cc, "_cubin_cache", {})
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
    first = cc.compile_cubin(src, name="k.cu", target="sm_80")
    files = list(tmp_path.glob("*.cubin"))
    assert len(files) == 1 and files[0].read_bytes() == cc._pack_file(first)  # header + hash + cubin
    monkeypatch.setattr(cc, "_cubin_cache", {})
    assert cc.compile_cubin(src, name="k.cu", target="sm_80") == first


@pytest.mark.parametrize("target", cc.available_targets())
def test_common_selftest_kernels_compile_without_spills(target):
    report = cc.compile_report(cc.load_source("common/selftest.cu"), name="selftest.cu", target=target)
    assert {"selftest_convert", "selftest_mma_bf16", "selftest_mma_fp16", "selftest_ldmatrix_mma_bf16",
            "selftest_grid_barrier", "selftest_ticket", "selftest_float_key"} <= set(report)
    for kname, r in report.items():
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0, (kname, r)
        assert r["registers"] > 0


def test_selftest_convert_check_compares_bits():
    """The conversion self-test claims bit-for-bit agreement: a kernel that rounds -0.0 to +0.0 (equal as values)
    or packs one wrong bf16 half must fail it."""
    from cake_rt.selftest import convert_matches

    x = np.array([0.0, -0.0, np.inf, -np.inf, 1.0 + 2.0 ** -9, -3.0e-41, 7.0e4], np.float32)
    ob = x.astype(interop.BF16).astype(np.float32)
    with np.errstate(over="ignore"):
        oh = x.astype(np.float16).astype(np.float32)
    pk = (x.astype(interop.BF16).view(np.uint16).astype(np.uint32)
          | ((-x).astype(interop.BF16).view(np.uint16).astype(np.uint32) << 16))
    assert convert_matches(x, ob, oh, pk)
    for which in ("bf16", "fp16"):
        bad_b, bad_h = ob.copy(), oh.copy()
        (bad_b if which == "bf16" else bad_h)[1] = 0.0  # +0.0 where -0.0 is due
        assert np.array_equal(bad_b, ob) and np.array_equal(bad_h, oh)  # what a value comparison saw
        assert not convert_matches(x, bad_b, bad_h, pk), which
    assert not convert_matches(x, ob, oh, pk ^ np.uint32(1 << 16))


def test_compile_report_parses_registers_and_spills():
    src = r'''
    extern "C" __global__ void big(float* out, int n) {
        float acc[64];
        for (int i = 0; i < 64; ++i) acc[i] = out[(threadIdx.x * 64 + i) % n];
        for (int r = 0; r < n; ++r) { int j = out[r] > 0 ? r % 64 : (r * 7) % 64; acc[j] += 1.0f; }
        float s = 0; for (int i = 0; i < 64; ++i) s += acc[i];
        out[threadIdx.x] = s;
    }'''
    rep = cc.compile_report(src, name="big.cu", target="sm_80")
    assert rep["big"]["stack_bytes"] > 0  # a run-time indexed array lives in local memory
    assert rep["big"]["params"] == [8, 4]
    # an out-of-line device function's figures (its block follows the kernel's in ptxas' log) are not the kernel's
    called = src.replace('extern "C"', '__device__ __noinline__ void tail(float* o) { o[threadIdx.x] += 1.0f; }\n'
                         '    extern "C"').replace("out[threadIdx.x] = s;", "out[threadIdx.x] = s; tail(out);")
    rep2 = cc.compile_report(called, name="big.cu", target="sm_80")
    assert set(rep2) == {"big"} and rep2["big"]["stack_bytes"] > 0, rep2


def test_compile_report_names_a_kernel_whose_wgmma_ptxas_serialized(monkeypatch):
    """ptxas's C7512-style note (every wgmma of a function waits for the one before) lands in that kernel's report
    alone; a kernel without one reports None."""
    src = ('extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }\n'
           'extern "C" __global__ void j(float* a) { a[threadIdx.x] *= 2.0f; }')
    plain = cc.compile_report(src, name="k.cu", target="sm_80")
    assert plain["k"]["wgmma_serialized"] is None and plain["j"]["wgmma_serialized"] is None
    run = cc._run_nvrtc

    def noted(text, name, target, options, verbose=False):
        cubin, log = run(text, name, target, options, verbose=verbose)
        note = ("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
                "to insufficient register resources for the function 'j'\n"
                "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
                "to the presence of Extern calls in the function 'absent'\n")
        return cubin, note + log

    monkeypatch.setattr(cc, "_run_nvrtc", noted)
    rep = cc.compile_report(src, name="k.cu", target="sm_80")
    assert rep["k"]["wgmma_serialized"] is None
    assert rep["j"]["wgmma_serialized"].startswith("C7512: wgmma.mma_async instructions are serialized due to "
                                                   "insufficient register resources")


@pytest.mark.parametrize("target", cc.available_targets())
def test_kernel_params_are_the_signature_in_order(target):
    """Each entry function's parameter sizes in declaration order, a by-value struct whole (a tensor map)."""
    src = r'''
    struct __align__(64) Map { unsigned long long w[16]; };
    extern "C" __global__ void a(char c, double d, const __grid_constant__ Map m, short s, float* p) {
        if (threadIdx.x == 0) *p = c + d + m.w[3] + s;
    }
    extern "C" __global__ void b() {}'''
    params = cc.kernel_params(cc.compile_cubin(src, name="params.cu", target=target))
    assert params == {"a": [1, 8, 128, 2, 8], "b": []}


@pytest.fixture
def nvrtc_texts(monkeypatch):
    """Every text NVRTC is given from here on (``_run_nvrtc`` spied on; it still compiles)."""
    texts = []
    real = cc._run_nvrtc

    def spy(text, *args, **kwargs):
        texts.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(cc, "_run_nvrtc", spy)
    return texts


def test_compile_report_compiles_a_new_text_each_time_and_refuses_an_empty_log(monkeypatch, nvrtc_texts):
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
    reports = [cc.compile_report(src, name="k.cu", target="sm_80") for _ in range(2)]
    assert reports[0] == reports[1] and reports[0]["k"]["registers"] > 0
    assert len(set(nvrtc_texts[-2:])) == 2  # NVRTC may skip ptxas (and its report) for a text it has compiled

    monkeypatch.setattr(cc, "_run_nvrtc", lambda *a, **k: (b"", "ptxas info    : Compile time = 1 ms\n"))
    with pytest.raises(cc.CompileError, match="no ptxas report"):
        cc.compile_report(src, name="k.cu", target="sm_80")


def test_cold_compile_seconds_compiles_a_text_no_cache_holds(nvrtc_texts):
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }'
    times = [cc.cold_compile_seconds(src, name="k.cu", target="sm_80") for _ in range(2)]
    assert all(t > 0 for t in times)
    texts = nvrtc_texts
    assert len(texts) == 2 and texts[0] != texts[1] and all(src in t for t in texts)


def test_launch_refuses_python_scalars():
    from cake_rt.launch.grid import _dim3, _pack_args

    with pytest.raises(TypeError, match="argument 0"):
        _pack_args((3,))
    with pytest.raises(TypeError, match="argument 1"):
        _pack_args((np.int32(1), 2.5))
    params, holders = _pack_args((np.int32(7), np.float32(1.5), np.uint64(1 << 40), None))
    assert [h.value for h in holders] == [7, 1.5, 1 << 40, None]
    assert _dim3(5, "grid") == (5, 1, 1)
    assert _dim3((2, 3), "grid") == (2, 3, 1)
    with pytest.raises(ValueError, match="grid"):
        _dim3((0,), "grid")


class _FakeArray:
    """Enough of a CuPy array for check_array."""

    def __init__(self, shape, dtype, contiguous=True, device=0):
        self.shape = tuple(shape)
        self.ndim = len(shape)
        self.dtype = np.dtype(dtype)
        self.strides = tuple(range(len(shape)))

        class F:
            c_contiguous = contiguous

        class D:
            id = device

        self.flags = F()
        self.device = D()


def test_check_array_messages_name_the_argument():
    a = _FakeArray((2, 3, 4), np.float32)
    assert interop.check_array(a, "x", dtypes=[np.float32], shape=(2, None, 4)) is a
    with pytest.raises(TypeError, match=r"^x: expected dtype bfloat16 or float16, got float32"):
        interop.check_array(a, "x", dtypes=[interop.BF16, np.float16])
    with pytest.raises(ValueError, match=r"^x: expected 2 dimensions"):
        interop.check_array(a, "x", ndim=2)
    with pytest.raises(ValueError, match=r"^x: expected shape \(2, \?, 5\), got \(2, 3, 4\)"):
        interop.check_array(a, "x", shape=(2, None, 5))
    with pytest.raises(ValueError, match=r"^x: expected a C-contiguous array"):
        interop.check_array(_FakeArray((2, 3), np.float32, contiguous=False), "x")
    with pytest.raises(ValueError, match=r"^x: expected an array on device 1"):
        interop.check_array(a, "x", device=1)


def test_as_device_array_refuses_host_arrays():
    with pytest.raises(TypeError, match=r"^q: expected a CUDA device array"):
        interop.as_device_array(np.zeros(3, np.float32), "q")
    with pytest.raises(TypeError, match=r"^q: expected a CUDA device array"):
        interop.as_device_array(object(), "q")


def test_as_host_int32():
    out = interop.as_host_int32([0, 5, 9], "cu_seqlens")
    assert out.dtype == np.int32 and out.tolist() == [0, 5, 9]
    assert interop.as_host_int32(np.array([1, 2], np.int64), "o").dtype == np.int32
    with pytest.raises(TypeError, match="^cu_seqlens: expected an integer dtype"):
        interop.as_host_int32(np.array([0.0, 1.0]), "cu_seqlens")
    with pytest.raises(ValueError, match="^cu_seqlens: expected a 1-D array"):
        interop.as_host_int32(np.zeros((2, 2), np.int32), "cu_seqlens")
    with pytest.raises(ValueError, match="^cu_seqlens: values must fit in int32"):
        interop.as_host_int32([0, 1 << 40], "cu_seqlens")


@pytest.mark.parametrize("values, error, match", [
    ([0, [1, 2]], ValueError, "expected a 1-D array"),     # ragged: NumPy itself refuses it, naming nothing
    ([[0, 1], [2]], ValueError, "expected a 1-D array"),
    ([0, 1 << 70], ValueError, "values must fit in int32"),  # beyond int64: NumPy makes an object array
    ((0, -(1 << 70)), ValueError, "values must fit in int32"),
    ([0, None], TypeError, "expected an integer dtype"),
    ([0, "4"], TypeError, "expected an integer dtype")])
def test_as_host_int32_names_the_argument_for_any_list(values, error, match):
    with pytest.raises(error, match=f"^cu_seqlens: {match}"):
        interop.as_host_int32(values, "cu_seqlens")


def test_parse_dtype():
    allowed = [np.float32, interop.BF16, np.float16]
    assert interop.parse_dtype("bfloat16", "state_dtype", allowed) == interop.BF16
    assert interop.parse_dtype(np.float32, "state_dtype", allowed) == np.float32
    with pytest.raises(TypeError, match="^state_dtype"):
        interop.parse_dtype(np.float64, "state_dtype", allowed)
    with pytest.raises(ValueError, match="^state_dtype"):
        interop.parse_dtype("int3", "state_dtype", allowed)


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "cake_rt", *args], capture_output=True, text=True, timeout=120)


def test_cli_info_without_gpu_explains_and_exits_zero():
    from cake_rt.launch.arch import has_gpu

    r = _run_cli("info")
    assert r.returncode == 0, r.stderr
    assert "cake-rt" in r.stdout and "targets" in r.stdout
    if not has_gpu():
        assert "no CUDA GPU found" in r.stdout
        bare = _run_cli()  # the bare command is `info` (+ a self-test only when a GPU exists)
        assert bare.returncode == 0 and "no CUDA GPU found" in bare.stdout


def test_cli_gpu_commands_without_gpu_fail_with_one_line():
    from cake_rt.launch.arch import has_gpu

    if has_gpu():
        pytest.skip("a GPU is present")
    for cmd in ("selftest", "calibrate"):
        r = _run_cli(cmd)
        assert r.returncode == 3  # the documented "no usable GPU" status
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "needs a GPU" in r.stderr
