"""Algorithm plugin ``merge``: Algorithm 1 of the paper (microaggregate, then merge clusters)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.blocks import BLOCK_OPTIONS, block_spec
from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option, Partition
from tclose.plugins.blocked import n_blocks, partition_blocked
from tclose.plugins.kernels import PARTNERS
from tclose.plugins.refinement import REFINE_OPTIONS, SPLIT_OPTION, apply_refinement, split_large

BASES = ("mdav", "k-first", "t-first")

PARTNER_OPTIONS: Mapping[str, Option] = {
    "partner": Option(
        str,
        "nearest",
        "Merge partner: 'nearest' (the paper: closest centroid), 'min-emd' (among the "
        "'candidates' nearest clusters, the one whose merge gives the lowest EMD) or 'gain' "
        "(among them, the lowest SSE added per unit of EMD removed).",
        choices=PARTNERS,
    ),
    "candidates": Option(
        int, 5, "Nearest clusters examined by partners 'min-emd' and 'gain'.", min=1
    ),
}


class Merge:
    """Microaggregate (MDAV by default), then merge the cluster with the greatest EMD into the
    cluster closest to it in the QI space until every cluster is within ``t`` for every
    confidential attribute. Always returns a t-close partition (at worst one cluster).

    Blocks (options ``blocks``, ``executor``, ...; see :mod:`tclose.blocks`): stratified blocks
    as for t-first (strata of the first confidential attribute), so that every block's
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
        spec = block_spec(self.name, options)
        blocks = n_blocks(spec, x.shape[0], x.shape[0] // k)
        if blocks > 1:
            partition = partition_blocked(self.name, x, distances, k, t, options, spec, blocks)
            partition.info["base"] = base
            return self._finish(partition, x, distances, k, t, options)
        from tclose.plugins.kernels.k_first import k_first
        from tclose.plugins.kernels.mdav import mdav
        from tclose.plugins.kernels.merge import merge_until_t_close
        from tclose.plugins.kernels.t_first import t_first

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


@hookimpl
def register_algorithms(register):
    register(Merge())
