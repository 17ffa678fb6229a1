"""The compiled (Numba) loops of the MDAV and t-first kernels, and their NumPy twins.

All of this Numba code lives in one file on purpose: Numba's on-disk cache (``cache=True``) checks
only the source file of the function it caches, not the files of the functions it calls. A
compiled kernel calling a helper from another module would keep running the old helper after an
edit, until its own file changed. Keep every ``@njit`` function that these kernels call here.

**Compacted records.** The kernels keep the records still unclustered compacted: their coordinates
live in a column-major array ``xt`` of shape ``(d, n)``, and ``rows[p]`` is the original row index
of the record at position ``p``. A record leaves by swap-remove (the last record of its range moves
into its slot), so positions are not in row order and every tie is broken on ``rows[p]``.

**Bit-identical distances.** Squared Euclidean distances are summed over the columns in column
order, ``((0 + (x_0 - c_0)^2) + (x_1 - c_1)^2) + ...``, without fused multiply-add, by
:func:`sq_dist` and by its NumPy twin :func:`sq_dist_reference`. The centroid comes from a running
column sum: :func:`column_total` adds the rows in row order and :func:`subtract_rows` (twin
:func:`subtract_rows_reference`) removes the rows of each new cluster in ascending row order. So
the compiled kernels and the NumPy references see the same floating-point numbers and resolve every
tie, even between distinct records, the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tclose.jit import njit

if TYPE_CHECKING:
    from tclose.plugins.kernels.onehot import Layout

# ---------------------------------------------------------------------------------------------
# NumPy twins and shared set-up
# ---------------------------------------------------------------------------------------------


def sq_dist_reference(points: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Squared distances of the rows of ``points`` to ``point`` (NumPy twin of :func:`sq_dist`)."""
    dist = np.zeros(points.shape[0])
    for j in range(points.shape[1]):
        diff = points[:, j] - point[j]
        dist += diff * diff
    return dist


def subtract_rows_reference(total: np.ndarray, x: np.ndarray, members: np.ndarray) -> None:
    """``total -= x[row]`` for each row of ``members``, in that order (twin of
    :func:`subtract_rows`)."""
    for row in members:
        total -= x[row]


def column_total(x: np.ndarray) -> np.ndarray:
    """Column sums of ``x`` added row by row in row order (the start of the running sums).

    ``np.sum`` adds pairwise, in an order that depends on the shape; ``np.cumsum`` adds in order.
    It runs on blocks of :data:`_TOTAL_BLOCK` rows, each preceded by the sums so far, so that
    the temporary is one block, not a copy of ``x`` (the order of the additions is unchanged).
    """
    total = np.zeros(x.shape[1])
    for lo in range(0, x.shape[0], _TOTAL_BLOCK):
        block = np.concatenate((total[None, :], x[lo : lo + _TOTAL_BLOCK]))
        total = np.cumsum(block, axis=0)[-1].copy()
    return total


#: Rows per block of :func:`column_total`.
_TOTAL_BLOCK = 4096


# ---------------------------------------------------------------------------------------------
# Shared compiled helpers
# ---------------------------------------------------------------------------------------------

_BLOCK = 256


@njit(cache=True)
def sq_dist(xt: np.ndarray, lo: int, hi: int, point: np.ndarray, dist: np.ndarray) -> None:
    """``dist[p] = |xt[:, p] - point|^2`` for the positions ``lo <= p < hi``
    (:func:`sq_dist_mixed` without one-hot groups)."""
    no_codes = np.empty((0, 0), dtype=np.int64)
    sq_dist_mixed(xt, no_codes, np.empty(0, dtype=np.int64), lo, hi, point, np.empty(0), dist)


