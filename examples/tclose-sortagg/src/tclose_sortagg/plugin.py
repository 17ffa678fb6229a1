"""The ``principal-sort`` algorithm and the hook that registers it with tclose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

import tclose
from tclose.interfaces import EMD_TOLERANCE, FittedDistance, Option, Partition, Problem


class PrincipalSort:
    """Sort the rows along one axis, cut them into blocks of k, merge adjacent blocks for t.

    tclose runs it in blocks (``algorithm.options.blocks``) and refines its partition
    (``refine: true``) like any algorithm: nothing here is needed for either."""

    name = "principal-sort"
    options_schema: Mapping[str, Option] = {
        "axis": Option(
            str,
            "principal",
            "Sort key: 'principal' (first principal component of the QIs) or 'first' (first QI).",
            choices=("principal", "first"),
        ),
    }
    requires_t = True

    def partition(self, problem: Problem) -> Partition:
        x, distances, k, t = problem.x, problem.distances, problem.k, problem.t
        n = len(x)
        order = np.lexsort((np.arange(n), _sort_key(x, problem.options["axis"])))
        blocks = max(n // k, 1)
        labels = np.empty(n, dtype=np.int64)
        labels[order] = np.minimum(np.arange(n) // k, blocks - 1)
        merges = 0
        while t is not None:
            emd = _worst_emd(distances, labels)
            worst = int(np.argmax(emd))
            if emd[worst] <= t + EMD_TOLERANCE:
                break
            labels = _merge_with_best_neighbour(labels, worst, distances)
            merges += 1
        return Partition(labels, {"blocks": blocks, "merges": merges})


def _sort_key(x: np.ndarray, axis: str) -> np.ndarray:
    if axis == "first" or x.shape[1] == 1:
        return x[:, 0]
    centered = x - x.mean(axis=0)
    direction = np.linalg.svd(centered, full_matrices=False)[2][0]
    if direction[np.argmax(np.abs(direction))] < 0:  # fix the sign: same input, same order
        direction = -direction
    return centered @ direction


def _worst_emd(distances: Sequence[FittedDistance], labels: np.ndarray) -> np.ndarray:
    """Per block (labels are dense and ordered along the sort axis), the largest EMD."""
    return np.max([d.cluster_emd(labels) for d in distances], axis=0)


def _merge_with_best_neighbour(
    labels: np.ndarray, block: int, distances: Sequence[FittedDistance]
) -> np.ndarray:
    last = int(labels.max())
    candidates = [b for b in (block - 1, block + 1) if 0 <= b <= last]
    best = None
    for neighbour in candidates:
        trial = labels.copy()
        trial[trial == block] = neighbour
        trial = np.unique(trial, return_inverse=True)[1].reshape(-1)
        score = float(_worst_emd(distances, trial).max())
        if best is None or score < best[0]:
            best = (score, trial)
    return best[1]


@tclose.hookimpl
def register_algorithms(register):
    register(PrincipalSort())
