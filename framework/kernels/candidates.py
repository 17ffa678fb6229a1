"""Compare candidate partitions of one problem: run each, refine it within a time budget, keep
the lowest within-cluster sum of squares (the kernel of the ``auto`` algorithm)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from tclose.interfaces import Partition, Problem

__all__ = ["CandidateRun"]


class CandidateRun:
    """The candidates of one run of an algorithm that compares others (``auto``), and what
    each gave. ``problem.options`` holds ``exhaustive_rows``, ``time_factor`` and
    ``refine_passes`` (see :mod:`tclose.plugins.auto`)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.x, self.distances, self.k = problem.x, problem.distances, problem.k
        self.t: float = problem.required_t("auto")
        self.options: Mapping[str, Any] = problem.options
        self.deadline: float | None = None
        self.bounded = self.x.shape[0] > self.options["exhaustive_rows"]
        self.report: list[dict[str, Any]] = []
        self.best: tuple[float, int, np.ndarray] | None = None
        self.scale = float(max(self.x.size, 1))

    def skip(self, name: str, why: str) -> None:
        self.report.append({"name": name, "status": "skipped", "why": why})

    def candidate(
        self, name: str, build: Any, share: float = 1.0, started: float | None = None
    ) -> None:
        """Run one candidate, refine it, and keep it if it has the lowest WCSS so far.

        On a table above ``exhaustive_rows``, the first candidate sets the deadline (``started``
        plus ``time_factor`` times its own time) and its refinement gets ``share`` of what is
        left; later candidates must finish by the deadline.
        """
        from tclose.kernels.merge import BudgetExceeded
        from tclose.kernels.refine import refine, sse_of

        if self.deadline is not None and time.perf_counter() > self.deadline:
            self.skip(name, "the time budget was spent by the earlier candidates")
            return
        started = time.perf_counter() if started is None else started
        try:
            labels, info = build(self)
        except BudgetExceeded as error:
            self.report.append(
                {
                    "name": name,
                    "status": "over budget",
                    "why": str(error),
                    "seconds": round(time.perf_counter() - started, 4),
                }
            )
            return
        built = time.perf_counter()
        seconds = None
        if self.bounded:
            if self.deadline is None:
                self.deadline = started + self.options["time_factor"] * (built - started)
            seconds = max(0.0, (self.deadline - built) * share)
        refined, refine_info = refine(
            self.x,
            labels,
            self.distances,
            self.k,
            self.t,
            passes=self.options["refine_passes"],
            seconds=seconds,
        )
        wcss = sse_of(self.x, refined) / self.scale
        entry = {
            "name": name,
            "status": "ran",
            "wcss_unrefined": round(sse_of(self.x, labels) / self.scale, 8),
            "wcss": round(wcss, 8),
            "clusters": int(refined.max()) + 1 if refined.size else 0,
            "largest_cluster": int(np.bincount(refined).max()) if refined.size else 0,
            "seconds": round(time.perf_counter() - started, 4),
            "seconds_refine": round(time.perf_counter() - built, 4),
            "refine_passes": refine_info.get("passes", 0),
            "info": info,
        }
        self.report.append(entry)
        if self.best is None or wcss < self.best[0]:
            self.best = (wcss, len(self.report) - 1, refined)

    def result(self) -> Partition:
        assert self.best is not None  # t-first always runs
        wcss, index, labels = self.best
        winner = self.report[index]["name"]
        others = [
            f"{c['name']} {c['wcss']:.6g}"
            for c in self.report
            if c.get("status") == "ran" and c["name"] != winner
        ]
        why = f"lowest within-cluster sum of squares (wcss) after refinement ({wcss:.6g})" + (
            f"; the others: {', '.join(others)}" if others else "; the only candidate that ran"
        )
        return Partition(labels, {"winner": winner, "why": why, "candidates": self.report})
