"""Refinement: lower the SSE of any valid partition without breaking k or t.

Starting from a partition in which every cluster has at least ``k`` rows (and, when ``t`` is
given, an EMD of at most ``t + EMD_TOLERANCE`` for every confidential attribute), each pass

1. **splits** every cluster of at least ``2k`` rows into two halves when both halves keep ``k``
   rows and stay t-close (repeatedly, so a giant cluster is cut down to clusters below ``2k``).
   Two cuts are tried: the best cut by SSE along the axis through the cluster's two extreme
   records (the few best cut points), and a *stratified* cut (rows sorted by the first
   confidential attribute's code, each consecutive pair split between the halves by the same
   axis), whose halves follow the cluster's own distribution and so stay close to its EMD;
2. **re-splits** each cluster with each of its ``RESPLIT_NEIGHBOURS`` nearest clusters: their
   rows are pooled and cut in two again as in 1, when both parts stay valid and the SSE drops;
3. **moves** a record to one of the ``neighbours`` clusters whose centroids are closest to its
   cluster's, when its cluster keeps ``k`` rows, or **swaps** it with a record of such a cluster,
   choosing the step that lowers the SSE most among those that keep every changed cluster
   t-close for every attribute.

A step is accepted only when it lowers the SSE (the sum over clusters of the squared Euclidean
distances of the rows to their centroid), so the SSE never rises; merging two clusters never
lowers the SSE, so merges are only ever part of a re-split. After the first pass only clusters
that changed, or have a changed cluster among their neighbours, are scanned again. Work is
bounded by ``passes`` and, optionally, a time budget (checked between batches of clusters).
Without a time budget the result depends only on the input: there is no randomness (so no seed
is needed), and every tie is broken by position.

**Exact, incremental EMD.** A changed cluster's EMD is recomputed from its rows' codes in
``O(s log s)`` with the exact integer numerators of :mod:`tclose.kernels.emd`:
``E = sum_{i<M-1} |N F_i - s G_i|`` over the reference's cumulative counts ``G`` for an ordered
distance (anything offering :class:`~tclose.kernels.emd.OrderedParts`, including the
block views of :mod:`tclose.kernels.blocks`), so the decision is bit for bit the distance's own;
``E = sum_v |N c_v - s G_v|``, ``EMD = E / (2 N s)`` for the equal nominal distance (total
variation). Any other distance (a hierarchy, a third party's) is *opaque*: only swaps of two
records with the same code for it are allowed, which leave its histograms, hence its EMDs,
unchanged; splits and moves are then off.

Safety net: the result is checked with the distances' own ``cluster_emd`` and the SSE is
recomputed; if anything were worse than the input, the input is returned unchanged (and
``info["reverted"]`` says so). The numba functions here call only functions of this file (see
:mod:`tclose.kernels._compiled` for why).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels
from tclose.base.jit import njit
from tclose.interfaces import EMD_TOLERANCE, FittedDistance
from tclose.kernels.emd import ordered_parts

__all__ = ["Attributes", "attributes_of", "refine", "sse_of"]

ORDERED, NOMINAL, OPAQUE = 0, 1, 2
#: Clusters larger than this are not scanned record by record (moves and swaps); splits still
#: apply to them.
MAX_SCAN = 256
#: Cut points of the axis split checked for t-closeness, best SSE first.
CUT_TRIES = 4
#: Improving moves and swaps of one record checked for t-closeness, best first.
CHECK_TRIES = 8
#: Nearest clusters with which each cluster is pooled and split again.
RESPLIT_NEIGHBOURS = 3
#: Clusters handled between two checks of the time budget.
BATCH = 4096
#: The neighbour table of the split step, which uses none.
_NO_TABLE = np.zeros((0, 1), dtype=np.int64)


class Attributes:
    """The confidential attributes packed for the compiled kernel.

    Attributes:
        kinds: ``int64 (A,)``: ``ORDERED``, ``NOMINAL`` or ``OPAQUE`` per attribute.
        codes: ``int64 (A, n)``: each row's code (the reference's codes for ordered attributes).
        refs: ``int64``: every attribute's reference counts, concatenated (cumulative counts for
            ``ORDERED``, value counts for ``NOMINAL``, nothing for ``OPAQUE``).
        prefix: ``int64``: for ``ORDERED``, the prefix sums of the cumulative counts (aligned
            with ``refs``); zeros otherwise.
        offsets: ``int64 (A + 1,)``: attribute ``a`` owns ``refs[offsets[a]:offsets[a + 1]]``.
        rows: ``int64 (A,)``: ``N``, the rows of each reference table.
    """

    def __init__(self, distances: Sequence[FittedDistance], n: int) -> None:
        kinds, codes, refs, prefix, rows = [], [], [], [], []
        for distance in distances:
            parts = ordered_parts(distance)
            nominal = _equal_nominal_counts(distance)
            if parts is not None:
                kinds.append(ORDERED)
                codes.append(parts.codes)
                refs.append(parts.cum_counts)
                prefix.append(parts.cum_prefix)
                rows.append(parts.table_rows)
            elif nominal is not None:
                kinds.append(NOMINAL)
                codes.append(distance.codes)
                refs.append(nominal)
                prefix.append(np.zeros_like(nominal))
                rows.append(int(nominal.sum()))
            else:
                kinds.append(OPAQUE)
                codes.append(distance.codes)
                refs.append(np.zeros(0, dtype=np.int64))
                prefix.append(np.zeros(0, dtype=np.int64))
                rows.append(0)
        self.kinds = np.asarray(kinds, dtype=np.int64)
        self.codes = (
            np.ascontiguousarray(np.vstack(codes), dtype=np.int64)
            if codes
            else np.zeros((0, n), dtype=np.int64)
        )
        self.refs = np.concatenate(refs).astype(np.int64) if refs else np.zeros(0, np.int64)
        self.prefix = np.concatenate(prefix).astype(np.int64) if prefix else np.zeros(0, np.int64)
        self.offsets = np.concatenate(([0], np.cumsum([len(r) for r in refs]))).astype(np.int64)
        self.rows = np.asarray(rows, dtype=np.int64)

    @property
    def opaque(self) -> bool:
        """Whether some attribute's EMD cannot be computed here (only neutral swaps allowed)."""
        return bool((self.kinds == OPAQUE).any())


