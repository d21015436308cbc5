"""The SM clock beside the bench's samples (cake_rt.bench.clocks): NVML through a stand-in library, and the timer's
fields. CPU only."""
import ctypes

import pytest

from cake_rt.bench.clocks import REASONS, SmClock, clock_figures, reason_names


class _FakeNvml:
    """Stands in for libnvidia-ml: answers from lists (one value a call), an error code where the value is None."""

    def __init__(self, clocks, reasons=None, *, init=0, handle=0, reasons_name="nvmlDeviceGetCurrentClocksEventReasons"):
        self.clocks, self.reasons_left = list(clocks), None if reasons is None else list(reasons)
        self.init_rc, self.handle_rc, self.bus_ids = init, handle, []
        if self.reasons_left is not None:
            setattr(self, reasons_name, self._reasons)

    def nvmlInit_v2(self):
        return self.init_rc

    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id, handle_ref):
        self.bus_ids.append(bus_id)
        handle_ref._obj.value = 0x1234
        return self.handle_rc

    def nvmlDeviceGetClockInfo(self, handle, which, value_ref):
        assert handle.value == 0x1234 and which == 1  # NVML_CLOCK_SM
        v = self.clocks.pop(0)
        if v is None:
            return 999
        value_ref._obj.value = v
        return 0

    def nvmlDeviceGetPowerUsage(self, handle, value_ref):
        value_ref._obj.value = 612345  # mW
        return 0

    def _reasons(self, handle, value_ref):
        v = self.reasons_left.pop(0)
        if v is None:
            return 3
        value_ref._obj.value = v
        return 0


def _open(lib):
    return SmClock.open("0000:19:00.0", loader=lambda name: lib)


def test_reads_the_sm_clock_and_its_reasons():
    lib = _FakeNvml([1980, 1980, 1890], [0x0, 0x4])
    clock = _open(lib)  # (open reads the clock once: a device that does not answer gives None)
    assert clock is not None and lib.bus_ids == [b"0000:19:00.0"]
    assert clock.read() == (1980, 0x0)
    assert clock.read() == (1890, 0x4) and clock.watts() == pytest.approx(612.345)
    assert reason_names(0x4) == ["software power cap"] and reason_names(0x44) == ["software power cap",
                                                                                  "hardware thermal slowdown"]
    assert reason_names(0) == [] and reason_names(0x1000) == ["0x1000"]
    assert sorted(REASONS) == [1 << i for i in range(9)]


def test_the_old_reasons_name_and_none():
    lib = _FakeNvml([1755, 1755], [0x20], reasons_name="nvmlDeviceGetCurrentClocksThrottleReasons")
    assert _open(lib).read() == (1755, 0x20)
    lib = _FakeNvml([1755, 1755])  # a driver that tells no reasons
    assert _open(lib).read() == (1755, None)


@pytest.mark.parametrize("lib", [
    _FakeNvml([1980], init=9),  # nvmlInit fails (no driver loaded)
    _FakeNvml([1980], handle=6),  # NVML does not list the device
    _FakeNvml([None]),  # the first read fails
])
def test_open_gives_none_where_nvml_cannot_read(lib):
    assert _open(lib) is None


def test_open_gives_none_without_the_library():
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    assert SmClock.open("0000:19:00.0", loader=missing) is None
    clock = SmClock.open("0000:00:00.0")  # the real loader: None here unless this machine has a GPU at that address
    assert clock is None or isinstance(clock.mhz(), int)


def test_a_failed_read_is_none_and_the_fields_need_every_sample():
    lib = _FakeNvml([1980, None], [None])  # (open reads the clock, not the reasons)
    clock = _open(lib)
    assert clock.read() == (None, None)
    assert clock_figures([(1980, 4), (1890, 4)]) == {"clock_mhz": [1980, 1890], "clock_reasons": [4, 4]}
    assert clock_figures([(1980, None), (1890, 4)]) == {"clock_mhz": [1980, 1890]}
    assert clock_figures([(1980, 4), (None, 4)]) == {"clock_reasons": [4, 4]}
    assert clock_figures([(1980, 4), None]) == {} and clock_figures([]) == {}


