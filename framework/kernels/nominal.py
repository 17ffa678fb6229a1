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
from typing import Any, NamedTuple

import numpy as np

from tclose.base.hierarchy import Hierarchy

ORDERS = ("auto", "frequency", "hierarchy", "marginality", "listed")
_CHUNK_CELLS = 4_000_000


class NominalEMD:
    """A nominal confidential column, fitted (implements :class:`tclose.interfaces.FittedDistance`).

    Attributes:
        categories: the distinct values, in the chosen total order (``codes`` index into it).
        hierarchy: the :class:`~tclose.base.hierarchy.Hierarchy`, or ``None`` for the equal distance.
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
        unique, inverse, counts = np.unique(strings, return_inverse=True, return_counts=True)
        present = [str(v) for v in unique]
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
        """EMD of groups given as value histograms ``(m,)`` or ``(g, m)`` against the column.

        Integer counts are evaluated exactly (see :meth:`tree_parts`): the EMD is
        ``float(E) / float(H * n * s)`` with the integer numerator ``E``, so that every
        evaluation of the same group, here or in the compiled k-first, is bit for bit the same.
        Fractional weights go through the same formula in floating point.
        """
        counts = np.asarray(counts)
        single = counts.ndim == 1
        matrix = np.atleast_2d(counts)
        if matrix.dtype.kind not in "iub" and np.array_equal(matrix, np.round(matrix)):
            matrix = matrix.astype(np.int64)
        if matrix.dtype.kind in "iub":
            matrix = matrix.astype(np.int64)
            sizes = matrix.sum(axis=1)
            numer = self._numerators(matrix, sizes)
            denom = self._height * self.n * np.maximum(sizes, 1)
            result = numer.astype(np.float64) / denom.astype(np.float64)
        else:
            matrix = matrix.astype(np.float64)
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

    def _numerators(self, counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Exact numerators ``E`` of groups of integer ``counts`` ``(g, m)`` of ``sizes`` rows."""
        extra = self.n * counts - sizes[:, None] * self.global_counts  # n s (p - q), exact
        if self.hierarchy is None:
            return np.clip(extra, 0, None).sum(axis=1)
        numer = np.zeros(counts.shape[0], dtype=np.int64)
        for weight, membership in self._nodes:
            child_extra = extra @ membership.astype(np.int64)
            positive = np.clip(child_extra, 0, None).sum(axis=1)
            negative = np.clip(-child_extra, 0, None).sum(axis=1)
            numer += int(round(weight * self._height)) * np.minimum(positive, negative)
        return numer

    @property
    def _height(self) -> int:
        return self.hierarchy.height if self.hierarchy is not None else 1

    def tree_parts(self) -> TreeParts:
        """The exact description the compiled k-first uses (see :class:`TreeParts`)."""
        return tree_parts_of(self.codes, self.global_counts, self.n, self._height, self._nodes)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD of every cluster of a partition (dense labels ``0..L-1``), exact as
        :meth:`emd_of_counts`."""
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
            counts = np.zeros((last - first, self.m), dtype=np.int64)
            np.add.at(counts, (labels[rows] - first, self.codes[rows]), 1)
            out[first:last] = self.emd_of_counts(counts)
        return out

    def _equal_cluster_emd(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        """Sparse route: ``E`` sums ``n c_v - s G_v`` over the values present in a cluster with
        ``n c_v > s G_v`` (absent values have a negative gap)."""
        pairs, pair_counts = np.unique(labels * self.m + self.codes, return_counts=True)
        cluster = pairs // self.m
        value = pairs % self.m
        sizes = np.bincount(labels, minlength=n_clusters).astype(np.int64)
        gap = self.n * pair_counts.astype(np.int64) - sizes[cluster] * self.global_counts[value]
        numer = np.zeros(n_clusters, dtype=np.int64)
        np.add.at(numer, cluster, np.clip(gap, 0, None))
        return numer.astype(np.float64) / (self.n * np.maximum(sizes, 1)).astype(np.float64)


class TreeParts(NamedTuple):
    """A nominal EMD as a tree, for exact incremental updates in compiled code.

    The equal ground distance is the tree of height ``H = 1`` whose root holds every value. For a
    group of ``s`` rows out of the ``n`` of the table, each *slot* (a child of an inner node: a
    value, or an inner node below the root) has the gap ``X = n c - s G`` between the group's
    rows under it (``c``) and the table's (``G``), scaled by ``n s``. An inner node of depth
    ``d`` adds ``(H - d) * min(POS, NEG)``, the sums of the positive gaps and of the absolute
    negative gaps of its slots. The EMD is ``E / (H n s)`` with the sum ``E`` over inner nodes.

    Attributes:
        codes: ``int64 (n_rows,)`` the rows' value codes.
        path_ptr: ``int64 (m + 1,)``: value ``c``'s slots, bottom-up (its own slot first, the
            root's child last), are ``path_slot[path_ptr[c]:path_ptr[c + 1]]``.
        path_slot: ``int64``, see ``path_ptr``.
        slot_node: ``int64 (slots,)``: the inner node each slot is a child of.
        slot_count: ``int64 (slots,)``: the table's rows under each slot (``G``).
        node_weight: ``int64 (nodes,)``: ``H - depth`` of each inner node.
        table_rows: ``n``.
        height: ``H``.
    """

    codes: np.ndarray
    path_ptr: np.ndarray
    path_slot: np.ndarray
    slot_node: np.ndarray
    slot_count: np.ndarray
    node_weight: np.ndarray
    table_rows: int
    height: int


def tree_parts_of(
    codes: np.ndarray,
    global_counts: np.ndarray,
    n: int,
    height: int,
    nodes: list[tuple[float, Any]],
) -> TreeParts:
    """Build :class:`TreeParts` from the inner nodes of :func:`_inner_nodes` (or, without a
    hierarchy, one root over every value)."""
    m = global_counts.shape[0]
    if not nodes:
        nodes = [(1.0, np.eye(m))]
    paths: list[list[int]] = [[] for _ in range(m)]
    slot_node: list[int] = []
    slot_count: list[int] = []
    node_weight: list[int] = []
    depth_of: list[int] = []
    for node, (weight, membership) in enumerate(nodes):
        node_weight.append(int(round(weight * height)))
        for child in range(membership.shape[1]):
            under = np.flatnonzero(membership[:, child])
            if under.size == 0:
                continue
            slot = len(slot_node)
            slot_node.append(node)
            slot_count.append(int(global_counts[under].sum()))
            depth_of.append(node_weight[-1])
            for c in under:
                paths[c].append(slot)
    # bottom-up: the slot of the deepest node (the largest H - depth is the shallowest) first
    for code in range(m):
        paths[code].sort(key=lambda slot: depth_of[slot])
    ptr = np.concatenate(([0], np.cumsum([len(p) for p in paths]))).astype(np.int64)
    flat = [slot for p in paths for slot in p]
    return TreeParts(
        np.ascontiguousarray(codes, dtype=np.int64),
        ptr,
        np.array(flat, dtype=np.int64),
        np.array(slot_node, dtype=np.int64),
        np.array(slot_count, dtype=np.int64),
        np.array(node_weight, dtype=np.int64),
        int(n),
        int(height),
    )


def tree_parts(distance: Any) -> TreeParts | None:
    """``distance.tree_parts()`` if the distance has that method, else ``None``."""
    method = getattr(distance, "tree_parts", None)
    return method() if callable(method) else None


def _inner_nodes(hierarchy: Hierarchy, categories: list[str]) -> list[tuple[float, Any]]:
    """For each inner node: its weight ``(H - depth) / H`` and the ``(m, children)`` 0/1 matrix of
    which present leaves lie under each child."""
    index = {v: i for i, v in enumerate(categories)}
    height = hierarchy.height
    below: dict[str, list[int]] = {}  # node → the present leaves under it
    # deepest nodes first, so that a node's children are done before it (no recursion: a
    # hierarchy may be thousands of levels deep)
    for node in sorted(hierarchy.depth, key=hierarchy.depth.__getitem__, reverse=True):
        kids = hierarchy.children.get(node, [])
        below[node] = (
            [i for kid in kids for i in below[kid]]
            if kids
            else ([index[node]] if node in index else [])
        )

    nodes = []
    for node, kids in hierarchy.children.items():
        if not kids:
            continue
        membership = np.zeros((len(categories), len(kids)))
        for j, kid in enumerate(kids):
            membership[below[kid], j] = 1.0
        if membership.any():
            nodes.append(((height - hierarchy.depth[node]) / height, membership))
    return nodes
