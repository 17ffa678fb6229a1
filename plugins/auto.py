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

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from tclose.errors import ConfigError
from tclose.hookspecs import hookimpl
from tclose.interfaces import Option, Partition, Problem
from tclose.kernels.candidates import Build, CandidateRun

__all__ = ["Auto"]


class Auto:
    """Run t-first, merge, merge with the cost/gain partner and k-first as they fit the table;
    refine each; publish the partition of lowest report SSE. See the module documentation."""

    name = "auto"
    options_schema: Mapping[str, Option] = {
        "screen_passes": Option(
            int, 1, "Refinement passes given to every candidate before they are compared.", min=0
        ),
        "refine_passes": Option(
            int,
            6,
            "Refinement passes of the best candidate in all (screen_passes included).",
            min=0,
        ),
        "candidates": Option(
            int, 5, "Nearest clusters examined by merge's cost/gain partner rule.", min=1
        ),
        "merge_max_rows": Option(
            int, 200_000, "merge (both partners) is a candidate only up to this many rows.", min=0
        ),
        "k_first_max_rows": Option(
            int, 30_000, "k-first is a candidate only up to this many rows.", min=0
        ),
    }
    requires_t = True
    #: auto refines its candidates itself, and its block options go on to t-first and k-first.
    framework_steps: tuple[str, ...] = ()

    def partition(self, problem: Problem) -> Partition:
        if problem.t is None:
            raise ConfigError(
                "==> At privacy ==> At key: t\nAlgorithm 'auto' requires t (privacy.t): it "
                "compares algorithms that enforce t-closeness."
            )
        x = np.ascontiguousarray(problem.x, dtype=np.float64)
        options = problem.options
        run = CandidateRun(replace(problem, x=x))
        n = x.shape[0]
        run.candidate("t-first", _solved("t-first"))
        for name, build in (("merge", _solved("merge")), ("merge-gain", _merge_gain)):
            if n > options["merge_max_rows"]:
                run.skip(name, f"more than merge_max_rows = {options['merge_max_rows']} rows")
            else:
                run.candidate(name, build)
        if n > options["k_first_max_rows"]:
            run.skip("k-first", f"more than k_first_max_rows = {options['k_first_max_rows']} rows")
        else:
            run.candidate("k-first", _solved("k-first"))
        screen = min(options["screen_passes"], options["refine_passes"])
        run.screen(screen)
        run.finish(options["refine_passes"] - screen)
        return run.result()


def _solved(name: str) -> Build:
    """A candidate: the registered algorithm ``name`` with its default options, as it runs alone
    (the run's block options passed on)."""

    def build(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
        partition = problem.solve(name)
        return np.asarray(partition.labels), partition.info

    return build


def _merge_gain(problem: Problem) -> tuple[np.ndarray, dict[str, Any]]:
    """merge with the cost/gain partner among ``candidates`` nearest clusters, then splits."""
    options = {"partner": "gain", "candidates": problem.options["candidates"], "split": True}
    partition = problem.solve("merge", **options)
    return np.asarray(partition.labels), partition.info


@hookimpl
def register_algorithms(register):
    register(Auto())
