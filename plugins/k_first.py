"""Algorithm plugin ``k-first``: Algorithm 2 of the paper, finished by Algorithm 1's merge loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option, Partition
from tclose.plugins.kernels.k_first import k_first
from tclose.plugins.kernels.merge import merge_until_t_close
from tclose.plugins.merge import PARTNER_OPTIONS


class KFirst:
    """k-anonymity-first: MDAV-like clusters of k records, refined by swapping records with the
    next closest candidates while that lowers the cluster's EMD. It does not guarantee t alone
    (candidates run out), so the merge loop runs afterwards, as the paper does."""

    name = "k-first"
    options_schema: Mapping[str, Option] = dict(PARTNER_OPTIONS)
    requires_t = True

    def partition(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> Partition:
        labels = k_first(x, distances, k, t)
        initial = len(np.unique(labels))
        labels, merges = merge_until_t_close(
            x, labels, distances, t, partner=options["partner"], candidates=options["candidates"]
        )
        return Partition(labels, {"initial_clusters": initial, "merges": int(merges)})


@hookimpl
def register_algorithms(register):
    register(KFirst())
