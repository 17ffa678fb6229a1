"""Algorithm plugin ``mdav``: k-anonymous microaggregation alone (t is only reported)."""

from __future__ import annotations

from collections.abc import Mapping

from tclose.hookspecs import hookimpl
from tclose.interfaces import BlockPlan, Option, Partition, Problem
from tclose.kernels.merge_loop import KERNEL_PRELOAD


class MDAV:
    """Maximum Distance to Average Vector (Domingo-Ferrer & Torra 2005), as sdcMicro computes it.

    Gives k-anonymity only: clusters of k records (the last one up to 2k - 1). A ``t`` in the
    configuration is not enforced; the report states the EMD achieved.

    Blocks (see :mod:`tclose.blocks.framed`): recursive bisection along principal axes into
    blocks of a multiple of ``k`` rows (the last takes the remainder), MDAV in each. With one
    block (``blocks: 1``, or ``auto`` below 200,000 rows) the run is the unblocked one.
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
    }
    requires_t = False
    block_preload = KERNEL_PRELOAD

    def partition(self, problem: Problem) -> Partition:
        from tclose.kernels.mdav import mdav

        labels = mdav(problem.x, problem.k, ties=problem.options.get("ties", "lowest"))
        return Partition(labels, {"t_enforced": False})

    def block_plan(self, problem: Problem) -> BlockPlan:
        """Plain blocks of a multiple of ``k`` rows; the blocks need no distances."""
        return BlockPlan(
            problem.x.shape[0] // problem.k, distances=False, info={"t_enforced": False}
        )


@hookimpl
def register_algorithms(register):
    register(MDAV())
