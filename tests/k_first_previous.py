"""A reference k-first kernel (commit d9de46c) that recomputes ``k`` EMDs per candidate: slow.

Its partitions are the definition the fast kernel must reproduce: the tests compare both on
medium inputs (too large for the pure-Python reference of ``test_k_first_kernel.py``), and
``bench/bench_kfirst_worst.py`` times it as the "before". Numba compiles it without the on-disk
cache (``cache=False``), so it never shadows or reuses the package's cache.

Its module documentation follows.

Algorithm 2 of the paper: k-anonymity-first, t-closeness-aware microaggregation.

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

Making it fast without changing the result (the paper's cost is ``O(n^3/k)``):

- Which candidates can be swapped in. A record of code ``c`` swapped for a member of code ``z``
  changes the cluster's cumulative counts ``F`` by ``+1`` on ``[c, z)`` (if ``c < z``) or ``-1`` on
  ``[z, c)`` (if ``c > z``). With ``D_i = n F_i - s G_i`` (see :mod:`~tclose.kernels.emd`),
  ``Hp(c) = sum_{i<c} |D_i + n| - |D_i|`` and ``Hm(c) = sum_{i<c} |D_i - n| - |D_i|``, the swap
  lowers the exact numerator ``E`` iff ``Hp(c) > Hp(z)`` (``c < z``) or ``Hm(c) < Hm(z)``
  (``c > z``). Between two members' codes ``F`` is constant, ``Hp`` is concave and ``Hm`` convex,
  so the codes that improve on some member form at most ``3 (k + 1)`` intervals, found in
  ``O(k log m)`` by binary searches (:func:`_mark`), recomputed only when ``C`` changes. A
  candidate with an unmarked code would be rejected and leave ``C`` unchanged, so it is passed
  over; a marked one is evaluated exactly (with one attribute it lowers ``E``, so it is swapped
  in). With several attributes the marks are those of the attribute with the largest EMD: a
  necessary condition for a swap.
- The order of the candidates, without sorting them. The next 32 candidates are selected in one
  pass (most scans end there); the rest are spread over equal-width buckets of distance, ``O(1)`` a
  record, and in each bucket the closest marked candidate not yet passed is found by a scan.

So a GenerateCluster costs ``O(|X'| d)`` plus ``O(k log m)`` and one bucket scan per swap. When
``t`` is out of reach (e.g. ``k = 2``, ``t = 0.05``: no two records are that close to the whole
distribution) every scan still runs to the last candidate: ``O(n^2 / k)`` over the run, each
candidate costing a few comparisons.

This compiled path serves distances that offer
:class:`~tclose.kernels.emd.OrderedParts` (an exact
:class:`~tclose.kernels.emd.OrderedEMD`, or any distance with an ``ordered_parts()``
method). Any other :class:`~tclose.interfaces.FittedDistance` goes through a plain path that
evaluates the ``k`` possible swaps of every candidate with ``emd_of_counts`` (``O(k m)`` each):
same result, slow.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from tclose.interfaces import EMD_TOLERANCE, FittedDistance
from tclose.kernels.emd import (
    OrderedParts,
    emd_from_numerator,
    numerator_sorted,
    ordered_parts,
)

__all__ = ["k_first"]


def k_first(x: np.ndarray, distances: Sequence[FittedDistance], k: int, t: float) -> np.ndarray:
    """Partition the rows with the k-anonymity-first algorithm (Algorithm 2 of the paper).

    Args:
        x: ``float64 (n, d)`` quasi-identifiers, standardized.
        distances: one fitted distance per confidential attribute, each over the same ``n`` rows.
        k: minimum cluster size, ``1 <= k``.
        t: t-closeness level in ``(0, 1]`` that the swaps aim at.

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
    parts = [ordered_parts(d) for d in distances]
    if all(p is not None for p in parts):
        generate = _OrderedCluster(parts, k, t)
    else:
        generate = _GenericCluster(distances, k, t)
    rows = np.arange(n, dtype=np.int64)  # the unclustered records, ascending, in rows[:size]
    xt = np.array(x.T, order="C")  # their QIs (a copy), column-major (d, n), like ``rows``
    dist = np.empty(n)  # their squared distances to the current point
    size = n
    label = 0
    while size:
        _sq_dists(xt, size, _mean(xt, size), dist)
        source = int(np.argmax(dist[:size]))  # x_0; argmax ties go to the lowest row
        for second in (False, True):
            if second:  # x_1: farthest from x_0's point among those left
                if not size:
                    break
                source = int(np.argmax(dist[:size]))
            _sq_dists(xt, size, xt[:, source].copy(), dist)
            members = generate(rows[:size], dist[:size], source)
            labels[rows[members]] = label
            label += 1
            size = _remove(members, size, rows, xt, dist)
    return labels


