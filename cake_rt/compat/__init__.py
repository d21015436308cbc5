"""Drop-in entry points with other libraries' calling conventions, taking and returning torch tensors.

    cake_rt.compat.mamba_ssm   ``mamba_chunk_scan_combined`` with mamba_ssm's signature and return convention
    cake_rt.compat.dsa         ``indexer_topk``: torch tensors in, torch int32 indices out

These modules import torch; cake-rt itself never depends on it (import them only where torch is installed).
"""