def attributes_of(distances: Sequence[FittedDistance], n: int) -> Attributes:
    """Pack ``distances`` (fitted over the same ``n`` rows) for the compiled kernel."""
    return Attributes(distances, n)


def _equal_nominal_counts(distance: FittedDistance) -> np.ndarray | None:
    """The reference value counts of an equal-distance nominal EMD, else ``None``.

    Recognized: a fitted distance with ``hierarchy is None`` and ``global_pmf`` (the built-in
    nominal distance), directly or wrapped by a block view (``.distance``).
    """
    inner = getattr(distance, "distance", distance)
    if getattr(inner, "name", None) != "nominal-ranking" or getattr(inner, "hierarchy", 1):
        return None
    return np.asarray(inner.global_counts, dtype=np.int64)


def sse_of(x: np.ndarray, labels: np.ndarray) -> float:
    """Sum over clusters of the squared Euclidean distances of the rows to their centroid."""
    labels = np.asarray(labels, dtype=np.int64)
    if x.shape[0] == 0:
        return 0.0
    sizes = np.bincount(labels).astype(np.float64)
    sums = np.zeros((sizes.shape[0], x.shape[1]))
    np.add.at(sums, labels, x)
    used = sizes > 0
    return float((x * x).sum() - ((sums[used] ** 2).sum(axis=1) / sizes[used]).sum())


