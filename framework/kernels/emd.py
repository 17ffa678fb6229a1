"""Earth mover's distance (EMD) with the ordered ground distance.

For an attribute whose ``m`` distinct values, sorted, are ``v_1 < ... < v_m``, the ground distance
between ``v_i`` and ``v_j`` is ``|i - j| / (m - 1)``, and the EMD between two distributions ``P``
and ``Q`` over these values is (Li, Li & Venkatasubramanian, 2007)::

    EMD(P, Q) = 1/(m-1) * sum_{i=1}^{m-1} | sum_{j<=i} (p_j - q_j) |

(``0`` when ``m = 1``): the mean absolute gap between the two cumulative distributions.

Exact arithmetic. For a cluster of ``s`` rows out of the ``n`` rows of the table, let ``F_i`` be
the number of the cluster's rows with a value ``<= v_{i+1}`` and ``G_i`` the same count over the
whole table (``i = 0..m-2``). Then ``EMD = E / (n * s * (m-1))`` with the integer

    E = sum_{i=0}^{m-2} | n * F_i - s * G_i |

Every EMD of a cluster in this module and in the kernels that use it (the merge loop, k-first) is
computed as ``float(E) / float(n * s * (m-1))`` with ``E`` exact in ``int64``, whichever way ``E``
is obtained (dense cumulative sums or the segment sums below). So all of them return bit-identical
values for the same group of rows, and decisions that compare EMDs (which cluster is farthest from
t-closeness, whether a swap lowers the EMD) are exact. ``int64`` holds ``E`` while
``n * n * (m - 1) < 2**63`` (about two million rows when all values are distinct); past that the
NumPy functions fall back to ``float64`` in the same formulas and the compiled kernels refuse.

Segment sums. Inside a cluster, ``F`` is a step function: constant between two consecutive codes of
the cluster's rows. ``G`` is nondecreasing, so for a constant ``F`` the sum of ``|n F - s G_i|``
over a range ``[lo, hi)`` splits at the first ``p`` with ``s G_p >= n F`` (a binary search) into two
sums of ``G`` read from its prefix sums. A cluster of ``s`` rows costs ``O(s log m)``, whatever
``m``; :meth:`OrderedEMD.cluster_emd` evaluates the segments of all clusters at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from tclose.base.jit import njit
from tclose.interfaces import FittedDistance

__all__ = ["OrderedEMD", "OrderedParts", "emd_ordered", "max_emd_of_rows", "ordered_parts"]

#: ``n * n * (m - 1)`` must stay below this for the ``int64`` numerators to be exact.
_INT64_SAFE = 2**62


def emd_ordered(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """EMD between two histograms over the same ``m`` ordered values.

    ``EMD(P, Q) = 1/(m-1) * sum_{i=1}^{m-1} |sum_{j<=i} (p_j - q_j)|`` where ``p`` and ``q`` are
    the histograms normalized to sum 1; ``0`` when ``m = 1``.

    Args:
        p_counts: ``(m,)`` nonnegative counts (or weights) of the first distribution.
        q_counts: ``(m,)`` nonnegative counts (or weights) of the second distribution.

    Returns:
        the EMD, in ``[0, 1]``.

    Raises:
        ValueError: if the shapes differ, a histogram is empty (sums to 0), or has a negative entry.

    Examples:
        The example of Li et al. (2007): salaries 3k, 4k, ..., 11k, one record each.

        >>> everyone = [1] * 9
        >>> emd_ordered([1, 1, 1, 0, 0, 0, 0, 0, 0], everyone)  # {3k, 4k, 5k}
        0.375
        >>> round(emd_ordered([0, 0, 0, 1, 0, 1, 0, 0, 1], everyone), 3)  # {6k, 8k, 11k}
        0.167
        >>> emd_ordered([2], [5])
        0.0
    """
    p = np.asarray(p_counts, dtype=np.float64)
    q = np.asarray(q_counts, dtype=np.float64)
    if p.ndim != 1 or p.shape != q.shape or p.size == 0:
        raise ValueError(
            f"Expected two histograms of the same length m >= 1; got shapes "
            f"{p.shape} and {q.shape}."
        )
    if (p < 0).any() or (q < 0).any() or p.sum() <= 0 or q.sum() <= 0:
        raise ValueError("Histograms must be nonnegative and not empty.")
    return float(_emd_dense(p / p.sum(), q / q.sum()))


def _emd_dense(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """EMD of normalized histograms ``p`` and ``q`` along the last axis (broadcasting)."""
    m = p.shape[-1]
    if m == 1:
        return np.zeros(np.broadcast_shapes(p.shape, q.shape)[:-1])
    gaps = np.cumsum(p - q, axis=-1)[..., :-1]
    return np.abs(gaps).sum(axis=-1) / (m - 1)


class OrderedParts(NamedTuple):
    """What the compiled kernels need to compute exact ordered EMDs of groups of the rows.

    A fitted distance offers it through a method ``ordered_parts()`` (see :func:`ordered_parts`);
    the merge loop and k-first then take their compiled paths. The reference distribution may be
    that of a larger table than the rows handed to the kernel (e.g. one block of a blocked run):
    a group of ``s`` rows has ``EMD = E / (N s (M - 1))`` with
    ``E = sum_{i<M-1} |N F_i - s cum_counts[i]|``, ``F_i`` counting its rows with a code ``<= i``.

    Attributes:
        codes: ``int64 (n,)``: the kernel's rows' codes in the reference's ``M`` ordered values.
        cum_counts: ``int64 (M,)``: reference rows with a code ``<= i`` (``cum_counts[-1] == N``).
        cum_prefix: ``int64 (M,)``: ``sum_{j<i} cum_counts[j]``.
        table_rows: ``N``, the rows of the reference table; ``N * N * (M - 1)`` must be below
            ``2**62`` (the provider returns ``None`` otherwise).
    """

    codes: np.ndarray
    cum_counts: np.ndarray
    cum_prefix: np.ndarray
    table_rows: int


def ordered_parts(distance: FittedDistance) -> OrderedParts | None:
    """``distance.ordered_parts()`` if the distance has that method, else ``None``."""
    method = getattr(distance, "ordered_parts", None)
    return method() if callable(method) else None


class OrderedEMD:
    """EMD with the ordered distance, fitted on a whole confidential column.

    Implements :class:`tclose.interfaces.FittedDistance`. Build it with :meth:`fit`.

    Attributes:
        name: ``"emd-ordered"``.
        values: the ``m`` distinct values of the column, sorted ascending.
        codes: ``int64 (n,)``: index of each row's value in :attr:`values`.
        m: number of distinct values.
        n: number of rows.
        global_counts: ``int64 (m,)``: rows holding each value.
        cum_counts: ``int64 (m,)``: rows holding a value ``<= values[i]`` (``cum_counts[-1] == n``).
        cum_prefix: ``int64 (m,)``: ``cum_prefix[i] = sum_{j<i} cum_counts[j]``.
        ranks: ``int64 (n,)``: position of each row in the order (value, row index): the inverse
            permutation of a stable argsort of :attr:`codes`.
        exact: whether ``n * n * (m - 1) < 2**62``, so that EMD numerators are exact in ``int64``.
        column: the confidential column's name, set by the runner (``None`` until then).
    """

    name = "emd-ordered"

    def __init__(self, values: np.ndarray, codes: np.ndarray) -> None:
        """Use :meth:`fit`. ``values``: the sorted distinct values; ``codes``: ``int64 (n,)``."""
        self.values = values
        self.codes = np.ascontiguousarray(codes, dtype=np.int64)
        self.n = int(self.codes.shape[0])
        self.m = int(values.shape[0])
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        self.cum_counts = np.cumsum(self.global_counts)
        self.cum_prefix = np.concatenate(([0], np.cumsum(self.cum_counts[:-1]))).astype(np.int64)
        self._order = np.argsort(self.codes, kind="stable")
        self.ranks = np.empty(self.n, dtype=np.int64)
        self.ranks[self._order] = np.arange(self.n, dtype=np.int64)
        self.exact = self.n * self.n * max(self.m - 1, 1) < _INT64_SAFE
        self.column: str | None = None

    @classmethod
    def fit(cls, values: np.ndarray) -> OrderedEMD:
        """Fit on the whole confidential column.

        Args:
            values: ``(n,)`` array of any sortable dtype (numbers, ordinal codes, strings); no NaN.

        Returns:
            the fitted distance.

        Raises:
            ValueError: if ``values`` is not one-dimensional, is empty, or holds NaN.
        """
        values = np.asarray(values)
        if values.ndim != 1 or values.size == 0:
            raise ValueError(
                f"Expected a non-empty column of shape (n,); got shape {values.shape}."
            )
        if values.dtype.kind in "fc" and np.isnan(values).any():
            raise ValueError(f"The column holds {int(np.isnan(values).sum())} NaN values.")
        distinct, codes = np.unique(values, return_inverse=True)
        return cls(distinct, codes.reshape(-1))

    def __repr__(self) -> str:
        return f"OrderedEMD(n={self.n}, m={self.m})"

    def ordered_parts(self) -> OrderedParts | None:
        """The exact description used by the compiled kernels (``None`` if not :attr:`exact`)."""
        if not self.exact:
            return None
        return OrderedParts(self.codes, self.cum_counts, self.cum_prefix, self.n)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD between each cluster and the whole column, in ``O(n log n)``.

        Rows are sorted by (label, code). After the ``r``-th row of a cluster of ``s`` rows
        (``r = 1..s``) the cluster's count ``F`` is ``r`` up to the next row's code; each such
        segment is summed with one binary search in the global cumulative counts and their prefix
        sums (see the module documentation), all segments of all clusters at once.

        Args:
            labels: ``int64 (n,)`` dense labels ``0..L-1`` (every label in the range used).

        Returns:
            ``float64 (L,)``: entry ``c`` is the EMD of cluster ``c``.

        Raises:
            ValueError: if ``labels`` has the wrong shape, a negative label, or an unused label.
        """
        labels = np.asarray(labels)
        if labels.shape != (self.n,):
            raise ValueError(f"Expected labels of shape ({self.n},); got {labels.shape}.")
        if labels.dtype.kind not in "iu" or (self.n and labels.min() < 0):
            raise ValueError("Labels must be nonnegative integers.")
        labels = labels.astype(np.int64, copy=False)
        if self.n == 0:
            return np.zeros(0)
        sizes = np.bincount(labels)
        if (sizes == 0).any():
            raise ValueError(f"Labels must be dense: label {int(np.argmin(sizes))} is unused.")
        if self.m == 1:
            return np.zeros(sizes.shape[0])
        order = self._order[np.argsort(labels[self._order], kind="stable")]
        lab = labels[order]
        lo = self.codes[order]
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        ends = starts + sizes - 1
        hi = np.empty_like(lo)
        hi[:-1] = lo[1:]
        hi[ends] = self.m - 1
        count = np.arange(self.n) - starts[lab] + 1
        return segment_emds(
            lo, hi, count, sizes[lab], lo[starts], starts, self.cum_counts, self.cum_prefix,
            self.n, self.exact,
        )  # fmt: skip

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        """EMD between groups given as value histograms and the whole column (dense, ``O(g m)``).

        Args:
            counts: ``(m,)`` or ``(g, m)`` nonnegative integer counts: how many rows of each group
                hold each value. Every group must be non-empty.

        Returns:
            a ``float64`` scalar array for one group, or ``(g,)`` for ``g`` groups.

        Raises:
            ValueError: on a wrong shape, negative counts or an empty group.
        """
        counts = np.asarray(counts)
        if counts.ndim not in (1, 2) or counts.shape[-1] != self.m:
            raise ValueError(
                f"Expected counts of shape ({self.m},) or (g, {self.m}); got {counts.shape}."
            )
        if counts.dtype.kind not in "iub" and not np.array_equal(counts, np.round(counts)):
            raise ValueError("Counts must be integers.")
        dtype = np.int64 if self.exact else np.float64
        f = np.cumsum(counts.astype(dtype), axis=-1)
        s = f[..., -1]
        if (f[..., 0] < 0).any() or (np.diff(f, axis=-1) < 0).any():
            raise ValueError("Counts must be nonnegative.")
        if (s == 0).any():
            raise ValueError("Every group must hold at least one row.")
        if self.m == 1:
            return np.zeros(s.shape)
        gaps = self.n * f[..., :-1] - s[..., None] * self.cum_counts[:-1].astype(dtype)
        numer = np.abs(gaps).sum(axis=-1)
        denom = self.n * s * (self.m - 1)
        return np.asarray(numer, dtype=np.float64) / np.asarray(denom, dtype=np.float64)


