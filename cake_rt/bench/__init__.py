"""``cake-rt bench``: the benchmark runner, shipped inside the package.

    cake-rt bench [ssd|dsa|all|selfcheck] [--suite NAME | --rows S1,C1,...] [--heads 32,64]
                  [--processes N] [--repeats N] [--warm-l2] [--json PATH] [--plot PATH]
                  [--compare OLD.json] [--side-stream 1,32|none] [--dry-run]

Modules (none of them imports CuPy, PyTorch or the ops at import time):

    cli        argument parsing (``build_parser``) and ``main(argv)``
    suites     the suites as package data (``suites/ssd.json``, ``suites/dsa.json``) and the run plan
    layouts    DSA segment layouts (bottom-right tail, CP zigzag) and the FLOP/byte counts
    timing     CUDA-event timing of one synchronized call, cold-L2 flush, median/p20/p80
    floors     copy bandwidth and bf16 matrix rate measured on the GPU at the start of a run
    spinner    a kernel on a second stream that holds N SMs (kernels/bench/spin.cu)
    cases      the inputs and arms of each row (ours, peers)
    peers      optional peers: mamba_ssm Triton for SSD, a PyTorch eager DSA indexer
    runner     runs the plan (in process or in fresh worker processes), progress bar
    report     records -> derived figures, the terminal table, JSON, --compare
    plot       the PNG (matplotlib, optional extra ``plot``)
"""


def main(argv=None) -> int:
    """Entry of ``cake-rt bench``: ``argv`` holds the arguments after ``bench``; returns the exit status."""
    from .cli import main as _main

    return _main(argv)


__all__ = ["main"]
