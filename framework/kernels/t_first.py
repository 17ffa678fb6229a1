"""t-closeness-first microaggregation: Algorithm 3 of Soria-Comas et al.

The records are split by the rank of the confidential attribute into ``k'`` strata (subsets) of
consecutive ranks; every cluster then takes one record from each stratum, chosen in the
quasi-identifier space around an MDAV-like seed. Proposition 2 of the paper bounds the EMD of such
a cluster, so ``k'`` is chosen from ``t``.

**Cluster size.** Expression (7) and the adjustment (8) of the paper::

    k' = max(k, ceil(n / (2 (n - 1) t + 1)))
    k' = k' + floor((n mod k') / floor(n / k'))

The pseudocode prints a ceiling in the second line; the text's floor is the one that reproduces
Table 3 (``n = 1080, t = 0.01`` gives ``k' = 49``), so the floor is used. The ceiling is computed
exactly in integers, with ``t`` read as the decimal number it prints as (``0.05`` is ``1/20``, not
the binary double just above it), so that a quotient that is an integer in decimal arithmetic is
not pushed to the next integer by rounding. If ``k > n``, ``k' = n`` (one cluster; callers reject
``n < k`` before). A ``k'`` above ``n / 2`` becomes ``n`` through the adjustment.

After the adjustment, ``r = n mod k' < floor(n / k')`` always holds, i.e. there are fewer extra
records than clusters: with ``q = floor(n / k)``, ``n mod k = a q + b`` (``a`` the increment,
``0 <= b < q``), ``n = q (k + a) + b`` and ``b <= n mod k < k <= k + a``, so ``floor(n / k') = q``
and ``n mod k' = b < q``. No cluster ever needs two extra records.

**Strata.** Let ``q = floor(n / k')`` and ``r = n mod k'``. Stratum ``S_i`` (``i = 1..k'``) holds
``q`` consecutive ranks, plus extras for the central strata: if ``k'`` is odd, all ``r`` extras
go to ``S_{(k'+1)/2}``; if ``k'`` is even, ``ceil(r/2)`` go to the lower-middle ``S_{k'/2}`` and
``floor(r/2)`` to the upper-middle ``S_{k'/2+1}``. The strata stay contiguous in rank order: stratum
``i`` holds the ranks ``sum(|S_j|, j < i) .. sum(|S_j|, j <= i) - 1``.

**Clusters.** While records remain: ``x_a`` is the centroid of the remaining records, ``x_0`` the
remaining record farthest from it; the cluster of ``x_0`` takes, from every stratum, its remaining
record closest to ``x_0``. Then ``x_1`` is the remaining record farthest from ``x_0`` and a second
cluster is built around it the same way. Distances are squared Euclidean on the standardized QIs;
ties go to the lowest row index, in every search. Distances are summed column by column in column
order (:func:`tclose.kernels._compiled.sq_dist_reference`), so that ties between distinct
records break the same way everywhere. The compiled kernel does not pay one term per one-hot column
of a nominal QI: it filters with one table look-up per group (:mod:`tclose.kernels.onehot`)
and recomputes the column sum only for the records that could win a decision, with a rigorous
rounding margin (:func:`tclose.kernels._compiled.t_first_compiled`): its labels are those
of :func:`t_first_reference`, bit for bit.

*Extra records.* The paper's test for a second record from ``S_i`` (``|S_i| > |S_1|`` and
``|C| = i``) fails when ``S_1`` itself holds extras (``k' = 2``, ``n`` odd: the extra is never
taken). The rule used here: a cluster takes a second record (the second closest) from the first
stratum, in stratum order, that still holds extras, unless it already took one. So the first ``r``
clusters have ``k' + 1`` records (the lower-middle stratum's extras are used first), the others
``k'``, every cluster has exactly one record of every stratum plus at most one extra, and there
are exactly ``q`` clusters.

**EMD.** Proposition 2 gives ``EMD <= (n - k') / (2 (n - 1) k') <= t`` for distinct confidential
values when ``k'`` divides ``n``, and this holds (tested). Otherwise the paper uses that bound "as
an approximation", and clusters can exceed ``t``:

- clusters with an extra record, by up to a third in the worst case: for ``k' = 2`` and ``n``
  odd (``t = 0.25``), the ranks ``{0, 1, ceil(n/2)}`` have an EMD that approaches ``1/3`` as ``n``
  grows (0.267 at ``n = 11``, 0.333 at ``n = 23435``);
  for Table 3's own ``n = 1080, t = 0.01`` (``k' = 49``, two extras) the worst cluster of 50 has
  EMD 0.0141;
- clusters of ``k'`` records, slightly, the strata being unequal (``n = 1079, k' = 10``: worst
  0.0513 for ``t = 0.05``).

These worst cases need QIs that track the confidential order. In our runs (n = 1079 to 5003) no
cluster exceeded ``t`` with QIs independent of the confidential attribute; with correlation
0.9-0.99, up to two clusters in a run did, all with an extra record (EMD up to 0.33 for
``t = 0.25``). With ties in the confidential values the bound can fail outright. Callers check
every cluster and merge when needed.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from tclose.kernels._compiled import (
    column_total,
    sq_dist_reference,
    subtract_rows_reference,
)

__all__ = [
    "NUMPY_BELOW",
    "cluster_size",
    "strata_sizes",
    "t_first",
    "t_first_reference",
    "t_first_strata",
]

#: Tables of fewer rows are clustered by the NumPy twin (:func:`t_first_reference`, the same
#: labels bit for bit): loading a compiled kernel from Numba's cache costs about 0.2 s of CPU the
#: first time in a process (Numba's registries), more than the NumPy loop on a few hundred rows.
NUMPY_BELOW = 300


def cluster_size(n: int, k: int, t: float) -> int:
    """The cluster size ``k'`` of t-first for ``n`` records (Expressions (7) and (8) of the paper).

    Args:
        n: number of records, ``n >= 0``.
        k: requested minimum cluster size, ``k >= 1``.
        t: t-closeness level, ``0 < t <= 1``, read as the decimal it prints as.

    Returns:
        ``k'``, between ``min(k, n)`` and ``n`` (``0`` when ``n = 0``).

    Example:
        >>> cluster_size(1080, 2, 0.01), cluster_size(1080, 2, 0.05), cluster_size(1080, 2, 0.25)
        (49, 10, 2)
    """
    n, k, t_exact = _validate_scalars(n, k, t)
    if n == 0:
        return 0
    num, den = t_exact.numerator, t_exact.denominator
    # ceil(n / (2 (n-1) t + 1)) with t = num/den, in integers.
    size = max(k, -(-(n * den) // (2 * (n - 1) * num + den)))
    if size >= n:
        return n
    return size + (n % size) // (n // size)


def strata_sizes(n: int, k_effective: int) -> np.ndarray:
    """Sizes of the ``k'`` strata: ``floor(n / k')`` each, the remainder in the central one(s).

    Args:
        n: number of records.
        k_effective: ``k'`` from :func:`cluster_size` (``1 <= k' <= n``).

    Returns:
        ``int64`` array of shape ``(k',)``, in ascending rank order; it sums to ``n``.

    Example:
        >>> strata_sizes(11, 3).tolist(), strata_sizes(11, 4).tolist(), strata_sizes(13, 4).tolist()
        ([3, 5, 3], [2, 4, 3, 2], [3, 4, 3, 3])
    """
    q, r = divmod(n, k_effective)
    sizes = np.full(k_effective, q, dtype=np.int64)
    if k_effective % 2:
        sizes[k_effective // 2] += r
    else:
        sizes[k_effective // 2 - 1] += (r + 1) // 2
        sizes[k_effective // 2] += r // 2
    return sizes


def t_first(x: np.ndarray, ranks: np.ndarray, k: int, t: float) -> tuple[np.ndarray, int]:
    """Partition the rows of ``x`` with t-closeness-first microaggregation (compiled kernel;
    below :data:`NUMPY_BELOW` rows its NumPy twin, with the same labels).

    Args:
        x: ``(n, d)`` float array of quasi-identifiers, standardized (z-scores); finite.
        ranks: ``int64`` permutation of ``0..n-1``: the position of each row in the confidential
            attribute's total order (ties already broken, e.g. by row index).
        k: minimum cluster size, ``k >= 1``.
        t: t-closeness level, ``0 < t <= 1``.

    Returns:
        ``(labels, k_effective)``: ``int64`` labels of shape ``(n,)`` numbered ``0..q-1`` in order
        of creation, with ``q = floor(n / k')`` clusters (none if ``n = 0``), the first
        ``n mod k'`` of size ``k' + 1`` and the others of size ``k'``; and ``k'`` itself.

    Example:
        >>> import numpy as np
        >>> x = np.array([[0.0], [0.1], [5.0], [5.1]])
        >>> labels, k_eff = t_first(x, np.array([0, 2, 1, 3]), 2, 0.25)
        >>> labels.tolist(), k_eff
        ([0, 0, 1, 1], 2)
    """
    x, ranks, k_effective, stratum, sizes = _prepare(x, ranks, k, t)
    if x.shape[0] == 0:
        return np.empty(0, dtype=np.int64), k_effective
    return _labels(x, stratum, sizes), k_effective


def t_first_strata(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """t-first clusters of rows whose strata are given: a block of a larger table.

    The global strata of a table split into blocks (:mod:`tclose.blocks.split`) are assigned once on the
    whole table; each block is then clustered here with those strata, so that every cluster holds
    one record of every global stratum, as in the unblocked run. On a whole table with the strata
    of :func:`strata_sizes`, the labels are those of :func:`t_first`.

    Args:
        x: ``(n, d)`` float array of standardized quasi-identifiers; finite, ``n >= 1``.
        stratum: ``int64 (n,)`` stratum of every row, in ``0..k'-1``.
        sizes: ``int64 (k',)`` rows per stratum (``np.bincount(stratum)``). With
            ``q = min(sizes)``, the extras ``sizes - q`` must total at most ``q`` and fewer than
            ``k'``, so that each of the ``q`` clusters takes at most one.

    Returns:
        ``int64`` labels ``0..q-1`` in order of creation; the first ``sum(sizes - q)`` clusters
        have ``k' + 1`` records, the others ``k'``.

    Raises:
        ValueError: on inconsistent shapes or strata.
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    stratum = np.ascontiguousarray(stratum, dtype=np.int64)
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    n = x.shape[0]
    if x.ndim != 2 or n == 0 or not np.isfinite(x).all():
        raise ValueError(f"x must be a finite 2-D array with rows. Got shape {x.shape}.")
    k_effective = sizes.shape[0]
    if stratum.shape != (n,) or sizes.ndim != 1 or k_effective == 0:
        raise ValueError(f"stratum must have shape ({n},) and sizes at least one entry.")
    if (
        stratum.min() < 0
        or stratum.max() >= k_effective
        or not np.array_equal(np.bincount(stratum, minlength=k_effective), sizes)
    ):
        raise ValueError("sizes must count the rows of each stratum (np.bincount(stratum)).")
    q = int(sizes.min())
    extras = int(sizes.sum()) - q * k_effective
    if q == 0 or extras > q or extras >= k_effective:
        raise ValueError(
            f"The strata cannot be clustered one record each plus at most one "
            f"extra per cluster: {q} cluster(s), {extras} extra record(s), "
            f"{k_effective} strata."
        )
    return _labels(x, stratum, sizes)


def t_first_reference(x: np.ndarray, ranks: np.ndarray, k: int, t: float) -> tuple[np.ndarray, int]:
    """Plain NumPy t-first: same arguments and, bit for bit, the same result as :func:`t_first`."""
    x, ranks, k_effective, stratum, sizes = _prepare(x, ranks, k, t)
    return _numpy_labels(x, stratum, sizes), k_effective


def _labels(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The compiled kernel, or for fewer than :data:`NUMPY_BELOW` rows its NumPy twin."""
    if x.shape[0] < NUMPY_BELOW:
        return _numpy_labels(x, stratum, sizes)
    from tclose.kernels._compiled import t_first_compiled

    return t_first_compiled(x, stratum, sizes)


def _numpy_labels(x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """t-first labels in plain NumPy (the twin of
    :func:`tclose.kernels._compiled.t_first_compiled`)."""
    n, k_effective = x.shape[0], sizes.shape[0]
    labels = np.empty(n, dtype=np.int64)
    extras = sizes - n // max(k_effective, 1)
    remaining = np.arange(n)  # ascending row order, so argmax/lexsort tie to the lowest row
    total = column_total(x)
    label = 0

    def cluster_around(seed: int) -> np.ndarray:
        """Cluster the records closest to ``seed`` per stratum; return distances to ``seed``."""
        nonlocal remaining, label
        dist = sq_dist_reference(x[remaining], x[seed])
        strata = stratum[remaining]
        order = np.lexsort((remaining, dist, strata))
        first = np.searchsorted(strata[order], np.arange(k_effective))
        chosen = list(order[first])
        with_extra = np.flatnonzero(extras > 0)
        if with_extra.size:
            i = with_extra[0]
            chosen.insert(i + 1, order[first[i] + 1])  # the second closest, after the first
            extras[i] -= 1
        members = remaining[chosen]
        labels[members] = label
        label += 1
        subtract_rows_reference(total, x, members)
        kept = np.ones(remaining.size, dtype=bool)
        kept[chosen] = False
        remaining = remaining[kept]
        return dist[kept]

    while remaining.size:
        centroid = total / remaining.size
        x0 = remaining[np.argmax(sq_dist_reference(x[remaining], centroid))]
        dist_to_x0 = cluster_around(x0)
        if remaining.size:
            cluster_around(remaining[np.argmax(dist_to_x0)])
    return labels


def _validate_scalars(n: int, k: int, t: float) -> tuple[int, int, Fraction]:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(
            f"The 'k' parameter of t-first must be an integer >= 1. Got {k!r} instead."
        )
    t = float(t)
    if not 0.0 < t <= 1.0:
        raise ValueError(f"The 't' parameter of t-first must be in (0, 1]. Got {t!r} instead.")
    return int(n), int(k), Fraction(str(t))


def _prepare(
    x: np.ndarray, ranks: np.ndarray, k: int, t: float
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    """Validate; return x, ranks, k', the stratum of every row and the strata sizes."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D array (n, d). Got shape {x.shape} instead.")
    if not np.isfinite(x).all():
        raise ValueError("x must be finite (no NaN or infinity).")
    n = x.shape[0]
    ranks = np.asarray(ranks)
    if ranks.shape != (n,) or not np.issubdtype(ranks.dtype, np.integer):
        raise ValueError(f"ranks must be an integer array of shape ({n},).")
    ranks = ranks.astype(np.int64, copy=False)
    if n and (ranks.min() < 0 or ranks.max() >= n or np.bincount(ranks, minlength=n).max() != 1):
        raise ValueError("ranks must be a permutation of 0..n-1.")
    k_effective = cluster_size(n, k, t)
    if n == 0:
        return x, ranks, k_effective, ranks, np.empty(0, dtype=np.int64)
    sizes = strata_sizes(n, k_effective)
    stratum = np.repeat(np.arange(k_effective, dtype=np.int64), sizes)[ranks]
    return x, ranks, k_effective, stratum, sizes
