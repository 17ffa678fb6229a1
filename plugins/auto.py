"""Algorithm plugin ``auto``: build the candidates that fit the table, refine them, publish the
partition whose release has the lowest SSE.

No single algorithm of the paper wins everywhere: t-first is best when the confidential attribute
is unrelated to the quasi-identifiers, merge when they follow each other (and merge can collapse
into giant clusters there). ``auto`` builds these candidates, each exactly as the algorithm runs
alone with its default options (:meth:`Problem.solve <tclose.interfaces.Problem.solve>`; the
run's block options are passed on):

1. ``t-first`` (always);
2. ``merge`` (the paper's Algorithm 1: MDAV, then the nearest partner) and ``merge-gain``
   (MDAV, then among the ``candidates`` nearest clusters the one with the least SSE added per unit
   of EMD removed, then clusters of ``>= 2k`` rows split while t-close), up to
   ``merge_max_rows`` rows;
3. ``k-first`` (the paper's Algorithm 2 and merge loop), up to ``k_first_max_rows`` rows.

Then every candidate is refined (:mod:`tclose.kernels.refine`) with ``screen_passes`` passes,
and the candidate of lowest loss so far gets ``refine_passes - screen_passes`` more
(:class:`tclose.kernels.candidates.CandidateRun`). Every partition met on the way, the built
ones included, is ranked by the report's ``utility.sse`` of the release it would make
(:attr:`Problem.release_sse <tclose.interfaces.Problem.release_sse>`; by the ``wcss`` of ``x``
when the problem comes without it, outside a run of the framework), and the lowest is published.
So ``auto``'s SSE is at most that of ``t-first``, ``merge`` and ``k-first`` whenever they are
among its candidates (up to ``k_first_max_rows`` rows for all three).

Budgets are units of work, never seconds: candidates are admitted by the number of rows, and the
refinement by its number of passes. The same input and options give the same partition on any
machine and under any load.

``info`` lists every candidate with its ``loss`` as built and after refinement
(``loss_unrefined``, ``loss_refined``, ``loss`` the lower: the report's ``utility.sse`` its
release would have; the report calls no other figure SSE), its ``wcss`` (the within-cluster sum
of squares of the matrix the algorithms see, divided by its number of cells: what the
refinement lowers), its CPU
seconds (information only), its number of clusters and its status (``ran`` or ``skipped``), names
the ``winner``, whether the published partition is the ``refined`` one, what it was
``ranked_by`` (``loss``, or ``wcss`` without ``Problem.release_sse``) and why it won. ``auto``
requires ``t``.
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
                "Algorithm 'auto' requires t (privacy.t): it "
                "compares algorithms that enforce t-closeness.",
                path=("privacy", "t"),
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
