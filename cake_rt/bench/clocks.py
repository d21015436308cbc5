"""The GPU's SM clock beside the bench's samples, read through NVML (the driver's ``libnvidia-ml``, by ctypes).

Under a burst of back-to-back multi-ms calls the H200 steps its SM clock down (power capping; docs/benchmarks.md, the
12-02k record), so a long row's median mixes clock levels, and two processes that step at different calls read
different medians for the same machine code. The timer reads, right after each timed call, the SM clock in MHz and
NVML's clock-event reasons: a bit mask of why the clock is below its maximum (``REASONS`` names the bits). A run's
JSON carries them beside the samples (``clock_mhz``, ``clock_reasons``) and beside the floors' timings.

Reads only: nothing here sets a clock, a power limit or any other setting of the card. Where NVML cannot be read (no
driver library, another OS, a device NVML does not list, an error code), ``SmClock.open`` gives None and the figures
carry no clock.
"""
from __future__ import annotations

import ctypes

NVML_LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0
NVML_CLOCK_SM = 1

# nvmlClocksEventReasons (nvml.h): why the clocks are below their maximum
REASONS = {
    0x1: "gpu idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}


def reason_names(mask: int) -> list:
    """The names of the bits set in a clock-event-reasons mask (an unnamed bit as its hex value)."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    return names + ([hex(rest)] if rest else [])


class SmClock:
    """One GPU's SM clock and clock-event reasons through NVML: ``read()`` gives (MHz, reasons mask), either None
    where NVML answers with an error."""

    def __init__(self, lib, handle):
        self._lib, self._handle = lib, handle
        # (the reasons' function was renamed in CUDA 12.x drivers; the old name stays exported)
        self._reasons = None
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(lib, name, None)
            if fn is not None:
                self._reasons = fn
                break

    @classmethod
    def open(cls, pci_bus_id: str, *, loader=ctypes.CDLL):
        """The clock of the GPU at ``pci_bus_id`` (CUDA's form, e.g. ``0000:19:00.0``: the same device whatever
        CUDA_VISIBLE_DEVICES renumbers), or None where NVML cannot read it."""
        try:
            lib = loader(NVML_LIBRARY)
            if lib.nvmlInit_v2() != NVML_SUCCESS:
                return None
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(str(pci_bus_id).encode(), ctypes.byref(handle)) != NVML_SUCCESS:
                return None
            clock = cls(lib, handle)
            return clock if clock.mhz() is not None else None
        except (OSError, AttributeError, TypeError, ValueError):
            return None

    def _query(self, fn, value):
        """``fn(handle, &value)``'s value, or None on an NVML error (or a missing entry point)."""
        if fn is None:
            return None
        try:
            ok = fn(self._handle, ctypes.byref(value)) == NVML_SUCCESS
        except (OSError, AttributeError, TypeError, ValueError):
            return None
        return value.value if ok else None

    def mhz(self):
        """The SM clock now, MHz (None on an NVML error)."""
        return self._query(lambda h, v: self._lib.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, v), ctypes.c_uint(0))

    def reasons(self):
        """The clock-event reasons now (a mask of ``REASONS``; None where this driver or NVML does not tell)."""
        return self._query(self._reasons, ctypes.c_ulonglong(0))

    def watts(self):
        """The board's power draw now, W (None on an NVML error)."""
        mw = self._query(getattr(self._lib, "nvmlDeviceGetPowerUsage", None), ctypes.c_uint(0))
        return None if mw is None else mw / 1000.0

    def read(self) -> tuple:
        """(SM MHz, clock-event reasons): what the timer keeps beside each sample."""
        return self.mhz(), self.reasons()


def clock_figures(readings: list) -> dict:
    """The JSON fields of a list of ``SmClock.read()`` pairs, one a sample: ``clock_mhz`` and ``clock_reasons``, each
    only where every sample has its reading (a list that does not line up with the samples would mislead)."""
    out = {}
    if readings and all(r is not None and r[0] is not None for r in readings):
        out["clock_mhz"] = [int(r[0]) for r in readings]
    if readings and all(r is not None and r[1] is not None for r in readings):
        out["clock_reasons"] = [int(r[1]) for r in readings]
    return out
