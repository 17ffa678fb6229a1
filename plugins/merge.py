"""Algorithm plugin ``merge``: Algorithm 1 of the paper (microaggregate, then merge clusters)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels
from tclose.blocks.service import BlockPlan, Strata, run_in_blocks
from tclose.blocks.split import BLOCK_OPTIONS
from tclose.hookspecs import hookimpl
from tclose.interfaces import EMD_TOLERANCE, FittedDistance, Option, Partition
from tclose.kernels import PARTNERS
from tclose.kernels.refinement import REFINE_OPTIONS, SPLIT_OPTION, apply_refinement, split_large

log = logging.getLogger("tclose")

BASES = ("mdav", "k-first", "t-first")

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


def required_t(t: float | None, algorithm: str) -> float:
    """``t`` for an algorithm that ``requires_t`` (the runner always passes one); a clear error
    for a direct caller that passed ``None``."""
    if t is None:
        raise ValueError(f"Algorithm {algorithm!r} enforces t-closeness: t is required, not None.")
    return t


class MergeLoopBlocks:
    """The block hooks merge and k-first share (see :class:`tclose.interfaces.BlockHooks`):
    t-first's stratified blocks, ``floor(n/k)`` clusters, and the merge loop on the whole table as
    the global step. A subclass gives ``partition_block`` (its base clustering, then
    :func:`merge_in_block`)."""

    name: str
    block_preload = KERNEL_PRELOAD

    def block_plan(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> BlockPlan:
        """Stratified blocks (t-first's strata of the first attribute), ``floor(n/k)`` clusters."""
        return t_close_plan(x, distances, k, required_t(t, self.name), x.shape[0] // k)

    def finish_blocks(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        partition: Partition,
        block_infos: Sequence[Mapping[str, Any]],
    ) -> Partition:
        """The merge loop on the whole table if a cluster exceeds ``t``."""
        t = required_t(t, self.name)
        partition = merge_blocks(x, distances, t, options, partition, block_infos, self.name)
        partition.info["initial_clusters"] = sum(i["initial_clusters"] for i in block_infos)
        return partition


class Merge(MergeLoopBlocks):
    """Microaggregate (MDAV by default), then merge the cluster with the greatest EMD into the
    cluster closest to it in the QI space until every cluster is within ``t`` for every
    confidential attribute. Always returns a t-close partition (at worst one cluster).

    Blocks (options ``blocks``, ``executor``, ...; see :mod:`tclose.blocks.split`): stratified
    blocks as for t-first (strata of the first confidential attribute), so that every block's
    distribution follows the whole table's; the base algorithm and the merge loop run in every
    block with EMDs against the whole table, then the merge loop runs on the whole table if a
    cluster still exceeds ``t``."""

    name = "merge"
    options_schema: Mapping[str, Option] = {
        "base": Option(str, "mdav", "Microaggregation run before merging.", choices=BASES),
        **PARTNER_OPTIONS,
        **SPLIT_OPTION,
        **REFINE_OPTIONS,
        **BLOCK_OPTIONS,
    }
    requires_t = True

    def partition(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> Partition:
        base = options["base"]
        t = required_t(t, self.name)
        partition = run_in_blocks(self, x, distances, k, t, options)
        if partition is not None:
            partition.info["base"] = base
            return self._finish(partition, x, distances, k, t, options)
        from tclose.kernels.k_first import k_first
        from tclose.kernels.mdav import mdav
        from tclose.kernels.merge import merge_until_t_close
        from tclose.kernels.t_first import t_first

        if base == "mdav":
            labels = mdav(x, k)
        elif base == "k-first":
            labels = k_first(x, distances, k, t)
        else:
            labels, _ = t_first(x, distances[0].ranks, k, t)
        initial = len(np.unique(labels))
        labels, merges = merge_until_t_close(
            x, labels, distances, t, partner=options["partner"], candidates=options["candidates"]
        )
        partition = Partition(
            labels, {"base": base, "initial_clusters": initial, "merges": int(merges)}
        )
        return self._finish(partition, x, distances, k, t, options)

    def partition_block(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        strata: Strata | None = None,
    ) -> Partition:
        """The base clustering of one block, then the merge loop inside it."""
        from tclose.kernels.k_first import k_first
        from tclose.kernels.mdav import mdav
        from tclose.kernels.t_first import t_first_strata

        base = options["base"]
        t = required_t(t, self.name)
        if base == "t-first":
            assert strata is not None
            labels = t_first_strata(x, strata.stratum, strata.sizes)
        elif base == "mdav":
            labels = mdav(x, k)
        else:
            labels = k_first(x, distances, k, t)
        return merge_in_block(x, labels, distances, t, options)

    @staticmethod
    def _finish(
        partition: Partition,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float,
        options: Mapping[str, Any],
    ) -> Partition:
        """The options ``split`` and ``refine``, in that order."""
        partition = split_large(partition, x, distances, k, t, options)
        return apply_refinement(partition, x, distances, k, t, options)


def t_close_plan(
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float,
    clusters: int,
    stratify_by: FittedDistance | None = None,
) -> BlockPlan:
    """Stratified blocks with t-first's ``k'`` strata (the blocked t-enforcing built-ins)."""
    from tclose.kernels.t_first import cluster_size

    return BlockPlan(clusters, strata=cluster_size(x.shape[0], k, t), stratify_by=stratify_by)


def merge_in_block(
    x: np.ndarray,
    labels: np.ndarray,
    distances: Sequence[FittedDistance],
    t: float,
    options: Mapping[str, Any],
) -> Partition:
    """A block's clustering ``labels``, merged while a cluster's EMD against the whole table
    (``distances`` are block views) exceeds ``t``; ``info``: ``initial_clusters``, ``merges``."""
    from tclose.kernels.merge import merge_until_t_close

    initial = int(labels.max()) + 1
    worst = max(float(d.cluster_emd(labels).max()) for d in distances)
    merges = 0
    if worst > t + EMD_TOLERANCE:
        labels, merges = merge_until_t_close(
            x, labels, distances, t, partner=options["partner"], candidates=options["candidates"]
        )
    return Partition(labels, {"initial_clusters": initial, "merges": int(merges)})


def merge_blocks(
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    t: float,
    options: Mapping[str, Any],
    partition: Partition,
    block_infos: Sequence[Mapping[str, Any]],
    name: str,
) -> Partition:
    """The global step of the blocked t-enforcing built-ins: check every cluster against the
    whole table, and run the merge loop on it if one exceeds ``t``; ``info`` gets ``merges``,
    ``merges_in_blocks`` and ``merges_global``."""
    from tclose.kernels.merge import merge_until_t_close

    labels = partition.labels
    dense = dense_labels(labels)
    worst = max(float(d.cluster_emd(dense).max()) for d in distances)
    merges_global = 0
    if worst > t + EMD_TOLERANCE:
        log.info(
            "%s: a cluster exceeds t across blocks (EMD %.4f); merging on the whole table",
            name,
            worst,
        )
        labels, merges_global = merge_until_t_close(
            x, dense, distances, t, partner=options["partner"], candidates=options["candidates"]
        )
    in_blocks = sum(int(i["merges"]) for i in block_infos)
    partition.info.update(
        merges=in_blocks + int(merges_global),
        merges_in_blocks=in_blocks,
        merges_global=int(merges_global),
    )
    return Partition(labels, partition.info)


@hookimpl
def register_algorithms(register):
    register(Merge())
