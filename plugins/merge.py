"""Algorithm plugin ``merge``: Algorithm 1 of the paper (microaggregate, then merge clusters)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.hookspecs import hookimpl
from tclose.interfaces import Option, Partition, Problem
from tclose.kernels.merge_loop import PARTNER_OPTIONS, MergeLoopBlocks, merge_in_block, merge_loop
from tclose.kernels.refinement import SPLIT_OPTION, split_large

BASES = ("mdav", "k-first", "t-first")


class Merge(MergeLoopBlocks):
    """Microaggregate (MDAV by default), then merge the cluster with the greatest EMD into the
    cluster closest to it in the QI space until every cluster is within ``t`` for every
    confidential attribute. Always returns a t-close partition (at worst one cluster).

    Blocks (see :mod:`tclose.blocks.framed`): stratified blocks as for t-first (strata of the
    first confidential attribute), so that every block's distribution follows the whole table's;
    the base algorithm and the merge loop run in every block with EMDs against the whole table,
    then the merge loop runs on the whole table if a cluster still exceeds ``t``."""

    name = "merge"
    options_schema: Mapping[str, Option] = {
        "base": Option(str, "mdav", "Microaggregation run before merging.", choices=BASES),
        **PARTNER_OPTIONS,
        **SPLIT_OPTION,
    }
    requires_t = True

    def partition(self, problem: Problem) -> Partition:
        labels = _base_clusters(problem, self.name)
        merged, merges = merge_loop(problem, labels, problem.required_t(self.name))
        base = problem.options["base"]
        info = {"base": base, "initial_clusters": len(np.unique(labels)), "merges": merges}
        return split_large(Partition(merged, info), problem)

    def partition_block(self, problem: Problem) -> Partition:
        """The base clustering of one block, then the merge loop inside it."""
        return merge_in_block(problem, _base_clusters(problem, self.name), self.name)

    def finish_blocks(
        self, problem: Problem, partition: Partition, block_infos: Sequence[Mapping[str, Any]]
    ) -> Partition:
        """The merge loop on the whole table if a cluster exceeds ``t``, then ``split``."""
        partition = super().finish_blocks(problem, partition, block_infos)
        partition.info["base"] = problem.options["base"]
        return split_large(partition, problem)


def _base_clusters(problem: Problem, name: str) -> np.ndarray:
    """The clusters of the ``base`` microaggregation (in a block, t-first with the block's
    global strata)."""
    from tclose.kernels.k_first import k_first
    from tclose.kernels.mdav import mdav
    from tclose.kernels.t_first import t_first, t_first_strata

    base, x = problem.options["base"], problem.x
    if base == "mdav":
        return mdav(x, problem.k)
    if base == "k-first":
        return k_first(x, problem.distances, problem.k, problem.required_t(name))
    if problem.strata is not None:
        return t_first_strata(x, problem.strata.stratum, problem.strata.sizes)
    return t_first(x, problem.distances[0].ranks, problem.k, problem.required_t(name))[0]


@hookimpl
def register_algorithms(register):
    register(Merge())
