"""EMD for nominal attributes: the equal ground distance, or a hierarchy's distance.

Equal distance (every two different values are at distance 1): the EMD is the total variation
distance, ``EMD(P, Q) = 1/2 * sum_v |p_v - q_v|``.

Hierarchical distance (Li, Li and Venkatasubramanian, "t-Closeness", ICDE 2007): two leaves are at
distance ``(H - depth(LCA)) / H``. With ``extra(v) = p_v - q_v`` for a leaf and, for an inner node
``N``, ``extra(N)`` the sum over its leaves, the EMD is the sum over inner nodes of
``(H - depth(N)) / H * min(pos(N), neg(N))`` where ``pos(N)`` (``neg(N)``) is the sum of the
positive (the absolute value of the negative) ``extra`` of ``N``'s children.

Both are distances over the values *present* in the column (a leaf no row holds has no mass in
either distribution, so it changes nothing).

Total order for t-first's strata ("nominal ranking"): ``frequency`` (most frequent value first),
``hierarchy`` (depth-first order of the hierarchy's leaves, so that siblings are neighbours and a
stratum boundary mixes close values), ``marginality`` (least marginal first; a value's marginality
is its expected ground distance to a random record of the table, after Domingo-Ferrer, Sánchez and
Rufian-Torrell's semantic marginality), or ``listed`` (the order given in the configuration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tclose.hierarchy import Hierarchy

ORDERS = ("auto", "frequency", "hierarchy", "marginality", "listed")
_CHUNK_CELLS = 4_000_000


class NominalEMD:
    """A nominal confidential column, fitted (implements :class:`tclose.interfaces.FittedDistance`).

    Attributes:
        categories: the distinct values, in the chosen total order (``codes`` index into it).
        hierarchy: the :class:`~tclose.hierarchy.Hierarchy`, or ``None`` for the equal distance.
    """

    name = "nominal-ranking"

    def __init__(
        self, categories: list[str], codes: np.ndarray, hierarchy: Hierarchy | None = None
    ) -> None:
        self.categories = categories
        self.codes = codes.astype(np.int64)
        self.m = len(categories)
        self.n = len(codes)
        self.hierarchy = hierarchy
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        self.global_pmf = self.global_counts / max(self.n, 1)
        order = np.argsort(self.codes, kind="stable")
        self.ranks = np.empty(self.n, dtype=np.int64)
        self.ranks[order] = np.arange(self.n)
        self.column: str | None = None
        self._nodes = _inner_nodes(hierarchy, categories) if hierarchy is not None else []

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        hierarchy: Hierarchy | None = None,
        order: str = "auto",
        listed: Sequence[str] | None = None,
    ) -> NominalEMD:
        """Fit on the whole column (values are compared as strings).

        Args:
            values: ``(n,)`` column.
            hierarchy: a hierarchy whose leaves include every value, or ``None``.
            order: one of :data:`ORDERS`; ``auto`` is ``hierarchy`` with a hierarchy, else
                ``frequency``.
            listed: the categories in order, for ``order="listed"`` (default: the hierarchy's
                leaves); values not listed come after, most frequent first.
        """
        strings = np.asarray([str(v) for v in values], dtype=object)
        present, inverse, counts = np.unique(strings, return_inverse=True, return_counts=True)
        present = [str(v) for v in present]
        if hierarchy is not None:
            hierarchy.check_values(present, "column")
        if order == "auto":
            order = "hierarchy" if hierarchy is not None else "frequency"
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
        frequency_rank = {v: (-int(c), v) for v, c in zip(present, counts)}
        if order == "frequency":
            ordered = sorted(present, key=frequency_rank.__getitem__)
        elif order in ("hierarchy", "listed"):
            if order == "hierarchy" and hierarchy is None:
                raise ValueError("order 'hierarchy' needs a hierarchy")
            reference = (
                list(listed)
                if listed is not None
                else (hierarchy.leaves if hierarchy is not None else [])
            )
            position = {v: i for i, v in enumerate(reference)}
            ordered = sorted(
                present, key=lambda v: (position.get(v, len(position)), frequency_rank[v])
            )
        else:  # marginality
            pmf = counts / counts.sum()
            ground = (
                hierarchy.leaf_distance_matrix(present)
                if hierarchy is not None
                else 1.0 - np.eye(len(present))
            )
            marginality = ground @ pmf
            ordered = [present[i] for i in np.lexsort((np.arange(len(present)), marginality))]
        position = {v: i for i, v in enumerate(ordered)}
        remap = np.array([position[v] for v in present], dtype=np.int64)
        return cls(ordered, remap[inverse.reshape(-1)], hierarchy)

    def __repr__(self) -> str:
        kind = "hierarchical" if self.hierarchy is not None else "equal"
        return f"NominalEMD({kind}, n={self.n}, m={self.m})"

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        """EMD of groups given as value histograms ``(m,)`` or ``(g, m)`` against the column."""
        counts = np.asarray(counts, dtype=np.float64)
        single = counts.ndim == 1
        matrix = np.atleast_2d(counts)
        sizes = matrix.sum(axis=1, keepdims=True)
        sizes[sizes == 0] = 1.0
        extra = matrix / sizes - self.global_pmf
        if self.hierarchy is None:
            result = 0.5 * np.abs(extra).sum(axis=1)
        else:
            result = np.zeros(len(matrix))
            for weight, membership in self._nodes:
                child_extra = extra @ membership
                positive = np.clip(child_extra, 0, None).sum(axis=1)
                negative = np.clip(-child_extra, 0, None).sum(axis=1)
                result += weight * np.minimum(positive, negative)
        return result[0] if single else result

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD of every cluster of a partition (dense labels ``0..L-1``)."""
        labels = np.asarray(labels, dtype=np.int64)
        n_clusters = int(labels.max()) + 1 if len(labels) else 0
        if self.hierarchy is None:
            return self._equal_cluster_emd(labels, n_clusters)
        out = np.empty(n_clusters)
        step = max(1, _CHUNK_CELLS // max(self.m, 1))
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(0, n_clusters + step, step))
        for block, first in enumerate(range(0, n_clusters, step)):
            last = min(first + step, n_clusters)
            rows = (
                order[bounds[block] : bounds[block + 1]]
                if block + 1 < len(bounds)
                else order[bounds[block] :]
            )
            counts = np.zeros((last - first, self.m))
            np.add.at(counts, (labels[rows] - first, self.codes[rows]), 1.0)
            out[first:last] = self.emd_of_counts(counts)
        return out

    def _equal_cluster_emd(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        pairs, pair_counts = np.unique(labels * self.m + self.codes, return_counts=True)
        cluster = pairs // self.m
        value = pairs % self.m
        sizes = np.bincount(labels, minlength=n_clusters).astype(np.float64)
        q = self.global_pmf[value]
        present_gap = np.abs(pair_counts / sizes[cluster] - q)
        total = np.bincount(cluster, weights=present_gap - q, minlength=n_clusters)
        return 0.5 * (total + 1.0)


def _inner_nodes(hierarchy: Hierarchy, categories: list[str]) -> list[tuple[float, Any]]:
    """For each inner node: its weight ``(H - depth) / H`` and the ``(m, children)`` 0/1 matrix of
    which present leaves lie under each child."""
    index = {v: i for i, v in enumerate(categories)}
    height = hierarchy.height
    below: dict[str, list[int]] = {}

    def leaves_under(node: str) -> list[int]:
        if node not in below:
            kids = hierarchy.children.get(node, [])
            below[node] = (
                ([index[node]] if node in index else [])
                if not kids
                else [i for kid in kids for i in leaves_under(kid)]
            )
        return below[node]

    nodes = []
    for node, kids in hierarchy.children.items():
        if not kids:
            continue
        membership = np.zeros((len(categories), len(kids)))
        for j, kid in enumerate(kids):
            membership[leaves_under(kid), j] = 1.0
        if membership.any():
            nodes.append(((height - hierarchy.depth[node]) / height, membership))
    return nodes