def _first_members(dist: np.ndarray, source: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The source and the ``k - 1`` closest others; the key that orders all candidates.

    Returns:
        ``(positions sorted ascending, key)`` where ``key`` is ``dist`` with the source at ``-1``.
    """
    key = dist.copy()
    key[source] = -1.0
    return np.sort(_next_closest(key, -np.inf, -1, k)), key


class _OrderedCluster:
    """GenerateCluster for distances with :class:`OrderedParts` (compiled, see the module doc)."""

    def __init__(self, parts: Sequence[OrderedParts], k: int, t: float) -> None:
        self.k, self.t = k, t
        self.codes = np.stack([p.codes for p in parts]).astype(np.int64, copy=False)
        sizes = [p.cum_counts.shape[0] for p in parts]
        self.offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self.cum = np.concatenate([p.cum_counts for p in parts]).astype(np.int64, copy=False)
        self.cum_prefix = np.concatenate([p.cum_prefix for p in parts]).astype(np.int64, copy=False)
        self.table_rows = np.array([p.table_rows for p in parts], dtype=np.int64)

    def __call__(self, rows: np.ndarray, dist: np.ndarray, source: int) -> np.ndarray:
        if rows.size < 2 * self.k:
            return np.arange(rows.size)
        members, key = _first_members(dist, source, self.k)
        return _refine(
            members,
            key,
            rows,
            self.codes,
            self.offsets,
            self.cum,
            self.cum_prefix,
            self.table_rows,
            self.t + EMD_TOLERANCE,
        )


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


@njit(cache=False)
def _refine(
    members: np.ndarray,
    key: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    offsets: np.ndarray,
    cum: np.ndarray,
    cum_prefix: np.ndarray,
    table_rows: np.ndarray,
    limit: float,
) -> np.ndarray:
    """The swap loop of GenerateCluster, for attributes with :class:`OrderedParts`.

    Args:
        members: ``(k,)`` positions (into ``rows``) of the first members, ascending.
        key: ``(|X'|,)`` distance of each unclustered record to the source (source at ``-1``);
            candidates come in the order (key, position).
        rows: ``(|X'|,)`` row of each position, ascending.
        codes: ``(A, n)`` value codes of every row, one line per attribute (the attributes'
            :class:`~tclose.kernels.emd.OrderedParts`).
        offsets: ``(A + 1,)``: attribute ``a`` owns ``cum[offsets[a]:offsets[a + 1]]``.
        cum: concatenated reference cumulative counts of the attributes.
        cum_prefix: concatenated prefix sums of ``cum``.
        table_rows: ``(A,)`` rows of each attribute's reference table.
        limit: ``t + EMD_TOLERANCE``.

    Returns:
        the final members' positions, ascending.
    """
    s = members.shape[0]
    members = members.copy()
    emds = np.empty(codes.shape[0])
    for a in range(codes.shape[0]):
        emds[a] = _member_emd(members, -1, -1, rows, codes, offsets, cum, cum_prefix, table_rows, a)
    if emds.max() <= limit:
        return members
    last = members[0]  # the k-th closest: candidates come after it in (key, position) order
    for q in range(s):
        j = members[q]
        if key[j] > key[last] or (key[j] == key[last] and j > last):
            last = j
    table = np.empty((s + 1, _COLUMNS), dtype=np.int64)
    marks = np.empty((3 * (s + 1), 2), dtype=np.int64)
    target = int(np.argmax(emds))
    target_codes = codes[target]
    n_marks = _mark(
        members, rows, codes, offsets, cum, cum_prefix, table_rows, target, table, marks
    )
    for phase in range(2):
        if phase == 0:  # most scans stop early: first the next few candidates, then the rest
            stream = _next_closest(key, key[last], last, _FIRST_BATCH)
            bounds = np.array([0, stream.shape[0]])
        else:
            stream, bounds = _bucket_candidates(key, last)
        for b in range(bounds.shape[0] - 1):
            while True:  # the closest marked candidate of the bucket not yet passed, if any
                y = -1
                for i in range(bounds[b], bounds[b + 1]):
                    j = stream[i]
                    if key[j] < key[last] or (key[j] == key[last] and j <= last):
                        continue
                    if not _marked(target_codes[rows[j]], marks, n_marks):
                        continue
                    if y == -1 or key[j] < key[y] or (key[j] == key[y] and j < y):
                        y = j
                if y == -1:
                    break
                last = y  # every candidate before y is unmarked: rejected, C unchanged
                if _try_swap(y, members, emds, rows, codes, offsets, cum, cum_prefix, table_rows):
                    if emds.max() <= limit:
                        return members
                    target = int(np.argmax(emds))
                    target_codes = codes[target]
                    n_marks = _mark(
                        members,
                        rows,
                        codes,
                        offsets,
                        cum,
                        cum_prefix,
                        table_rows,
                        target,
                        table,
                        marks,
                    )
        if phase == 0 and stream.shape[0]:
            for j in stream:  # the whole batch is passed
                if key[j] > key[last] or (key[j] == key[last] and j > last):
                    last = j
    return members


@njit(cache=False)
def _try_swap(
    y: int,
    members: np.ndarray,
    emds: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    offsets: np.ndarray,
    cum: np.ndarray,
    cum_prefix: np.ndarray,
    table_rows: np.ndarray,
) -> bool:
    """Swap candidate ``y`` for the member ``y'`` minimizing the resulting EMD (largest over the
    attributes; ties: lowest row), if that EMD is lower than the current one.

    Updates ``members`` (kept ascending) and ``emds`` (per attribute) in place; ``O(A k^2 log m)``.
    Returns whether the swap was made.
    """
    best_out, best = -1, np.inf
    for q in range(members.shape[0]):  # members ascending: ties go to the lowest row
        worst = 0.0
        for a in range(codes.shape[0]):
            worst = max(
                worst,
                _member_emd(members, q, y, rows, codes, offsets, cum, cum_prefix, table_rows, a),
            )
        if worst < best:
            best_out, best = q, worst
    if best >= emds.max():
        return False
    members[best_out] = y
    members.sort()
    for a in range(codes.shape[0]):
        emds[a] = _member_emd(members, -1, -1, rows, codes, offsets, cum, cum_prefix, table_rows, a)
    return True


@njit(cache=False)
def _member_emd(
    members: np.ndarray,
    out: int,
    replacement: int,
    rows: np.ndarray,
    codes: np.ndarray,
    offsets: np.ndarray,
    cum: np.ndarray,
    cum_prefix: np.ndarray,
    table_rows: np.ndarray,
    a: int,
) -> float:
    """EMD of attribute ``a`` for the members, with ``members[out]`` replaced by position
    ``replacement`` (no replacement when ``out == -1``)."""
    s = members.shape[0]
    zs = np.empty(s, dtype=np.int64)
    for q in range(s):
        zs[q] = codes[a, rows[replacement if q == out else members[q]]]
    zs.sort()
    lo, hi = offsets[a], offsets[a + 1]
    n = table_rows[a]
    return emd_from_numerator(numerator_sorted(zs, n, cum[lo:hi], cum_prefix[lo:hi]), n, s, hi - lo)


# Columns of the segment table built by _build_table (one line per segment of constant F).
_LO, _V, _HP, _HM, _A, _B, _A2, _B2, _T, _U, _U0 = range(11)
_COLUMNS = 11
_MAX = np.iinfo(np.int64).max
_MIN = np.iinfo(np.int64).min
#: Candidates selected one pass ahead before the rest are bucketed (most scans stop within them).
_FIRST_BATCH = 32


@njit(cache=False)
def _build_table(
    members: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    offsets: np.ndarray,
    cum_all: np.ndarray,
    prefix_all: np.ndarray,
    table_rows: np.ndarray,
    a: int,
    table: np.ndarray,
) -> int:
    """Describe, for attribute ``a``, which codes can lower the members' EMD by one swap.

    The members' distinct codes ``u_1 < ... < u_r`` cut ``[0, m)`` into segments
    ``[0, u_1), [u_1, u_2), ..., [u_r, m)`` on which the count ``F`` is constant. Line ``q`` of
    ``table`` holds, for segment ``q``: its start ``_LO``; ``_V = n F``; ``_HP``, ``_HM``: ``Hp``
    and ``Hm`` at its start; ``_A``, ``_B`` and ``_A2``, ``_B2``: the breakpoints where ``hp`` and
    ``hm`` change form inside it; ``_T``: the least ``Hp(z)`` over member codes ``z`` after the
    segment; ``_U`` and ``_U0``: the greatest ``Hm(z)`` over member codes ``z < c`` for a code
    ``c`` inside the segment, and for ``c`` at its start. See :func:`_mark`.

    Returns:
        the number of segments ``r + 1``.
    """
    lo_a, hi_a = offsets[a], offsets[a + 1]
    cum = cum_all[lo_a:hi_a]
    prefix = prefix_all[lo_a:hi_a]
    m = hi_a - lo_a
    n = table_rows[a]
    s = members.shape[0]
    zs = np.empty(s, dtype=np.int64)
    for q in range(s):
        zs[q] = codes[a, rows[members[q]]]
    zs.sort()
    r = 0  # segment 0 is [0, u_1), with F = 0 (empty when u_1 = 0)
    table[0, _LO] = 0
    table[0, _V] = 0
    for q in range(s):
        if q == 0 or zs[q] != zs[q - 1]:
            r += 1
            table[r, _LO] = zs[q]
        table[r, _V] = n * (q + 1)
    table[0, _HP] = 0
    table[0, _HM] = 0
    for q in range(r + 1):
        v = table[q, _V]
        lo = table[q, _LO]
        table[q, _A] = _first_above(cum, lo, m - 1, s, v, True)
        table[q, _B] = _first_above(cum, lo, m - 1, s, v + n, False)
        table[q, _A2] = _first_above(cum, lo, m - 1, s, v - n, True)
        table[q, _B2] = _first_above(cum, lo, m - 1, s, v, False)
        if q < r:
            end = table[q + 1, _LO]
            table[q + 1, _HP] = table[q, _HP] + _sum_hp(table, q, end, n, s, prefix)
            table[q + 1, _HM] = table[q, _HM] + _sum_hm(table, q, end, n, s, prefix)
    lowest = _MAX
    for q in range(r, -1, -1):
        table[q, _T] = lowest
        if q > 0:
            lowest = min(lowest, table[q, _HP])
    highest = _MIN
    table[0, _U] = _MIN
    table[0, _U0] = _MIN
    for q in range(1, r + 1):
        table[q, _U0] = highest
        highest = max(highest, table[q, _HM])
        table[q, _U] = highest
    return r + 1


@njit(cache=False)
def _first_above(cum: np.ndarray, lo: int, hi: int, s: int, threshold: int, strict: bool) -> int:
    """First ``i`` in ``[lo, hi)`` with ``s * cum[i] > threshold`` (``>=`` if not ``strict``);
    ``hi`` if none (``cum`` is nondecreasing)."""
    while lo < hi:
        mid = (lo + hi) // 2
        value = s * cum[mid]
        if value > threshold or (not strict and value == threshold):
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=False)
def _sum_hp(table: np.ndarray, q: int, c: int, n: int, s: int, prefix: np.ndarray) -> int:
    """``sum_{i in [lo, c)} |D_i + n| - |D_i|`` inside segment ``q`` (``D_i = v - s cum_i``).

    The term is ``n`` while ``s cum_i <= v`` (up to ``_A``), ``-n`` once ``s cum_i >= v + n``
    (from ``_B``), and ``2v + n - 2 s cum_i`` in between; ``O(1)`` with the prefix sums.
    """
    lo, v, a, b = table[q, _LO], table[q, _V], table[q, _A], table[q, _B]
    if c <= lo:
        return 0
    total = n * (min(c, a) - lo)
    end = min(c, b)
    if end > a:
        total += (2 * v + n) * (end - a) - 2 * s * (prefix[end] - prefix[a])
    if c > b:
        total -= n * (c - b)
    return total


@njit(cache=False)
def _sum_hm(table: np.ndarray, q: int, c: int, n: int, s: int, prefix: np.ndarray) -> int:
    """``sum_{i in [lo, c)} |D_i - n| - |D_i|`` inside segment ``q``.

    The term is ``-n`` while ``s cum_i <= v - n`` (up to ``_A2``), ``n`` once ``s cum_i >= v``
    (from ``_B2``), and ``2 s cum_i - 2v + n`` in between.
    """
    lo, v, a, b = table[q, _LO], table[q, _V], table[q, _A2], table[q, _B2]
    if c <= lo:
        return 0
    total = -n * (min(c, a) - lo)
    end = min(c, b)
    if end > a:
        total += (n - 2 * v) * (end - a) + 2 * s * (prefix[end] - prefix[a])
    if c > b:
        total += n * (c - b)
    return total


@njit(cache=False)
def _mark(
    members: np.ndarray,
    rows: np.ndarray,
    codes: np.ndarray,
    offsets: np.ndarray,
    cum_all: np.ndarray,
    prefix_all: np.ndarray,
    table_rows: np.ndarray,
    a: int,
    table: np.ndarray,
    marks: np.ndarray,
) -> int:
    """The codes that can lower the members' EMD numerator of attribute ``a`` by one swap.

    For a member code ``z > c``, swapping in a record of code ``c`` adds 1 to ``F`` on
    ``[c, z)`` and changes the numerator by ``Hp(z) - Hp(c)``; for ``z < c`` it removes 1 on
    ``[z, c)`` and changes it by ``Hm(c) - Hm(z)``. So ``c`` is marked iff
    ``Hp(c) > min Hp(z > c)`` or ``Hm(c) < max Hm(z < c)``. Inside a segment of constant ``F``,
    ``Hp`` is concave and ``Hm`` convex (their increments are monotone in ``cum``), so each
    condition holds on an interval of the segment, found by binary searches with ``O(1)``
    evaluations (see :func:`_build_table`). ``O(k log m)``.

    Args:
        table: ``(k + 1, _COLUMNS)`` scratch for :func:`_build_table`.
        marks: ``(3 (k + 1), 2)`` output: disjoint inclusive intervals ``[lo, hi]`` of marked
            codes, sorted.

    Returns:
        the number of intervals.
    """
    n_segments = _build_table(
        members, rows, codes, offsets, cum_all, prefix_all, table_rows, a, table
    )
    cum = cum_all[offsets[a] : offsets[a + 1]]
    prefix = prefix_all[offsets[a] : offsets[a + 1]]
    m = cum.shape[0]
    n = table_rows[a]
    s = members.shape[0]
    count = 0
    for q in range(n_segments):
        lo = table[q, _LO]
        hi = table[q + 1, _LO] if q + 1 < n_segments else m  # codes [lo, hi)
        if hi <= lo:
            continue
        v = table[q, _V]
        bound = table[q, _T]
        if bound != _MAX:  # Hp(c) > bound: Hp rises up to the first c with hp(c) <= 0
            top = _first_above(cum, lo, hi - 1, 2 * s, 2 * v + n, False)
            if table[q, _HP] + _sum_hp(table, q, top, n, s, prefix) > bound:
                left, right = lo, top
                while left < right:
                    mid = (left + right) // 2
                    if table[q, _HP] + _sum_hp(table, q, mid, n, s, prefix) > bound:
                        right = mid
                    else:
                        left = mid + 1
                start = left
                left, right = top, hi - 1
                while left < right:
                    mid = (left + right + 1) // 2
                    if table[q, _HP] + _sum_hp(table, q, mid, n, s, prefix) > bound:
                        left = mid
                    else:
                        right = mid - 1
                marks[count, 0], marks[count, 1] = start, left
                count += 1
        bound = table[q, _U]
        if bound != _MIN and hi - 1 > lo:  # Hm(c) < bound for lo < c < hi: Hm falls, then rises
            bottom = max(_first_above(cum, lo, hi - 1, 2 * s, 2 * v - n, False), lo + 1)
            if table[q, _HM] + _sum_hm(table, q, bottom, n, s, prefix) < bound:
                left, right = lo + 1, bottom
                while left < right:
                    mid = (left + right) // 2
                    if table[q, _HM] + _sum_hm(table, q, mid, n, s, prefix) < bound:
                        right = mid
                    else:
                        left = mid + 1
                start = left
                left, right = bottom, hi - 1
                while left < right:
                    mid = (left + right + 1) // 2
                    if table[q, _HM] + _sum_hm(table, q, mid, n, s, prefix) < bound:
                        left = mid
                    else:
                        right = mid - 1
                marks[count, 0], marks[count, 1] = start, left
                count += 1
        if q > 0 and table[q, _HM] < table[q, _U0]:  # c = lo: members below lo only
            marks[count, 0], marks[count, 1] = lo, lo
            count += 1
    return _merge_intervals(marks, count)


@njit(cache=False)
def _merge_intervals(marks: np.ndarray, count: int) -> int:
    """Sort the first ``count`` inclusive intervals and merge overlapping or adjacent ones."""
    for i in range(1, count):  # insertion sort by start
        lo, hi = marks[i, 0], marks[i, 1]
        p = i
        while p > 0 and marks[p - 1, 0] > lo:
            marks[p, 0], marks[p, 1] = marks[p - 1, 0], marks[p - 1, 1]
            p -= 1
        marks[p, 0], marks[p, 1] = lo, hi
    merged = 0
    for i in range(count):
        if merged > 0 and marks[i, 0] <= marks[merged - 1, 1] + 1:
            marks[merged - 1, 1] = max(marks[merged - 1, 1], marks[i, 1])
        else:
            marks[merged, 0], marks[merged, 1] = marks[i, 0], marks[i, 1]
            merged += 1
    return merged


@njit(cache=False)
def _marked(c: int, marks: np.ndarray, count: int) -> bool:
    """Whether code ``c`` lies in one of the ``count`` sorted disjoint intervals."""
    if count <= 8:
        hit = False
        for i in range(count):
            hit |= (marks[i, 0] <= c) & (c <= marks[i, 1])
        return hit
    lo, hi = 0, count
    while lo < hi:  # first interval starting after c
        mid = (lo + hi) // 2
        if marks[mid, 0] > c:
            hi = mid
        else:
            lo = mid + 1
    return lo > 0 and c <= marks[lo - 1, 1]


@njit(cache=False)
def _bucket_candidates(key: np.ndarray, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions after ``last`` in (key, position) order, grouped into buckets of keys.

    Buckets are equal-width ranges of key values, about 16 records each on average: a key's bucket
    is computed, not searched, so bucketing costs ``O(1)`` a record. Keys in a lower bucket are all
    smaller, equal keys share a bucket, and inside a bucket positions are ascending (buckets are
    scanned, never sorted).

    Returns:
        ``(stream, bounds)``: bucket ``b`` is ``stream[bounds[b]:bounds[b + 1]]``.
    """
    after = np.empty(key.shape[0], dtype=np.int64)
    count = 0
    low = np.inf
    high = -np.inf
    for j in range(key.shape[0]):
        kj = key[j]
        if kj > key[last] or (kj == key[last] and j > last):
            after[count] = j
            count += 1
            low = min(low, kj)
            high = max(high, kj)
    n_buckets = max(1, count // 16)
    scale = (n_buckets / (high - low)) if high > low else 0.0
    bucket = np.empty(count, dtype=np.int64)
    bounds = np.zeros(n_buckets + 1, dtype=np.int64)
    for i in range(count):
        b = min(int((key[after[i]] - low) * scale), n_buckets - 1)
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


@njit(cache=False)
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


@njit(cache=False)
def _mean(xt: np.ndarray, size: int) -> np.ndarray:
    """Mean of the first ``size`` records of the column-major ``xt``, summed in row order."""
    out = np.zeros(xt.shape[0])
    for j in range(xt.shape[0]):
        total = 0.0
        for i in range(size):
            total += xt[j, i]
        out[j] = total / size
    return out


@njit(cache=False)
def _sq_dists(xt: np.ndarray, size: int, point: np.ndarray, out: np.ndarray) -> None:
    """Squared Euclidean distance of the first ``size`` records of the column-major ``xt`` to
    ``point`` into ``out[:size]``, summed over the columns in order: ``(0 + d_0^2) + d_1^2 ...``
    (the loop over records is the inner one, so it vectorizes without reordering any sum)."""
    for i in range(size):
        out[i] = 0.0
    for j in range(xt.shape[0]):
        column = xt[j]
        pj = point[j]
        for i in range(size):
            diff = column[i] - pj
            out[i] += diff * diff


@njit(cache=False)
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
        if length > 0:
            rows[kept : kept + length] = rows[start:stop]
            dist[kept : kept + length] = dist[start:stop]
            for j in range(xt.shape[0]):
                xt[j, kept : kept + length] = xt[j, start:stop]
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
