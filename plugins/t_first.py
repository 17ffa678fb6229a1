"""Algorithm plugin ``t-first``: Algorithm 3 of the paper (t-closeness-first microaggregation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels
from tclose.blocks.service import BlockPlan, Strata, run_in_blocks
from tclose.blocks.split import BLOCK_OPTIONS
from tclose.hookspecs import hookimpl
from tclose.interfaces import EMD_TOLERANCE, FittedDistance, Option, Partition
from tclose.kernels.refinement import REFINE_OPTIONS, apply_refinement
from tclose.plugins.merge import (
    KERNEL_PRELOAD,
    PARTNER_OPTIONS,
    merge_blocks,
    merge_in_block,
    required_t,
)


class TFirst:
    """t-closeness-first: strata by confidential rank, one record per stratum in every cluster.

    The cluster size is ``k' = max(k, ceil(n / (2(n-1)t + 1)))``, adjusted by
    ``k' += floor((n mod k') / floor(n/k'))``. Records are split into ``k'`` strata of consecutive
    ranks of the stratifying attribute (option ``stratify``: a confidential column's name; the first
    confidential attribute by default), the remainder going to the central stratum or strata. Each
    cluster takes the record of every stratum closest (in the QI space) to an MDAV-like seed.

    Proposition 2 bounds every cluster's EMD by ``t`` when the stratifying attribute has distinct
    values. With ties, or for the other confidential attributes, a cluster may exceed ``t``; then
    the merge loop of Algorithm 1 runs afterwards, and the report says how many merges it made.

    Blocks (options ``blocks``, ``executor``, ``scheduler``, ``workers``, ``retries``; see
    :mod:`tclose.blocks.split`): the strata are assigned on the whole table, the table is split by
    recursive stratified bisection, and t-first runs in every block with the global strata, so
    every cluster still holds one record of each global stratum. Clusters above ``t`` are merged
    inside their block (EMD against the whole table), then on the whole table if still needed.
    With one block (``blocks: 1``, or ``auto`` below 200,000 rows) the run is the unblocked one.
    """

    name = "t-first"
    options_schema: Mapping[str, Option] = {
        "stratify": Option(
            str,
            "",
            "Confidential column whose order forms the strata "
            "(default: the first confidential attribute).",
        ),
        **PARTNER_OPTIONS,  # the merge loop's, run if a cluster still exceeds t
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
        from tclose.kernels.merge import merge_until_t_close
        from tclose.kernels.t_first import t_first

        t = required_t(t, self.name)
        stratifying = _stratifying(distances, options["stratify"])
        partition = run_in_blocks(self, x, distances, k, t, options)
        if partition is not None:
            return apply_refinement(partition, x, distances, k, t, options)
        labels, k_effective = t_first(x, stratifying.ranks, k, t)
        info: dict[str, Any] = {
            "k_effective": int(k_effective),
            "stratified_by": stratifying.column,
        }
        exceeding = max(float(d.cluster_emd(dense_labels(labels)).max()) for d in distances)
        merges = 0
        if exceeding > t + EMD_TOLERANCE:
            labels, merges = merge_until_t_close(
                x,
                labels,
                distances,
                t,
                partner=options["partner"],
                candidates=options["candidates"],
            )
        info["merges"] = int(merges)
        info["merged_to_enforce_t"] = merges > 0
        return apply_refinement(Partition(labels, info), x, distances, k, t, options)

    block_preload = KERNEL_PRELOAD

    def block_plan(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> BlockPlan:
        """Stratified blocks with the global strata of the ``stratify`` attribute."""
        from tclose.kernels.t_first import cluster_size

        stratifying = _stratifying(distances, options["stratify"])
        k_effective = cluster_size(x.shape[0], k, required_t(t, self.name))
        info = {"k_effective": int(k_effective), "stratified_by": stratifying.column}
        clusters = x.shape[0] // max(k_effective, 1)
        return BlockPlan(clusters, strata=k_effective, stratify_by=stratifying, info=info)

    def partition_block(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        strata: Strata | None = None,
    ) -> Partition:
        """t-first on one block with the global strata, then the merge loop inside it."""
        from tclose.kernels.t_first import t_first_strata

        assert strata is not None
        labels = t_first_strata(x, strata.stratum, strata.sizes)
        return merge_in_block(x, labels, distances, required_t(t, self.name), options)

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
        partition.info["merged_to_enforce_t"] = partition.info["merges"] > 0
        return partition


def _stratifying(distances: Sequence[FittedDistance], column: str) -> FittedDistance:
    from tclose.errors import ConfigError

    if not column:
        return distances[0]
    for distance in distances:
        if distance.column == column:
            return distance
    names = [d.column for d in distances]
    raise ConfigError(
        f"==> At algorithm.options ==> At key: stratify\n"
        f"The 'stratify' option of t-first must name a confidential attribute {names}. "
        f"Got {column!r} instead."
    )


@hookimpl
def register_algorithms(register):
    register(TFirst())
