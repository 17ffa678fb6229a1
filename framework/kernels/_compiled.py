"""The compiled (Numba) loops of the MDAV and t-first kernels, and their NumPy twins.

Each loop is one compiled function (:func:`_mdav_loop`, :func:`_t_first_loop`): Numba compiles
every compiled function on its own and optimizes its code again inside each caller, so that
helpers cost seconds of compilation on a first run. (Numba's on-disk cache, ``cache=True``, checks
only the source file of the function it caches, not the files of the functions it calls: a
compiled function here must call no compiled function of another file, which would keep running
its old code after an edit.)

**Compacted records.** The kernels keep the records still unclustered compacted: their coordinates
live in a column-major array ``xt`` of shape ``(d, n)``, and ``rows[p]`` is the original row index
of the record at position ``p``. A record leaves by swap-remove (the last record of its range moves
into its slot), so positions are not in row order and every tie is broken on ``rows[p]``.

**Bit-identical distances.** Squared Euclidean distances are summed over the columns in column
order, ``((0 + (x_0 - c_0)^2) + (x_1 - c_1)^2) + ...``, without fused multiply-add, by the loops
and by their NumPy twin :func:`sq_dist_reference`. The centroid comes from a running column sum:
:func:`column_total` adds the rows in row order, and the loops (twin:
:func:`subtract_rows_reference`) subtract the rows of each new cluster in the order the cluster
took them. So the compiled kernels and the NumPy references see the same floating-point numbers
and resolve every tie, even between distinct records, the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tclose.base.jit import njit

if TYPE_CHECKING:
    from tclose.kernels.onehot import Layout

# ---------------------------------------------------------------------------------------------
# NumPy twins and shared set-up
# ---------------------------------------------------------------------------------------------


def sq_dist_reference(points: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Squared distances of the rows of ``points`` to ``point`` (NumPy twin of the loops' sums)."""
    dist = np.zeros(points.shape[0])
    for j in range(points.shape[1]):
        diff = points[:, j] - point[j]
        dist += diff * diff
    return dist


def subtract_rows_reference(total: np.ndarray, x: np.ndarray, members: np.ndarray) -> None:
    """``total -= x[row]`` for each row of ``members``, in that order (twin of the loops')."""
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
# Shared set-up of the compiled loops
# ---------------------------------------------------------------------------------------------

#: Positions per block of the distance loops: the partial sums stay in L1 across the columns.
_BLOCK = 256


