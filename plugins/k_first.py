"""Algorithm plugin ``k-first``: Algorithm 2 of the paper, finished by Algorithm 1's merge loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tclose.base.notices import counts_reporter
from tclose.blocks.service import Strata, run_in_blocks
from tclose.blocks.split import BLOCK_OPTIONS
from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option, Partition
from tclose.kernels.refinement import REFINE_OPTIONS, apply_refinement
from tclose.plugins.merge import PARTNER_OPTIONS, MergeLoopBlocks, merge_in_block, required_t

log = logging.getLogger("tclose")

#: Seconds between two INFO log lines of k-first's progress (shown with ``tclose run -v``).
LOG_INTERVAL = 10.0


class KFirst(MergeLoopBlocks):
    """k-anonymity-first: MDAV-like clusters of k records, refined by swapping records with the
    next closest candidates while that lowers the cluster's EMD. It does not guarantee t alone
    (candidates run out), so the merge loop runs afterwards, as the paper does.

    Blocks (options ``blocks``, ``executor``, ...; see :mod:`tclose.blocks.split`): stratified
    blocks as for t-first; k-first and the merge loop run in every block with EMDs against the
    whole table, then the merge loop runs on the whole table if a cluster still exceeds ``t``.

    ``refine`` (off by default, so that the paper's algorithm is what runs): the refinement pass
    of :mod:`tclose.kernels.refinement` on the final partition."""

    name = "k-first"
    options_schema: Mapping[str, Option] = {**PARTNER_OPTIONS, **REFINE_OPTIONS, **BLOCK_OPTIONS}
    requires_t = True

    def partition(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> Partition:
        t = required_t(t, self.name)
        partition = run_in_blocks(self, x, distances, k, t, options)
        if partition is not None:
            return apply_refinement(partition, x, distances, k, t, options)
        from tclose.kernels.k_first import k_first
        from tclose.kernels.merge import merge_until_t_close

        labels = k_first(x, distances, k, t, progress=_progress())
        initial = len(np.unique(labels))
        labels, merges = merge_until_t_close(
            x, labels, distances, t, partner=options["partner"], candidates=options["candidates"]
        )
        partition = Partition(labels, {"initial_clusters": initial, "merges": int(merges)})
        return apply_refinement(partition, x, distances, k, t, options)

    def partition_block(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        strata: Strata | None = None,
    ) -> Partition:
        """k-first on one block (EMDs against the whole table), then the merge loop inside it."""
        from tclose.kernels.k_first import k_first

        t = required_t(t, self.name)
        return merge_in_block(x, k_first(x, distances, k, t), distances, t, options)


def _progress() -> Callable[[int, int], None]:
    """Rows clustered so far: to the phase's bar of the ``tclose`` command (when it runs one),
    and as an INFO log line every :data:`LOG_INTERVAL` seconds (for logs and pipes, where the
    bar is not drawn)."""
    bar = counts_reporter()
    last = time.monotonic()

    def report(done: int, total: int) -> None:
        nonlocal last
        if bar is not None:
            bar(done, total)
        if done < total and time.monotonic() - last >= LOG_INTERVAL:
            log.info("k-first: %d of %d rows clustered (%.0f %%)", done, total, 100 * done / total)
            last = time.monotonic()

    return report


@hookimpl
def register_algorithms(register):
    register(KFirst())
