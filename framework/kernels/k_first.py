"""Algorithm 2 of the paper: k-anonymity-first, t-closeness-aware microaggregation.

An MDAV-like outer loop over the unclustered records ``X'``::

    while X' is not empty:
        x_a = centroid of X';  x_0 = record of X' farthest from x_a;  GenerateCluster(x_0)
        if X' is not empty:    x_1 = record of X' farthest from x_0;  GenerateCluster(x_1)

``GenerateCluster(x)``: if ``|X'| < 2k`` the cluster is all of ``X'``. Otherwise ``C`` is ``x`` and
the ``k - 1`` records of ``X'`` closest to it, and the other records of ``X'``, ordered by distance
to ``x``, are the candidates. While ``EMD(C) > t + EMD_TOLERANCE`` and candidates remain, the next
candidate ``y`` is considered: ``y'`` is the member of ``C`` that minimizes
``EMD(C + {y} - {y'})``, and the swap is made if that EMD is lower than ``EMD(C)``. ``y`` leaves
the candidate list either way, and so does a swapped-out ``y'``; both stay unclustered, available
to later clusters (the ``X'`` that the paper's pseudocode shrinks inside GenerateCluster is this
local candidate list, not the global set). With several confidential attributes, ``EMD`` is the
largest over the attributes. The clusters do not all satisfy t: the merge loop
(:func:`~tclose.kernels.merge.merge_until_t_close`) finishes the job, as in the paper.

Conventions: distances are squared Euclidean on the standardized QIs, summed over the columns in
order (no fused multiply-add), and the centroid of ``X'`` is the sum of its rows in ascending row
order divided by ``|X'|``. Every tie (farthest record, closest records, next candidate, which
``y'``) goes to the lowest row index, except that ``x`` is always the first member of its ``C``.

Making it fast without changing the result (the paper's cost is ``O(n^3/k)``; the worst cases
are tables whose QIs follow the confidential order, where almost every candidate is swapped in):

- Exact swap evaluation in ``O(k)``. A record of code ``c`` swapped for a member of code ``z``
  changes the cluster's cumulative counts ``F`` by ``+1`` on ``[c, z)`` (if ``c < z``) or ``-1``
  on ``[z, c)`` (if ``c > z``). With ``D_i = n F_i - s G_i`` (see
  :mod:`~tclose.kernels.emd`), ``Hp(c) = sum_{i<c} |D_i + n| - |D_i|`` and
  ``Hm(c) = sum_{i<c} |D_i - n| - |D_i|``, the exact numerator changes by ``Hp(z) - Hp(c)``
  (``c < z``) or ``Hm(c) - Hm(z)`` (``c > z``). A table of the segments between the members'
  codes (:func:`_build_table`, rebuilt after each swap in ``O(k)`` from thresholds computed once)
  gives ``Hp`` and ``Hm`` at any code in ``O(1)`` from prefix sums, so the ``k`` possible swaps
  of a candidate cost ``O(k)`` (recomputing ``k`` EMDs would cost ``O(k^2 log m)``). The EMDs
  compared are ``float(E') / float(n s (m - 1))`` of the exact integers: bit for bit the values a
  recomputation gives, so every decision and tie is the same.
- Candidates that cannot be swapped in are passed in ``O(1)``: the code improves on some member
  iff ``Hp(c)`` exceeds the least ``Hp`` of the member codes above it or ``Hm(c)`` is below the
  greatest ``Hm`` of those below (:func:`_candidate_improves`). With several attributes the test is
  made on the attribute with the largest EMD: a necessary condition for a swap.
- Nominal attributes (:class:`~tclose.kernels.nominal.TreeParts`, the equal distance or
  a hierarchy) keep the gaps of the cluster's counts per tree node; a swap changes the nodes on
  two leaf-to-root paths, so its exact numerator change costs ``O(H)``. Whether a value improves
  on some member is cached per value until the next swap.
- The order of the candidates. The next 32 are selected in one pass (most scans end there); the
  rest are spread over at most 256 buckets between quantiles of a sample of the keys (balanced
  whatever the distribution of the distances), and a bucket is sorted when the scan reaches it. The old
  kernel searched its (equal-width, so on skewed distances very unequal) buckets again after
  every swap: ``O(n)`` per swap, the ``O(n^3/k)`` of the worst cases.

So a GenerateCluster costs ``O(|X'| (d + log |X'|))`` plus ``O(k)`` per candidate swapped in.
When ``t`` is out of reach (e.g. ``k = 2``, ``t = 0.05``) every scan runs to the last candidate:
``O(n^2 / k)`` over the run, each candidate costing a few comparisons. Arrays are passed to the
compiled helpers one by one (tuples of arrays cost reference counting on every call), and all
of this module's compiled code calls only compiled functions of this module: Numba's cache
checks only the file of the function it caches (see ``_compiled.py``; a test enforces it).

The compiled path serves distances that offer
:class:`~tclose.kernels.emd.OrderedParts` (an exact
:class:`~tclose.kernels.emd.OrderedEMD`, or any distance with an ``ordered_parts()``
method) or :class:`~tclose.kernels.nominal.TreeParts` (``tree_parts()``: a
:class:`~tclose.kernels.nominal.NominalEMD`). Any other
:class:`~tclose.interfaces.FittedDistance` goes through a plain path that evaluates the ``k``
possible swaps of every candidate with ``emd_of_counts`` (``O(k m)`` each): same result, slow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from tclose.base.jit import njit
from tclose.interfaces import EMD_TOLERANCE, FittedDistance
from tclose.kernels.emd import OrderedParts, ordered_parts
from tclose.kernels.nominal import TreeParts, tree_parts

__all__ = ["k_first"]

#: Seconds between two calls of the ``progress`` callable of :func:`k_first`.
PROGRESS_INTERVAL = 0.5


def k_first(
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Partition the rows with the k-anonymity-first algorithm (Algorithm 2 of the paper).

    Args:
        x: ``float64 (n, d)`` quasi-identifiers, standardized.
        distances: one fitted distance per confidential attribute, each over the same ``n`` rows.
        k: minimum cluster size, ``1 <= k``.
        t: t-closeness level in ``(0, 1]`` that the swaps aim at.
        progress: called as ``progress(done, n)`` with the rows clustered so far, at most every
            :data:`PROGRESS_INTERVAL` seconds and once at the end (between two clusters, never
            inside the compiled loops).

    Returns:
        ``int64 (n,)`` labels ``0..L-1`` in order of cluster creation. Every cluster has exactly
        ``k`` rows except the last, which takes the ``k..2k-1`` records left (all ``n`` if
        ``n < 2k``). Clusters may exceed ``t``: run
        :func:`~tclose.kernels.merge.merge_until_t_close` afterwards.

    Raises:
        ValueError: on inconsistent shapes or an out-of-range parameter.

    Example:
        >>> import numpy as np
        >>> from tclose.kernels.emd import OrderedEMD
        >>> x = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
        >>> charge = OrderedEMD.fit(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
        >>> k_first(x, [charge], k=2, t=0.2).tolist()
        [2, 1, 0, 1, 0, 2]
    """
    x, k, t = _validate(x, distances, k, t)
    n = x.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    ordered = [ordered_parts(d) for d in distances]
    trees = [tree_parts(d) if o is None else None for d, o in zip(distances, ordered)]
    if all(o is not None or tr is not None for o, tr in zip(ordered, trees)):
        generate: _CompiledCluster | _GenericCluster = _CompiledCluster(
            [o for o in ordered if o is not None], [tr for tr in trees if tr is not None], k, t
        )
    else:
        generate = _GenericCluster(distances, k, t)
    rows = np.arange(n, dtype=np.int64)  # the unclustered records, ascending, in rows[:size]
    xt = np.array(x.T, order="C")  # their QIs (a copy), column-major (d, n), like ``rows``
    dist = np.empty(n)  # their squared distances to the current point
    size = n
    label = 0
    reported = time.monotonic()
    while size:
        _distances(xt, size, -1, dist)  # to the centroid of the records left
        source = int(np.argmax(dist[:size]))  # x_0; argmax ties go to the lowest row
        for second in (False, True):
            if second:  # x_1: farthest from x_0's point among those left
                if not size:
                    break
                source = int(np.argmax(dist[:size]))
            _distances(xt, size, source, dist)
            members = generate(rows[:size], dist[:size], source)
            labels[rows[members]] = label
            label += 1
            size = _remove(members, size, rows, xt, dist)
        if progress is not None and time.monotonic() - reported >= PROGRESS_INTERVAL:
            progress(n - size, n)
            reported = time.monotonic()
    if progress is not None:
        progress(n, n)
    return labels


