"""Algorithm 1 of the paper: merge clusters of a k-anonymous partition until it is t-close.

Starting from any partition (normally a microaggregation with clusters of at least ``k`` rows)::

    while some cluster has EMD > t + EMD_TOLERANCE:
        C  = the cluster with the greatest EMD         (ties: lowest cluster id)
        C' = the cluster whose centroid is closest to C's centroid in the QI space
             (squared Euclidean distance; ties: lowest cluster id)
        merge C into C'                                (the union keeps the id of C')

A cluster's EMD is the largest over the confidential attributes, so t holds for each attribute.
Cluster ids are the ranks of the input labels (``np.unique``). Every merge removes a cluster, so the
loop ends; in the worst case one cluster is left, whose EMD is 0.

Incremental state (:class:`_Clusters`). Each cluster keeps its rows as a linked list (a merge is
``O(1)``), the sum and the centroid of its QIs (a union's sum is the sum of the two sums, ``O(d)``),
and its EMD. After a merge only the union's EMD can change, and it is recomputed from the union's
codes only when needed: the EMD of a union is at most the size-weighted mean of the two EMDs (the
union's cumulative distribution is the weighted mean of the two, and ``|.|`` is convex), and while
that bound is ``<= t`` the union can never be the cluster with the greatest EMD (that one exceeds
``t``), so the bound is kept instead. This spares the ``O(s log s)`` recomputation (sorted codes,
:func:`~tclose.kernels.emd.max_emd_of_rows`; ``O(m)`` through ``emd_of_counts`` for a
distance other than :class:`~tclose.kernels.emd.OrderedEMD`) each time a large cluster
absorbs a small one. Picking ``C`` is an ``argmax`` over the EMDs (``O(L)``, ``L`` being the
number of input clusters) and picking ``C'`` a compiled scan of the live clusters' centroids, kept
contiguous (``O(L' d)``, ``L'`` live clusters). A heap would find ``C`` faster, but the centroid
scan costs more anyway, and nearest-centroid indexes do not pay at this size.

Determinism: EMDs are exact rationals rounded once (see :mod:`~tclose.kernels.emd`), so
ties between EMDs are real ties; an input cluster's sum adds its rows in ascending row order, so the
result depends only on the input, never on the platform's summation order.

Partner rule ``"min-emd"`` (an option, not the paper's rule): among the ``candidates`` clusters
closest to ``C`` (by centroid distance, ties by lowest id), ``C'`` is the one whose union with ``C``
has the lowest EMD; ties go to the closer candidate.

Partner rule ``"gain"`` (an option): among the ``candidates`` closest clusters, ``C'`` is the one
with the lowest cost per unit of gain, where the cost is the SSE the merge adds
(``|C| |C'| / (|C| + |C'|)`` times the squared centroid distance) and the gain is how much the
union's EMD is below ``C``'s; candidates whose union does not lower the EMD are passed over (if
none lowers it, the closest is taken, as the paper does). Ties go to the closer candidate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import numpy as np

from tclose.base.jit import njit
from tclose.interfaces import EMD_TOLERANCE, FittedDistance
from tclose.kernels.emd import max_emd_of_rows

__all__ = ["PARTNERS", "BudgetExceeded", "merge_until_t_close"]

Partner = Literal["nearest", "min-emd", "gain"]
from tclose.kernels import PARTNERS  # noqa: E402  (light: option declarations use it)


class BudgetExceeded(RuntimeError):
    """The merge loop passed its ``deadline`` (raised only when a deadline is given)."""


def merge_until_t_close(
    x: np.ndarray,
    labels: np.ndarray,
    distances: Sequence[FittedDistance],
    t: float,
    *,
    partner: Partner = "nearest",
    candidates: int = 5,
    deadline: float | None = None,
) -> tuple[np.ndarray, int]:
    """Merge clusters until every cluster is within ``t`` of the whole table, for every attribute.

    Args:
        x: ``float64 (n, d)`` quasi-identifiers, standardized.
        labels: ``(n,)`` integer labels of the starting partition (any integers).
        distances: one fitted distance per confidential attribute, each over the same ``n`` rows.
        t: t-closeness level in ``(0, 1]``.
        partner: ``"nearest"`` (the paper: the closest centroid), ``"min-emd"`` (among the
            ``candidates`` closest clusters, the one whose union has the lowest EMD) or
            ``"gain"`` (among them, the lowest added SSE per unit of EMD removed).
        candidates: how many of the closest clusters ``"min-emd"`` and ``"gain"`` examine,
            ``>= 1``.
        deadline: a ``time.perf_counter()`` value after which the loop raises
            :class:`BudgetExceeded` (``None``: no limit).

    Returns:
        ``(labels, merges)``: ``int64 (n,)`` dense labels ``0..L'-1`` numbered in the order of the
        input labels (a merged cluster takes the place of the partner it was merged into), and the
        number of merges performed. Every output cluster is a union of input clusters, and its EMD
        is at most ``t + EMD_TOLERANCE`` for every attribute.

    Raises:
        ValueError: on inconsistent shapes or an out-of-range parameter.

    Example:
        >>> import numpy as np
        >>> from tclose.kernels.emd import OrderedEMD
        >>> x = np.array([[0.0], [0.1], [1.0], [1.1]])
        >>> charge = OrderedEMD.fit(np.array([1.0, 2.0, 3.0, 4.0]))
        >>> merge_until_t_close(x, np.array([0, 0, 1, 1]), [charge], t=0.2)
        (array([0, 0, 0, 0]), 1)
    """
    x, labels, t = _validate(x, labels, distances, t, partner, candidates)
    n = labels.shape[0]
    if n == 0:
        return labels, 0
    _, dense = np.unique(labels, return_inverse=True)
    dense = dense.reshape(-1).astype(np.int64)
    state = _Clusters(x, dense, distances, t)
    merges = 0
    while state.n_alive > 1:
        c = int(np.argmax(state.emd))  # dead clusters hold -inf; ties go to the lowest id
        if state.emd[c] <= t + EMD_TOLERANCE:
            break
        if deadline is not None and merges % 64 == 0 and time.perf_counter() > deadline:
            raise BudgetExceeded(f"the merge loop passed its time budget after {merges} merges")
        if partner == "nearest":
            state.merge(c, int(_nearest(state.packed, state.ids, state.n_alive, state.slot[c])))
        elif partner == "gain":
            best_p, best_emd = _cheapest_gain(state, c, candidates)
            state.merge(c, best_p, union_emd=best_emd)
        else:
            best_p, best_emd = -1, np.inf
            for p in _k_nearest(state.packed, state.ids, state.n_alive, state.slot[c], candidates):
                union_emd = max_emd_of_rows(distances, state.rows(c, int(p)))
                if union_emd < best_emd:
                    best_p, best_emd = int(p), union_emd
            state.merge(c, best_p, union_emd=best_emd)
        merges += 1
    return state.labels(), merges


def _cheapest_gain(state: _Clusters, c: int, candidates: int) -> tuple[int, float]:
    """Partner rule ``"gain"``: the candidate of lowest added SSE per unit of EMD reduction."""
    near = _k_nearest(state.packed, state.ids, state.n_alive, state.slot[c], candidates)
    best_p, best_emd, best_ratio = int(near[0]), -1.0, np.inf
    own = state.packed[state.slot[c]]
    for p in near:
        p = int(p)
        union_emd = max_emd_of_rows(state.distances, state.rows(c, p))
        if best_emd < 0 and p == int(near[0]):
            best_emd = union_emd  # the fallback: the closest, as the paper does
        gain = state.emd[c] - union_emd
        if gain <= 0:
            continue
        a, b = state.size[c], state.size[p]
        cost = a * b / (a + b) * float(((state.packed[state.slot[p]] - own) ** 2).sum())
        if cost / gain < best_ratio:
            best_p, best_emd, best_ratio = p, union_emd, cost / gain
    return best_p, best_emd


class _Clusters:
    """The clusters during the merge loop, indexed by id ``0..L-1``.

    Attributes:
        size: rows per cluster (0 once merged away).
        sums: ``(L, d)`` sum of the QIs of each cluster's rows; a union's sum is
            ``sums[partner] + sums[merged]``.
        packed: ``(L, d)``: the centroids (``sums / size``) of the live clusters in
            ``packed[:n_alive]``, kept contiguous so that the scans skip merged clusters; the
            centroid of cluster ``c`` is ``packed[slot[c]]`` and ``ids[i]`` is the cluster in
            slot ``i`` (a merged cluster's slot is refilled by the last one).
        alive: whether the cluster still exists.
        emd: ``(L,)`` EMD of each live cluster (largest over the attributes), ``-inf`` when dead;
            for a union it may be an upper bound known to be ``<= t`` (see :meth:`merge`).
        head, tail, nxt: the rows of each cluster as a linked list (``nxt[row]``, ``-1`` ends it),
            so that a merge is ``O(1)``.
    """

    def __init__(
        self, x: np.ndarray, dense: np.ndarray, distances: Sequence[FittedDistance], t: float
    ) -> None:
        self.distances = distances
        self.t = t
        order = np.argsort(dense, kind="stable")  # rows ascending inside each cluster
        self.size = np.bincount(dense)
        n_clusters = self.size.shape[0]
        self.sums, self.head, self.tail, self.nxt = _start_clusters(
            x, order.astype(np.int64), self.size.astype(np.int64)
        )
        self.packed = self.sums / self.size[:, None]
        self.ids = np.arange(n_clusters, dtype=np.int64)
        self.slot = np.arange(n_clusters, dtype=np.int64)
        self.alive = np.ones(n_clusters, dtype=np.bool_)
        self.n_alive = n_clusters
        self.emd = np.zeros(n_clusters)
        for d in distances:
            np.maximum(self.emd, d.cluster_emd(dense), out=self.emd)

    def rows(self, *clusters: int) -> np.ndarray:
        """The rows of the given clusters (in list order, not sorted)."""
        return np.concatenate([_gather(self.head, self.nxt, c, self.size[c]) for c in clusters])

    def merge(self, c: int, p: int, union_emd: float | None = None) -> None:
        """Merge cluster ``c`` into cluster ``p``; ``union_emd`` if already known.

        The EMD of a union is at most the size-weighted mean of the two EMDs (the union's
        cumulative distribution is the weighted mean of the two, and ``|.|`` is convex). When that
        bound is ``<= t`` the union can never again be the cluster with the greatest EMD while
        the loop runs, so the bound is stored instead of the exact value, which saves an ``O(s)``
        recomputation each time a large cluster absorbs a small one.
        """
        a, b = self.size[p], self.size[c]
        if union_emd is None:
            bound = (a * self.emd[p] + b * self.emd[c]) / (a + b)
            union_emd = (
                bound if bound <= self.t else max_emd_of_rows(self.distances, self.rows(p, c))
            )
        self.emd[p] = union_emd
        self.nxt[self.tail[p]] = self.head[c]
        self.tail[p] = self.tail[c]
        self.size[p] += b
        self.size[c] = 0
        self.sums[p] += self.sums[c]
        self.packed[self.slot[p]] = self.sums[p] / self.size[p]
        last = self.ids[self.n_alive - 1]  # c's slot goes to the cluster in the last slot
        self.packed[self.slot[c]] = self.packed[self.slot[last]]
        self.ids[self.slot[c]] = last
        self.slot[last] = self.slot[c]
        self.alive[c] = False
        self.emd[c] = -np.inf
        self.n_alive -= 1

    def labels(self) -> np.ndarray:
        """Dense labels: live clusters numbered in id order."""
        out = np.empty(self.nxt.shape[0], dtype=np.int64)
        for new, c in enumerate(np.flatnonzero(self.alive)):
            out[_gather(self.head, self.nxt, int(c), self.size[c])] = new
        return out


def _nearest(packed: np.ndarray, ids: np.ndarray, n_alive: int, own: int) -> int:
    """The live cluster whose centroid is closest to the one in slot ``own``; ties: lowest id."""
    return int(_k_nearest(packed, ids, n_alive, own, 1)[0])


@njit(
    "Tuple((float64[:, ::1], int64[::1], int64[::1], int64[::1]))"
    "(readonly(float64[:, ::1]), readonly(int64[::1]), readonly(int64[::1]))",
    cache=True,
)
def _start_clusters(
    x: np.ndarray, order: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``sums``, ``head``, ``tail``, ``nxt`` of the clusters listed row by row in ``order``: the
    sum of ``x`` over each cluster's rows, added in ascending row order, and its rows as a
    linked list."""
    sums = np.zeros((sizes.shape[0], x.shape[1]))
    head = np.empty(sizes.shape[0], dtype=np.int64)
    tail = np.empty(sizes.shape[0], dtype=np.int64)
    nxt = np.empty(order.shape[0], dtype=np.int64)
    start = 0
    for c in range(sizes.shape[0]):
        head[c] = order[start]
        tail[c] = order[start + sizes[c] - 1]
        for i in range(start, start + sizes[c]):
            nxt[order[i]] = order[i + 1] if i + 1 < start + sizes[c] else -1
            for j in range(x.shape[1]):
                sums[c, j] += x[order[i], j]
        start += sizes[c]
    return sums, head, tail, nxt


@njit("int64[::1](readonly(int64[::1]), readonly(int64[::1]), int64, int64)", cache=True)
def _gather(head: np.ndarray, nxt: np.ndarray, c: int, size: int) -> np.ndarray:
    """The ``size`` rows of cluster ``c``, walking its linked list."""
    out = np.empty(size, dtype=np.int64)
    row = head[c]
    for i in range(size):
        out[i] = row
        row = nxt[row]
    return out


@njit(
    "int64[::1](readonly(float64[:, ::1]), readonly(int64[::1]), int64, int64, int64)",
    cache=True,
)
def _k_nearest(packed: np.ndarray, ids: np.ndarray, n_alive: int, own: int, q: int) -> np.ndarray:
    """Up to ``q`` live clusters other than slot ``own``'s, closest first (ties: lowest id);
    squared Euclidean distances summed in column order."""
    best = np.empty(q, dtype=np.int64)
    dists = np.empty(q)
    found = 0
    for i in range(n_alive):
        if i == own:
            continue
        dist = 0.0
        for j in range(packed.shape[1]):
            diff = packed[own, j] - packed[i, j]
            dist += diff * diff
        if found == q and (dist > dists[q - 1] or (dist == dists[q - 1] and ids[i] > best[q - 1])):
            continue
        if found < q:
            pos = found
            found += 1
        else:
            pos = q - 1  # the worst kept one is dropped
        while pos > 0 and (
            dists[pos - 1] > dist or (dists[pos - 1] == dist and best[pos - 1] > ids[i])
        ):
            best[pos] = best[pos - 1]
            dists[pos] = dists[pos - 1]
            pos -= 1
        best[pos] = ids[i]
        dists[pos] = dist
    return best[:found]


def _validate(
    x: np.ndarray,
    labels: np.ndarray,
    distances: Sequence[FittedDistance],
    t: float,
    partner: str,
    candidates: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    x = np.ascontiguousarray(x, dtype=np.float64)
    labels = np.asarray(labels)
    if x.ndim != 2:
        raise ValueError(f"x must have shape (n, d); got {x.shape}.")
    if labels.shape != (x.shape[0],) or labels.dtype.kind not in "iu":
        raise ValueError(
            f"labels must be integers of shape ({x.shape[0]},); got {labels.dtype} {labels.shape}."
        )
    if not distances:
        raise ValueError("At least one confidential attribute (fitted distance) is needed.")
    for d in distances:
        if d.codes.shape != labels.shape:
            raise ValueError(
                f"Distance {d.name!r} is fitted on {d.codes.shape[0]} rows; x has {x.shape[0]}."
            )
    if isinstance(t, bool) or not isinstance(t, (int, float, np.floating)) or not 0 < t <= 1:
        raise ValueError(f"The 't' parameter of merge must be in (0, 1]. Got {t!r} instead.")
    if partner not in PARTNERS:
        raise ValueError(
            f"The 'partner' parameter of merge must be one of {PARTNERS}. Got {partner!r} instead."
        )
    if (
        isinstance(candidates, bool)
        or not isinstance(candidates, (int, np.integer))
        or candidates < 1
    ):
        raise ValueError(
            f"The 'candidates' parameter of merge must be an int >= 1. Got {candidates!r} instead."
        )
    return x, labels.astype(np.int64, copy=False), float(t)
