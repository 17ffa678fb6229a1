"""Algorithm plugin ``mdav``: k-anonymous microaggregation alone (t is only reported)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option, Partition
from tclose.plugins.kernels.mdav import mdav


class MDAV:
    """Maximum Distance to Average Vector (Domingo-Ferrer & Torra 2005), as sdcMicro computes it.

    Gives k-anonymity only: clusters of k records (the last one up to 2k - 1). A ``t`` in the
    configuration is not enforced; the report states the EMD achieved.
    """

    name = "mdav"
    options_schema: Mapping[str, Option] = {
        "ties": Option(
            str, "lowest",
            "Ties in nearest-record searches: 'lowest' row index, or 'sdcmicro' (highest, as "
            "sdcMicro's bucket sort does; identical results on data without ties).",
            choices=("lowest", "sdcmicro"),
        ),
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
        return Partition(mdav(x, k, ties=options["ties"]), {"t_enforced": False})


@hookimpl
def register_algorithms(register):
    register(MDAV())