@njit(cache=True)
def argmax_lowest(dist: np.ndarray, rows: np.ndarray, lo: int, hi: int, best: int) -> int:
    """Position of the largest ``dist[lo:hi]``, ties to the lowest ``rows`` value.

    ``best`` is the winner so far over other ranges (or ``-1``); it is returned if no position of
    this range beats it (``-1`` if there is none at all).
    """
    if best < 0:
        if lo >= hi:
            return -1
        best = lo
    best_dist = dist[best]
    best_row = rows[best]
    span = dist[lo:hi]
    span_rows = rows[lo:hi]
    for a in range(span.shape[0]):
        v = span[a]
        if v < best_dist:
            continue
        if v > best_dist or span_rows[a] < best_row:
            best = lo + a
            best_dist = v
            best_row = span_rows[a]
    return best


@njit(cache=True)
def subtract_rows(total: np.ndarray, x: np.ndarray, members: np.ndarray, count: int) -> None:
    """``total -= x[row]`` for the rows ``members[:count]``, in that order."""
    for a in range(count):
        row = members[a]
        for j in range(total.shape[0]):
            total[j] -= x[row, j]


@njit(cache=True)
def _move(xt: np.ndarray, rows: np.ndarray, dist: np.ndarray, src: int, dst: int) -> None:
    """Move the record at position ``src`` into position ``dst``."""
    rows[dst] = rows[src]
    dist[dst] = dist[src]
    for j in range(xt.shape[0]):
        xt[j, dst] = xt[j, src]