def segment_emds(
    lo: np.ndarray,
    hi: np.ndarray,
    count: np.ndarray,
    size: np.ndarray,
    first: np.ndarray,
    starts: np.ndarray,
    cum_counts: np.ndarray,
    cum_prefix: np.ndarray,
    n: int,
    exact: bool,
) -> np.ndarray:
    """EMDs of groups against a reference, from the segments on which each group's count is
    constant: ``E = s cum_prefix[first] + sum over segments of sum_{i in [lo, hi)} |n F - s G_i|``
    and ``EMD = E / (n s (m - 1))``, all groups at once, ``O(S log m)`` for ``S`` segments (the
    NumPy twin of :func:`numerator_sorted`, for :meth:`OrderedEMD.cluster_emd` and the block
    views).

    Args:
        lo, hi: ``int64 (S,)`` each segment's codes ``[lo, hi)`` (``hi <= m - 1``), the segments
            of a group consecutive, its first at ``starts``.
        count: ``(S,)`` the group's rows at or below the segment's codes (``F``).
        size: ``(S,)`` the size ``s`` of the segment's group.
        first: ``(L,)`` each group's lowest code (``F = 0`` below it).
        starts: ``(L,)`` the index of each group's first segment.
        cum_counts, cum_prefix: the reference's ``G`` ``(m,)``, ``m >= 2``, and its prefix sums.
        n: the reference's rows.
        exact: sums in ``int64`` (exact) rather than ``float64``.

    Returns:
        ``float64 (L,)``.
    """
    dtype = np.int64 if exact else np.float64
    s: np.ndarray = size.astype(dtype, copy=False)  # read only
    v: np.ndarray = count.astype(dtype, copy=False) * n
    # First i with s * G_i >= v, i.e. G_i >= ceil(v / s), clipped into [lo, hi].
    threshold = -(-v // s)
    p = np.clip(np.searchsorted(cum_counts, threshold, side="left"), lo, hi)
    sg = cum_prefix.astype(dtype, copy=False)
    seg = v * (p - lo) - s * (sg[p] - sg[lo]) + s * (sg[hi] - sg[p]) - v * (hi - p)
    sizes = size[starts].astype(dtype)
    numer = np.add.reduceat(seg, starts) + sizes * sg[first]
    denom = n * sizes * (cum_counts.shape[0] - 1)
    return numer.astype(np.float64) / denom.astype(np.float64)


def max_emd_of_rows(distances: Sequence[FittedDistance], rows: np.ndarray) -> float:
    """The largest EMD over the attributes of the group made of ``rows``.

    A distance with :class:`OrderedParts` (an exact :class:`OrderedEMD`, see :func:`ordered_parts`)
    is evaluated from the group's sorted codes (``O(s log s)``, bit for bit
    :meth:`OrderedEMD.cluster_emd`); any other distance from the group's histogram through its
    ``emd_of_counts`` (``O(m)``).

    Args:
        distances: one fitted distance per confidential attribute.
        rows: ``int64 (s,)`` rows of the group, ``s >= 1``.
    """
    worst = 0.0
    for d in distances:
        parts = ordered_parts(d)
        if parts is not None:
            numer = numerator_of_rows(
                parts.codes, rows, parts.cum_counts, parts.cum_prefix, parts.table_rows
            )
            emd = cast(Any, emd_from_numerator).py_func(  # the same rule, not compiled
                numer, parts.table_rows, rows.shape[0], parts.cum_counts.shape[0]
            )
        else:
            emd = float(d.emd_of_counts(np.bincount(d.codes[rows], minlength=d.m)))
        worst = max(worst, emd)
    return worst


# ----------------------------------------------------------------------------------------------
# Exact int64 numerators of one group (the merge loop; k-first and refinement keep their own
# compiled copies, see their modules).


@njit("int64(readonly(int64[::1]), int64, readonly(int64[::1]), readonly(int64[::1]))", cache=True)
def numerator_sorted(codes: np.ndarray, n: int, cum: np.ndarray, cum_prefix: np.ndarray) -> int:
    """The exact EMD numerator ``E`` of a cluster given its codes sorted ascending, ``O(s log m)``.

    After its ``r``-th row (``r = 1..s``) the cluster's count ``F`` is ``r`` up to the next row's
    code: on that range ``[lo, hi)`` the sum of ``|v - s cum[i]|`` (``v = n F``) splits at the
    first ``i`` with ``s cum[i] >= v`` (a binary search; ``cum`` is nondecreasing) into two sums
    of ``cum`` read from its prefix sums.

    Args:
        codes: ``int64 (s,)`` sorted codes of the cluster's rows, ``s >= 1``.
        n: rows in the table.
        cum: global cumulative counts ``(m,)``.
        cum_prefix: prefix sums of ``cum``, ``(m,)``: ``cum_prefix[i] = sum_{j<i} cum[j]``.

    Returns:
        ``E``; the EMD is ``E / (n * s * (m - 1))``.
    """
    s = codes.shape[0]
    top = cum.shape[0] - 1
    total = s * cum_prefix[min(codes[0], top)]  # F = 0 below the first code
    for r in range(s):
        lo = codes[r]
        hi = codes[r + 1] if r + 1 < s else top
        if hi <= lo:
            continue
        v = n * (r + 1)
        a, b = lo, hi
        while a < b:
            mid = (a + b) // 2
            if s * cum[mid] >= v:
                b = mid
            else:
                a = mid + 1
        total += (
            v * (a - lo)
            - s * (cum_prefix[a] - cum_prefix[lo])
            + s * (cum_prefix[hi] - cum_prefix[a])
            - v * (hi - a)
        )
    return total


@njit("float64(int64, int64, int64, int64)", cache=True)
def emd_from_numerator(numer: int, n: int, s: int, m: int) -> float:
    """``float(E) / float(n * s * (m - 1))``; ``0`` when ``m == 1``. The one rounding rule
    (Python code calls its ``py_func``: the same operations, nothing to compile)."""
    if m <= 1:
        return 0.0
    return float(numer) / float(n * s * (m - 1))


def numerator_of_rows(
    codes: np.ndarray, rows: np.ndarray, cum: np.ndarray, cum_prefix: np.ndarray, n: int
) -> int:
    """The exact EMD numerator ``E`` of the cluster made of ``rows`` (any order), ``O(s log s)``.

    Args:
        codes: ``int64`` codes of the rows (indexed by ``rows``).
        rows: ``int64 (s,)`` the cluster's rows, ``s >= 1``.
        cum: the reference cumulative counts ``(m,)``.
        cum_prefix: prefix sums of ``cum``, ``(m,)``.
        n: rows of the reference table (``cum[-1]``).
    """
    return int(
        numerator_sorted(
            np.sort(codes[rows]).astype(np.int64, copy=False),
            int(n),
            np.ascontiguousarray(cum, dtype=np.int64),
            np.ascontiguousarray(cum_prefix, dtype=np.int64),
        )
    )
