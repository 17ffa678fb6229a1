"""Algorithm plugin ``k-first``: Algorithm 2 of the paper, finished by Algorithm 1's merge loop."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

import numpy as np

from tclose.base.notices import counts_reporter
from tclose.hookspecs import hookimpl
from tclose.interfaces import Option, Partition, Problem
from tclose.kernels.merge_loop import PARTNER_OPTIONS, MergeLoopBlocks, merge_in_block, merge_loop

log = logging.getLogger("tclose")

#: Seconds between two INFO log lines of k-first's progress (shown with ``tclose run -v``).
LOG_INTERVAL = 10.0


class KFirst(MergeLoopBlocks):
    """k-anonymity-first: MDAV-like clusters of k records, refined by swapping records with the
    next closest candidates while that lowers the cluster's EMD. It does not guarantee t alone
    (candidates run out), so the merge loop runs afterwards, as the paper does.

    Blocks (see :mod:`tclose.blocks.framed`): stratified blocks as for t-first; k-first and the
    merge loop run in every block with EMDs against the whole table, then the merge loop runs on
    the whole table if a cluster still exceeds ``t``."""

    name = "k-first"
    options_schema: Mapping[str, Option] = PARTNER_OPTIONS
    requires_t = True

    def partition(self, problem: Problem) -> Partition:
        from tclose.kernels.k_first import k_first

        t = problem.required_t(self.name)
        labels = k_first(problem.x, problem.distances, problem.k, t, progress=_progress())
        initial = len(np.unique(labels))
        labels, merges = merge_loop(problem, labels, t)
        return Partition(labels, {"initial_clusters": initial, "merges": merges})

    def partition_block(self, problem: Problem) -> Partition:
        """k-first on one block (EMDs against the whole table), then the merge loop inside it."""
        from tclose.kernels.k_first import k_first

        t = problem.required_t(self.name)
        labels = k_first(problem.x, problem.distances, problem.k, t)
        return merge_in_block(problem, labels, self.name)


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