def _transpose_rows(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``x[rows].T`` as a C-contiguous ``(d, n)`` array (plain NumPy, called before the loops)."""
    return np.ascontiguousarray(x[rows].T)


# ---------------------------------------------------------------------------------------------
# MDAV
# ---------------------------------------------------------------------------------------------


def mdav_compiled(x: np.ndarray, k: int, ties_to_highest: bool) -> np.ndarray:
    """MDAV labels of the rows of ``x`` (C-contiguous float64, finite, ``n >= 1``); see
    :func:`tclose.plugins.kernels.mdav.mdav`."""
    rows = np.arange(x.shape[0], dtype=np.int64)
    return _mdav_loop(x, _transpose_rows(x, rows), rows, k, ties_to_highest, column_total(x))


@njit(cache=True)
def _mdav_loop(x, xt, rows, k, high, total):
    n, d = x.shape
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    point = np.empty(d)
    near_pos = np.empty(k, dtype=np.int64)
    near_dist = np.empty(k)
    near_row = np.empty(k, dtype=np.int64)
    m = n
    label = 0
    while m >= 2 * k:
        two_clusters = m >= 3 * k
        for j in range(d):
            point[j] = total[j] / m
        sq_dist(xt, 0, m, point, dist)
        r = rows[argmax_lowest(dist, rows, 0, m, -1)]
        for j in range(d):
            point[j] = x[r, j]
        sq_dist(xt, 0, m, point, dist)
        # s: farthest from r among the records remaining *before* r's cluster leaves (sdcMicro).
        s = rows[argmax_lowest(dist, rows, 0, m, -1)]
        _k_nearest(dist, rows, m, k, high, near_pos, near_dist, near_row)
        m = _remove_cluster(x, xt, rows, dist, m, k, total, labels, label, near_pos, near_row)
        label += 1
        if two_clusters:
            for j in range(d):
                point[j] = x[s, j]
            sq_dist(xt, 0, m, point, dist)
            _k_nearest(dist, rows, m, k, high, near_pos, near_dist, near_row)
            m = _remove_cluster(x, xt, rows, dist, m, k, total, labels, label, near_pos, near_row)
            label += 1
    for p in range(m):
        labels[rows[p]] = label
    return labels


@njit(cache=True)
def _k_nearest(dist, rows, m, k, high, near_pos, near_dist, near_row) -> None:
    """The ``k`` smallest ``(dist, row)`` among positions ``0..m-1``, in ``near_*[:k]``.

    Rows at equal distance are ordered by ascending row index, or descending if ``high``.
    Insertion into a sorted buffer of ``k``: after the first few records, almost every record
    fails the first comparison with the buffer's worst.
    """
    count = 0
    worst_dist = np.inf
    worst_row = -1
    for p in range(m):
        v = dist[p]
        if count == k:
            if v > worst_dist:
                continue
            r = rows[p]
            if v == worst_dist and (r < worst_row if high else r > worst_row):
                continue
            slot = k - 1
        else:
            r = rows[p]
            slot = count
            count += 1
        while slot > 0:
            w = near_dist[slot - 1]
            s = near_row[slot - 1]
            if v > w or (v == w and (r < s if high else r > s)):
                break
            near_dist[slot] = w
            near_row[slot] = s
            near_pos[slot] = near_pos[slot - 1]
            slot -= 1
        near_dist[slot] = v
        near_row[slot] = r
        near_pos[slot] = p
        if count == k:
            worst_dist = near_dist[k - 1]
            worst_row = near_row[k - 1]


@njit(cache=True)
def _remove_cluster(x, xt, rows, dist, m, k, total, labels, label, near_pos, near_row) -> int:
    """Label the records at ``near_pos[:k]``, update the running sum, swap-remove them."""
    for a in range(k):
        labels[near_row[a]] = label
    subtract_rows(total, x, near_row, k)
    # Highest position first: the record moved into a freed slot is then never one still to go.
    for a in range(1, k):
        p = near_pos[a]
        b = a - 1
        while b >= 0 and near_pos[b] < p:
            near_pos[b + 1] = near_pos[b]
            b -= 1
        near_pos[b + 1] = p
    for a in range(k):
        m -= 1
        if near_pos[a] != m:
            _move(xt, rows, dist, m, near_pos[a])
    return m


# ---------------------------------------------------------------------------------------------
# t-closeness-first
# ---------------------------------------------------------------------------------------------


def t_first_compiled(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """t-first labels of the rows of ``x`` (C-contiguous float64, finite, ``n >= 1``), given the
    stratum of every row and the strata sizes; see :func:`tclose.plugins.kernels.t_first.t_first`.

    **Filter, then decide on the column sum.** One-hot column groups (nominal QIs) are found by
    :func:`tclose.plugins.kernels.onehot.column_layout`; every distance is first computed with one
    table look-up per group and record (cheap, but rounded differently from the column sum). Each
    decision (the farthest record, the two closest of a stratum) then recomputes, for the few
    records whose look-up distance is within ``eps`` of the winner's, the plain column-order sum
    of :func:`sq_dist` and decides on it. ``eps`` (:func:`_fill_point`) is twice a rigorous bound
    on the difference of the two sums, so no record outside that margin can win: the labels are,
    bit for bit, those of the column-sum kernel (:func:`tclose.plugins.kernels.t_first.
    t_first_reference`), ties included.
    """
    from tclose.plugins.kernels.onehot import column_layout

    return _t_first_run(x, stratum, sizes, column_layout(x))


def t_first_column_sum(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`t_first_compiled` with every column summed as a number (no look-up tables): the
    column-sum kernel that the look-ups must reproduce, for tests and benchmarks."""
    from tclose.plugins.kernels.onehot import Layout

    empty = np.empty(0, dtype=np.int64)
    layout = Layout(
        np.arange(x.shape[1], dtype=np.int64),
        empty,
        empty,
        np.empty(0),
        np.empty((0, x.shape[0]), dtype=np.int64),
        empty,
    )
    return _t_first_run(x, stratum, sizes, layout)


def _t_first_run(
    x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray, layout: Layout
) -> np.ndarray:
    """Set up the compacted arrays of :func:`_t_first_loop` for ``layout`` and run it."""
    # Stratum i occupies positions start[i] .. start[i] + count[i] - 1, rows in ascending order.
    rows = np.argsort(stratum, kind="stable").astype(np.int64)
    start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    xt = np.ascontiguousarray(x[np.ix_(rows, layout.numeric)].T)  # no copy of the groups
    has_numeric = xt.shape[0] > 0
    return _t_first_loop(
        x,
        xt,
        np.ascontiguousarray(layout.codes[:, rows]),
        (layout.numeric, layout.group_lo, layout.group_hi, layout.group_value, layout.table_start),
        (
            xt.min(axis=1) if has_numeric else np.empty(0),
            xt.max(axis=1) if has_numeric else np.empty(0),
        ),
        rows,
        start,
        sizes.astype(np.int64),
        column_total(x),
    )


@njit(cache=True)
def _t_first_loop(x, xt, codes, layout, ranges, rows, start, sizes, total):
    n, d = x.shape
    n_strata = sizes.shape[0]
    count = sizes.copy()
    extras = sizes - n // n_strata
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    point = np.empty(d)
    numeric, group_lo, group_hi = layout[0], layout[1], layout[2]
    point_numeric = np.empty(numeric.shape[0])
    table = np.empty(max(1, (group_hi - group_lo).sum()))
    members = np.empty(n_strata + 1, dtype=np.int64)
    m = n
    label = 0
    while m > 0:
        for j in range(d):
            point[j] = total[j] / m
        eps = _fill_point(point, layout, ranges, point_numeric, table)
        _sq_dist_strata(xt, codes, layout[4], start, count, point_numeric, table, dist)
        x0 = rows[_farthest(x, point, eps, dist, rows, start, count)]
        for j in range(d):
            point[j] = x[x0, j]
        eps = _fill_point(point, layout, ranges, point_numeric, table)
        _sq_dist_strata(xt, codes, layout[4], start, count, point_numeric, table, dist)
        m -= _stratified_cluster(
            x,
            xt,
            codes,
            rows,
            dist,
            start,
            count,
            extras,
            total,
            labels,
            label,
            members,
            point,
            eps,
        )
        label += 1
        if m > 0:
            # dist still holds the distances to x0 (= point) of the records left: x1 is the
            # farthest.
            x1 = rows[_farthest(x, point, eps, dist, rows, start, count)]
            for j in range(d):
                point[j] = x[x1, j]
            eps = _fill_point(point, layout, ranges, point_numeric, table)
            _sq_dist_strata(xt, codes, layout[4], start, count, point_numeric, table, dist)
            m -= _stratified_cluster(
                x,
                xt,
                codes,
                rows,
                dist,
                start,
                count,
                extras,
                total,
                labels,
                label,
                members,
                point,
                eps,
            )
            label += 1
    return labels


#: ``8 u`` (``u = 2^-53``, the unit roundoff): each sum is within ``K u B`` of the exact distance
#: (:func:`_fill_point`), so the two differ by at most ``e = 2 K u B``; the decisions need
#: ``eps >= 2 e = 4 K u B``, and ``8 K u B`` doubles it for the rounding of ``B`` itself.
_EPS_UNIT = 8.0 * 2.0**-53


@njit(cache=True)
def _fill_point(point, layout, ranges, point_numeric, table) -> float:
    """The point's numeric coordinates, and its table ``|c e_v - p|^2`` for every group
    (twin of :func:`tclose.plugins.kernels.onehot.fill_tables_reference`). Returns ``eps``.

    ``eps`` is four times a bound on the difference between the look-up distance and the
    column-order sum of any record (twice what the decisions need, see :data:`_EPS_UNIT`). Both
    sums add ``K <= d + g + 8`` rounded non-negative terms (the group
    terms are ``S_g - p_v^2 + (c - p_v)^2``, ``S_g = sum p_j^2``); each is off by at most
    ``K u`` times ``B = sum over numeric columns of the largest (x_j - p_j)^2 over the column's
    range + sum over groups of (S_g + the largest table entry)``, which bounds the distance and
    the partial sums of both.
    """
    numeric, group_lo, group_hi, group_value, table_start = layout
    low, high = ranges
    bound = 0.0
    for a in range(numeric.shape[0]):
        p = point[numeric[a]]
        point_numeric[a] = p
        bound += max((high[a] - p) * (high[a] - p), (low[a] - p) * (low[a] - p))
    for g in range(group_lo.shape[0]):
        total = 0.0
        for j in range(group_lo[g], group_hi[g]):
            total += point[j] * point[j]
        worst = 0.0
        for j in range(group_lo[g], group_hi[g]):
            gap = group_value[g] - point[j]
            entry = (total - point[j] * point[j]) + gap * gap
            table[table_start[g] + j - group_lo[g]] = entry
            worst = max(worst, abs(entry))
        bound += total + worst
    return _EPS_UNIT * (point.shape[0] + group_lo.shape[0] + 8) * bound


@njit(cache=True)
def _column_sum(x, row, point) -> float:
    """``|x[row] - point|^2`` summed in column order: the value of :func:`sq_dist`, bit for bit."""
    acc = 0.0
    for j in range(point.shape[0]):
        diff = x[row, j] - point[j]
        acc += diff * diff
    return acc


@njit(cache=True)
def sq_dist_mixed(xt, codes, table_start, lo, hi, point, table, dist) -> None:
    """``dist[p] = |xt[:, p] - point|^2`` over the numeric columns ``xt`` for the positions
    ``lo <= p < hi``, plus one table entry per one-hot group:
    ``dist[p] += table[table_start[g] + codes[g, p]]`` (numeric columns first, groups in order).
    """
    # Blocks of 256 positions: the partial sums stay in L1 across the d columns. The loops index
    # views from 0, so that Numba knows the indices are non-negative, drops the negative-index
    # wraparound test and vectorizes (5x faster than indexing with range(lo, hi)).
    d = xt.shape[0]
    n_groups = codes.shape[0]
    acc = np.empty(_BLOCK)
    for block in range(lo, hi, _BLOCK):
        width = min(_BLOCK, hi - block)
        out = dist[block : block + width]
        if d == 0:
            acc[:width] = 0.0
        else:
            column = xt[0, block : block + width]
            p0 = point[0]
            for p in range(width):
                diff = column[p] - p0
                acc[p] = diff * diff  # == 0.0 + diff * diff, bit for bit
        for j in range(1, d):
            column = xt[j, block : block + width]
            pj = point[j]
            for p in range(width):
                diff = column[p] - pj
                acc[p] += diff * diff
        for g in range(n_groups):
            group = codes[g, block : block + width]
            entries = table[table_start[g] :]
            for p in range(width):
                acc[p] += entries[group[p]]
        for p in range(width):
            out[p] = acc[p]


@njit(cache=True)
def _sq_dist_strata(xt, codes, table_start, start, count, point, table, dist) -> None:
    for i in range(start.shape[0]):
        sq_dist_mixed(xt, codes, table_start, start[i], start[i] + count[i], point, table, dist)


@njit(cache=True)
def _argmax_strata(dist, rows, start, count) -> int:
    best = -1
    for i in range(start.shape[0]):
        best = argmax_lowest(dist, rows, start[i], start[i] + count[i], best)
    return best


@njit(cache=True)
def _farthest(x, point, eps, dist, rows, start, count) -> int:
    """Position of the record farthest from ``point`` by the column-order sum, ties to the
    lowest row. ``dist`` holds distances within ``eps / 2`` of it; those within ``eps`` of the
    largest are replaced by the column sum (no other can win)."""
    threshold = dist[_argmax_strata(dist, rows, start, count)] - eps
    best = -1
    best_dist = -1.0
    best_row = -1
    for i in range(start.shape[0]):
        for p in range(start[i], start[i] + count[i]):
            if dist[p] >= threshold:
                v = _column_sum(x, rows[p], point)
                dist[p] = v
                if v > best_dist or (v == best_dist and rows[p] < best_row):
                    best, best_dist, best_row = p, v, rows[p]
    return best


@njit(cache=True)
def _two_nearest(span, span_rows):
    """Positions in ``span`` of the smallest and second smallest ``(span, span_rows)``
    (``-1`` for the second if the span has one record)."""
    best = -1
    best_dist = np.inf
    best_row = -1
    second = -1
    second_dist = np.inf
    second_row = -1
    for a in range(span.shape[0]):
        v = span[a]
        if v > second_dist:
            continue
        r = span_rows[a]
        if v < best_dist or (v == best_dist and r < best_row):
            second, second_dist, second_row = best, best_dist, best_row
            best, best_dist, best_row = a, v, r
        elif v < second_dist or r < second_row:
            second, second_dist, second_row = a, v, r
    return best, second


@njit(cache=True)
def _refine_two_nearest(x, seed, span, span_rows, threshold):
    """:func:`_two_nearest` by the column-order sum to ``seed``, among the positions whose
    ``span`` is at most ``threshold`` (their ``span`` becomes that sum); the others cannot be
    among the two nearest (see :func:`_stratified_cluster`)."""
    best = -1
    best_dist = np.inf
    best_row = -1
    second = -1
    second_dist = np.inf
    second_row = -1
    for a in range(span.shape[0]):
        if span[a] > threshold:
            continue
        v = _column_sum(x, span_rows[a], seed)
        span[a] = v
        r = span_rows[a]
        if v < best_dist or (v == best_dist and r < best_row):
            second, second_dist, second_row = best, best_dist, best_row
            best, best_dist, best_row = a, v, r
        elif v < second_dist or (v == second_dist and r < second_row):
            second, second_dist, second_row = a, v, r
    return best, second


@njit(cache=True)
def _stratified_cluster(
    x, xt, codes, rows, dist, start, count, extras, total, labels, label, members, seed, eps
) -> int:
    """One cluster: the closest record to ``seed`` of every stratum, plus one extra record.

    The extra is the second closest record of the first stratum that still holds extras, unless
    none does. ``dist`` holds look-up distances to the seed; in each stratum those within ``eps``
    of the second smallest are replaced by the column-order sum, which decides. The chosen records
    are labelled and swap-removed (``dist`` moves along, so that it still gives the distances of
    the records left). Returns how many were taken.
    """
    taken = 0
    extra_taken = False
    for i in range(start.shape[0]):
        lo = start[i]
        span = dist[lo : lo + count[i]]
        span_rows = rows[lo : lo + count[i]]
        best, second = _two_nearest(span, span_rows)
        threshold = span[second if second >= 0 else best] + eps
        best, second = _refine_two_nearest(x, seed, span, span_rows, threshold)
        best_row = span_rows[best]
        second_row = span_rows[second] if second >= 0 else -1
        members[taken] = best_row
        labels[best_row] = label
        taken += 1
        if not extra_taken and extras[i] > 0:
            extra_taken = True
            extras[i] -= 1
            members[taken] = second_row
            labels[second_row] = label
            taken += 1
            # Higher position first, so that the record moved into it is never `best`.
            _remove_in_stratum(xt, codes, rows, dist, start, count, i, lo + max(best, second))
            _remove_in_stratum(xt, codes, rows, dist, start, count, i, lo + min(best, second))
        else:
            _remove_in_stratum(xt, codes, rows, dist, start, count, i, lo + best)
    subtract_rows(total, x, members, taken)
    return taken


@njit(cache=True)
def _remove_in_stratum(xt, codes, rows, dist, start, count, i, p) -> None:
    last = start[i] + count[i] - 1
    if p != last:
        _move(xt, rows, dist, last, p)
        for g in range(codes.shape[0]):
            codes[g, p] = codes[g, last]
    count[i] -= 1
