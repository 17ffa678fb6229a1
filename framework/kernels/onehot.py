"""Compact layout of one-hot column groups: categorical distances without one-hot in the hot loop.

A nominal quasi-identifier with ``m`` categories is embedded as ``m`` one-hot columns scaled by a
constant ``c`` (:mod:`tclose.base.attributes`; a hierarchy gives one such group per level). The
kernels' hot loop computes the squared distance of every remaining record to one point (a
centroid or a record); summed column by column it costs ``m`` operations per record and group.

**The exact trick.** In a group whose rows are ``c e_v`` (``v`` the row's category), the part of
the squared distance to a point ``p`` (its entries in the group's columns) is::

    |c e_v - p|^2 = (S - p_v^2) + (c - p_v)^2,    S = sum_j p_j^2

so one table ``lut[v]`` of ``m`` entries per point gives every record's term with one look-up of
its category code. For a centroid ``p`` is the vector of cluster frequencies times ``c``, and the
term is ``c^2 (1 - 2 f_v + sum f^2)``. When ``p`` is itself a record, the table holds exactly
``0`` and ``2 c^2``. The kernel keeps the other (numeric) columns as numbers.

**Detection** (:func:`column_layout`), from ``x`` alone, so that any caller of the kernels gets it:
scanning the columns left to right, a group is a run of at least two consecutive columns, each
holding only ``0`` and one common non-zero value ``c``, such that every row has exactly one
non-zero entry in the run (the run ends at the first column where that holds). Any run found this
way is a correct group whatever attribute produced it, so the layout is exact by construction;
a column not in a group stays numeric.

**Order of the sums.** :func:`sq_dist_reference` (NumPy) and the compiled loop add the numeric
columns first, in column order, then the groups' table entries in group order, with the same
floating-point operations, so the compiled look-up and its reference agree bit for bit. They do
not agree bit for bit with the plain column-order sum, which the kernels' decisions follow: the
t-first kernel uses the look-ups as a filter and recomputes the column sum for the records within
a rigorous rounding margin of each decision (:func:`tclose.kernels._compiled.
t_first_compiled`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Layout", "column_layout", "fill_tables_reference", "sq_dist_reference"]


@dataclass(frozen=True)
class Layout:
    """Where the numeric columns and the one-hot groups of ``x`` are.

    Attributes:
        numeric: ``int64`` indices of the columns kept as numbers, ascending.
        group_lo: ``int64 (g,)`` first column of each group.
        group_hi: ``int64 (g,)`` one past the last column of each group.
        group_value: ``float64 (g,)`` the non-zero value ``c`` of each group.
        codes: ``int64 (g, n)`` each row's category (column offset in its group).
        table_start: ``int64 (g,)`` offset of each group's entries in a table of
            :attr:`table_size` entries (the sum of the groups' widths).
    """

    numeric: np.ndarray
    group_lo: np.ndarray
    group_hi: np.ndarray
    group_value: np.ndarray
    codes: np.ndarray
    table_start: np.ndarray

    @property
    def table_size(self) -> int:
        """Entries of the look-up table: one per column of a group."""
        return int((self.group_hi - self.group_lo).sum())


def column_layout(x: np.ndarray) -> Layout:
    """Find the one-hot groups of ``x`` (see the module docstring).

    Args:
        x: ``(n, d)`` finite float array.

    Returns:
        the :class:`Layout`; every column is numeric when no group is found.

    Example:
        >>> x = np.array([[0.5, 0.7, 0.0], [1.5, 0.0, 0.7], [2.0, 0.7, 0.0]])
        >>> layout = column_layout(x)
        >>> layout.numeric.tolist(), layout.group_lo.tolist(), layout.codes.tolist()
        ([0], [1], [[0, 1, 0]])
    """
    n, d = x.shape
    numeric: list[int] = []
    groups: list[tuple[int, int]] = []
    a = 0
    while a < d:
        end = _group_end(x, a) if n else None
        if end is None:
            numeric.append(a)
            a += 1
        else:
            groups.append((a, end))
            a = end
    lo = np.array([g[0] for g in groups], dtype=np.int64)
    hi = np.array([g[1] for g in groups], dtype=np.int64)
    codes = np.empty((len(groups), n), dtype=np.int64)
    values = np.empty(len(groups))
    for i, (start, stop) in enumerate(groups):
        block = x[:, start:stop]
        codes[i] = np.argmax(block != 0, axis=1)
        values[i] = block[0, codes[i, 0]]
    widths = hi - lo
    return Layout(
        np.array(numeric, dtype=np.int64),
        lo,
        hi,
        values,
        codes,
        np.concatenate(([0], np.cumsum(widths)[:-1])).astype(np.int64),
    )


def _group_end(x: np.ndarray, a: int) -> int | None:
    """One past the last column of the group starting at column ``a``, or ``None``."""
    first = x[:, a]
    nonzero = np.flatnonzero(first)
    if nonzero.size == 0 or nonzero.size == first.size:
        return None  # an all-zero column, or no row left for the other columns
    value = first[nonzero[0]]
    count = np.zeros(x.shape[0], dtype=np.int64)
    for b in range(a, x.shape[1]):
        column = x[:, b]
        mask = column != 0
        if not (column[mask] == value).all():
            return None
        count += mask
        if count.max() > 1:
            return None
        if count.min() == 1:
            return b + 1 if b > a else None
    return None


def fill_tables_reference(layout: Layout, point: np.ndarray, table: np.ndarray) -> None:
    """``table[start_g + v] = |c_g e_v - point_g|^2`` for every group ``g`` and category ``v``
    (NumPy twin of the tables the compiled t-first loop fills, same operations in the same
    order)."""
    for g in range(layout.group_lo.shape[0]):
        p = point[layout.group_lo[g] : layout.group_hi[g]]
        squares = p * p
        total = np.cumsum(squares)[-1]  # sequential sum, as the compiled loop adds
        gap = layout.group_value[g] - p
        start = layout.table_start[g]
        table[start : start + p.shape[0]] = (total - squares) + gap * gap


def sq_dist_reference(
    layout: Layout, x: np.ndarray, rows: np.ndarray, point: np.ndarray
) -> np.ndarray:
    """Squared distances of the rows ``rows`` of ``x`` to ``point``: numeric columns first, in
    column order, then each group's table entry (the twin of the compiled t-first loop's)."""
    dist = np.zeros(rows.shape[0])
    for j in layout.numeric:
        diff = x[rows, j] - point[j]
        dist += diff * diff
    if layout.group_lo.shape[0]:
        table = np.empty(layout.table_size)
        fill_tables_reference(layout, point, table)
        for g in range(layout.group_lo.shape[0]):
            dist += table[layout.table_start[g] + layout.codes[g, rows]]
    return dist
