"""Algorithm plugin ``mdav``: k-anonymous microaggregation alone (t is only reported)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.blocks.service import BlockPlan, Strata, run_in_blocks
from tclose.blocks.split import BLOCK_OPTIONS
from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option, Partition
from tclose.kernels.refinement import REFINE_OPTIONS, apply_refinement
from tclose.plugins.merge import KERNEL_PRELOAD


class MDAV:
    """Maximum Distance to Average Vector (Domingo-Ferrer & Torra 2005), as sdcMicro computes it.

    Gives k-anonymity only: clusters of k records (the last one up to 2k - 1). A ``t`` in the
    configuration is not enforced; the report states the EMD achieved.

    Blocks (options ``blocks``, ``executor``, ...; see :mod:`tclose.blocks.split`): recursive
    bisection along principal axes into blocks of a multiple of ``k`` rows (the last takes the
    remainder), MDAV in each. With one block (``blocks: 1``, or ``auto`` below 200,000 rows) the
    run is the unblocked one.
    """

    name = "mdav"
    options_schema: Mapping[str, Option] = {
        "ties": Option(
            str,
            "lowest",
            "Ties in nearest-record searches: 'lowest' row index, or 'sdcmicro' (highest, as "
            "sdcMicro's bucket sort does; identical results on data without ties).",
            choices=("lowest", "sdcmicro"),
        ),
        **REFINE_OPTIONS,
        **BLOCK_OPTIONS,
    }
    requires_t = False

    def partition(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> Partition:
        partition = run_in_blocks(self, x, distances, k, None, options)
        if partition is not None:
            partition.info["t_enforced"] = False
            return apply_refinement(partition, x, distances, k, None, options)
        from tclose.kernels.mdav import mdav

        partition = Partition(mdav(x, k, ties=options["ties"]), {"t_enforced": False})
        return apply_refinement(partition, x, distances, k, None, options)

    block_preload = KERNEL_PRELOAD

    def block_plan(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> BlockPlan:
        """Plain blocks of a multiple of ``k`` rows; the blocks need no distances."""
        return BlockPlan(x.shape[0] // k, distances=False)

    def partition_block(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        strata: Strata | None = None,
    ) -> Partition:
        """MDAV on one block."""
        from tclose.kernels.mdav import mdav

        return Partition(mdav(x, k, ties=options.get("ties", "lowest")), {})


@hookimpl
def register_algorithms(register):
    register(MDAV())
