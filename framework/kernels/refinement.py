"""The ``refine`` options every algorithm accepts, and the step that applies them.

The framework applies ``refine`` after every algorithm (:mod:`tclose.blocks.framed`); it is off
by default, so that the paper's ``merge``, ``k-first`` and ``t-first`` and ``mdav`` reproduce
their published results. ``refine_passes`` and ``refine_seconds`` bound it. When on, the
partition is handed to :func:`tclose.kernels.refine.refine`, which lowers its within-cluster sum
of squares (``wcss``) by splits, moves and swaps that keep every cluster ``>= k`` rows and
t-close for every confidential attribute; what it did is reported under ``info["refine"]``.
``split`` (:data:`SPLIT_OPTION`, of ``merge``) is its first kind of step alone.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tclose.interfaces import Option, Partition, Problem

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


def apply_refinement(partition: Partition, problem: Problem) -> Partition:
    """``partition`` refined if ``problem.options["refine"]`` (``info["refine"]`` says what
    changed).

    ``problem.t`` is ``None`` for algorithms that do not enforce it (then only ``k`` is kept).
    """
    options = problem.options
    if not options.get("refine", False):
        return partition
    seconds = options.get("refine_seconds", 0.0) or None
    from tclose.kernels.refine import refine

    labels, info = refine(
        problem.x,
        np.asarray(partition.labels),
        problem.distances,
        problem.k,
        problem.t,
        passes=options.get("refine_passes", 3),
        seconds=seconds,
    )
    return Partition(labels, {**partition.info, "refine": info})


def split_large(partition: Partition, problem: Problem) -> Partition:
    """``partition`` with its clusters of ``>= 2k`` rows split while valid, if
    ``problem.options["split"]`` (``info["splits"]``: how many splits)."""
    if not problem.options.get("split", False):
        return partition
    from tclose.kernels.refine import refine

    x, distances, k, t = problem.x, problem.distances, problem.k, problem.t
    labels, info = refine(x, np.asarray(partition.labels), distances, k, t, passes=1, moves=False)
    return Partition(labels, {**partition.info, "splits": info.get("splits", 0)})
