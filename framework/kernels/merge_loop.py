"""Algorithm 1's merge loop as the built-in t-enforcing algorithms use it: its options, in one
block, on the whole table after the blocks, and the block hooks that merge and k-first share.

The loop itself is :func:`tclose.kernels.merge.merge_until_t_close`; this module holds what an
algorithm plugin builds on it, so that the plugins (``merge``, ``k-first``, ``t-first``,
``mdav``) share it without importing one another.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels
from tclose.interfaces import EMD_TOLERANCE, BlockPlan, Option, Partition, Problem
from tclose.kernels import PARTNERS

__all__ = [
    "KERNEL_PRELOAD",
    "PARTNER_OPTIONS",
    "MergeLoopBlocks",
    "merge_blocks",
    "merge_in_block",
    "merge_loop",
    "t_close_plan",
]

log = logging.getLogger("tclose")

#: Modules the local pool's fork server preloads for blocked runs of the built-ins.
KERNEL_PRELOAD = ("tclose.kernels.warm",)

PARTNER_OPTIONS: Mapping[str, Option] = {
    "partner": Option(
        str,
        "nearest",
        "Merge partner: 'nearest' (the paper: closest centroid), 'min-emd' (among the "
        "'candidates' nearest clusters, the one whose merge gives the lowest EMD) or 'gain' "
        "(among them, the least within-cluster sum of squares added per unit of EMD removed).",
        choices=PARTNERS,
    ),
    "candidates": Option(
        int, 5, "Nearest clusters examined by partners 'min-emd' and 'gain'.", min=1
    ),
}


def worst_emd(problem: Problem, labels: np.ndarray) -> float:
    """The largest EMD of a cluster of dense ``labels``, over every confidential attribute."""
    return max(float(d.cluster_emd(labels).max()) for d in problem.distances)


def merge_loop(problem: Problem, labels: np.ndarray, t: float) -> tuple[np.ndarray, int]:
    """``labels`` merged until t-close, with the problem's ``partner`` and ``candidates``
    options; the labels and the number of merges."""
    from tclose.kernels.merge import merge_until_t_close

    options = problem.options
    labels, merges = merge_until_t_close(
        problem.x,
        labels,
        problem.distances,
        t,
        partner=options["partner"],
        candidates=options["candidates"],
    )
    return labels, int(merges)


def merge_in_block(problem: Problem, labels: np.ndarray, name: str) -> Partition:
    """A block's clustering ``labels``, merged while a cluster's EMD against the whole table
    (the problem's distances are block views) exceeds ``t``; ``info``: ``initial_clusters``,
    ``merges``."""
    t = problem.required_t(name)
    initial = int(labels.max()) + 1
    merges = 0
    if worst_emd(problem, labels) > t + EMD_TOLERANCE:
        labels, merges = merge_loop(problem, labels, t)
    return Partition(labels, {"initial_clusters": initial, "merges": merges})


def merge_blocks(
    problem: Problem,
    partition: Partition,
    block_infos: Sequence[Mapping[str, Any]],
    name: str,
) -> Partition:
    """The global step of the blocked t-enforcing built-ins: check every cluster against the
    whole table, and run the merge loop on it if one exceeds ``t``; ``info`` gets ``merges``,
    ``merges_in_blocks`` and ``merges_global``."""
    t = problem.required_t(name)
    labels = partition.labels
    dense = dense_labels(labels)
    worst = worst_emd(problem, dense)
    merges_global = 0
    if worst > t + EMD_TOLERANCE:
        log.info(
            "%s: a cluster exceeds t across blocks (EMD %.4f); merging on the whole table",
            name,
            worst,
        )
        labels, merges_global = merge_loop(problem, dense, t)
    in_blocks = sum(int(i["merges"]) for i in block_infos)
    partition.info.update(
        merges=in_blocks + merges_global,
        merges_in_blocks=in_blocks,
        merges_global=merges_global,
    )
    return Partition(labels, partition.info)


def t_close_plan(problem: Problem, name: str, stratify_by: Any = None) -> BlockPlan:
    """Stratified blocks with t-first's ``k'`` strata (the blocked t-enforcing built-ins),
    ``floor(n/k)`` clusters."""
    from tclose.kernels.t_first import cluster_size

    n, k = problem.x.shape[0], problem.k
    strata = cluster_size(n, k, problem.required_t(name))
    return BlockPlan(n // k, strata=strata, stratify_by=stratify_by)


class MergeLoopBlocks:
    """The block hooks merge and k-first share (see :class:`tclose.interfaces.BlockHooks`):
    t-first's stratified blocks, ``floor(n/k)`` clusters, and the merge loop on the whole table
    as the global step. A subclass gives ``partition_block`` (its base clustering, then
    :func:`merge_in_block`)."""

    name: str
    block_preload = KERNEL_PRELOAD

    def block_plan(self, problem: Problem) -> BlockPlan:
        """Stratified blocks (t-first's strata of the first attribute), ``floor(n/k)``
        clusters."""
        return t_close_plan(problem, self.name)

    def finish_blocks(
        self, problem: Problem, partition: Partition, block_infos: Sequence[Mapping[str, Any]]
    ) -> Partition:
        """The merge loop on the whole table if a cluster exceeds ``t``."""
        partition = merge_blocks(problem, partition, block_infos, self.name)
        partition.info["initial_clusters"] = sum(i["initial_clusters"] for i in block_infos)
        return partition
