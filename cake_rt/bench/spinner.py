"""Holding SMs from a side stream (the side-stream table of ``cake-rt bench``).

``SMHolder.hold(n)`` launches ``kernels/bench/spin.cu`` with ``n`` CTAs on its own non-blocking stream.
Each CTA asks for the device's whole opt-in shared memory per block (more than half of an SM's), so
two of them never share an SM: ``n`` CTAs hold exactly ``n`` SMs. The context is entered only once
every CTA is resident (its start counter reads ``n``) and the CTAs sit on ``n`` distinct SMs; on exit
the stop flag is written by a copy on a third stream and the spinner's stream is synchronized.

Inside a hold, run only kernels whose modules are already loaded (warm the calls up first): loading a
module waits for the device to go idle, so a first call inside a hold waits for the hold's own timeout
(``max_hold_s``) and the hold ends with ``timed_out`` > 0. The bench times only warmed-up calls.
"""
from __future__ import annotations

import contextlib
import time

import numpy as np


def holder_smem_bytes(smem_per_block_optin: int, smem_per_sm: int) -> int:
    """Dynamic shared memory of one spinner CTA: the opt-in maximum, which must exceed half an SM's."""
    if 2 * smem_per_block_optin <= smem_per_sm:
        raise RuntimeError(f"cannot hold one SM per CTA: opt-in shared memory per block {smem_per_block_optin} B "
                           f"is not more than half of the SM's {smem_per_sm} B")
    return int(smem_per_block_optin)


class SMHolder:
    """Holds SMs with a spinning kernel on a second stream. Not thread-safe; one hold at a time."""

    def __init__(self, device=None, *, max_hold_s: float = 30.0, start_timeout_s: float = 10.0):
        import cupy

        from cake_rt.launch.arch import device_info
        from cake_rt.launch.compile import get_kernel

        self.info = device_info(device)
        self.kernel = get_kernel("bench/spin.cu", "cake_bench_spin", device=device)
        self.smem = holder_smem_bytes(self.info.smem_per_block_optin, self.info.smem_per_sm)
        self.kernel.set_max_dynamic_shared(self.smem)
        self.words = cupy.zeros(4, dtype=cupy.uint32)
        self.sm_ids = cupy.zeros(self.info.sm_count, dtype=cupy.uint32)
        self.side = cupy.cuda.Stream(non_blocking=True)
        self.ctl = cupy.cuda.Stream(non_blocking=True)
        self._pinned = cupy.cuda.alloc_pinned_memory(64)
        self._host = np.ndarray((16,), dtype=np.uint32, buffer=self._pinned)  # writable view of pinned memory
        self.max_ns = np.uint64(int(max_hold_s * 1e9))
        self.start_timeout_s = float(start_timeout_s)

    def _read_words(self) -> np.ndarray:
        import cupy

        cupy.cuda.runtime.memcpyAsync(self._host.ctypes.data, self.words.data.ptr, 16,
                                      cupy.cuda.runtime.memcpyDeviceToHost, self.ctl.ptr)
        self.ctl.synchronize()
        return self._host[:4].copy()

    def _stop(self) -> None:
        import cupy

        self._host[8] = 1
        cupy.cuda.runtime.memcpyAsync(self.words.data.ptr, self._host[8:].ctypes.data, 4,
                                      cupy.cuda.runtime.memcpyHostToDevice, self.ctl.ptr)
        self.ctl.synchronize()
        self.side.synchronize()

    @contextlib.contextmanager
    def hold(self, n: int):
        """Context in which ``n`` SMs are held; yields {'held', 'distinct_sms', 'smem_per_cta'}.
        After the block, 'timed_out' tells whether any CTA stopped on its own (the hold was shorter)."""
        import cupy

        from cake_rt.launch.grid import launch

        n = int(n)
        if not 1 <= n <= self.info.sm_count:
            raise ValueError(f"hold: expected 1 <= n <= {self.info.sm_count} SMs, got {n}")
        cupy.cuda.runtime.memsetAsync(self.words.data.ptr, 0, 16, self.ctl.ptr)
        self.ctl.synchronize()
        launch(self.kernel, n, 32, (self.words, self.sm_ids, self.max_ns), shared_mem=self.smem,
               stream=self.side, tag="bench-spin")
        info = {"held": n, "smem_per_cta": self.smem}
        try:
            deadline = time.monotonic() + self.start_timeout_s
            while True:
                w = self._read_words()
                if w[1] >= n:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"side-stream spinner: only {int(w[1])} of {n} CTAs became resident "
                                       f"within {self.start_timeout_s} s")
                time.sleep(0.0005)
            ids = np.empty(n, dtype=np.uint32)
            cupy.cuda.runtime.memcpyAsync(ids.ctypes.data, self.sm_ids.data.ptr, 4 * n,
                                          cupy.cuda.runtime.memcpyDeviceToHost, self.ctl.ptr)
            self.ctl.synchronize()
            info["distinct_sms"] = int(np.unique(ids).size)
            if info["distinct_sms"] != n:
                raise RuntimeError(f"side-stream spinner: {n} CTAs landed on {info['distinct_sms']} SMs")
            yield info
        finally:
            self._stop()
            info["timed_out"] = int(self._read_words()[2])
