"""Compare candidate partitions of one problem: build each, refine them, keep the one whose
release has the lowest SSE (the kernel of the ``auto`` algorithm).

Every decision depends on the input alone: candidates are admitted by the table's size, the
refinement is bounded by numbers of passes (units of work: a pass scans the clusters once; never
seconds), and partitions are ranked by a function of their labels. The same input and options
give the same partition on any machine and under any load. The ``seconds`` in the report (CPU
seconds of this process) are information only.

Stages: every candidate is built (:meth:`CandidateRun.candidate`), then refined with
``screen_passes`` passes (:meth:`CandidateRun.screen`), then the candidate of lowest loss so far
gets the rest of ``refine_passes`` from its refined partition (:meth:`CandidateRun.finish`). Every partition met
on the way is ranked, built ones included (refinement lowers the ``wcss``, which is not always the
report's SSE), and the lowest wins; ties keep the earlier one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tclose.interfaces import Partition, Problem

__all__ = ["Build", "CandidateRun"]

#: A candidate: labels of the problem's rows and facts for the report.
Build = Callable[[Problem], tuple[np.ndarray, dict[str, Any]]]


class CandidateRun:
    """The candidates of one run of an algorithm that compares others (``auto``), and what each
    gave.

    Partitions are ranked by their ``loss``: ``problem.release_sse``, the information loss the
    report would give their release (its ``utility.sse``), when the framework gives it; else by
    the within-cluster sum of squares of ``x`` divided by its number of cells (``wcss``).

    Args:
        problem: the whole table's problem; ``t`` is required.
    """

    def __init__(self, problem: Problem) -> None:
        from tclose.kernels.refine import sse_of

        self.problem = problem
        self.t: float = problem.required_t("auto")
        cells = float(max(problem.x.size, 1))
        self.wcss: Callable[[np.ndarray], float] = lambda labels: sse_of(problem.x, labels) / cells
        self.ranked_by = "loss" if problem.release_sse is not None else "wcss"
        self.score = problem.release_sse if problem.release_sse is not None else self.wcss
        self.report: list[dict[str, Any]] = []
        self.built: dict[int, np.ndarray] = {}
        self.refined: dict[int, np.ndarray] = {}
        self.best: tuple[float, int, str, np.ndarray] | None = None

    def skip(self, name: str, why: str) -> None:
        """Record that candidate ``name`` did not run, and why."""
        self.report.append({"name": name, "status": "skipped", "why": why})

    def candidate(self, name: str, build: Build) -> None:
        """Build candidate ``name`` and rank its partition."""
        started = time.process_time()
        labels, info = build(self.problem)
        labels = np.asarray(labels)
        entry: dict[str, Any] = {"name": name, "status": "ran", "info": info}
        entry["loss_unrefined"] = entry["loss"] = self._ranked(labels, len(self.report), "built")
        entry["wcss_unrefined"] = entry["wcss"] = round(self.wcss(labels), 8)
        entry["seconds"] = round(time.process_time() - started, 4)
        entry.update(seconds_refine=0.0, refine_passes=0, **_sizes(labels))
        self.built[len(self.report)] = labels
        self.report.append(entry)

    def screen(self, passes: int) -> None:
        """Refine every built candidate with ``passes`` passes and rank the results."""
        if passes <= 0:
            return
        for index, labels in self.built.items():
            self._refine(index, labels, passes)

    def finish(self, passes: int) -> None:
        """Give the candidate of lowest loss so far ``passes`` more passes, from its refined
        partition if it has one, and rank the result."""
        if passes <= 0 or not self.built:
            return
        index = min(self.built, key=lambda i: (self.report[i]["loss"], i))
        self._refine(index, self.refined.get(index, self.built[index]), passes)

    def _refine(self, index: int, labels: np.ndarray, passes: int) -> None:
        from tclose.kernels.refine import refine

        started = time.process_time()
        problem = self.problem
        out, info = refine(problem.x, labels, problem.distances, problem.k, self.t, passes=passes)
        entry = self.report[index]
        entry["loss_refined"] = self._ranked(out, index, "refined")
        entry["loss"] = min(entry["loss"], entry["loss_refined"])
        entry["wcss"] = round(self.wcss(out), 8)
        spent = time.process_time() - started
        entry["seconds_refine"] = round(entry["seconds_refine"] + spent, 4)
        entry["seconds"] = round(entry["seconds"] + spent, 4)
        entry["refine_passes"] += info.get("passes", 0)
        entry.update(_sizes(out))
        self.refined[index] = out

    def _ranked(self, labels: np.ndarray, index: int, which: str) -> float:
        """The score of one partition, ranked against the best so far."""
        score = float(self.score(labels))
        if self.best is None or score < self.best[0]:
            self.best = (score, index, which, labels)
        return score

    def result(self) -> Partition:
        """The partition of lowest score, with every candidate and why it won."""
        assert self.best is not None  # t-first always runs
        score, index, which, labels = self.best
        others = [
            f"{c['name']} {c['loss']:.6g}"
            for i, c in enumerate(self.report)
            if c["status"] == "ran" and i != index
        ]
        measure = "information loss of the release" if self.ranked_by == "loss" else "wcss"
        why = f"lowest {measure} ({score:.6g}, {which})" + (
            f"; the others: {', '.join(others)}" if others else "; the only candidate that ran"
        )
        info = {
            "winner": self.report[index]["name"],
            "refined": which == "refined",
            "ranked_by": self.ranked_by,
            "why": why,
            "candidates": self.report,
        }
        return Partition(labels, info)


def _sizes(labels: np.ndarray) -> dict[str, int]:
    sizes = np.bincount(np.unique(labels, return_inverse=True)[1].reshape(-1))
    return {"clusters": int(sizes.size), "largest_cluster": int(sizes.max()) if sizes.size else 0}
