"""Merge clusters until each holds enough distinct entities and values (k entities, l-diversity).

A :class:`Requirement` asks every cluster for a number of distinct values of one row attribute
(``distinct``: at least ``need`` distinct codes, as ``k`` distinct entities or distinct
l-diversity) or an entropy of at least ``log(need)`` (``entropy``: entropy l-diversity).
:func:`merge_until_met` merges every cluster that falls short of any requirement into the
cluster whose QI centroid is nearest to its own (all such merges of a pass at once, as the
connected components of the pairs), and repeats until no cluster falls short.

Merging keeps what the partition already guarantees:

- ``k``: a union of clusters of ``>= k`` rows has ``>= k`` rows;
- ``t``: a union's distribution of a confidential attribute is the size-weighted mixture of its
  members' distributions, and the EMD to the whole table's distribution is convex in the
  distribution (an optimal transport cost to a fixed distribution; for the ordered distance the
  L1 norm of the differences of cumulative sums), so the union's EMD is at most the largest of
  its members' EMDs: a union of t-close clusters is t-close;
- the requirements themselves: a union holds every distinct value of its members, and entropy is
  concave, so a union of clusters with entropy ``>= log(l)`` keeps it.

Each pass removes at least one cluster while one falls short, so the loop ends, at worst with
the whole table as one cluster: :func:`unmet_by_table` tells beforehand whether even that
falls short (then no partition can meet the requirement). NumPy arrays in, NumPy arrays out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Requirement", "merge_until_met", "shortfall", "unmet_by_table"]

#: Tolerance of the entropy comparison (``entropy >= log(need) - ENTROPY_TOLERANCE``).
ENTROPY_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Requirement:
    """What every cluster must hold of one attribute of the rows.

    Attributes:
        codes: ``int64 (n,)``, the attribute's value of every row as a code ``0..m-1``.
        need: the number of distinct values (``distinct``), or ``l`` of ``log(l)`` (``entropy``).
        kind: ``"distinct"`` or ``"entropy"``.
        what: what the codes are, for messages (``"entities (nr)"``, ``"values of health"``).
    """

    codes: np.ndarray
    need: int
    kind: str
    what: str


def shortfall(labels: np.ndarray, requirement: Requirement, clusters: int) -> np.ndarray:
    """``bool (clusters,)``: which clusters of the dense ``labels`` fall short of
    ``requirement``."""
    m = int(requirement.codes.max()) + 1 if len(requirement.codes) else 1
    pairs, counts = np.unique(labels * m + requirement.codes, return_counts=True)
    owner = pairs // m
    if requirement.kind == "distinct":
        distinct = np.bincount(owner, minlength=clusters)
        return distinct < requirement.need
    sizes = np.bincount(owner, weights=counts, minlength=clusters)
    share = counts / sizes[owner]
    entropy = np.bincount(owner, weights=-share * np.log(share), minlength=clusters)
    return entropy < np.log(requirement.need) - ENTROPY_TOLERANCE


def unmet_by_table(requirements: Sequence[Requirement]) -> list[Requirement]:
    """The requirements that even the whole table, as one cluster, falls short of."""
    return [
        r
        for r in requirements
        if len(r.codes) and shortfall(np.zeros(len(r.codes), dtype=np.int64), r, 1)[0]
    ]


def merge_until_met(
    x: np.ndarray, labels: np.ndarray, requirements: Sequence[Requirement]
) -> tuple[np.ndarray, int]:
    """``labels`` (any integers) with every cluster that falls short of a requirement merged
    into its nearest cluster by QI centroid (``x``: ``float64 (n, d)``), pass after pass, until
    none falls short or one cluster is left; and how many clusters the merges removed. The
    labels come back dense ``0..L-1``."""
    labels = np.unique(np.asarray(labels), return_inverse=True)[1].astype(np.int64).ravel()
    merged = 0
    while True:
        clusters = int(labels.max()) + 1 if len(labels) else 0
        short = np.zeros(clusters, dtype=bool)
        for requirement in requirements:
            short |= shortfall(labels, requirement, clusters)
        if clusters <= 1 or not short.any():
            return labels, merged
        from scipy.sparse import coo_matrix  # SciPy only once a cluster falls short
        from scipy.sparse.csgraph import connected_components

        target = _nearest_other(_centroids(x, labels, clusters), np.flatnonzero(short))
        pairs = coo_matrix(
            (np.ones(len(target)), (np.flatnonzero(short), target)), shape=(clusters, clusters)
        )
        count, component = connected_components(pairs, directed=False)
        merged += clusters - count
        labels = component[labels].astype(np.int64)


def _centroids(x: np.ndarray, labels: np.ndarray, clusters: int) -> np.ndarray:
    """``float64 (clusters, d)``: the mean of every cluster's rows."""
    sizes = np.bincount(labels, minlength=clusters).astype(np.float64)
    sums = (
        np.stack(
            [np.bincount(labels, weights=x[:, j], minlength=clusters) for j in range(x.shape[1])],
            axis=1,
        )
        if x.shape[1]
        else np.zeros((clusters, 0))
    )
    return sums / sizes[:, None]


def _nearest_other(centroids: np.ndarray, which: np.ndarray) -> np.ndarray:
    """For every cluster in ``which``, the nearest other cluster by centroid (Euclidean; the
    lowest index among equally near ones that the tree returns first)."""
    if centroids.shape[1] == 0:  # no QI to measure: every other cluster is as near
        return np.where(which == 0, 1, 0)
    from scipy.spatial import cKDTree

    _distances, found = cKDTree(centroids).query(centroids[which], k=2)
    return np.where(found[:, 0] == which, found[:, 1], found[:, 0])
