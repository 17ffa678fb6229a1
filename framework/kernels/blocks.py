"""Fitted distances restricted to a block's rows, measuring EMDs against the whole table.

The block service (:mod:`tclose.blocks.service`) runs an algorithm on blocks of the rows; in a
block, the algorithm receives these views instead of the whole-table distances.

**EMD against the whole table inside a block.** A block's task measures EMDs against the
*global* distribution of every confidential attribute, never the block's own. The kernels take
fitted distances over the rows they are given, so the task builds a :class:`RestrictedOrderedEMD`
per attribute: a fitted distance over the block's rows whose reference distribution is the whole
table's. It needs only the whole table's cumulative counts (sent once per worker, see
:class:`OrderedReference`) and the block rows' value codes (sent with the block). It offers
``ordered_parts()`` (:class:`~tclose.kernels.emd.OrderedParts` with the whole table as
reference), so the merge loop and k-first take their compiled exact paths; for ``emd_of_counts``
its value domain is compressed to the values present in the block (a histogram costs ``O(m_b)``,
not ``O(m)``). Its EMDs are those of the whole table's :class:`OrderedEMD` for the same rows, bit
for bit (same exact integer numerator, same final division). Distances other than
``emd-ordered`` get a :class:`RestrictedDistance`, which delegates to the fitted distance
(``O(m)`` per histogram).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tclose.interfaces import FittedDistance

if TYPE_CHECKING:
    from tclose.kernels.emd import OrderedParts

__all__ = [
    "OrderedReference",
    "RestrictedDistance",
    "RestrictedOrderedEMD",
    "reference_of",
    "restrict",
]


# ------------------------------------------------------------------------------------------------
# Distances restricted to a block, measured against the whole table


@dataclass(frozen=True)
class OrderedReference:
    """What a block needs of a whole-table :class:`OrderedEMD`: its cumulative counts.

    Attributes:
        name: the distance's name.
        column: the confidential column.
        n: rows of the whole table.
        m: distinct values of the whole table.
        cum_counts: ``int64 (m,)`` rows holding a value ``<= values[i]``.
        cum_prefix: ``int64 (m,)`` ``sum_{j<i} cum_counts[j]``.
        exact: whether EMD numerators are exact in ``int64``.
    """

    name: str
    column: str | None
    n: int
    m: int
    cum_counts: np.ndarray
    cum_prefix: np.ndarray
    exact: bool


def reference_of(distance: FittedDistance) -> Any:
    """The part of a fitted distance that block tasks need (sent once per worker)."""
    from tclose.kernels.emd import OrderedEMD

    if isinstance(distance, OrderedEMD):
        return OrderedReference(
            distance.name,
            distance.column,
            distance.n,
            distance.m,
            distance.cum_counts,
            distance.cum_prefix,
            bool(distance.exact),
        )
    return distance


class RestrictedOrderedEMD:
    """The ordered EMD of groups of a block's rows against the whole table's distribution.

    A :class:`~tclose.interfaces.FittedDistance` over the block's ``n_b`` rows. Its value domain
    is the ``m_b`` distinct values present in the block (``codes`` index them, ascending), but
    every EMD is the whole table's: for a group of ``s`` rows with count ``F_i`` at or below the
    whole table's ``i``-th value, ``E = sum_{i<m-1} |N F_i - s G_i|`` over the whole table's
    ``m`` values and cumulative counts ``G``, and ``EMD = E / (N s (m - 1))``. ``F`` is constant
    between two consecutive block values, so each such range is a segment sum (one binary search
    in ``G``, two prefix-sum lookups), as in :mod:`tclose.kernels.emd`.

    Attributes:
        name, column: the whole-table distance's.
        codes: ``int64 (n_b,)`` index of each block row's value among the block's values.
        m: number of distinct values in the block.
        global_counts: ``int64 (m,)`` block rows holding each of the block's values.
        ranks: ``int64 (n_b,)`` the block rows' positions in the whole table's order.
        reference: the whole table's :class:`OrderedReference`.
        value_codes: ``int64 (m,)`` the block's values as codes of the whole table's values.
    """

    def __init__(
        self,
        reference: OrderedReference,
        table_codes: np.ndarray,
        table_ranks: np.ndarray | None = None,
    ) -> None:
        """Build from the whole-table codes (and optionally ranks) of the block's rows."""
        table_codes = np.asarray(table_codes, dtype=np.int64)
        self.name = reference.name
        self.column = reference.column
        self.reference = reference
        self.value_codes, codes = np.unique(table_codes, return_inverse=True)
        self.codes = codes.reshape(-1).astype(np.int64)
        self.m = int(self.value_codes.shape[0])
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        order = np.argsort(table_codes if table_ranks is None else table_ranks, kind="stable")
        self.ranks = np.empty(order.shape[0], dtype=np.int64)
        self.ranks[order] = np.arange(order.shape[0], dtype=np.int64)
        self._table_codes = table_codes

    def __repr__(self) -> str:
        return (
            f"RestrictedOrderedEMD(rows={self.codes.shape[0]}, m={self.m}, "
            f"table n={self.reference.n}, m={self.reference.m})"
        )

    def _emd(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        count: np.ndarray,
        size: np.ndarray,
        first: np.ndarray,
        starts: np.ndarray,
    ) -> np.ndarray:
        """EMDs from segments: on whole-table codes ``[lo, hi)`` a group of ``size`` rows has
        cumulative count ``count``; ``first`` is each group's lowest code, ``starts`` the index
        of each group's first segment."""
        from tclose.kernels.emd import segment_emds

        ref = self.reference
        if ref.m <= 1:
            return np.zeros(starts.shape[0])
        return segment_emds(
            lo, hi, count, size, first, starts, ref.cum_counts, ref.cum_prefix, ref.n, ref.exact
        )

    def ordered_parts(self) -> OrderedParts | None:
        """The exact description the compiled kernels use (merge loop, k-first): the block rows'
        codes among the whole table's values, and the whole table's cumulative counts.
        ``None`` when the whole table's numerators are not exact in ``int64``."""
        from tclose.kernels.emd import OrderedParts

        ref = self.reference
        if not ref.exact:
            return None
        return OrderedParts(self._table_codes, ref.cum_counts, ref.cum_prefix, ref.n)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD of each cluster of block rows against the whole table, ``O(n_b log n_b)``.

        Args:
            labels: ``int64 (n_b,)`` dense labels ``0..L-1``.

        Returns:
            ``float64 (L,)``; bit for bit the whole table's ``OrderedEMD.cluster_emd`` value of
            the same rows.
        """
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != self.codes.shape:
            raise ValueError(f"Expected labels of shape {self.codes.shape}; got {labels.shape}.")
        if labels.shape[0] == 0:
            return np.zeros(0)
        sizes = np.bincount(labels)
        if (sizes == 0).any():
            raise ValueError(f"Labels must be dense: label {int(np.argmin(sizes))} is unused.")
        top = self.reference.m - 1
        order = np.lexsort((self._table_codes, labels))
        lab = labels[order]
        lo = self._table_codes[order]
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        hi = np.empty_like(lo)
        hi[:-1] = lo[1:]
        hi[starts[1:] - 1] = top
        hi[-1] = top
        lo = np.minimum(lo, top)
        count = np.arange(lab.shape[0]) - starts[lab] + 1
        return self._emd(lo, hi, count, sizes[lab], lo[starts], starts)

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        """EMD against the whole table of groups given as histograms over the block's values.

        Args:
            counts: ``(m,)`` or ``(g, m)`` nonnegative integer counts over the block's ``m``
                values; every group non-empty.

        Returns:
            a ``float64`` scalar array for one group, or ``(g,)``.
        """
        counts = np.asarray(counts)
        if counts.ndim not in (1, 2) or counts.shape[-1] != self.m:
            raise ValueError(
                f"Expected counts of shape ({self.m},) or (g, {self.m}); got {counts.shape}."
            )
        single = counts.ndim == 1
        counts = np.atleast_2d(counts).astype(np.int64)
        if (counts < 0).any():
            raise ValueError("Counts must be nonnegative.")
        cumulative = np.cumsum(counts, axis=1)
        size = cumulative[:, -1]
        if (size == 0).any():
            raise ValueError("Every group must hold at least one row.")
        groups, width = counts.shape
        top = self.reference.m - 1
        lo = np.minimum(np.broadcast_to(self.value_codes, (groups, width)), top)
        hi = np.empty_like(lo)
        hi[:, :-1] = lo[:, 1:]
        hi[:, -1] = top
        # A group's first segment starts at the block's lowest value, where its count may be 0:
        # the first-code term ``s * cum_prefix[lo]`` below then covers the codes under it.
        starts = np.arange(groups) * width
        result = self._emd(
            lo.reshape(-1),
            hi.reshape(-1),
            cumulative.reshape(-1),
            np.repeat(size, width),
            lo[:, 0],
            starts,
        )
        return result[0] if single else result


class RestrictedDistance:
    """Any fitted distance restricted to a block's rows (delegates every EMD to it).

    ``codes`` are the whole table's codes of the block rows and ``m`` the whole table's, so a
    histogram costs ``O(m)``; ``emd_of_counts`` is the fitted distance's own (whole-table
    reference), ``cluster_emd`` goes through it with one histogram per cluster.
    """

    def __init__(
        self, distance: FittedDistance, table_codes: np.ndarray, table_ranks: np.ndarray
    ) -> None:
        self.name = distance.name
        self.column = distance.column
        self.distance = distance
        self.codes = np.asarray(table_codes, dtype=np.int64)
        self.m = distance.m
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        order = np.argsort(table_ranks, kind="stable")
        self.ranks = np.empty(order.shape[0], dtype=np.int64)
        self.ranks[order] = np.arange(order.shape[0], dtype=np.int64)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        labels = np.asarray(labels, dtype=np.int64)
        n_clusters = int(labels.max()) + 1 if labels.size else 0
        counts = np.bincount(labels * self.m + self.codes, minlength=n_clusters * self.m)
        return np.atleast_1d(self.distance.emd_of_counts(counts.reshape(n_clusters, self.m)))

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        return self.distance.emd_of_counts(counts)

    def tree_parts(self) -> Any:
        """The distance's tree description (k-first's compiled nominal path) with the block rows'
        codes, EMDs against the whole table; ``None`` if the distance has none."""
        from tclose.kernels.nominal import tree_parts

        parts = tree_parts(self.distance)
        return None if parts is None else parts._replace(codes=self.codes)


def restrict(reference: Any, table_codes: np.ndarray, table_ranks: np.ndarray | None = None) -> Any:
    """A fitted distance over a block's rows, measuring EMDs against the whole table.

    Args:
        reference: :func:`reference_of` a whole-table fitted distance.
        table_codes: the whole-table codes of the block's rows.
        table_ranks: the whole-table ranks of the block's rows (for the view's ``ranks``;
            default: the order of the codes, ties by position).
    """
    if isinstance(reference, OrderedReference):
        return RestrictedOrderedEMD(reference, table_codes, table_ranks)
    ranks = table_codes if table_ranks is None else table_ranks
    return RestrictedDistance(reference, table_codes, ranks)
