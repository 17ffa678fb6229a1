"""Loads the compiled kernels of the built-ins' blocked runs: importing it runs each once.

This is the module's only job, and nothing imports it but the local pool's fork server: the
built-in algorithms name it in their ``block_preload``, so every worker process, forked from that
server, starts with NumPy, Numba and the kernels imported and the compiled t-first, MDAV, k-first
and merge loops loaded from Numba's cache (about a second per process otherwise).
"""

from __future__ import annotations

import contextlib

import numpy as np


def warm_up() -> None:
    """Run every built-in ``partition_block`` once on a tiny block (loads Numba's cache)."""
    from tclose.block_service import Strata
    from tclose.plugins.block_distances import OrderedReference, restrict
    from tclose.plugins.k_first import KFirst
    from tclose.plugins.mdav import MDAV
    from tclose.plugins.t_first import TFirst

    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    cum = np.array([1, 2, 3, 4], dtype=np.int64)
    reference = OrderedReference("emd-ordered", None, 4, 4, cum, np.array([0, 1, 3, 6]), True)
    views = [restrict(reference, np.arange(4, dtype=np.int64))]
    options = {"partner": "nearest", "candidates": 1}
    strata = Strata(np.array([0, 1, 0, 1]), np.array([2, 2]))
    MDAV().partition_block(x, views, 2, None, {})
    TFirst().partition_block(x, views, 2, 0.01, options, strata=strata)
    KFirst().partition_block(x, views, 2, 0.01, options)


with contextlib.suppress(Exception):  # a failed warm-up only costs time later
    warm_up()