def _first_members(dist: np.ndarray, source: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The source and the ``k - 1`` closest others; the key that orders all candidates.

    Returns:
        ``(positions sorted ascending, key)`` where ``key`` is ``dist`` with the source at ``-1``.
    """
    key = dist.copy()
    key[source] = -1.0
    return np.sort(_next_closest(key, -np.inf, -1, k)), key


class _CompiledCluster:
    """GenerateCluster for ordered attributes (:class:`OrderedParts`) and nominal ones
    (:class:`TreeParts`), compiled (see the module doc)."""

    def __init__(
        self, ordered: Sequence[OrderedParts], trees: Sequence[TreeParts], k: int, t: float
    ) -> None:
        self.k, self.limit = k, t + EMD_TOLERANCE
        n = (ordered[0] if ordered else trees[0]).codes.shape[0]
        self.o_codes = _stack([p.codes for p in ordered], n)
        self.o_off = _offsets([p.cum_counts.shape[0] for p in ordered])
        self.o_cum = _concat([p.cum_counts for p in ordered])
        self.o_cuts = _cuts(ordered, k)
        self.o_prefix = _concat([p.cum_prefix for p in ordered])
        self.o_rows = np.array([p.table_rows for p in ordered], dtype=np.int64)
        self.tables = np.empty((len(ordered), k + 1, _COLUMNS), dtype=np.int64)
        self.n_segments = np.zeros(len(ordered), dtype=np.int64)
        self.segment_of = np.zeros((len(ordered), k), dtype=np.int64)
        self.order = np.zeros(k, dtype=np.int64)
        slots = np.cumsum([0] + [p.slot_node.shape[0] for p in trees])
        nodes = np.cumsum([0] + [p.node_weight.shape[0] for p in trees])
        self.t_codes = _stack([p.codes for p in trees], n)
        self.t_off = _offsets([p.path_ptr.shape[0] for p in trees])
        self.path_ptr = _concat([p.path_ptr + o for p, o in zip(trees, _path_starts(trees))])
        self.path_slot = _concat([p.path_slot + o for p, o in zip(trees, slots)])
        self.slot_node = _concat([p.slot_node + o for p, o in zip(trees, nodes)])
        self.slot_count = _concat([p.slot_count for p in trees])
        self.slot_off = slots.astype(np.int64)
        self.node_off = nodes.astype(np.int64)
        self.node_weight = _concat([p.node_weight for p in trees])
        self.t_rows = np.array([p.table_rows for p in trees], dtype=np.int64)
        self.t_height = np.array([p.height for p in trees], dtype=np.int64)
        self.gaps = np.zeros(self.slot_node.shape[0], dtype=np.int64)
        self.pos = np.zeros(self.node_weight.shape[0], dtype=np.int64)
        self.neg = np.zeros(self.node_weight.shape[0], dtype=np.int64)
        self.stamp = np.zeros(self.path_ptr.shape[0], dtype=np.int64)
        self.verdict = np.zeros(self.path_ptr.shape[0], dtype=np.bool_)
        self.generation = np.zeros(1, dtype=np.int64)

    def __call__(self, rows: np.ndarray, dist: np.ndarray, source: int) -> np.ndarray:
        if rows.size < 2 * self.k:
            return np.arange(rows.size)
        members, key = _first_members(dist, source, self.k)
        return _generate(
            members, key, rows,
            self.o_codes, self.o_off, self.o_cum, self.o_cuts, self.o_prefix, self.o_rows,
            self.tables,
            self.n_segments, self.segment_of, self.order,
            self.t_codes, self.t_off, self.path_ptr, self.path_slot, self.slot_node,
            self.slot_count, self.slot_off, self.node_off, self.node_weight, self.t_rows,
            self.t_height, self.gaps, self.pos, self.neg, self.stamp, self.verdict,
            self.generation, self.limit,
        )  # fmt: skip


def _cuts(ordered: Sequence[OrderedParts], k: int) -> np.ndarray:
    """``cuts[a, 0, f + 1]`` (``cuts[a, 1, f + 1]``): the first code ``i < m - 1`` of attribute
    ``a`` with ``k cum[i] > f n`` (``>= f n``), ``m - 1`` if none, for ``f = -1 .. k + 1``."""
    cuts = np.zeros((len(ordered), 2, k + 3), dtype=np.int64)
    for a, p in enumerate(ordered):
        scaled = k * p.cum_counts[:-1].astype(np.int64)
        thresholds = np.arange(-1, k + 2, dtype=np.int64) * int(p.table_rows)
        cuts[a, 0] = np.searchsorted(scaled, thresholds, side="right")
        cuts[a, 1] = np.searchsorted(scaled, thresholds, side="left")
    return cuts


def _stack(codes: list[np.ndarray], n: int) -> np.ndarray:
    if not codes:
        return np.zeros((0, n), dtype=np.int64)
    return np.ascontiguousarray(np.stack(codes), dtype=np.int64)


def _offsets(sizes: list[int]) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    return np.ascontiguousarray(np.concatenate(arrays), dtype=np.int64)


def _path_starts(trees: Sequence[TreeParts]) -> list[int]:
    return np.cumsum([0] + [p.path_slot.shape[0] for p in trees])[:-1].tolist()


class _GenericCluster:
    """GenerateCluster for any fitted distance, through ``emd_of_counts`` (slow, plain)."""

    def __init__(self, distances: Sequence[FittedDistance], k: int, t: float) -> None:
        self.distances, self.k, self.t = distances, k, t

    def _emd(self, hists: list[np.ndarray]) -> np.ndarray:
        """Largest EMD over the attributes of groups given by one ``(g, m)`` histogram each."""
        pairs = zip(self.distances, hists, strict=True)
        return np.max([d.emd_of_counts(h) for d, h in pairs], axis=0)

    def __call__(self, rows: np.ndarray, dist: np.ndarray, source: int) -> np.ndarray:
        if rows.size < 2 * self.k:
            return np.arange(rows.size)
        members, key = _first_members(dist, source, self.k)
        hists = [
            np.bincount(d.codes[rows[members]], minlength=d.m)[None, :] for d in self.distances
        ]
        current = float(self._emd(hists)[0])
        if current <= self.t + EMD_TOLERANCE:
            return members
        order = np.lexsort((np.arange(rows.size), key))[self.k :]
        for y in order:
            swapped = []
            for d, h in zip(self.distances, hists, strict=True):
                trial = np.repeat(h, self.k, axis=0)
                trial[:, d.codes[rows[y]]] += 1
                trial[np.arange(self.k), d.codes[rows[members]]] -= 1
                swapped.append(trial)
            emds = self._emd(swapped)
            out = int(np.argmin(emds))  # members ascending: ties go to the lowest row
            if emds[out] < current:
                current = float(emds[out])
                hists = [trial[out : out + 1] for trial in swapped]
                members[out] = y
                members.sort()
                if current <= self.t + EMD_TOLERANCE:
                    break
        return members


# Columns of the segment table of an ordered attribute (one line per segment of constant F).
_LO, _V, _HP, _HM, _A, _B, _A2, _B2, _T, _U, _U0 = range(11)
_COLUMNS = 11
_MAX = np.iinfo(np.int64).max
_MIN = np.iinfo(np.int64).min
#: Candidates selected one pass ahead before the rest are bucketed (most scans stop within them).
_FIRST_BATCH = 32
#: Keys sampled to place the bucket boundaries of the candidates after the first batch.
_SAMPLE = 512


#: Signature parts: read-only ``int64`` arrays of one, two and three dimensions.
_RI = "readonly(int64[::1])"
_RI2 = "readonly(int64[:, ::1])"
_RI3 = "readonly(int64[:, :, ::1])"


@njit(
    f"int64[::1]({_RI}, readonly(float64[::1]), {_RI}, {_RI2}, {_RI}, {_RI}, {_RI3}, {_RI}, {_RI},"
    f" int64[:, :, ::1], int64[::1], int64[:, ::1], int64[::1], {_RI2}, {_RI}, {_RI}, {_RI}, {_RI},"
    f" {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, int64[::1], int64[::1], int64[::1], int64[::1],"
    " boolean[::1], int64[::1], float64)",
    cache=True,
)
def _generate(
    members, key, rows,
    o_codes, o_off, o_cum, o_cuts, o_prefix, o_rows, tables, n_segments, segment_of, order,
    t_codes, t_off, path_ptr, path_slot, slot_node, slot_count, slot_off, node_off,
    node_weight, t_rows, t_height, gaps, pos, neg, stamp, verdict, generation,
    limit,
):  # fmt: skip
    """The swap loop of GenerateCluster (see the module doc).

    Args:
        members: ``(k,)`` positions (into ``rows``) of the first members, ascending.
        key: ``(|X'|,)`` distance of each unclustered record to the source (source at ``-1``);
            candidates come in the order (key, position).
        rows: ``(|X'|,)`` row of each position, ascending.
        o_codes, o_off, o_cum, o_prefix, o_rows: the ordered attributes'
            :class:`OrderedParts`, concatenated; ``o_cuts``: see :func:`_cuts`; ``tables``,
            ``n_segments``, ``segment_of``, ``order``: their scratch (see :func:`_build_table`).
        t_codes, ..., t_height: the nominal attributes' :class:`TreeParts`, concatenated;
            ``gaps``, ``pos``, ``neg``: their state; ``stamp``, ``verdict``, ``generation``:
            cached answers of :func:`_candidate_improves`, per value.
        limit: ``t + EMD_TOLERANCE``.

    Returns:
        the final members' positions, ascending.

    Arrays are passed one by one, not in tuples: a call with tuples of arrays costs hundreds of
    nanoseconds of reference counting, more than the work of the hot helpers. The set-up and the
    ordering of the candidates are written out here, not in helpers: each compiled helper would
    be compiled on its own and optimized again inside its caller.
    """
    members = members.copy()
    s = members.shape[0]
    n_ordered = o_codes.shape[0]
    n_attributes = n_ordered + t_codes.shape[0]
    numer = np.zeros(n_attributes, dtype=np.int64)
    emds = np.zeros(n_attributes)
    delta = np.zeros((n_attributes, s), dtype=np.int64)
    # The exact numerators (numer) and EMDs (emds) of the first members, ordered attributes
    # first, and the attributes' states for them (segment tables, nominal gaps).
    codes = np.empty(s, dtype=np.int64)
    for a in range(n_ordered):
        _build_table(a, members, rows, o_codes, o_off, o_cuts, o_prefix, o_rows, tables,
                     n_segments, segment_of, order)  # fmt: skip
        for q in range(s):  # the members' codes, sorted (insertion: k is small)
            c = o_codes[a, rows[members[q]]]
            p = q
            while p > 0 and codes[p - 1] > c:
                codes[p] = codes[p - 1]
                p -= 1
            codes[p] = c
        # sum over the segments [codes[r], codes[r + 1]) of constant F = r + 1 (the same sum
        # as tclose.kernels.emd.numerator_sorted; F = 0 below the first code)
        n = o_rows[a]
        cum, prefix = o_cum[o_off[a] : o_off[a + 1]], o_prefix[o_off[a] : o_off[a + 1]]
        top = cum.shape[0] - 1
        total = s * prefix[min(codes[0], top)]
        for r in range(s):
            lo = codes[r]
            hi = codes[r + 1] if r + 1 < s else top
            if hi <= lo:
                continue
            v = n * (r + 1)
            p, b = lo, hi  # the first p with s * cum[p] >= v
            while p < b:
                mid = (p + b) // 2
                if s * cum[mid] >= v:
                    b = mid
                else:
                    p = mid + 1
            total += (
                v * (p - lo)
                - s * (prefix[p] - prefix[lo])
                + s * (prefix[hi] - prefix[p])
                - v * (hi - p)
            )
        numer[a] = total
        emds[a] = _ordered_emd(total, n, s, top + 1)
    for a in range(t_codes.shape[0]):  # nominal attribute a's gaps for the members
        for node in range(node_off[a], node_off[a + 1]):
            pos[node] = 0
            neg[node] = 0
        for slot in range(slot_off[a], slot_off[a + 1]):
            gaps[slot] = -s * slot_count[slot]
            neg[slot_node[slot]] += s * slot_count[slot]
        for q in range(s):
            c = t_codes[a, rows[members[q]]]
            for p in range(path_ptr[t_off[a] + c], path_ptr[t_off[a] + c + 1]):
                _move_gap(path_slot[p], t_rows[a], gaps, pos, neg, slot_node)
        total = 0
        for node in range(node_off[a], node_off[a + 1]):
            total += node_weight[node] * min(pos[node], neg[node])
        numer[n_ordered + a] = total
        emds[n_ordered + a] = _tree_emd(total, t_rows[a], s, t_height[a])
    generation[0] += 1  # forget the cached verdicts of the previous cluster
    target = 0  # the attribute of the largest EMD (the first of equals), as np.argmax(emds)
    for a in range(n_attributes):
        if emds[a] > emds[target]:
            target = a
    if emds[target] <= limit:
        return members
    last = members[0]  # the k-th closest member: candidates come after it in (key, position)
    for j in members:
        if key[j] > key[last] or (key[j] == key[last] and j > last):
            last = j
    # Phase 0: most scans stop early, so first the next few candidates, in order. Phase 1: the
    # rest, in buckets of keys, each sorted when the scan reaches it.
    stream = _next_closest(key, key[last], last, _FIRST_BATCH)
    bounds = np.empty(2, dtype=np.int64)
    bounds[0], bounds[1] = 0, stream.shape[0]
    for phase in range(2):
        if phase == 1:
            if stream.shape[0] < _FIRST_BATCH:
                break
            stream, bounds = _buckets(key, stream[-1])
        for bucket in range(bounds.shape[0] - 1):
            lo, hi = bounds[bucket], bounds[bucket + 1]
            if phase == 1 and hi - lo <= 32:  # sort the bucket by (key, position): insertion
                for i in range(lo + 1, hi):
                    j = stream[i]
                    p = i
                    while p > lo and key[stream[p - 1]] > key[j]:
                        stream[p] = stream[p - 1]
                        p -= 1
                    stream[p] = j
            elif phase == 1:  # or a stable sort by key (positions are ascending in a bucket)
                part = stream[lo:hi].copy()
                values = np.empty(hi - lo)
                for i in range(hi - lo):
                    values[i] = key[part[i]]
                ranked = _stable_order(values)
                for i in range(hi - lo):
                    stream[lo + i] = part[ranked[i]]
            for i in range(lo, hi):
                j = stream[i]
                if not _candidate_improves(target, j, members, rows, o_codes, o_off, o_prefix,
                                           o_rows, tables, n_segments, t_codes, t_off, path_ptr,
                                           path_slot, slot_node, node_weight, t_rows, gaps, pos,
                                           neg, stamp, verdict, generation):  # fmt: skip
                    continue
                if _try_swap(j, members, rows, numer, emds, delta, o_codes, o_off, o_cuts,
                             o_prefix, o_rows, tables, n_segments, segment_of, order, t_codes,
                             t_off, path_ptr, path_slot, slot_node, node_weight, t_rows,
                             t_height, gaps, pos, neg):  # fmt: skip
                    generation[0] += 1  # the cached verdicts are stale
                    target = 0
                    for a in range(n_attributes):
                        if emds[a] > emds[target]:
                            target = a
                    if emds[target] <= limit:
                        return members
    return members


@njit(
    f"boolean(int64, int64, {_RI}, {_RI}, {_RI2}, {_RI}, {_RI}, {_RI}, int64[:, :, ::1],"
    f" int64[::1], {_RI2}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, int64[::1], int64[::1],"
    " int64[::1], int64[::1], boolean[::1], int64[::1])",
    cache=True,
    _nrt=False,
)
def _candidate_improves(
    target, j, members, rows, o_codes, o_off, o_prefix, o_rows, tables, n_segments, t_codes,
    t_off, path_ptr, path_slot, slot_node, node_weight, t_rows, gaps, pos, neg, stamp, verdict,
    generation,
) -> bool:  # fmt: skip
    """Whether candidate ``j`` can lower the numerator of attribute ``target`` (the one of the
    greatest EMD): :func:`_ordered_improves`, or :func:`_tree_improves` cached per value until
    the next swap (``stamp``, ``verdict``, ``generation``).

    Compiled without the Numba runtime (``_nrt=False``), as the other per-candidate helpers: its
    arrays are then passed without reference counting. Inlined, or compiled with the runtime, it
    made the scan up to 3.5 times slower (nominal attributes, 6,000 rows); with the two checks
    written out in it, 1.4 to 1.8 times (the compiler then no longer inlines it into the
    scan)."""
    n_ordered = o_codes.shape[0]
    if target < n_ordered:
        return _ordered_improves(target, o_codes[target, rows[j]], tables, n_segments, o_prefix,
                                 o_off[target], o_rows[target], members.shape[0])  # fmt: skip
    a = target - n_ordered
    slot = t_off[a] + t_codes[a, rows[j]]
    if stamp[slot] != generation[0]:  # not cached since the last swap
        stamp[slot] = generation[0]
        verdict[slot] = _tree_improves(a, j, members, rows, t_codes, t_off, path_ptr, path_slot,
                                       slot_node, node_weight, t_rows[a], gaps, pos, neg)  # fmt: skip
    return verdict[slot]


@njit(
    f"boolean(int64, int64, int64[:, :, ::1], int64[::1], {_RI}, int64, int64, int64)",
    cache=True,
    _nrt=False,
)
def _ordered_improves(a, c, tables, n_segments, prefix, base, n, s) -> bool:
    """Whether replacing some member by a row of code ``c`` lowers the exact numerator of
    ordered attribute ``a``: ``Hp(c)`` above the least ``Hp`` of the member codes above ``c``,
    or ``Hm(c)`` below the greatest ``Hm`` of those below (see :func:`_build_table`)."""
    q, hp, hm = _locate(a, c, tables, n_segments, prefix, base, n, s)
    if hp > tables[a, q, _T]:
        return True
    if c > tables[a, q, _LO]:
        return hm < tables[a, q, _U]
    return q > 0 and hm < tables[a, q, _U0]


@njit(
    f"boolean(int64, int64, {_RI}, {_RI}, {_RI2}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, int64, {_RI},"
    f" {_RI}, {_RI})",
    cache=True,
    _nrt=False,
)
def _tree_improves(
    a, j, members, rows, t_codes, t_off, path_ptr, path_slot, slot_node, node_weight, n, gaps,
    pos, neg,
) -> bool:  # fmt: skip
    """Whether replacing some member by candidate ``j`` lowers the exact numerator of nominal
    attribute ``a`` (``O(k H)``; the caller caches the answer per value until the next swap)."""
    c = t_codes[a, rows[j]]
    for q in range(members.shape[0]):
        z = t_codes[a, rows[members[q]]]
        change = _tree_delta(c, z, t_off[a], path_ptr, path_slot, slot_node, node_weight, n,
                             gaps, pos, neg)  # fmt: skip
        if change < 0:
            return True
    return False


@njit(
    f"boolean(int64, int64[::1], {_RI}, int64[::1], float64[::1], int64[:, ::1], {_RI2}, {_RI},"
    f" {_RI3}, {_RI}, {_RI}, int64[:, :, ::1], int64[::1], int64[:, ::1], int64[::1], {_RI2},"
    f" {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, {_RI}, int64[::1], int64[::1], int64[::1])",
    cache=True,
    _nrt=False,
)
def _try_swap(
    y, members, rows, numer, emds, delta,
    o_codes, o_off, o_cuts, o_prefix, o_rows, tables, n_segments, segment_of, order,
    t_codes, t_off, path_ptr, path_slot, slot_node, node_weight, t_rows, t_height, gaps, pos,
    neg,
) -> bool:  # fmt: skip
    """Swap candidate ``y`` for the member ``y'`` minimizing the resulting EMD (largest over the
    attributes; ties: lowest row), if that EMD is lower than the current one.

    Each member's numerator change is exact and ``O(1)`` (ordered, from the segment table) or
    ``O(H)`` (nominal); the EMDs compared are ``float(E') / float(denominator)``, bit for bit the
    values of a recomputation. Updates ``members`` (kept ascending), ``numer``, ``emds`` and the
    attributes' states in place; returns whether the swap was made.
    """
    s = members.shape[0]
    n_ordered = o_codes.shape[0]
    for a in range(n_ordered):
        c = o_codes[a, rows[y]]
        q, hp, hm = _locate(a, c, tables, n_segments, o_prefix, o_off[a], o_rows[a], s)
        for r in range(s):
            g = segment_of[a, r]
            z = tables[a, g, _LO]
            if z > c:
                delta[a, r] = tables[a, g, _HP] - hp
            elif z < c:
                delta[a, r] = hm - tables[a, g, _HM]
            else:
                delta[a, r] = 0
    for a in range(t_codes.shape[0]):
        c = t_codes[a, rows[y]]
        for r in range(s):
            z = t_codes[a, rows[members[r]]]
            delta[n_ordered + a, r] = _tree_delta(c, z, t_off[a], path_ptr, path_slot,
                                                  slot_node, node_weight, t_rows[a], gaps,
                                                  pos, neg)  # fmt: skip
    best_out, best = -1, np.inf
    for r in range(s):  # members ascending: ties go to the lowest row
        worst = 0.0
        for a in range(n_ordered):
            m = o_off[a + 1] - o_off[a]
            worst = max(worst, _ordered_emd(numer[a] + delta[a, r], o_rows[a], s, m))
        for a in range(t_codes.shape[0]):
            e = numer[n_ordered + a] + delta[n_ordered + a, r]
            worst = max(worst, _tree_emd(e, t_rows[a], s, t_height[a]))
        if worst < best:
            best_out, best = r, worst
    current = 0.0  # emds.max()
    for a in range(emds.shape[0]):
        current = max(current, emds[a])
    if best >= current:
        return False
    for a in range(t_codes.shape[0]):  # a row of value z replaced by one of value c
        c = t_codes[a, rows[y]]
        z = t_codes[a, rows[members[best_out]]]
        for p in range(path_ptr[t_off[a] + c], path_ptr[t_off[a] + c + 1]):
            _move_gap(path_slot[p], t_rows[a], gaps, pos, neg, slot_node)
        for p in range(path_ptr[t_off[a] + z], path_ptr[t_off[a] + z + 1]):
            _move_gap(path_slot[p], -t_rows[a], gaps, pos, neg, slot_node)
    for a in range(numer.shape[0]):
        numer[a] += delta[a, best_out]
        if a < n_ordered:
            emds[a] = _ordered_emd(numer[a], o_rows[a], s, o_off[a + 1] - o_off[a])
        else:
            b = a - n_ordered
            emds[a] = _tree_emd(numer[a], t_rows[b], s, t_height[b])
    p = best_out  # members[best_out] = y, keeping the members ascending
    while p > 0 and members[p - 1] > y:
        members[p] = members[p - 1]
        p -= 1
    while p + 1 < s and members[p + 1] < y:
        members[p] = members[p + 1]
        p += 1
    members[p] = y
    for a in range(n_ordered):
        _build_table(a, members, rows, o_codes, o_off, o_cuts, o_prefix, o_rows, tables,
                     n_segments, segment_of, order)  # fmt: skip
    return True


@njit(None, inline="always")
def _ordered_emd(numer: int, n: int, s: int, m: int) -> float:
    """``float(E) / float(n * s * (m - 1))``; ``0`` when ``m == 1`` (as in the emd module)."""
    if m <= 1:
        return 0.0
    return float(numer) / float(n * s * (m - 1))


@njit(None, inline="always")
def _tree_emd(numer: int, n: int, s: int, height: int) -> float:
    """``float(E) / float(H * n * s)``, as :meth:`NominalEMD.emd_of_counts`."""
    return float(numer) / float(height * n * s)


@njit(None, inline="always")
def _locate(a, c, tables, n_segments, prefix, base, n, s) -> tuple[int, int, int]:
    """Segment ``q`` of code ``c`` for ordered attribute ``a``, and ``Hp(c)``, ``Hm(c)``."""
    q = n_segments[a] - 1
    while tables[a, q, _LO] > c:
        q -= 1
    hp = tables[a, q, _HP] + _sum_hp(tables, a, q, c, n, s, prefix, base)
    hm = tables[a, q, _HM] + _sum_hm(tables, a, q, c, n, s, prefix, base)
    return q, hp, hm


@njit(None, inline="always")
def _move_gap(slot: int, change: int, gaps, pos, neg, slot_node) -> None:
    """Add ``change`` to the gap of ``slot``, keeping its node's ``pos`` and ``neg`` sums."""
    node = slot_node[slot]
    old = gaps[slot]
    new = old + change
    pos[node] += max(new, 0) - max(old, 0)
    neg[node] += max(-new, 0) - max(-old, 0)
    gaps[slot] = new


@njit(None, inline="always")
def _node_delta(node: int, old1: int, new1: int, old2: int, new2: int, pos, neg, weight) -> int:
    """Change of ``weight * min(pos, neg)`` of ``node`` when two of its gaps change."""
    p = pos[node] + max(new1, 0) - max(old1, 0) + max(new2, 0) - max(old2, 0)
    q = neg[node] + max(-new1, 0) - max(-old1, 0) + max(-new2, 0) - max(-old2, 0)
    return weight[node] * (min(p, q) - min(pos[node], neg[node]))


@njit(
    f"int64(int64, int64, int64, {_RI}, {_RI}, {_RI}, {_RI}, int64, {_RI}, {_RI}, {_RI})",
    cache=True,
    _nrt=False,
)
def _tree_delta(c, z, base, path_ptr, path_slot, slot_node, node_weight, n, gaps, pos, neg) -> int:
    """Change of a nominal numerator when a row of value ``z`` is replaced by one of value ``c``
    (``base``: the attribute's offset in ``path_ptr``), ``O(H)``: below their lowest common
    ancestor the slots on ``c``'s path gain ``n``, those on ``z``'s lose ``n``; at it, one slot of
    each; above it, nothing."""
    if c == z:
        return 0
    c_lo, c_top = path_ptr[base + c], path_ptr[base + c + 1] - 1
    z_lo, z_top = path_ptr[base + z], path_ptr[base + z + 1] - 1
    while c_top > c_lo and z_top > z_lo and path_slot[c_top] == path_slot[z_top]:
        c_top -= 1  # walk down from the root's children while the paths agree
        z_top -= 1
    total = 0
    for p in range(c_lo, c_top):
        slot = path_slot[p]
        g = gaps[slot]
        total += _node_delta(slot_node[slot], g, g + n, 0, 0, pos, neg, node_weight)
    for p in range(z_lo, z_top):
        slot = path_slot[p]
        g = gaps[slot]
        total += _node_delta(slot_node[slot], g, g - n, 0, 0, pos, neg, node_weight)
    up, down = path_slot[c_top], path_slot[z_top]
    gu, gd = gaps[up], gaps[down]
    return total + _node_delta(slot_node[up], gu, gu + n, gd, gd - n, pos, neg, node_weight)


@njit(
    f"void(int64, {_RI}, {_RI}, {_RI2}, {_RI}, {_RI3}, {_RI}, {_RI}, int64[:, :, ::1], int64[::1],"
    " int64[:, ::1], int64[::1])",
    cache=True,
    _nrt=False,
)
def _build_table(
    a, members, rows, codes, offsets, cuts, prefix, table_rows, tables, n_segments, segment_of,
    order,
) -> None:  # fmt: skip
    """Describe, for ordered attribute ``a``, which codes can lower the members' EMD by one swap.

    The members' distinct codes ``u_1 < ... < u_r`` cut ``[0, m)`` into segments
    ``[0, u_1), [u_1, u_2), ..., [u_r, m)`` on which the count ``F`` is constant. Line ``q`` of
    the table holds, for segment ``q``: its start ``_LO``; ``_V = n F``; ``_HP``, ``_HM``: ``Hp``
    and ``Hm`` at its start; ``_A``, ``_B`` and ``_A2``, ``_B2``: the breakpoints where ``hp`` and
    ``hm`` change form inside it; ``_T``: the least ``Hp(z)`` over member codes ``z`` after the
    segment; ``_U`` and ``_U0``: the greatest ``Hm(z)`` over member codes ``z < c`` for a code
    ``c`` inside the segment, and for ``c`` at its start. ``segment_of[a, q]`` is the segment
    that member ``q`` starts. The breakpoints are the thresholds ``cuts`` (computed once: they
    depend on ``F`` only) clipped to the segment's start, so this is ``O(k)`` (members nearly
    in code order) to ``O(k^2)``.
    """
    base = offsets[a]
    n = table_rows[a]
    s = members.shape[0]
    # the members in (code, position) order: insertion sort
    for q in range(s):
        z = codes[a, rows[members[q]]]
        p = q
        while p > 0 and codes[a, rows[members[order[p - 1]]]] > z:
            order[p] = order[p - 1]
            p -= 1
        order[p] = q
    r = 0  # segment 0 is [0, u_1), with F = 0 (empty when u_1 = 0)
    tables[a, 0, _LO] = 0
    tables[a, 0, _V] = 0
    for i in range(s):
        z = codes[a, rows[members[order[i]]]]
        if i == 0 or z != tables[a, r, _LO]:
            r += 1
            tables[a, r, _LO] = z
        tables[a, r, _V] = n * (i + 1)
        segment_of[a, order[i]] = r
    tables[a, 0, _HP] = 0
    tables[a, 0, _HM] = 0
    for q in range(r + 1):
        v = tables[a, q, _V]
        lo = tables[a, q, _LO]
        f = v // n + 1  # cuts[a, _, f + j]: first code with s cum > (or >=) (F + j) n
        tables[a, q, _A] = max(lo, cuts[a, 0, f])
        tables[a, q, _B] = max(lo, cuts[a, 1, f + 1])
        tables[a, q, _A2] = max(lo, cuts[a, 0, f - 1])
        tables[a, q, _B2] = max(lo, cuts[a, 1, f])
        if q < r:
            end = tables[a, q + 1, _LO]
            tables[a, q + 1, _HP] = tables[a, q, _HP] + _sum_hp(
                tables, a, q, end, n, s, prefix, base
            )
            tables[a, q + 1, _HM] = tables[a, q, _HM] + _sum_hm(
                tables, a, q, end, n, s, prefix, base
            )
    lowest = _MAX
    for q in range(r, -1, -1):
        tables[a, q, _T] = lowest
        if q > 0:
            lowest = min(lowest, tables[a, q, _HP])
    highest = _MIN
    tables[a, 0, _U] = _MIN
    tables[a, 0, _U0] = _MIN
    for q in range(1, r + 1):
        tables[a, q, _U0] = highest
        highest = max(highest, tables[a, q, _HM])
        tables[a, q, _U] = highest
    n_segments[a] = r + 1


@njit(None, inline="always")
def _sum_hp(tables, t: int, q: int, c: int, n: int, s: int, prefix, base: int) -> int:
    """``sum_{i in [lo, c)} |D_i + n| - |D_i|`` inside segment ``q`` of attribute ``t``
    (``D_i = v - s cum_i``; ``prefix[base:]`` are the attribute's prefix sums of ``cum``).

    The term is ``n`` while ``s cum_i <= v`` (up to ``_A``), ``-n`` once ``s cum_i >= v + n``
    (from ``_B``), and ``2v + n - 2 s cum_i`` in between; ``O(1)`` with the prefix sums.
    """
    lo, v, a, b = tables[t, q, _LO], tables[t, q, _V], tables[t, q, _A], tables[t, q, _B]
    if c <= lo:
        return 0
    total = n * (min(c, a) - lo)
    end = min(c, b)
    if end > a:
        total += (2 * v + n) * (end - a) - 2 * s * (prefix[base + end] - prefix[base + a])
    if c > b:
        total -= n * (c - b)
    return total


@njit(None, inline="always")
def _sum_hm(tables, t: int, q: int, c: int, n: int, s: int, prefix, base: int) -> int:
    """``sum_{i in [lo, c)} |D_i - n| - |D_i|`` inside segment ``q`` of attribute ``t``.

    The term is ``-n`` while ``s cum_i <= v - n`` (up to ``_A2``), ``n`` once ``s cum_i >= v``
    (from ``_B2``), and ``2 s cum_i - 2v + n`` in between.
    """
    lo, v, a, b = tables[t, q, _LO], tables[t, q, _V], tables[t, q, _A2], tables[t, q, _B2]
    if c <= lo:
        return 0
    total = -n * (min(c, a) - lo)
    end = min(c, b)
    if end > a:
        total += (n - 2 * v) * (end - a) + 2 * s * (prefix[base + end] - prefix[base + a])
    if c > b:
        total += n * (c - b)
    return total


@njit("Tuple((int64[::1], int64[::1]))(readonly(float64[::1]), int64)", cache=True)
def _buckets(key: np.ndarray, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions after ``last`` in (key, position) order, grouped into buckets of keys.

    The bucket boundaries are quantiles of a sample of at most ``_SAMPLE`` keys (evenly spaced
    positions), so buckets hold about 16 records each whatever the distribution of the keys; a
    key's bucket is found by binary search among the boundaries. Keys in a lower bucket are all
    smaller, equal keys share a bucket, and inside a bucket positions are ascending (buckets are
    not sorted here: :func:`_generate` sorts each when it reaches it).

    Returns:
        ``(stream, bounds)``: bucket ``b`` is ``stream[bounds[b]:bounds[b + 1]]``.
    """
    after = np.empty(key.shape[0], dtype=np.int64)
    count = 0
    for j in range(key.shape[0]):
        kj = key[j]
        if kj > key[last] or (kj == key[last] and j > last):
            after[count] = j
            count += 1
    n_buckets = max(1, min(count // 16, _SAMPLE // 2))
    sample = np.empty(min(count, _SAMPLE))
    for i in range(sample.shape[0]):
        sample[i] = key[after[(i * count) // sample.shape[0]]]
    ranked = _stable_order(sample)
    edges = np.empty(n_buckets - 1)
    for b in range(1, n_buckets):
        edges[b - 1] = sample[ranked[(b * sample.shape[0]) // n_buckets]]
    bucket = np.empty(count, dtype=np.int64)
    bounds = np.zeros(n_buckets + 1, dtype=np.int64)
    for i in range(count):
        kj = key[after[i]]
        lo, hi = 0, n_buckets - 1  # the number of edges <= kj
        while lo < hi:
            mid = (lo + hi) // 2
            if edges[mid] <= kj:
                lo = mid + 1
            else:
                hi = mid
        b = lo
        bucket[i] = b
        bounds[b + 1] += 1
    for b in range(n_buckets):
        bounds[b + 1] += bounds[b]
    fill = bounds[:-1].copy()
    stream = np.empty(count, dtype=np.int64)
    for i in range(count):
        stream[fill[bucket[i]]] = after[i]
        fill[bucket[i]] += 1
    return stream, bounds


@njit("int64[::1](readonly(float64[::1]))", cache=True)
def _stable_order(keys: np.ndarray) -> np.ndarray:
    """The positions of ``keys`` in ascending order, equal keys in position order:
    ``np.argsort(keys, kind="stable")`` by a bottom-up merge sort, without Numba's sort
    machinery (compiled on its own for every kind and type). Keys are finite. (The same as
    :func:`tclose.kernels.refine._stable_order`: each file keeps its own copy, see
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


@njit("int64[::1](readonly(float64[::1]), float64, int64, int64)", cache=True)
def _next_closest(key: np.ndarray, after_key: float, after: int, count: int) -> np.ndarray:
    """Positions of the ``count`` smallest pairs (key, position) that come after
    ``(after_key, after)``, in that order (one pass, insertion into the ``count`` best)."""
    best = np.empty(count, dtype=np.int64)
    found = 0
    for j in range(key.shape[0]):
        kj = key[j]
        if kj < after_key or (kj == after_key and j <= after):
            continue
        if found == count and kj >= key[best[count - 1]]:
            continue
        if found < count:
            p = found
            found += 1
        else:
            p = count - 1
        while p > 0 and key[best[p - 1]] > kj:
            best[p] = best[p - 1]
            p -= 1
        best[p] = j
    return best[:found]


@njit("void(readonly(float64[:, ::1]), int64, int64, float64[::1])", cache=True)
def _distances(xt: np.ndarray, size: int, source: int, out: np.ndarray) -> None:
    """Squared Euclidean distance of the first ``size`` records of the column-major ``xt`` into
    ``out[:size]``, to the record at position ``source``, or to their mean (summed in row
    order) when ``source < 0``; summed over the columns in order, ``(0 + d_0^2) + d_1^2 ...``
    (the loop over records is the inner one, so it vectorizes without reordering any sum)."""
    point = np.empty(xt.shape[0])
    for j in range(xt.shape[0]):
        if source >= 0:
            point[j] = xt[j, source]
        else:
            total = 0.0
            for i in range(size):
                total += xt[j, i]
            point[j] = total / size
    for i in range(size):
        out[i] = 0.0
    for j in range(xt.shape[0]):
        column = xt[j]
        pj = point[j]
        for i in range(size):
            diff = column[i] - pj
            out[i] += diff * diff


@njit("int64(readonly(int64[::1]), int64, int64[::1], float64[:, ::1], float64[::1])", cache=True)
def _remove(
    members: np.ndarray, size: int, rows: np.ndarray, xt: np.ndarray, dist: np.ndarray
) -> int:
    """Remove the positions ``members`` (ascending) from the first ``size`` records of ``rows``,
    ``xt`` (column-major) and ``dist``, keeping the order of the others; returns the new size."""
    kept = members[0]
    for q in range(members.shape[0]):  # move each run between two removed positions down
        start = members[q] + 1
        stop = members[q + 1] if q + 1 < members.shape[0] else size
        length = stop - start
        if length > 0:  # kept < start: a forward copy reads each value before it is replaced
            for i in range(length):
                rows[kept + i] = rows[start + i]
                dist[kept + i] = dist[start + i]
            for j in range(xt.shape[0]):
                for i in range(length):
                    xt[j, kept + i] = xt[j, start + i]
            kept += length
    return kept


def _validate(
    x: np.ndarray, distances: Sequence[FittedDistance], k: int, t: float
) -> tuple[np.ndarray, int, float]:
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must have shape (n, d); got {x.shape}.")
    if not np.isfinite(x).all():
        raise ValueError("x must be finite.")
    if not distances:
        raise ValueError("At least one confidential attribute (fitted distance) is needed.")
    for d in distances:
        if d.codes.shape != (x.shape[0],):
            raise ValueError(
                f"Distance {d.name!r} is fitted on {d.codes.shape[0]} rows; x has {x.shape[0]}."
            )
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"The 'k' parameter of k-first must be an int >= 1. Got {k!r} instead.")
    if isinstance(t, bool) or not isinstance(t, (int, float, np.floating)) or not 0 < t <= 1:
        raise ValueError(f"The 't' parameter of k-first must be in (0, 1]. Got {t!r} instead.")
    return x, int(k), float(t)
