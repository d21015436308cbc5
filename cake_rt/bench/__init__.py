"""``cake-rt bench``: the benchmark runner, shipped inside the package.

    cake-rt bench [ssd|dsa|all|selfcheck] [--suite NAME | --rows S1,C1,...] [--heads 32,64]
                  [--processes N] [--repeats N] [--warm-l2] [--json PATH] [--plot PATH]
                  [--speedup-plot PATH] [--compare OLD.json] [--side-stream 1,32|none] [--dry-run]
    cake-rt calibrate [--rows ...] [--repeats N] [--output PATH] [--no-save]

Modules (none of them imports CuPy, PyTorch or the ops at import time):

    cli        the flags (``add_arguments``, also used by the ``cake-rt`` parser), ``run`` and ``main(argv)``
    suites     the suites as package data (``suites/ssd.json``, ``suites/dsa.json``) and the run plan
    layouts    DSA segment layouts (bottom-right tail, CP zigzag through cake_rt.cp) and the ops' FLOP/byte counts
    timing     the one timer: GPU time behind a delay kernel, eager wall time, host time; cold-L2 flush
    floors     copy bandwidth and bf16 matrix rate measured on the GPU at the start of a run
    spinner    a kernel on a second stream that holds N SMs (kernels/bench/spin.cu)
    cases      the inputs and arms of each row (ours, peers)
    peers      optional peers: mamba_ssm and vLLM Triton for SSD, a PyTorch eager DSA indexer
    calibrate  ``cake-rt calibrate``: fit the SSD cost model to this GPU and save it
    runner     runs the plan (in process or in fresh worker processes), progress bar
    report     records -> derived figures, the terminal table, JSON, --compare
    plot       the PNGs (times against floors and peers; speedup over peers), matplotlib
"""


def main(argv=None) -> int:
    """Entry of ``cake-rt bench``: ``argv`` holds the arguments after ``bench``; returns the exit status."""
    from .cli import main as _main

    return _main(argv)


__all__ = ["main"]