def refine(
    x: np.ndarray,
    labels: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float | None,
    *,
    passes: int = 3,
    seconds: float | None = None,
    neighbours: int = 6,
    moves: bool = True,
    splits: bool = True,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Lower the SSE of a valid partition, keeping every cluster ``>= k`` rows and t-close.

    Args:
        x: ``float64 (n, d)`` standardized quasi-identifiers.
        labels: ``(n,)`` integer labels of a partition whose clusters have ``>= k`` rows (and an
            EMD ``<= t + EMD_TOLERANCE`` for every attribute when ``t`` is given).
        distances: one fitted distance per confidential attribute (may be empty when ``t`` is
            ``None``).
        k: minimum cluster size, ``>= 1``.
        t: t-closeness level, or ``None`` (only ``k`` is kept).
        passes: passes of splits, moves and swaps, ``>= 0``; stops early when a pass changes
            nothing.
        seconds: time budget, or ``None`` for none (then the result is deterministic).
        neighbours: clusters considered around each cluster for moves and swaps.
        moves: whether moves and swaps run.
        splits: whether splits run.

    Returns:
        ``(labels, info)``: dense ``int64`` labels and facts for the report (``wcss_before``,
        ``wcss_after``: :func:`sse_of` divided by the number of cells of ``x``, the quantity
        refinement lowers, which is not the report's ``utility.sse``; ``splits``, ``resplits``
        (pairs of clusters
        split again), ``moves``, ``swaps``, ``passes``,
        ``seconds``; ``skipped`` with a reason when the input is not a valid partition).
    """
    started = time.perf_counter()
    x = np.ascontiguousarray(x, dtype=np.float64)
    dense = dense_labels(np.asarray(labels))
    n = dense.shape[0]
    scale = float(max(x.size, 1))
    before = sse_of(x, dense)
    info: dict[str, Any] = {"wcss_before": before / scale, "wcss_after": before / scale}
    reason = _invalid(dense, distances, k, t)
    if reason or n == 0 or passes == 0:
        info["skipped"] = reason or "nothing to do"
        return dense, info
    attrs = attributes_of(distances if t is not None else [], n)
    t_value = np.inf if t is None else float(t) + EMD_TOLERANCE
    state = _State(x, dense, n // k if k > 0 else n)
    counts = np.zeros(4, dtype=np.int64)
    deadline = None if seconds is None else started + seconds
    steps = _Steps(k, t_value, neighbours, moves, splits, deadline)
    done = _run_passes(x, state, attrs, steps, passes, counts)
    result = dense_labels(state.labels)
    after = sse_of(x, result)
    info.update(
        splits=int(counts[0]),
        resplits=int(counts[3]),
        moves=int(counts[1]),
        swaps=int(counts[2]),
        passes=done,
    )
    # The SSE of a partition with nothing left to gain is 0 up to rounding (sse_of subtracts).
    rounding = 1e-12 * max(float((x * x).sum()), 1.0)
    if after > before + rounding or _invalid(result, distances, k, t):
        info["reverted"] = True  # the safety net: never reached by a correct kernel
        result, after = dense, before
    info["wcss_after"] = after / scale
    info["seconds"] = round(time.perf_counter() - started, 4)
    return result, info


@dataclass(frozen=True)
class _Steps:
    """What a pass may do: ``k``, ``t + EMD_TOLERANCE`` (``inf`` without ``t``), the options of
    :func:`refine`, and the deadline (a :func:`time.perf_counter` value, or ``None``)."""

    k: int
    t_value: float
    neighbours: int
    moves: bool
    splits: bool
    deadline: float | None

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline


def _run_passes(
    x: np.ndarray, state: _State, attrs: Attributes, steps: _Steps, passes: int, counts: np.ndarray
) -> int:
    """Up to ``passes`` passes of splits, then re-splits, moves and swaps, on ``state`` (in
    place; ``counts``: splits, moves, swaps, re-splits so far). Stops after a pass that changes
    nothing or past the deadline. Returns the passes run."""
    done = 0
    active = np.ones(state.size.shape[0], dtype=np.bool_)
    for _ in range(passes):
        changed = counts.sum()
        previous, first_new = state.labels.copy(), state.n_clusters
        if steps.splits and not attrs.opaque:
            state.n_clusters = _pass(
                SPLIT, x, state.labels, state.head, state.nxt, state.prv, state.size, state.sums,
                _NO_TABLE, 0, 0, state.n_clusters, steps.k, steps.t_value, True, attrs.kinds,
                attrs.codes, attrs.refs, attrs.prefix, attrs.offsets, attrs.rows, counts, active,
            )  # fmt: skip
        active[first_new : state.n_clusters] = True  # new from the splits of this pass
        if steps.moves:
            table = state.neighbour_table(steps.neighbours)
            _scan_clusters(x, state, attrs, steps, table, counts, active)
            active = _still_active(
                previous, state.labels, first_new, state.n_clusters, table, active.shape[0]
            )
        done += 1
        if counts.sum() == changed or steps.past_deadline():
            break
    return done


def _scan_clusters(
    x: np.ndarray,
    state: _State,
    attrs: Attributes,
    steps: _Steps,
    table: np.ndarray,
    counts: np.ndarray,
    active: np.ndarray,
) -> None:
    """Re-splits, then moves and swaps, over the ``active`` clusters in batches of
    :data:`BATCH` (the deadline is checked between batches)."""
    k, t_value = steps.k, steps.t_value
    for lo in range(0, state.n_clusters, BATCH):
        if steps.past_deadline():
            break
        hi = min(lo + BATCH, state.n_clusters)
        for step in (MOVE,) if attrs.opaque else (RESPLIT, MOVE):
            _pass(
                step, x, state.labels, state.head, state.nxt, state.prv, state.size, state.sums,
                table, lo, hi, state.n_clusters, k, t_value, not attrs.opaque, attrs.kinds,
                attrs.codes, attrs.refs, attrs.prefix, attrs.offsets, attrs.rows, counts, active,
            )  # fmt: skip


def _still_active(
    before: np.ndarray,
    after: np.ndarray,
    first_new: int,
    count: int,
    table: np.ndarray,
    capacity: int,
) -> np.ndarray:
    """Clusters worth scanning in the next pass: those that changed in this one (rows left or
    joined, or new from a split) and those with such a cluster among their neighbours."""
    touched = np.zeros(capacity, dtype=np.bool_)  # every cluster id the kernels may index
    moved = before != after
    touched[before[moved]] = True
    touched[after[moved]] = True
    touched[first_new:count] = True
    active = touched.copy()
    rows = table.shape[0]
    near = np.where(table >= 0, touched[np.maximum(table, 0)], False).any(axis=1)
    active[:rows] |= near
    return active


def _invalid(
    dense: np.ndarray, distances: Sequence[FittedDistance], k: int, t: float | None
) -> str:
    """Why ``dense`` is not a valid partition (``""`` when it is), by the distances' own EMDs."""
    if dense.shape[0] == 0:
        return ""
    if np.bincount(dense).min() < k:
        return f"a cluster has fewer than k = {k} rows"
    if t is None:
        return ""
    for distance in distances:
        if float(np.max(distance.cluster_emd(dense))) > t + EMD_TOLERANCE:
            return f"a cluster's EMD for {distance.column or distance.name} exceeds t"
    return ""


class _State:
    """Clusters as doubly linked lists of rows, with their sizes and QI sums."""

    def __init__(self, x: np.ndarray, dense: np.ndarray, capacity: int) -> None:
        n_clusters = int(dense.max()) + 1
        capacity = max(capacity, n_clusters)
        self.labels = dense.copy()
        self.size = np.zeros(capacity, dtype=np.int64)
        self.size[:n_clusters] = np.bincount(dense)
        self.sums = np.zeros((capacity, x.shape[1]))
        np.add.at(self.sums, dense, x)
        self.head, self.nxt, self.prv = _lists(dense, capacity)
        self.n_clusters = n_clusters

    def neighbour_table(self, q: int) -> np.ndarray:
        """``(L, q)``: for each cluster, the ``q`` clusters of closest centroid (``-1`` pads)."""
        count = self.n_clusters
        q = max(0, min(q, count - 1))
        table = np.full((count, max(q, 1)), -1, dtype=np.int64)
        if q == 0:
            return table
        centroids = self.sums[:count] / self.size[:count, None]
        if centroids.shape[1] == 0:
            centroids = np.zeros((count, 1))
        from scipy.spatial import cKDTree

        _, found = cKDTree(centroids).query(centroids, k=q + 1)
        found = np.asarray(found, dtype=np.int64).reshape(count, q + 1)
        drop = found == np.arange(count)[:, None]
        drop[~drop.any(axis=1), -1] = True  # the cluster itself is hidden among equal centroids
        drop &= np.cumsum(drop, axis=1) == 1  # drop exactly one entry per row
        table[:, :q] = found[~drop].reshape(count, q)
        return table


def _lists(dense: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Doubly linked lists of the rows of every cluster, rows in ascending order."""
    n = dense.shape[0]
    order = np.argsort(dense, kind="stable")
    head = np.full(capacity, -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    prv = np.full(n, -1, dtype=np.int64)
    same = dense[order[1:]] == dense[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    prv[order[1:][same]] = order[:-1][same]
    first = np.ones(n, dtype=bool)
    first[1:] = ~same
    head[dense[order[first]]] = order[first]
    return head, nxt, prv


# ----------------------------------------------------------------------------------------------
# Compiled kernel. Every function below calls only functions of this file. The three steps run
# in one compiled function (:func:`_pass`), and the helpers used once are written out where they
# are used: each compiled function is compiled on its own and optimized again inside each caller.

#: The steps of :func:`_pass`.
SPLIT, RESPLIT, MOVE = 0, 1, 2
#: Signature parts: the QIs, and read-only ``int64`` arrays.
_X = "readonly(float64[:, ::1])"
_RI = "readonly(int64[::1])"
_RI2 = "readonly(int64[:, ::1])"
#: The packed attributes (:class:`Attributes`): kinds, codes, refs, prefix, offsets, rows.
_ATTRIBUTES = f"{_RI}, {_RI2}, {_RI}, {_RI}, {_RI}, {_RI}"


@njit(
    f"int64(int64, {_X}, int64[::1], int64[::1], int64[::1], int64[::1], int64[::1],"
    f" float64[:, ::1], {_RI2}, int64, int64, int64, int64, float64, boolean, {_ATTRIBUTES},"
    " int64[::1], readonly(boolean[::1]))",
    cache=True,
)
def _pass(
    step, x, labels, head, nxt, prv, size, sums, table, lo, hi, n_clusters, k, t, free,
    kinds, codes, refs, prefix, offsets, n_refs, counts, active,
):  # fmt: skip
    """One step of a pass over the clusters; returns the number of clusters.

    ``SPLIT``: split every cluster of ``>= 2k`` rows while both halves stay valid and the SSE
    drops (new clusters are appended and examined in turn; ``table``, ``lo``, ``hi``,
    ``active`` unused). ``RESPLIT``: for each active cluster ``a`` in ``lo..hi-1`` and each of its
    :data:`RESPLIT_NEIGHBOURS` first neighbours ``b`` (``table``), pool their rows and split them
    again (:func:`_best_split`) when that lowers their SSE and both parts stay valid. ``MOVE``:
    moves and swaps for the records of the active clusters ``lo..hi-1`` (see the module docs);
    ``free``: moves and swaps of any codes are allowed (no opaque attribute), otherwise only
    swaps of records with the same code for every opaque attribute. ``counts``: splits, moves,
    swaps, re-splits.
    """
    n = x.shape[0]
    rows = np.empty(n, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    buf = np.empty(n, dtype=np.int64)
    if step == SPLIT:
        c = 0
        while c < n_clusters:
            if size[c] < 2 * k or n_clusters >= size.shape[0]:
                c += 1
                continue
            s = _gather(head, nxt, c, rows)
            cut = _best_split(
                x, rows, s, k, t, kinds, codes, refs, prefix, offsets, n_refs, out, buf, -1.0
            )
            if cut == 0:
                c += 1
                continue
            new = n_clusters
            n_clusters += 1
            for i in range(cut, s):
                _relabel(x, labels, head, nxt, prv, size, sums, out[i], c, new)
            counts[0] += 1  # c is examined again: its halves may split further
        return n_clusters
    if step == RESPLIT:
        for a in range(lo, hi):
            if not active[a]:
                continue
            for j in range(min(RESPLIT_NEIGHBOURS, table.shape[1])):
                b = table[a, j]
                if b < 0 or b == a or size[a] == 0 or size[b] == 0:
                    continue
                if size[a] + size[b] > MAX_SCAN:
                    continue
                sa = _gather(head, nxt, a, rows)
                s = sa + _gather(head, nxt, b, rows[sa:])
                current = _sse_of_rows(x, rows[:sa], sa) + _sse_of_rows(x, rows[sa:s], s - sa)
                if current <= 1e-9:  # nothing to gain; and a negative limit would mean no limit
                    continue
                limit = current - 1e-9 * max(current, 1.0)
                cut = _best_split(
                    x, rows, s, k, t, kinds, codes, refs, prefix, offsets, n_refs, out, buf, limit
                )
                if cut == 0:
                    continue
                for i in range(s):
                    row = out[i]
                    target = a if i < cut else b
                    if labels[row] != target:
                        _relabel(x, labels, head, nxt, prv, size, sums, row, labels[row], target)
                counts[3] += 1
        return n_clusters
    theirs = np.empty(n, dtype=np.int64)
    q = table.shape[1]
    cand_gain = np.empty(q * (MAX_SCAN + 1))
    cand_b = np.empty(q * (MAX_SCAN + 1), dtype=np.int64)
    cand_u = np.empty(q * (MAX_SCAN + 1), dtype=np.int64)
    eps = 1e-12
    for a in range(lo, hi):
        if size[a] == 0 or size[a] > MAX_SCAN or not active[a]:
            continue
        s_mine = _gather(head, nxt, a, rows)
        for i in range(s_mine):
            r = rows[i]
            if labels[r] != a:
                continue
            sa = size[a]
            leave = sa / (sa - 1.0) * _sq_norm_dist(x, r, sums, a, sa) if sa > 1 else 0.0
            found = 0
            for j in range(q):
                b = table[a, j]
                if b < 0 or b == a or size[b] == 0 or size[b] > MAX_SCAN:
                    continue
                sb = size[b]
                if free and sa > k:
                    gain = sb / (sb + 1.0) * _sq_norm_dist(x, r, sums, b, sb) - leave
                    if gain < -eps:
                        cand_gain[found], cand_b[found], cand_u[found] = gain, b, -1
                        found += 1
                s_theirs = _gather(head, nxt, b, theirs)
                for jj in range(s_theirs):
                    u = theirs[jj]
                    if not free and not _same_codes(codes, kinds, r, u, True):
                        continue
                    # the SSE change of exchanging r (of a) with u (of b)
                    dot = 0.0
                    norm = 0.0
                    for col in range(x.shape[1]):
                        delta = x[u, col] - x[r, col]
                        dot += delta * (sums[b, col] / sb - sums[a, col] / sa)
                        norm += delta * delta
                    gain = 2.0 * dot - norm * (1.0 / sa + 1.0 / sb)
                    if gain < -eps:
                        cand_gain[found], cand_b[found], cand_u[found] = gain, b, u
                        found += 1
            if found == 0:
                continue
            order = _stable_order(cand_gain[:found])
            for o in range(min(found, CHECK_TRIES)):
                c = order[o]
                b, u = cand_b[c], cand_u[c]
                if u < 0 or not _same_codes(codes, kinds, r, u, False):
                    # a without r (u in its place for a swap), then b with r (in u's place for a
                    # swap), must stay t-close (a swap of equal codes changes no histogram)
                    s = 0
                    row = head[a]
                    while row != -1:
                        if row != r:
                            out[s] = row
                            s += 1
                        elif u >= 0:
                            out[s] = u
                            s += 1
                        row = nxt[row]
                    if not _group_ok(out, s, t, kinds, codes, refs, prefix, offsets, n_refs, buf):
                        continue
                    s = _gather(head, nxt, b, out)
                    for m in range(s):
                        if out[m] == u:
                            out[m] = r
                    if u < 0:
                        out[s] = r
                        s += 1
                    if not _group_ok(out, s, t, kinds, codes, refs, prefix, offsets, n_refs, buf):
                        continue
                _relabel(x, labels, head, nxt, prv, size, sums, r, a, b)
                if u < 0:
                    counts[1] += 1
                else:
                    _relabel(x, labels, head, nxt, prv, size, sums, u, b, a)
                    counts[2] += 1
                break
    return n_clusters


@njit(
    f"int64({_X}, int64[::1], int64, int64, float64, {_ATTRIBUTES}, int64[::1], int64[::1],"
    " float64)",
    cache=True,
)
def _best_split(
    x, rows, s, k, t, kinds, codes, refs, prefix, offsets, n_refs, out, buf, limit
) -> int:
    """The lowest-SSE valid split of ``rows[:s]`` into ``out[:cut]`` and ``out[cut:s]``.

    Returns ``cut`` (``0`` when no valid split has an SSE below ``limit``; a negative ``limit``
    stands for the SSE of the rows as one cluster).
    """
    d = x.shape[1]
    # The axis through p, the row farthest from the centroid, and q, the row farthest from p
    # (ties to the first); the rows' projections on it.
    point = np.zeros(d)
    for i in range(s):
        for j in range(d):
            point[j] += x[rows[i], j]
    for j in range(d):
        point[j] /= s
    ends = np.empty(2, dtype=np.int64)
    for end in range(2):
        best = 0
        best_dist = -1.0
        for i in range(s):
            dist = 0.0
            for j in range(d):
                diff = x[rows[i], j] - point[j]
                dist += diff * diff
            if dist > best_dist:
                best, best_dist = i, dist
        ends[end] = rows[best]
        for j in range(d):
            point[j] = x[rows[best], j]
    proj = np.empty(s)
    for i in range(s):
        total = 0.0
        for j in range(d):
            total += x[rows[i], j] * (x[ends[1], j] - x[ends[0], j])
        proj[i] = total
    order = np.argsort(proj)
    by_axis = rows[:s][order]
    # sse[0, i]: SSE of by_axis[:i + 1]; sse[1, i]: of by_axis[i:] (added from the end), by
    # running sums.
    sse = np.empty((2, s))
    for side in range(2):
        totals = np.zeros(d)
        squares = 0.0
        for step in range(s):
            i = step if side == 0 else s - 1 - step
            for j in range(d):
                v = x[by_axis[i], j]
                totals[j] += v
                squares += v * v
            norm = 0.0
            for j in range(d):
                norm += totals[j] * totals[j]
            sse[side, i] = squares - norm / (step + 1)
    # Candidate cuts by SSE, best first, then the stratified split.
    cuts = np.empty(max(s - 2 * k + 1, 0), dtype=np.int64)
    scores = np.empty(cuts.shape[0])
    for i in range(cuts.shape[0]):
        cuts[i] = k + i
        scores[i] = sse[0, cuts[i] - 1] + sse[1, cuts[i]]
    whole = sse[0, s - 1]
    ranked = np.argsort(scores)
    best_score = limit if limit >= 0 else whole - 1e-9 * max(whole, 1.0)
    best_cut = 0
    for attempt in range(min(CUT_TRIES, ranked.shape[0])):
        cut = cuts[ranked[attempt]]
        if scores[ranked[attempt]] >= best_score:
            break
        if _group_ok(by_axis, cut, t, kinds, codes, refs, prefix, offsets, n_refs, buf) and (
            _group_ok(by_axis[cut:], s - cut, t, kinds, codes, refs, prefix, offsets, n_refs, buf)
        ):
            best_score = scores[ranked[attempt]]
            best_cut = cut
            for i in range(s):
                out[i] = by_axis[i]
            break
    # Stratified halves: the rows sorted by the first attribute's code (ties by projection),
    # each consecutive pair sending its lower projection to the first half; then the same along
    # the axis between the halves' centroids (the first half taking the lower projections).
    half = s // 2
    strat = np.empty(s, dtype=np.int64)
    strat_best = np.empty(s, dtype=np.int64)
    strat_score = np.inf
    key = np.empty(s)
    rank = np.empty(s, dtype=np.int64)
    axis = np.empty(d)
    for _ in range(3):
        order_proj = np.argsort(proj)
        for i in range(s):
            rank[order_proj[i]] = i
        for i in range(s):
            code = codes[0, rows[i]] if kinds.shape[0] > 0 else 0
            key[i] = float(code) * s + rank[i]
        order = np.argsort(key)
        low = 0
        high = half
        i = 0
        while i + 1 < s:
            first, second = order[i], order[i + 1]
            if proj[first] > proj[second]:
                first, second = second, first
            if low < half:
                strat[low] = rows[first]
                low += 1
            else:
                strat[high] = rows[first]
                high += 1
            strat[high] = rows[second]
            high += 1
            i += 2
        if i < s:
            strat[high] = rows[order[i]]
        score = _sse_of_rows(x, strat[:half], half) + _sse_of_rows(x, strat[half:], s - half)
        if score >= strat_score:
            break
        strat_score = score
        for i in range(s):
            strat_best[i] = strat[i]
        for j in range(d):
            axis[j] = 0.0
        for i in range(s):
            weight = 1.0 / half if i < half else -1.0 / (s - half)
            for j in range(d):
                axis[j] += weight * x[strat[i], j]
        for i in range(s):
            total = 0.0
            for j in range(d):
                total -= x[rows[i], j] * axis[j]
            proj[i] = total
    if (
        strat_score < best_score
        and _group_ok(strat_best, half, t, kinds, codes, refs, prefix, offsets, n_refs, buf)
        and _group_ok(
            strat_best[half:], s - half, t, kinds, codes, refs, prefix, offsets, n_refs, buf
        )
    ):
        for i in range(s):
            out[i] = strat_best[i]
        best_cut = half
    return best_cut


@njit(f"boolean({_RI}, int64, float64, {_ATTRIBUTES}, int64[::1])", cache=True)
def _group_ok(rows, s, t, kinds, codes, refs, prefix, offsets, n_refs, buf) -> bool:
    """Whether the group ``rows[:s]`` has EMD ``<= t`` for every (non-opaque) attribute: its
    exact numerator from its sorted codes, one division (as the distances' ``cluster_emd``)."""
    if t == np.inf:
        return True
    for a in range(kinds.shape[0]):
        if kinds[a] == OPAQUE:
            continue
        keys = np.empty(s)
        for i in range(s):
            buf[i] = codes[a, rows[i]]
            keys[i] = buf[i]  # exact: codes are below 2**53
        order = _stable_order(keys)
        sorted_codes = np.empty(s, dtype=np.int64)
        for i in range(s):
            sorted_codes[i] = buf[order[i]]
        ref = refs[offsets[a] : offsets[a + 1]]
        pre = prefix[offsets[a] : offsets[a + 1]]
        n_ref = n_refs[a]
        emd = 0.0
        if kinds[a] == ORDERED and ref.shape[0] > 1:
            top = ref.shape[0] - 1
            # sum over the segments [codes[r], codes[r + 1]) of constant F = r + 1 of
            # |n_ref F - s ref[i]| (as tclose.kernels.emd.numerator_sorted)
            total = s * pre[min(sorted_codes[0], top)]
            for r in range(s):
                lo = sorted_codes[r]
                hi = sorted_codes[r + 1] if r + 1 < s else top
                if hi <= lo:
                    continue
                v = n_ref * (r + 1)
                p, b = lo, hi  # the first p with s * ref[p] >= v
                while p < b:
                    mid = (p + b) // 2
                    if s * ref[mid] >= v:
                        b = mid
                    else:
                        p = mid + 1
                total += (
                    v * (p - lo) - s * (pre[p] - pre[lo]) + s * (pre[hi] - pre[p]) - v * (hi - p)
                )
            emd = float(total) / float(n_ref * s * top)
        elif kinds[a] == NOMINAL:
            # sum_v |N c_v - s G_v| = s N + sum_{present v} (|N c_v - s G_v| - s G_v)
            total = s * n_ref
            r = 0
            while r < s:
                v = sorted_codes[r]
                c = 0
                while r < s and sorted_codes[r] == v:
                    c += 1
                    r += 1
                g = s * ref[v]
                total += abs(n_ref * c - g) - g
            emd = float(total) / float(2 * n_ref * s)
        if emd > t:
            return False
    return True


@njit("int64[::1](readonly(float64[::1]))", cache=True)
def _stable_order(keys: np.ndarray) -> np.ndarray:
    """The positions of ``keys`` in ascending order, equal keys in position order:
    ``np.argsort(keys, kind="stable")`` by a bottom-up merge sort, without Numba's sort
    machinery (compiled on its own for every kind and type). Keys are finite. (The same as
    :func:`tclose.kernels.k_first._stable_order`: each file keeps its own copy, see
    ``_compiled.py``.)"""
    n = keys.shape[0]
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        order[i] = i
    merged = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            a, b = lo, mid
            for out in range(lo, hi):
                if b < hi and (a == mid or keys[order[b]] < keys[order[a]]):
                    merged[out] = order[b]
                    b += 1
                else:
                    merged[out] = order[a]
                    a += 1
        order, merged = merged, order
        width *= 2
    return order


@njit(f"int64({_RI}, {_RI}, int64, int64[::1])", cache=True)
def _gather(head, nxt, c, out) -> int:
    """Rows of cluster ``c`` into ``out``; returns how many."""
    count = 0
    row = head[c]
    while row != -1:
        out[count] = row
        count += 1
        row = nxt[row]
    return count


@njit(
    f"void({_X}, int64[::1], int64[::1], int64[::1], int64[::1], int64[::1], float64[:, ::1],"
    " int64, int64, int64)",
    cache=True,
)
def _relabel(x, labels, head, nxt, prv, size, sums, row, src, dst) -> None:
    """Move ``row`` from cluster ``src`` to ``dst`` (lists, sizes, sums, label): out of
    ``src``'s doubly linked list, to the head of ``dst``'s."""
    if prv[row] == -1:
        head[src] = nxt[row]
    else:
        nxt[prv[row]] = nxt[row]
    if nxt[row] != -1:
        prv[nxt[row]] = prv[row]
    nxt[row] = head[dst]
    prv[row] = -1
    if head[dst] != -1:
        prv[head[dst]] = row
    head[dst] = row
    labels[row] = dst
    size[src] -= 1
    size[dst] += 1
    for j in range(x.shape[1]):
        sums[src, j] -= x[row, j]
        sums[dst, j] += x[row, j]


@njit(f"float64({_X}, int64, readonly(float64[:, ::1]), int64, int64)", cache=True)
def _sq_norm_dist(x, row, sums, c, s) -> float:
    """``|x[row] - sums[c] / s|^2``."""
    total = 0.0
    for j in range(x.shape[1]):
        diff = x[row, j] - sums[c, j] / s
        total += diff * diff
    return total


@njit(f"boolean({_RI2}, {_RI}, int64, int64, boolean)", cache=True)
def _same_codes(codes, kinds, r, u, only_opaque) -> bool:
    for a in range(kinds.shape[0]):
        if (kinds[a] == OPAQUE or not only_opaque) and codes[a, r] != codes[a, u]:
            return False
    return True


@njit(f"float64({_X}, {_RI}, int64)", cache=True)
def _sse_of_rows(x, rows, s) -> float:
    d = x.shape[1]
    total = np.zeros(d)
    squares = 0.0
    for i in range(s):
        for j in range(d):
            v = x[rows[i], j]
            total[j] += v
            squares += v * v
    norm = 0.0
    for j in range(d):
        norm += total[j] * total[j]
    return squares - norm / s
