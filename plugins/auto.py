"""Algorithm plugin ``auto``: run the candidates that fit the table, refine each, keep the best.

No single algorithm of the paper wins everywhere: t-first is best when the confidential attribute
is unrelated to the quasi-identifiers, merge when they follow each other (and merge can collapse
into giant clusters there). ``auto`` runs the candidates that fit the table's size, refines each
(:mod:`tclose.kernels.refine`), and publishes the partition of lowest WCSS (below):

1. ``t-first`` (always; it is the fastest), then refined;
2. ``merge`` with the cost/gain partner (MDAV, then the merge loop choosing among the
   ``candidates`` nearest clusters the one with the least WCSS added per unit of EMD removed),
   its clusters of ``>= 2k`` rows split while t-close, then refined (on large tables within the
   time budget below);
3. ``k-first`` (the paper's Algorithm 2 and merge loop), refined, only when the table has at most
   ``k_first_max_rows`` rows and the budget is not spent (its worst cases are slow).

Time budget: up to ``exhaustive_rows`` rows (10,000) every candidate runs to the end and the
result is deterministic. On larger tables the whole run gets ``time_factor`` (3) times what
t-first took: t-first's refinement gets half of what is left, merge must finish its merge loop by
the deadline (else it is abandoned, ``over budget``) and its refinement stops there, and a
candidate that cannot start in time is ``skipped``. The result then depends on the machine's speed.

``info`` lists every candidate with its WCSS before and after refinement (``wcss_unrefined``,
``wcss``), its time, its number of clusters and its status (``ran``, ``skipped`` or ``over
budget``), names the ``winner`` and says why it won. WCSS is the within-cluster sum of squares
of the matrix the algorithms see (the standardized QIs: z-scores, scaled ranks, scaled one-hot
vectors, weights applied), the rows' squared distances to their cluster's centroid, divided by
the matrix's number of cells: what the algorithms and refinement lower. It is not the report's
``utility.sse``, the information loss of the published values, unless every QI is numeric, not
rounded, of weight 1 (the published value is then the centroid): a nominal QI publishes its
cluster's most frequent value, not a mean of one-hot vectors. ``auto`` requires ``t``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from tclose.errors import ConfigError
from tclose.hookspecs import hookimpl
from tclose.interfaces import Option, Partition, Problem
from tclose.kernels.candidates import CandidateRun

__all__ = ["Auto"]


class Auto:
    """Run t-first, merge (cost/gain partner, splits) and, on small tables, k-first; refine each;
    publish the lowest WCSS. See the module documentation."""

    name = "auto"
    options_schema: Mapping[str, Option] = {
        "refine_passes": Option(int, 6, "Refinement passes given to every candidate.", min=0),
        "candidates": Option(
            int, 5, "Nearest clusters examined by merge's cost/gain partner rule.", min=1
        ),
        "time_factor": Option(
            float,
            3.0,
            "Time budget of the whole run above exhaustive_rows: this many times what t-first took.",
            min=0.0,
        ),
        "exhaustive_rows": Option(
            int,
            10_000,
            "Up to this many rows every candidate runs to the end, whatever the time "
            "(deterministic); above, all share the time budget.",
            min=0,
        ),
        "merge_max_rows": Option(
            int, 200_000, "merge is a candidate only up to this many rows.", min=0
        ),
        "k_first_max_rows": Option(
            int, 5_000, "k-first is a candidate only up to this many rows.", min=0
        ),
    }
    requires_t = True
    #: auto refines its candidates itself, and its block options go on to t-first and k-first.
    framework_steps: tuple[str, ...] = ()

    def partition(self, problem: Problem) -> Partition:
        if problem.t is None:
            raise ConfigError(
                "Algorithm 'auto' requires t (privacy.t): it "
                "compares algorithms that enforce t-closeness.",
                path=("privacy", "t"),
            )
        x = np.ascontiguousarray(problem.x, dtype=np.float64)
        run = CandidateRun(replace(problem, x=x))
        options = problem.options
        started = time.perf_counter()
        run.candidate("t-first", self._t_first, share=0.5, started=started)
        if x.shape[0] > options["merge_max_rows"]:
            run.skip("merge", f"more than merge_max_rows = {options['merge_max_rows']} rows")
        else:
            run.candidate("merge", self._merge)
        if x.shape[0] > options["k_first_max_rows"]:
            run.skip("k-first", f"more than k_first_max_rows = {options['k_first_max_rows']} rows")
        else:
            run.candidate("k-first", self._k_first)
        return run.result()

    @staticmethod
    def _t_first(run: CandidateRun) -> tuple[np.ndarray, dict[str, Any]]:
        partition = run.problem.solve("t-first")
        return np.asarray(partition.labels), partition.info

    @staticmethod
    def _merge(run: CandidateRun) -> tuple[np.ndarray, dict[str, Any]]:
        from tclose.kernels.mdav import mdav
        from tclose.kernels.merge import merge_until_t_close
        from tclose.kernels.refine import refine

        labels = mdav(run.x, run.k)
        labels, merges = merge_until_t_close(
            run.x,
            labels,
            run.distances,
            run.t,
            partner="gain",
            candidates=run.options["candidates"],
            deadline=run.deadline,
        )
        labels, split = refine(run.x, labels, run.distances, run.k, run.t, passes=1, moves=False)
        return labels, {"partner": "gain", "merges": int(merges), "splits": split.get("splits", 0)}

    @staticmethod
    def _k_first(run: CandidateRun) -> tuple[np.ndarray, dict[str, Any]]:
        partition = run.problem.solve("k-first")
        return np.asarray(partition.labels), partition.info


@hookimpl
def register_algorithms(register):
    register(Auto())