class _Event:
    def record(self, stream):
        pass

    def synchronize(self):
        pass


class _Gpu:
    """The timer's pieces with a clock: GPU ms and clock readings from lists, one a sample."""

    def __init__(self, gpu_ms, readings):
        self.gpu_ms, self.readings = list(gpu_ms), list(readings)
        self.clock = self

    def event(self):
        return _Event()

    def elapsed_ms(self, start, end):
        return self.gpu_ms.pop(0)

    def delay(self, stream, ms):
        pass

    def read(self):
        return self.readings.pop(0)


def test_timer_keeps_a_reading_beside_each_sample():
    from cake_rt.bench.timing import Timer

    # one warm-up call a arm (no reading), then rounds a, b / b, a / a, b; the readings follow the calls' order
    gpu = _Gpu([1.0, 2.0] + [1.1, 2.1, 2.2, 1.2, 1.3, 2.3] + [9.0] * 6,
               [(1980, 0), (1980, 0), (1890, 4), (1890, 4), (1875, 4), (1875, 4)])
    t = Timer(stream=None, repeats=3, warmup=1, pieces=gpu, flush=lambda s: None, budget_s=10.0, min_repeats=3)
    t._clock = lambda: 0.0
    out = t.time_arms([("a", lambda: None), ("b", lambda: None)])
    assert out["a"]["samples"] == [1.1, 1.2, 1.3] and out["b"]["samples"] == [2.1, 2.2, 2.3]
    assert out["a"]["clock_mhz"] == [1980, 1890, 1875] and out["a"]["clock_reasons"] == [0, 4, 4]
    assert out["b"]["clock_mhz"] == [1980, 1890, 1875] and out["b"]["clock_reasons"] == [0, 4, 4]
    assert gpu.readings == []  # none for the warm-up, the host batches or the wall samples


def test_timer_without_a_clock_has_no_clock_fields():
    from cake_rt.bench.timing import Timer

    gpu = _Gpu([1.0] * 10, [])
    gpu.clock = None
    t = Timer(stream=None, repeats=2, warmup=1, pieces=gpu, flush=lambda s: None, budget_s=10.0, min_repeats=2)
    t._clock = lambda: 0.0
    out = t.time(lambda: None)
    assert out["samples"] == [1.0, 1.0] and "clock_mhz" not in out and "clock_reasons" not in out


def test_clock_drift_prints_each_group_s_clock(load_script, capsys):
    """scripts/clock-drift's burst: each group's GPU times beside its median clock, power and the reasons any call of
    the group had; '-' without a clock."""
    drift = load_script("clock-drift")

    class Clock:
        def __init__(self):
            self.calls = 0

        def read(self):
            self.calls += 1
            return (1980, 0) if self.calls <= 2 else (1890, 0x4)

        def watts(self):
            return 690.0

    class FakeTimer:
        def __init__(self, clock):
            self.gpu = type("Pieces", (), {"clock": clock})()
            self.ms = iter([4.2, 4.2, 4.4, 4.4] + [4.2] * 5)

        def sample(self, fn, delay_ms=0.0):
            return next(self.ms), 0.01

    got = drift.burst("row", lambda: None, FakeTimer(Clock()), 4, 0.0, 2)
    out = capsys.readouterr().out.splitlines()
    assert got == [4.2, 4.2, 4.4, 4.4]
    assert "1980 MHz   690 W  no reason" in out[1] and "1890 MHz   690 W  software power cap" in out[2]
    assert "after the pause" in out[3] and "software power cap" in out[3]
    drift.burst("row", lambda: None, FakeTimer(None), 4, 0.0, 2)
    assert all(line.rstrip().endswith("-") for line in capsys.readouterr().out.splitlines()[1:])