def _transpose_rows(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``x[rows].T`` as a C-contiguous ``(d, n)`` array (plain NumPy, called before the loops)."""
    return np.ascontiguousarray(x[rows].T)


# ---------------------------------------------------------------------------------------------
# MDAV
# ---------------------------------------------------------------------------------------------


def mdav_compiled(x: np.ndarray, k: int, ties_to_highest: bool) -> np.ndarray:
    """MDAV labels of the rows of ``x`` (C-contiguous float64, finite, ``n >= 1``); see
    :func:`tclose.kernels.mdav.mdav`."""
    rows = np.arange(x.shape[0], dtype=np.int64)
    return _mdav_loop(
        x, _transpose_rows(x, rows), rows, int(k), bool(ties_to_highest), column_total(x)
    )


@njit(
    "int64[::1](readonly(float64[:, ::1]), float64[:, ::1], int64[::1], int64, boolean,"
    " float64[::1])",
    cache=True,
)
def _mdav_loop(x, xt, rows, k, high, total):
    """The MDAV loop, one compiled function (each helper would be compiled, and its code
    optimized again inside each caller). ``stage`` 0 takes the centroid of the records left,
    finds ``r``; 1 clusters around ``r`` (and finds ``s`` among the records before the cluster
    leaves); 2 clusters around ``s``. Ties to the lowest row (``high``: the nearest to the
    highest)."""
    n, d = x.shape
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    point = np.empty(d)
    near_pos = np.empty(k, dtype=np.int64)
    near_dist = np.empty(k)
    near_row = np.empty(k, dtype=np.int64)
    m = n
    label = 0
    stage = 0
    seed = -1
    other = -1
    two_clusters = False
    while stage > 0 or m >= 2 * k:
        if stage == 0:
            two_clusters = m >= 3 * k
            for j in range(d):
                point[j] = total[j] / m
        else:
            for j in range(d):
                point[j] = x[seed, j]
        # dist[p] = |xt[:, p] - point|^2 for p < m, summed in column order (see the module
        # doc), by blocks of positions that stay in L1 across the columns; the loops index
        # views from 0, so that Numba drops the negative-index test and vectorizes.
        for block in range(0, m, _BLOCK):
            out = dist[block : min(block + _BLOCK, m)]
            out[:] = 0.0
            for j in range(d):
                column = xt[j, block : block + out.shape[0]]
                pj = point[j]
                for p in range(out.shape[0]):
                    diff = column[p] - pj
                    out[p] += diff * diff
        if stage < 2:  # the farthest record, ties to the lowest row
            best = 0
            for p in range(m):
                if dist[p] < dist[best]:
                    continue
                if dist[p] > dist[best] or rows[p] < rows[best]:
                    best = p
            if stage == 0:
                seed, stage = rows[best], 1
                continue
            other = rows[best]  # s, among the records left before r's cluster leaves
        # The k smallest (dist, row) by insertion into a sorted buffer (rows at equal distance
        # ascending, or descending if high); after the first few records, almost every record
        # fails the first comparison with the buffer's worst.
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
        # Label them and update the running sum (rows in buffer order); swap-remove them,
        # highest position first (an insertion sort), so that the record moved into a freed
        # slot is never one still to go.
        for a in range(k):
            labels[near_row[a]] = label
            for j in range(d):
                total[j] -= x[near_row[a], j]
        for a in range(1, k):
            p = near_pos[a]
            b = a - 1
            while b >= 0 and near_pos[b] < p:
                near_pos[b + 1] = near_pos[b]
                b -= 1
            near_pos[b + 1] = p
        for a in range(k):
            m -= 1
            p = near_pos[a]
            if p != m:
                rows[p] = rows[m]
                dist[p] = dist[m]
                for j in range(d):
                    xt[j, p] = xt[j, m]
        label += 1
        if stage == 1 and two_clusters:
            seed, stage = other, 2
        else:
            stage = 0
    for p in range(m):
        labels[rows[p]] = label
    return labels


# ---------------------------------------------------------------------------------------------
# t-closeness-first
# ---------------------------------------------------------------------------------------------


def t_first_compiled(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """t-first labels of the rows of ``x`` (C-contiguous float64, finite, ``n >= 1``), given the
    stratum of every row and the strata sizes; see :func:`tclose.kernels.t_first.t_first`.

    **Filter, then decide on the column sum.** One-hot column groups (nominal QIs) are found by
    :func:`tclose.kernels.onehot.column_layout`; every distance is first computed with one
    table look-up per group and record (cheap, but rounded differently from the column sum). Each
    decision (the farthest record, the two closest of a stratum) then recomputes, for the few
    records whose look-up distance is within ``eps`` of the winner's, the plain column-order sum
    and decides on it. ``eps`` (see :data:`_EPS_UNIT`) is twice a rigorous bound on the
    difference of the two sums, so no record outside that margin can win: the labels are, bit for
    bit, those of the column-sum kernel (:func:`tclose.kernels.t_first.
    t_first_reference`), ties included.
    """
    from tclose.kernels.onehot import column_layout

    return _t_first_run(x, stratum, sizes, column_layout(x))


def t_first_column_sum(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """:func:`t_first_compiled` with every column summed as a number (no look-up tables): the
    column-sum kernel that the look-ups must reproduce, for tests and benchmarks."""
    from tclose.kernels.onehot import Layout

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
        _int64(layout.numeric),
        _int64(layout.group_lo),
        _int64(layout.group_hi),
        np.ascontiguousarray(layout.group_value, dtype=np.float64),
        _int64(layout.table_start),
        xt.min(axis=1) if has_numeric else np.empty(0),
        xt.max(axis=1) if has_numeric else np.empty(0),
        rows,
        start,
        _int64(sizes),
        column_total(x),
    )


def _int64(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


#: ``8 u`` (``u = 2^-53``, the unit roundoff). Both sums of a record's distance (look-ups and
#: column order) add ``K <= d + g + 8`` rounded non-negative terms (a group's term is
#: ``S_g - p_v^2 + (c - p_v)^2``, ``S_g = sum p_j^2``); each is within ``K u B`` of the exact
#: distance, ``B`` being the sum over the numeric columns of the largest ``(x_j - p_j)^2`` over
#: the column's range plus the sum over the groups of ``S_g`` and the largest table entry, which
#: bounds the distance and the partial sums of both. So the two differ by at most
#: ``e = 2 K u B``; the decisions need ``eps >= 2 e = 4 K u B``, and ``eps = 8 K u B`` doubles it
#: for the rounding of ``B`` itself.
_EPS_UNIT = 8.0 * 2.0**-53


@njit(
    "int64[::1](readonly(float64[:, ::1]), float64[:, ::1], int64[:, ::1], readonly(int64[::1]),"
    " readonly(int64[::1]), readonly(int64[::1]), readonly(float64[::1]),"
    " readonly(int64[::1]), readonly(float64[::1]), readonly(float64[::1]), int64[::1],"
    " readonly(int64[::1]), readonly(int64[::1]), float64[::1])",
    cache=True,
)
def _t_first_loop(
    x, xt, codes, numeric, group_lo, group_hi, group_value, table_start, low, high, rows, start,
    sizes, total,
):  # fmt: skip
    """The t-first loop, one compiled function (each helper would be compiled, and its code
    optimized again inside each caller). ``stage`` 0 takes the centroid of the records left and
    finds ``x0``; 1 clusters around ``x0`` and finds ``x1``, the farthest from it among the
    records left; 2 clusters around ``x1``.

    ``xt`` holds the numeric columns ``numeric`` of the records left (compacted, see the module
    doc), ``codes`` their category in each one-hot group ``[group_lo, group_hi)`` of value
    ``group_value``, ``low``/``high`` the numeric columns' ranges; stratum ``i`` holds the
    positions ``start[i]`` to ``start[i] + count[i] - 1`` (``count`` starts at ``sizes``).
    """
    n, d = x.shape
    n_strata = sizes.shape[0]
    n_numeric = numeric.shape[0]
    n_groups = group_lo.shape[0]
    count = sizes.copy()
    extras = sizes - n // n_strata
    labels = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    point = np.empty(d)
    point_numeric = np.empty(n_numeric)
    entries = 0
    for g in range(n_groups):
        entries += group_hi[g] - group_lo[g]
    table = np.empty(max(1, entries))
    members = np.empty(n_strata + 1, dtype=np.int64)
    m = n
    label = 0
    stage = 0
    seed = -1
    while m > 0:
        if stage == 0:
            for j in range(d):
                point[j] = total[j] / m
        else:
            for j in range(d):
                point[j] = x[seed, j]
        # The point's numeric coordinates and its table |c e_v - p|^2 for every group (twin of
        # tclose.kernels.onehot.fill_tables_reference), and eps (see _EPS_UNIT).
        bound = 0.0
        for a in range(n_numeric):
            p = point[numeric[a]]
            point_numeric[a] = p
            bound += max((high[a] - p) * (high[a] - p), (low[a] - p) * (low[a] - p))
        for g in range(n_groups):
            squares = 0.0
            for j in range(group_lo[g], group_hi[g]):
                squares += point[j] * point[j]
            worst = 0.0
            for j in range(group_lo[g], group_hi[g]):
                gap = group_value[g] - point[j]
                entry = (squares - point[j] * point[j]) + gap * gap
                table[table_start[g] + j - group_lo[g]] = entry
                worst = max(worst, abs(entry))
            bound += squares + worst
        eps = _EPS_UNIT * (d + n_groups + 8) * bound
        # Look-up distances of every record left: the numeric columns in column order, then
        # one table entry per group (twin: tclose.kernels.onehot.sq_dist_reference), by
        # blocks of positions that stay in L1 across the columns; the loops index views from 0,
        # so that Numba drops the negative-index test and vectorizes.
        for i in range(n_strata):
            for block in range(start[i], start[i] + count[i], _BLOCK):
                out = dist[block : min(block + _BLOCK, start[i] + count[i])]
                for j in range(n_numeric):
                    column = xt[j, block : block + out.shape[0]]
                    pj = point_numeric[j]
                    if j == 0:
                        for p in range(out.shape[0]):
                            diff = column[p] - pj
                            out[p] = diff * diff  # == 0.0 + diff * diff, bit for bit
                    else:
                        for p in range(out.shape[0]):
                            diff = column[p] - pj
                            out[p] += diff * diff
                if n_numeric == 0:
                    out[:] = 0.0
                for g in range(n_groups):
                    group = codes[g, block : block + out.shape[0]]
                    lookup = table[table_start[g] :]
                    for p in range(out.shape[0]):
                        out[p] += lookup[group[p]]
        if stage > 0:
            # One cluster: the closest record to the seed of every stratum, plus the second
            # closest of the first stratum that still holds extras, unless none does. In each
            # stratum the two nearest by the look-up distances give a threshold (the second's
            # + eps); the records within it get their column-order sum, which decides.
            taken = 0
            extra_taken = False
            for i in range(n_strata):
                lo = start[i]
                span = dist[lo : lo + count[i]]
                span_rows = rows[lo : lo + count[i]]
                threshold = np.inf
                first = second = -1
                for phase in range(2):
                    first, first_dist, first_row = -1, np.inf, -1
                    second, second_dist, second_row = -1, np.inf, -1
                    for a in range(span.shape[0]):
                        v = span[a]
                        if phase == 1:
                            if v > threshold:
                                continue
                            v = 0.0
                            for j in range(d):
                                diff = x[span_rows[a], j] - point[j]
                                v += diff * diff
                            span[a] = v
                        if v > second_dist:
                            continue
                        r = span_rows[a]
                        if v < first_dist or (v == first_dist and r < first_row):
                            second, second_dist, second_row = first, first_dist, first_row
                            first, first_dist, first_row = a, v, r
                        elif v < second_dist or r < second_row:
                            second, second_dist, second_row = a, v, r
                    threshold = span[second if second >= 0 else first] + eps
                members[taken] = span_rows[first]
                labels[span_rows[first]] = label
                taken += 1
                out_first, out_then = lo + first, -1
                if not extra_taken and extras[i] > 0:
                    extra_taken = True
                    extras[i] -= 1
                    members[taken] = span_rows[second]
                    labels[span_rows[second]] = label
                    taken += 1
                    # Higher position first, so that the record moved into it is never first.
                    out_first, out_then = lo + max(first, second), lo + min(first, second)
                for p in (out_first, out_then):  # swap-remove, dist moving along
                    last = lo + count[i] - 1
                    if p < 0:
                        continue
                    if p != last:
                        rows[p] = rows[last]
                        dist[p] = dist[last]
                        for j in range(n_numeric):
                            xt[j, p] = xt[j, last]
                        for g in range(n_groups):
                            codes[g, p] = codes[g, last]
                    count[i] -= 1
            for a in range(taken):
                for j in range(d):
                    total[j] -= x[members[a], j]
            m -= taken
            label += 1
            if stage == 2 or m == 0:
                stage = 0
                continue
        # The farthest record by the column-order sum, ties to the lowest row: dist holds
        # distances within eps / 2 of it; those within eps of the largest get the column sum
        # (no other can win). In stage 1, dist holds the distances to x0 of the records left.
        top, top_row = -np.inf, -1  # the largest (a branch, not max(): 15% faster here)
        for i in range(n_strata):
            span = dist[start[i] : start[i] + count[i]]
            span_rows = rows[start[i] : start[i] + count[i]]
            for a in range(span.shape[0]):
                if span[a] < top:
                    continue
                if span[a] > top or span_rows[a] < top_row:
                    top, top_row = span[a], span_rows[a]
        threshold = top - eps
        best, best_dist, best_row = -1, -1.0, -1
        for i in range(n_strata):
            for p in range(start[i], start[i] + count[i]):
                if dist[p] >= threshold:
                    r = rows[p]
                    v = 0.0
                    for j in range(d):
                        diff = x[r, j] - point[j]
                        v += diff * diff
                    dist[p] = v
                    if v > best_dist or (v == best_dist and r < best_row):
                        best, best_dist, best_row = p, v, r
        seed = rows[best]
        stage += 1
    return labels
