"""The task that clusters one block, as the workers of :mod:`tclose.executors` run it.

:func:`block_task` is what :func:`tclose.plugins.blocked.partition_blocked` sends to the executor,
one call per block. This module is kept apart from the driver because it **warms the compiled
kernels when it is imported**: the local executor preloads the task function's module in its fork
server, so that every worker process, forked from that server, starts with NumPy, Numba and the
kernels imported and the compiled t-first, MDAV and merge loops loaded from Numba's cache (about
a second per process otherwise). The driver imports it only when a run is blocked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tclose.interfaces import EMD_TOLERANCE
from tclose.plugins.blocked import OrderedReference, restrict
from tclose.plugins.kernels.k_first import k_first
from tclose.plugins.kernels.mdav import mdav
from tclose.plugins.kernels.merge import merge_until_t_close
from tclose.plugins.kernels.t_first import t_first_strata

__all__ = ["Block", "Shared", "block_task"]


@dataclass(frozen=True)
class Shared:
    """What every task of a run receives once: the algorithm, its parameters, the distances.

    Attributes:
        algorithm: ``"t-first"``, ``"mdav"``, ``"merge"`` or ``"k-first"``.
        k: minimum cluster size.
        t: t-closeness level (``None`` for ``mdav``).
        options: the algorithm's validated options.
        references: one :func:`~tclose.plugins.blocked.reference_of` per confidential attribute.
    """

    algorithm: str
    k: int
    t: float | None
    options: Mapping[str, Any]
    references: tuple[Any, ...]


@dataclass
class Block:
    """One block's payload.

    Attributes:
        x: ``float64 (n_b, d)`` the block's standardized QIs.
        codes: the whole-table value codes of the block's rows, one array per attribute.
        stratum: ``int64 (n_b,)`` global stratum of each row (stratified blocks).
        sizes: ``int64 (k',)`` rows of each stratum in the block.
    """

    x: np.ndarray
    codes: tuple[np.ndarray, ...] = ()
    stratum: np.ndarray | None = None
    sizes: np.ndarray | None = None


def block_task(shared: Shared, block: Block) -> tuple[np.ndarray, dict[str, int]]:
    """Cluster one block.

    ``mdav``: MDAV on the block. The others: their base clustering (t-first with the global
    strata; MDAV or k-first for ``merge``'s ``base`` and ``k-first``), then, if a cluster's EMD
    against the whole table exceeds ``t``, the merge loop inside the block.

    Returns:
        ``(labels, counts)``: ``int64`` labels ``0..L_b-1`` of the block's rows, and
        ``{"initial_clusters": ..., "merges": ...}`` (empty for ``mdav``).
    """
    options = shared.options
    if shared.algorithm == "mdav":
        return mdav(block.x, shared.k, ties=options.get("ties", "lowest")), {}
    views = [
        restrict(ref, codes) for ref, codes in zip(shared.references, block.codes, strict=True)
    ]
    base = shared.algorithm if shared.algorithm != "merge" else options["base"]
    if base == "t-first":
        labels = t_first_strata(block.x, block.stratum, block.sizes)
    elif base == "mdav":
        labels = mdav(block.x, shared.k)
    else:
        labels = k_first(block.x, views, shared.k, shared.t)
    initial = int(labels.max()) + 1
    worst = max(float(v.cluster_emd(labels).max()) for v in views)
    merges = 0
    if worst > shared.t + EMD_TOLERANCE:
        labels, merges = merge_until_t_close(
            block.x,
            labels,
            views,
            shared.t,
            partner=options["partner"],
            candidates=options["candidates"],
        )
    return labels, {"initial_clusters": initial, "merges": int(merges)}


def _warm_up() -> None:
    """Run every kernel a block task uses once on a tiny block (loads Numba's cache)."""
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    cum = np.array([1, 2, 3, 4], dtype=np.int64)
    reference = OrderedReference("emd-ordered", None, 4, 4, cum, np.array([0, 1, 3, 6]), True)
    options = {"partner": "nearest", "candidates": 1, "base": "mdav"}
    codes = (np.arange(4, dtype=np.int64),)
    stratum, sizes = np.array([0, 1, 0, 1]), np.array([2, 2])
    for algorithm in ("mdav", "t-first", "k-first"):
        block_task(
            Shared(algorithm, 2, 0.01, options, (reference,)), Block(x, codes, stratum, sizes)
        )


with contextlib.suppress(Exception):  # a failed warm-up only costs time later
    _warm_up()
