"""The ``refine`` options shared by the built-in algorithms, and the step that applies them.

Every built-in algorithm accepts ``refine`` (off by default for the paper's ``merge``, ``k-first``
and ``t-first`` and for ``mdav``, so that they reproduce their published results), with
``refine_passes`` and ``refine_seconds``. When on, the algorithm's partition is handed to
:func:`tclose.kernels.refine.refine`, which lowers its within-cluster sum of squares (``wcss``) by splits, moves and swaps that
keep every cluster ``>= k`` rows and t-close for every confidential attribute; what it did is
reported under ``info["refine"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.interfaces import FittedDistance, Option, Partition

__all__ = ["REFINE_OPTIONS", "SPLIT_OPTION", "apply_refinement", "split_large"]

REFINE_OPTIONS: Mapping[str, Option] = {
    "refine": Option(
        bool,
        False,
        "Refine the partition (splits, moves and swaps that lower the within-cluster sum of "
        "squares and keep k and t).",
    ),
    "refine_passes": Option(int, 3, "Passes of the refinement (it stops early when idle).", min=0),
    "refine_seconds": Option(
        float,
        0.0,
        "Time budget of the refinement in seconds; 0 means none (the result is then "
        "deterministic).",
        min=0.0,
    ),
}

SPLIT_OPTION: Mapping[str, Option] = {
    "split": Option(
        bool,
        False,
        "After merging, split every cluster of 2k rows or more whose halves stay t-close.",
    ),
}


def apply_refinement(
    partition: Partition,
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float | None,
    options: Mapping[str, Any],
) -> Partition:
    """``partition`` refined if ``options["refine"]`` (``info["refine"]`` says what changed).

    ``t`` is ``None`` for algorithms that do not enforce it (then only ``k`` is kept).
    """
    if not options.get("refine", False):
        return partition
    seconds = options.get("refine_seconds", 0.0) or None
    from tclose.kernels.refine import refine

    labels, info = refine(
        x,
        np.asarray(partition.labels),
        distances,
        k,
        t,
        passes=options.get("refine_passes", 3),
        seconds=seconds,
    )
    return Partition(labels, {**partition.info, "refine": info})


def split_large(
    partition: Partition,
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float,
    options: Mapping[str, Any],
) -> Partition:
    """``partition`` with its clusters of ``>= 2k`` rows split while valid, if ``options["split"]``
    (``info["split"]``: how many splits)."""
    if not options.get("split", False):
        return partition
    from tclose.kernels.refine import refine

    labels, info = refine(x, np.asarray(partition.labels), distances, k, t, passes=1, moves=False)
    return Partition(labels, {**partition.info, "splits": info.get("splits", 0)})
