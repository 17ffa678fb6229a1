"""Algorithm plugin ``t-first``: Algorithm 3 of the paper (t-closeness-first microaggregation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tclose.base.arrays import dense_labels
from tclose.errors import ConfigError
from tclose.hookspecs import hookimpl
from tclose.interfaces import EMD_TOLERANCE, BlockPlan, FittedDistance, Option, Partition, Problem
from tclose.kernels.merge_loop import (
    KERNEL_PRELOAD,
    PARTNER_OPTIONS,
    merge_blocks,
    merge_in_block,
    merge_loop,
    worst_emd,
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

    Blocks (see :mod:`tclose.blocks.framed`): the strata are assigned on the whole table, the
    table is split by recursive stratified bisection, and t-first runs in every block with the
    global strata, so every cluster still holds one record of each global stratum. Clusters above
    ``t`` are merged inside their block (EMD against the whole table), then on the whole table if
    still needed. With one block (``blocks: 1``, or ``auto`` below 200,000 rows) the run is the
    unblocked one.
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
    }
    requires_t = True
    block_preload = KERNEL_PRELOAD

    def partition(self, problem: Problem) -> Partition:
        from tclose.kernels.t_first import t_first

        t = problem.required_t(self.name)
        stratifying = _stratifying(problem)
        labels, k_effective = t_first(problem.x, stratifying.ranks, problem.k, t)
        merges = 0
        if worst_emd(problem, dense_labels(labels)) > t + EMD_TOLERANCE:
            labels, merges = merge_loop(problem, labels, t)
        info = {"k_effective": int(k_effective), "stratified_by": stratifying.column}
        return Partition(labels, {**info, "merges": merges, "merged_to_enforce_t": merges > 0})

    def block_plan(self, problem: Problem) -> BlockPlan:
        """Stratified blocks with the global strata of the ``stratify`` attribute."""
        from tclose.kernels.t_first import cluster_size

        stratifying = _stratifying(problem)
        k_effective = cluster_size(problem.x.shape[0], problem.k, problem.required_t(self.name))
        info = {"k_effective": int(k_effective), "stratified_by": stratifying.column}
        clusters = problem.x.shape[0] // max(k_effective, 1)
        return BlockPlan(clusters, strata=k_effective, stratify_by=stratifying, info=info)

    def partition_block(self, problem: Problem) -> Partition:
        """t-first on one block with the global strata, then the merge loop inside it."""
        from tclose.kernels.t_first import t_first_strata

        assert problem.strata is not None
        labels = t_first_strata(problem.x, problem.strata.stratum, problem.strata.sizes)
        return merge_in_block(problem, labels, self.name)

    def finish_blocks(
        self, problem: Problem, partition: Partition, block_infos: Sequence[Mapping[str, Any]]
    ) -> Partition:
        """The merge loop on the whole table if a cluster exceeds ``t``."""
        partition = merge_blocks(problem, partition, block_infos, self.name)
        partition.info["merged_to_enforce_t"] = partition.info["merges"] > 0
        return partition


def _stratifying(problem: Problem) -> FittedDistance:
    column = problem.options["stratify"]
    if not column:
        return problem.distances[0]
    for distance in problem.distances:
        if distance.column == column:
            return distance
    names = [d.column for d in problem.distances]
    raise ConfigError(
        f"The 'stratify' option of t-first must name a confidential attribute {names}. "
        f"Got {column!r} instead.",
        path=("algorithm", "options", "stratify"),
    )


@hookimpl
def register_algorithms(register):
    register(TFirst())
