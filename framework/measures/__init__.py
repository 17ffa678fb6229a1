"""Disclosure risk and utility of a release, measured from the source rows and the published rows.

The kernels take NumPy arrays whose rows are aligned: row ``i`` of ``published`` is the published
version of source row ``i`` (the link an intruder does not have but the data controller does).
:func:`evaluate` takes two DataFrames for people who anonymize elsewhere; :func:`measure_release`
is what ``tclose run``, ``tclose compare`` and :func:`tclose.anonymize` call. Every measure, its
formula and its source (sdcMicro, ARX, the literature) is in ``docs/reports.md``.

Risk:

- :func:`record_linkage` — distance-based record linkage (Pagliuca and Seri 1999; Domingo-Ferrer
  and Torra 2001; sdcMicro's ``recordLinkage``): the expected share of source records an intruder
  who knows a record's original quasi-identifiers re-identifies by linking it to its nearest
  published row(s).
- :func:`interval_disclosure` — the share of records whose every continuous QI lies within
  ``published ± p·sd`` (SDID, Mateo-Sanz, Sebé and Domingo-Ferrer 2004; sdcMicro's ``dRisk``).
- :func:`attribute_disclosure` — distinct and entropy l-diversity (Machanavajjhala et al. 2007)
  and β-likeness (Cao and Karras 2012) of a confidential attribute over the classes.
- :func:`reidentification_risk` — the prosecutor risk ``1/|class|`` (ARX).
- :func:`population_risk` — population uniqueness estimated from the sample (Zayatz's model,
  :mod:`tclose.measures.population`), of the release and of the source.

Utility: :func:`il1s` (sdcMicro's ``dUtility`` IL1s), :func:`correlation_max_diff`,
:func:`moment_changes` and :func:`total_variation`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.arrays import equal_row_classes
from tclose.base.attributes import (
    MISSING,
    EncodedTable,
    QuasiIdentifier,
    _hierarchy_embedding,
    _rows,
    instant_offsets,
    standardized_like,
)
from tclose.errors import ConfigError, DataError
from tclose.measures.population import SAMPLING_FRACTION, population_uniqueness

#: Two distances that differ by at most this (in standard deviations) are a tie in record linkage.
LINK_TOLERANCE = 1e-9
#: A mean within this share of its column's largest magnitude is 0 in :func:`moment_changes`.
MEAN_NOISE = 1e-12
#: Default ``p`` of interval disclosure (sdcMicro's ``dRisk`` default ``k = 0.05``).
INTERVAL_P = 0.05
_CONTINUOUS = ("numeric", "date", "datetime")
_BATCH = 1 << 16
#: Below this many rows record linkage compares every row with every distinct published vector in
#: NumPy instead of the compiled search (:mod:`tclose.measures._linkage`): the same shares, and a small run
#: loads neither a compiled kernel nor SciPy for it.
KERNEL_MIN_ROWS = 2_000
#: Bytes of the ``(rows, vectors, d)`` differences one chunk of that comparison holds.
_PAIRWISE_BYTES = 1 << 20
#: Vectors of the compiled search's KD-tree leaves.
_LEAF_SIZE = 16
#: Vectors within a row's own distance (+ tolerance) the compiled search keeps; a row with more
#: (many exact ties) is settled by the KD-tree's ball query instead.
_TIE_BUFFER = 64

DEFINITIONS = {
    "record_linkage": (
        "mean over source records i of [p(i) in N(i)] / |N(i)|, N(i) = the published rows at "
        "minimum mixed distance (source standardization) from i's original QIs, ties within "
        f"{LINK_TOLERANCE:g}"
    ),
    "interval_disclosure": (
        "share of source records whose every continuous QI x satisfies |x - x'| <= p * sd(x) "
        "(sample sd of the source)"
    ),
    "attribute": (
        "per confidential attribute over the classes: distinct_l = min distinct values, "
        "entropy_l = min exp(-sum q log q), beta = max over values with q > p of (q - p) / p "
        "(q: share in the class, p: share in the table)"
    ),
    "reidentification": "prosecutor risk 1/|class| per record: max, mean over records",
    "population": (
        "Zayatz (1991): estimated population uniques f1 * P(1|1) f1 / sum_i P(1|i) f_i / pi, "
        "P(1|i) hypergeometric (one of i in a sample of n out of N = n / pi), f_i classes of "
        "size i; of the release's classes and of the source's original QI values"
    ),
    "il1s": "mean over records and continuous QIs of |x - x'| / (sqrt(2) * sd(x))",
    "correlation_max_diff": (
        "max over pairs of numeric attributes (QIs and confidential) of |r - r'|, Pearson"
    ),
}


# --- kernels: NumPy in, NumPy out ---------------------------------------------------------------


def linkage_contributions(
    source_x: np.ndarray,
    published_x: np.ndarray,
    classes: np.ndarray | None = None,
    tolerance: float = LINK_TOLERANCE,
) -> np.ndarray:
    """Each source record's share ``[p(i) ∈ N(i)] / |N(i)|`` in :func:`record_linkage`.

    Args:
        source_x: ``(n, d)`` original records (embedded QIs, see :func:`embed_published`).
        published_x: ``(n, d)`` published records, row ``i`` the release of source row ``i``.
        classes: optional labels of the rows with identical published vectors (computed with
            ``np.unique`` when omitted).
        tolerance: distances within ``tolerance`` of the minimum tie.

    From :data:`KERNEL_MIN_ROWS` rows, runs in ``O(n log n)`` on the distinct published vectors
    (rotated to their principal axes, which leaves distances unchanged and lets a KD-tree split
    along the directions that separate them best). A row ``i`` at distance ``r`` from its own vector
    only needs the vectors within ``r + tolerance``: a compiled search
    (:func:`tclose.measures._linkage.link_rows`, on every core) looks for them in a KD-tree, stops at the
    first vector closer than ``r - tolerance`` (a miss, share 0) and otherwise counts ``N(i)`` among
    those found, their distances computed exactly; a row with more than :data:`_TIE_BUFFER` such
    vectors gets SciPy's KD-tree ball query instead. Below :data:`KERNEL_MIN_ROWS` rows every row is
    compared with every distinct vector in NumPy (:func:`_pairwise_contributions`, ``O(n·m·d)`` for
    ``m`` distinct vectors, in chunks of a few MB): no compiled kernel and no SciPy to load, the
    same shares bit for bit.
    """
    source_x = np.ascontiguousarray(source_x, dtype=np.float64)
    published_x = np.ascontiguousarray(published_x, dtype=np.float64)
    n = len(source_x)
    if n == 0:
        return np.zeros(0)
    if classes is None:
        classes = np.unique(published_x, axis=0, return_inverse=True)[1].reshape(-1)
    classes = np.ascontiguousarray(classes, dtype=np.int64)
    counts = np.bincount(classes)
    first = np.full(len(counts), n, dtype=np.int64)
    np.minimum.at(first, classes, np.arange(n))
    distinct = np.ascontiguousarray(published_x[first])
    if source_x.shape[1] == 0:  # no QI: every published row is at distance 0
        return np.full(n, 1.0 / n)
    if n < KERNEL_MIN_ROWS:
        return _pairwise_contributions(source_x, distinct, counts, classes, tolerance)
    basis = principal_axes(distinct)
    out = np.zeros(n)
    rows = _search_rows(source_x, distinct, basis, counts, classes, tolerance, out)
    if len(rows):  # many exact ties: the tree's ball query settles them
        own = np.sqrt(((source_x[rows] - distinct[classes[rows]]) ** 2).sum(axis=1))
        _settle_ties(
            _tree(distinct, basis),
            basis,
            source_x,
            distinct,
            counts,
            classes,
            rows,
            own,
            tolerance,
            out,
        )
    return out


def _pairwise_contributions(
    source_x: np.ndarray,
    distinct: np.ndarray,
    counts: np.ndarray,
    classes: np.ndarray,
    tolerance: float,
) -> np.ndarray:
    """Every row's share against every distinct published vector, by the definition.

    ``source_x`` is ``(n, d)`` with ``d >= 1``, ``distinct`` the ``(m, d)`` distinct published
    vectors, ``counts`` their rows, ``classes`` each row's own vector. Rows go by chunks whose
    ``(rows, m, d)`` differences hold about :data:`_PAIRWISE_BYTES`; distances are computed on
    the unrotated vectors as :func:`_tied_contributions` computes them (square, sum over the
    columns, square root), so ``N(i)`` and the shares are the same bit for bit.
    """
    n, d = source_x.shape
    m = len(distinct)
    step = max(1, _PAIRWISE_BYTES // (8 * m * d))
    out = np.empty(n)
    for start in range(0, n, step):
        rows = slice(start, start + step)
        squares = source_x[rows, None, :] - distinct[None, :, :]
        np.square(squares, out=squares)
        dist = np.sqrt(squares.sum(axis=2))
        member = dist <= (dist.min(axis=1) + tolerance)[:, None]
        size = np.where(member, counts, 0).sum(axis=1)
        hit = member[np.arange(len(member)), classes[rows]]
        out[rows] = np.where(hit, 1.0 / size, 0.0)
    return out


def principal_axes(points: np.ndarray) -> np.ndarray:
    """Orthonormal ``(d, d)`` basis of the principal axes of ``points``, largest variance first.
    Distances are invariant under it; a KD-tree on rotated points splits along the directions
    that separate them best (about twice as fast on correlated quasi-identifiers)."""
    centred = points - points.mean(axis=0)
    return np.linalg.eigh(centred.T @ centred)[1][:, ::-1]


def _tree(distinct: np.ndarray, basis: np.ndarray) -> Any:
    """SciPy's KD-tree over the rotated distinct vectors."""
    from scipy.spatial import cKDTree

    return cKDTree(distinct @ basis)


def _search_rows(source_x, distinct, basis, counts, classes, tolerance, out) -> np.ndarray:
    """The compiled bounded search (:func:`tclose.measures._linkage.link_rows`) over every row, in
    chunks on every core; writes the shares into ``out`` and returns the rows it left (more
    than :data:`_TIE_BUFFER` vectors within their own distance)."""
    from tclose.base.compile_notice import compile_notice
    from tclose.measures._linkage import OVERFLOW, build_tree, link_rows, rows_in_tree_order

    d = source_x.shape[1]
    rotated = np.ascontiguousarray(distinct @ basis)
    basis = np.ascontiguousarray(basis)  # the kernels' declared layout (principal_axes' is not)
    # Rounding of the rotation and of the fast-math sums, far below the tolerance for data in
    # standard deviations: the search never misses a vector within r + tolerance.
    scale = max(1.0, float(source_x.max()), -float(source_x.min()), float(np.abs(rotated).max()))
    slack = tolerance + 1e-13 * d * d * scale
    state = np.zeros(len(source_x), dtype=np.int8)
    with compile_notice():  # a first run compiles the linkage kernels here
        perm, start, stop, left, lo, hi = build_tree(rotated, _LEAF_SIZE)
        points = np.ascontiguousarray(rotated[perm])
        order = rows_in_tree_order(classes, perm)
        tree = (distinct, basis, points, perm, start, stop, left, lo, hi, counts, classes)

        def search(rows: np.ndarray) -> None:
            link_rows(rows, source_x, *tree, tolerance, slack, _TIE_BUFFER, out, state)

        search(order[:0])
    workers = _workers()
    if workers == 1 or len(order) < 4 * _CHUNK:
        search(order)
    else:
        from concurrent.futures import ThreadPoolExecutor

        pieces = np.array_split(order, max(4 * workers, len(order) // _CHUNK))
        pool = ThreadPoolExecutor(workers, thread_name_prefix="tclose-linkage")
        try:
            list(pool.map(search, pieces))
        finally:  # an interrupt cancels the chunks not started (each takes milliseconds)
            pool.shutdown(wait=True, cancel_futures=True)
    return np.flatnonzero(state == OVERFLOW)


#: Rows per task of the parallel linkage search (several tasks per core balance the load).
_CHUNK = 1 << 14


def _workers() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _settle_ties(tree, basis, source_x, distinct, counts, classes, rows, nearest, tolerance, out):
    """Exact shares of ``rows`` whose nearest published vectors may tie, by batches, written to
    ``out``; ``nearest`` bounds each row's minimum distance from above."""
    for start in range(0, len(rows), _BATCH):
        batch = slice(start, start + _BATCH)
        out[rows[batch]] = _tied_contributions(
            tree,
            basis,
            source_x,
            distinct,
            counts,
            classes,
            rows[batch],
            nearest[batch],
            tolerance,
        )


def _tied_contributions(tree, basis, source_x, distinct, counts, classes, rows, nearest, tolerance):
    """Exact shares of ``rows`` whose nearest published vectors may tie (candidates from the
    tree within ``nearest + 4·tolerance``, distances recomputed on the unrotated vectors)."""
    found = tree.query_ball_point(source_x[rows] @ basis, nearest + 4 * tolerance, workers=-1)
    lengths = np.fromiter((len(f) for f in found), dtype=np.int64, count=len(found))
    candidates = np.fromiter(
        (j for f in found for j in f), dtype=np.int64, count=int(lengths.sum())
    )
    owner = np.repeat(rows, lengths)
    dist = np.sqrt(((source_x[owner] - distinct[candidates]) ** 2).sum(axis=1))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    minimum = np.minimum.reduceat(dist, starts)
    member = dist <= np.repeat(minimum, lengths) + tolerance
    size = np.add.reduceat(np.where(member, counts[candidates], 0), starts)
    hit = np.logical_or.reduceat(member & (candidates == classes[owner]), starts)
    return np.where(hit, 1.0 / size, 0.0)


def record_linkage(
    source_x: np.ndarray,
    published_x: np.ndarray,
    classes: np.ndarray | None = None,
    tolerance: float = LINK_TOLERANCE,
) -> float:
    """Distance-based record linkage: ``1/n · Σ_i [p(i) ∈ N(i)] / |N(i)|``.

    ``N(i)`` is the set of published rows at minimum Euclidean distance from source row ``i``
    (ties within ``tolerance``), ``p(i)`` the published row of ``i``: an intruder who links ``i``
    to a random row of ``N(i)`` is right with probability ``[p(i) ∈ N(i)] / |N(i)|``.

    >>> source = np.array([[0.0], [1.0], [4.0], [5.0]])
    >>> record_linkage(source, np.array([[0.5], [0.5], [4.5], [4.5]]))
    0.5
    >>> record_linkage(source, np.array([[0.0], [1.0], [5.0], [4.0]]))
    0.5
    """
    shares = linkage_contributions(source_x, published_x, classes, tolerance)
    return float(shares.mean()) if len(shares) else 0.0


def interval_disclosure(
    original: np.ndarray, published: np.ndarray, sd: np.ndarray, p: float = INTERVAL_P
) -> float:
    """Share of rows whose every column satisfies ``|x − x'| ≤ p·sd`` (SDID, sdcMicro ``dRisk``).

    ``original`` and ``published`` are ``(n, q)``; ``sd`` the ``q`` standard deviations of the
    source columns. A rounding allowance of ``1e-12·|x|`` absorbs the floating-point error of
    a cluster mean (relative, so that the measure does not depend on the unit of a column).

    >>> interval_disclosure(np.array([[1.0], [2.0], [9.0]]), np.array([[1.0], [2.2], [9.0]]),
    ...                     np.array([2.0]))
    0.6666666666666666
    """
    original = np.asarray(original, dtype=np.float64)
    published = np.asarray(published)
    if original.shape[0] == 0:
        return 0.0
    spread = p * np.asarray(sd, dtype=np.float64)
    inside = np.ones(original.shape[0], dtype=bool)
    for j in range(original.shape[1]):  # one column at a time: n-sized temporaries only
        allowance = 1e-12 * np.abs(original[:, j])
        allowance += spread[j]
        inside &= np.abs(original[:, j] - published[:, j]) <= allowance
    return float(inside.mean())


def il1s(original: np.ndarray, published: np.ndarray, sd: np.ndarray) -> float:
    """sdcMicro's IL1s: ``1/(n·q) · Σ_i Σ_j |x_ij − x'_ij| / (√2·sd_j)``.

    A constant column (``sd = 0``) is divided by 1.

    >>> il1s(np.array([[0.0], [2.0]]), np.array([[1.0], [1.0]]), np.array([1.0]))
    0.7071067811865475
    """
    original = np.asarray(original, dtype=np.float64)
    if original.size == 0:
        return 0.0
    scale = np.sqrt(2.0) * np.where(np.asarray(sd) > 0, sd, 1.0)
    difference = original - published
    np.abs(difference, out=difference)
    difference /= scale
    return float(difference.mean())


def correlation_matrix(values: np.ndarray) -> np.ndarray:
    """Pearson correlations of the columns of ``values`` (a constant column correlates 0)."""
    values = np.asarray(values, dtype=np.float64)
    centred = values - values.mean(axis=0)
    if len(values):
        centred[:, _constant(values)] = 0.0  # not the rounding noise of their mean
    norm = np.sqrt((centred**2).sum(axis=0))
    centred /= np.where(norm > 0, norm, 1.0)  # in place: one (n, q) copy of the values
    return centred.T @ centred


def correlation_max_diff(original: np.ndarray, published: np.ndarray) -> float | None:
    """Largest ``|r − r'|`` over pairs of columns (``None`` with fewer than two columns).

    >>> a = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    >>> b = np.array([[1.5, 1.0], [1.5, 2.0], [3.5, 3.0], [3.5, 4.0]])
    >>> round(correlation_max_diff(a, b), 6)
    0.105573
    """
    if np.asarray(original).shape[1] < 2:
        return None
    return _max_off_diagonal(correlation_matrix(original), correlation_matrix(published))


def _max_off_diagonal(before: np.ndarray, after: np.ndarray) -> float:
    """Largest ``|r − r'|`` off the diagonal of two correlation matrices."""
    difference = np.abs(before - after)
    return float(difference[~np.eye(len(difference), dtype=bool)].max())


def moment_changes(original: np.ndarray, published: np.ndarray) -> dict[str, float | None]:
    """Relative change of the mean and of the (population) variance of one column.

    ``None`` where the original moment is 0: a variance when the column is constant, a mean
    when it is within :data:`MEAN_NOISE` of the column's largest magnitude (``[-3e300] * 5 +
    [5e300] * 3`` sums to 0 in float64 and to 1e284 exactly: a relative change of such a mean is
    rounding noise, reported as -100 % or +50 %).

    >>> moment_changes(np.array([1.0, 3.0]), np.array([2.0, 2.0]))
    {'mean': 0.0, 'variance': -1.0}
    """
    original, published = rescaled(original, published)
    mean, mean_after = float(np.mean(original)), float(np.mean(published))
    var, var_after = (
        float(np.var(a)) if len(a) and a.min() != a.max() else 0.0 for a in (original, published)
    )
    top = float(np.abs(original).max()) if len(original) else 0.0
    return {
        "mean": (mean_after - mean) / abs(mean) if abs(mean) > MEAN_NOISE * top else None,
        "variance": (var_after - var) / var if var != 0 else None,
    }


def total_variation(original_codes: np.ndarray, published_codes: np.ndarray, m: int) -> float:
    """``½ Σ_v |f(v) − f'(v)|`` between category frequencies (codes ``0..m-1``).

    >>> total_variation(np.array([0, 0, 1, 2]), np.array([0, 0, 0, 2]), 3)
    0.25
    """
    if len(original_codes) == 0 or len(published_codes) == 0:
        return 0.0
    before = np.bincount(original_codes, minlength=m) / len(original_codes)
    after = np.bincount(published_codes, minlength=m) / len(published_codes)
    return float(np.abs(before - after).sum() / 2)


def attribute_disclosure(classes: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """Distinct l, entropy l and β-likeness of one confidential attribute over the classes.

    - ``distinct_l`` = min over classes of the number of distinct values;
    - ``entropy_l`` = min over classes of ``exp(−Σ_v q_v log q_v)``;
    - ``beta`` = max over classes and values with ``q_v > p_v`` of ``(q_v − p_v) / p_v``
      (0 when no class raises any value's share), ``q`` the share in the class, ``p`` in the table.

    >>> attribute_disclosure(np.array([0, 0, 1, 1]), np.array(["a", "b", "a", "a"]))
    {'distinct_l': 1, 'entropy_l': 1.0, 'beta': 1.0}
    """
    classes = np.asarray(classes, dtype=np.int64)
    n = len(classes)
    if n == 0:
        return {"distinct_l": 0, "entropy_l": 0.0, "beta": 0.0}
    codes = pd.factorize(np.asarray(values), use_na_sentinel=False)[0]
    m = int(codes.max()) + 1
    pairs, pair_counts = np.unique(classes * m + codes, return_counts=True)
    pair_class, pair_value = pairs // m, pairs % m
    sizes = np.bincount(classes)
    share = pair_counts / sizes[pair_class]
    entropy = -np.bincount(pair_class, weights=share * np.log(share), minlength=len(sizes))
    overall = np.bincount(codes, minlength=m) / n
    gain = (share - overall[pair_value]) / overall[pair_value]
    return {
        "distinct_l": int(np.bincount(pair_class, minlength=len(sizes)).min()),
        "entropy_l": float(np.exp(entropy.min())),
        "beta": float(max(gain.max(), 0.0)),
    }


def reidentification_risk(classes: np.ndarray) -> dict[str, float]:
    """Prosecutor risk ``1/|class|`` of every record: ``max``, ``mean`` over records, and
    ``records_at_max`` (the share of records at the maximum).

    >>> reidentification_risk(np.array([0, 0, 1, 1, 1, 1]))
    {'max': 0.5, 'mean': 0.3333333333333333, 'records_at_max': 0.3333333333333333}
    """
    classes = np.asarray(classes, dtype=np.int64)
    if len(classes) == 0:
        return {"max": 0.0, "mean": 0.0, "records_at_max": 0.0}
    sizes = np.bincount(classes)
    sizes = sizes[sizes > 0]
    smallest = int(sizes.min())
    return {
        "max": 1.0 / smallest,
        "mean": len(sizes) / len(classes),
        "records_at_max": float(sizes[sizes == smallest].sum() / len(classes)),
    }


# --- published values in the source's encoding ---------------------------------------------------


def continuous_values(qi: QuasiIdentifier, published: np.ndarray) -> np.ndarray:
    """Published values of a numeric or date QI as floats (dates in nanoseconds; a NULL is
    NaN)."""
    if qi.type == "numeric":
        return np.asarray(published, dtype=np.float64)
    instants = np.asarray(published).astype("datetime64[ns]")
    numbers = instants.astype(np.int64).astype(np.float64)
    numbers[np.isnat(instants)] = np.nan  # a NULL, not the instant -2**63 ns
    return numbers


def category_codes(qi: QuasiIdentifier, published: np.ndarray) -> np.ndarray:
    """Published values of an ordinal or nominal QI as codes of the source's categories."""
    codes = _category_indexes(qi, published)
    unknown = codes < 0
    if unknown.any():
        raise DataError(
            f"The published column {qi.name!r} holds {int(unknown.sum())} value(s) that are not "
            f"categories of the source (rows {_rows(unknown, pd.RangeIndex(len(unknown)))})."
        )
    return codes


def _category_indexes(qi: QuasiIdentifier, published: np.ndarray) -> np.ndarray:
    """Index of every published value among the source's categories of ``qi`` (-1: none)."""
    names = pd.Series(np.asarray(published, dtype=object), dtype=object).fillna(MISSING)
    return pd.Index(qi.categories).get_indexer(names.astype(str)).astype(np.int64)


def embed_published(qi: QuasiIdentifier, published: np.ndarray) -> np.ndarray:
    """``(n, width)`` embedding of published values with the SOURCE's standardization, so that
    squared Euclidean distances between ``qi.embedding`` rows and these rows are the documented
    mixed distance (:mod:`tclose.base.attributes`). Equal values embed to equal rows bit for bit."""
    scale = np.sqrt(qi.weight)
    if qi.type == "numeric":
        numbers = continuous_values(qi, published)
        return (standardized_like(numbers, _values(qi)) * scale)[:, None]
    if qi.type in _CONTINUOUS:
        source, numbers = instant_pair(qi, published)
        return (standardized_like(numbers, source) * scale)[:, None]
    codes = category_codes(qi, published)
    m = len(qi.categories)
    if qi.type == "ordinal":
        table = (np.arange(m) / max(m - 1, 1) * scale)[:, None]
    elif qi.hierarchy is not None:
        table = _hierarchy_embedding(qi.hierarchy, qi.categories, np.arange(m)) * scale
    else:
        table = np.eye(m) / np.sqrt(2.0) * scale
    return table[codes]


def published_classes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Class of every row: rows with identical published values in every column (NULLs
    included) share a class; dense labels in order of first appearance. Integer and float
    columns are grouped by :func:`tclose.base.arrays.equal_row_classes`."""
    if not columns:
        return np.zeros(0, dtype=np.int64)
    arrays = [np.asarray(column) for column in columns]
    if len(arrays[0]) and all(a.dtype.kind in "iuf" for a in arrays):
        classes = equal_row_classes(arrays)
        if classes is not None:
            return classes
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        codes, uniques = pd.factorize(np.asarray(column), use_na_sentinel=False)
        key = pd.factorize(key * max(len(uniques), 1) + codes)[0].astype(np.int64)
    return key


# --- a release: the report's risk and utility sections -------------------------------------------


def measure_release(
    encoded: EncodedTable,
    published: Mapping[str, np.ndarray],
    confidential_types: Mapping[str, str],
    p: float = INTERVAL_P,
    published_confidential: Mapping[str, np.ndarray] | None = None,
    linked: bool = True,
    labels: np.ndarray | None = None,
    strict: bool = True,
    sampling_fraction: float = SAMPLING_FRACTION,
) -> dict[str, dict[str, Any]]:
    """The ``risk`` section and the ``utility`` additions of a report.

    Args:
        encoded: the encoded source (:func:`tclose.base.attributes.encode_table`), kept rows only.
        published: QI column → published value of every kept row, aligned with ``encoded``.
        confidential_types: confidential column → its type (numeric ones enter correlations).
        p: interval disclosure's half-width in standard deviations.
        published_confidential: confidential column → published values (default: the source's,
            which tclose publishes unchanged).
        linked: whether ``published`` is aligned with ``encoded`` row for row. Without the link
            (a published table read back without the source key), record linkage, interval
            disclosure and IL1s are ``None``; the other measures compare each table's own
            statistics and need no link.
        labels: optional cluster of every row, when rows of a cluster share their published
            values (as :meth:`EncodedTable.aggregate` makes them): the classes are then found
            among one row per cluster, which is faster and gives the same classes.
        strict: whether a published value of an ordinal or nominal QI that is not a category
            of the source is an error (:class:`DataError`); otherwise (a published table read
            back by ``tclose verify --source``, whose verdict comes first) the measures that
            need it are ``None``, with the reason in ``not_computed``.
        sampling_fraction: the share of the population the table is taken to be a sample of,
            for ``risk.population`` (:func:`population_risk`).

    Returns:
        ``{"risk": {...}, "utility": {...}}`` (JSON-ready).

    Raises:
        DataError: with ``strict``, a published category the source does not have.
    """
    qis = encoded.quasi_identifiers
    n = len(next(iter(published.values()))) if qis else len(encoded.x)
    released = published_confidential if published_confidential is not None else {}
    confidential = {c: released.get(c, v) for c, v in encoded.confidential.items()}
    columns = [np.asarray(published[q.name]) for q in qis]
    classes = _release_classes(columns, labels) if qis else np.zeros(n, dtype=np.int64)
    unusable = _unusable_columns(encoded, published, confidential_types, confidential)
    unusable_qis = {q.name: unusable[q.name] for q in qis if q.name in unusable}
    unknown = {} if strict else _unknown_categories(encoded, published)
    numbers = linked and not unusable_qis
    # Record linkage first: its (n, d) published embedding is freed before the next arrays.
    linkage = _release_linkage(encoded, published, classes) if numbers and not unknown else None
    interval, loss = _continuous_measures(encoded, published, p) if numbers else (None, None)
    risk: dict[str, Any] = {
        "record_linkage": linkage,
        "interval_disclosure": interval,
        "interval_p": p,
        "attribute": _attribute_section(classes, confidential),
        "reidentification": reidentification_risk(classes),
        "population": population_risk(encoded, classes, sampling_fraction),
        "classes": int(classes.max()) + 1 if n else 0,
        "definitions": {k: v for k, v in DEFINITIONS.items() if k not in _UTILITY},
    }
    correlations = (
        None if unusable else _correlations(encoded, published, confidential_types, confidential)
    )
    utility = _utility_section(encoded, published, loss, correlations, unusable, unknown)
    continuous = UNLINKED if not linked else _unusable_reason(unusable_qis) or NO_CONTINUOUS
    why = {
        "record_linkage": UNLINKED if not linked else str(_unusable_reason(unusable_qis, unknown)),
        "interval_disclosure": continuous,
        "il1s": continuous,
    }
    risk["not_computed"], utility["not_computed"] = _not_computed_sections(
        risk, utility, why, unusable, unusable_qis, unknown
    )
    return {"risk": risk, "utility": utility}


def _utility_section(
    encoded: EncodedTable,
    published: Mapping[str, np.ndarray],
    loss: float | None,
    correlations: float | None,
    unusable: Mapping[str, int],
    unknown: Mapping[str, int],
) -> dict[str, Any]:
    """The utility additions of :func:`measure_release` (IL1s ``loss`` and ``correlations``
    given), without ``not_computed``: the moments of the numeric QIs (``null`` for a column
    of ``unusable`` values) and the category frequencies (``null`` for a column of ``unknown``
    categories)."""
    qis = encoded.quasi_identifiers
    return {
        "il1s": loss,
        "correlation_max_diff": correlations,
        "moments": {
            q.name: {"mean": None, "variance": None}
            if q.name in unusable
            else moment_changes(_values(q), continuous_values(q, published[q.name]))
            for q in qis
            if q.type == "numeric"
        },
        "categorical_total_variation": {
            q.name: None
            if q.name in unknown
            else total_variation(_codes(q), category_codes(q, published[q.name]), len(q.categories))
            for q in qis
            if q.type not in _CONTINUOUS
        },
        "measure_definitions": {k: DEFINITIONS[k] for k in _UTILITY},
    }


def _not_computed_sections(
    risk: Mapping[str, Any],
    utility: Mapping[str, Any],
    why: Mapping[str, str],
    unusable: Mapping[str, int],
    unusable_qis: Mapping[str, int],
    unknown: Mapping[str, int],
) -> tuple[dict[str, str], dict[str, str]]:
    """The ``not_computed`` of the risk and utility sections (:func:`_not_computed`), with the
    reasons of the figures that ``unusable`` values or ``unknown`` categories left ``null``."""
    risk_reasons, utility_reasons = _not_computed(risk, utility, why)
    for column, count in unknown.items():
        utility_reasons[f"categorical_total_variation.{column}"] = str(
            _unusable_reason({}, {column: count})
        )
    if unusable:  # why the correlations and those columns' moments are null
        utility_reasons["correlation_max_diff"] = str(_unusable_reason(unusable))
        for column, count in unusable_qis.items():
            for moment in ("mean", "variance"):
                if f"moments.{column}.{moment}" in utility_reasons:
                    utility_reasons[f"moments.{column}.{moment}"] = str(
                        _unusable_reason({column: count})
                    )
    return risk_reasons, utility_reasons


def population_risk(
    encoded: EncodedTable, classes: np.ndarray, sampling_fraction: float = SAMPLING_FRACTION
) -> dict[str, Any]:
    """``risk.population``: :func:`tclose.measures.population.population_uniqueness` of the
    release's classes (``classes``: the class of every published row) and of the source's
    original quasi-identifier values (rows with equal values in every QI, of ``encoded``'s
    rows), with the model and the sampling fraction it assumed."""
    release = population_uniqueness(np.bincount(classes), sampling_fraction)
    qis = encoded.quasi_identifiers
    source_classes = (
        published_classes([_values(q) if q.type in _CONTINUOUS else _codes(q) for q in qis])
        if qis and len(encoded.x)
        else np.zeros(len(encoded.x), dtype=np.int64)
    )
    source = population_uniqueness(np.bincount(source_classes), sampling_fraction)
    keys = ("sample_uniques", "population_uniques", "population_uniqueness")
    return {
        "model": release["model"],
        "sampling_fraction": sampling_fraction,
        "population_size": release["population_size"],
        "release": {key: release[key] for key in keys},
        "source": {key: source[key] for key in keys},
    }


def _unusable_columns(
    encoded: EncodedTable,
    published: Mapping[str, np.ndarray],
    confidential_types: Mapping[str, str],
    confidential: Mapping[str, np.ndarray],
) -> dict[str, int]:
    """Continuous QI or numeric confidential column → how many of its published values are
    NULL or not finite (a table read back and changed since the run): no distance, difference
    or correlation is defined on them. Only such columns are listed."""
    found = {}
    for qi in encoded.quasi_identifiers:
        if qi.type in _CONTINUOUS:
            bad = int((~np.isfinite(continuous_values(qi, published[qi.name]))).sum())
            if bad:
                found[qi.name] = bad
    for column, kind in confidential_types.items():
        if kind == "numeric" and column in confidential:
            values = pd.to_numeric(pd.Series(confidential[column]), errors="coerce")
            bad = int((~np.isfinite(values.to_numpy(dtype=np.float64))).sum())
            if bad:
                found[column] = bad
    return found


def _unknown_categories(
    encoded: EncodedTable, published: Mapping[str, np.ndarray]
) -> dict[str, int]:
    """Ordinal or nominal QI → how many of its published values are not categories of the
    source (a NULL included, unless NULL is a category): only such columns are listed."""
    found = {}
    for qi in encoded.quasi_identifiers:
        if qi.type not in _CONTINUOUS:
            codes = _category_indexes(qi, published[qi.name])
            if (codes < 0).any():
                found[qi.name] = int((codes < 0).sum())
    return found


def _unusable_reason(
    unusable: Mapping[str, int], unknown: Mapping[str, int] | None = None
) -> str | None:
    """Why the measures that need numbers (``unusable``: column → count of NULL or non-finite
    values) or categories (``unknown``: column → count of values that are not categories of
    the source) are ``null``, naming columns and counts, never a value; ``None`` if neither."""
    parts = [
        f"{what}, in " + ", ".join(f"{column!r} ({count})" for column, count in columns.items())
        for what, columns in (
            ("NULL or not a finite number", unusable),
            ("not categories of the source", unknown or {}),
        )
        if columns
    ]
    return "published values that are " + "; ".join(parts) if parts else None


#: Why a measure is ``null`` (:func:`_not_computed`).
UNLINKED = (
    "needs each published row's source row, and the published table was read without the "
    "source key (the run's report has it; or publish with output.keep_key: true)"
)
NO_CONTINUOUS = "no numeric, date or datetime quasi-identifier"
FEW_NUMERIC = "fewer than two numeric attributes (quasi-identifiers and confidential)"
ZERO_MOMENT = "the original {} is 0: a relative change is undefined"


def _not_computed(
    risk: Mapping[str, Any], utility: Mapping[str, Any], why: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Measure → why it is ``null``, for the risk and the utility sections (only the null ones;
    a moment is named ``moments.<column>.mean`` or ``.variance``); ``why`` gives the reason of
    record linkage, interval disclosure and IL1s (when they are null)."""
    risk_reasons: dict[str, str] = {}
    utility_reasons: dict[str, str] = {}
    for section, reasons, name in (
        (risk, risk_reasons, "record_linkage"),
        (risk, risk_reasons, "interval_disclosure"),
        (utility, utility_reasons, "il1s"),
    ):
        if section[name] is None:
            reasons[name] = why[name]
    if utility["correlation_max_diff"] is None:
        utility_reasons["correlation_max_diff"] = FEW_NUMERIC
    for column, moments in utility["moments"].items():
        for moment in ("mean", "variance"):
            if moments[moment] is None:
                utility_reasons[f"moments.{column}.{moment}"] = ZERO_MOMENT.format(moment)
    return risk_reasons, utility_reasons


_UTILITY = ("il1s", "correlation_max_diff")


def _continuous_measures(
    encoded: EncodedTable, published: Mapping[str, np.ndarray], p: float
) -> tuple[float | None, float | None]:
    """(interval disclosure, IL1s) over the continuous QIs of a linked release (``None`` without
    such QIs); their ``(n, q)`` stacks are freed on return."""
    continuous = [q for q in encoded.quasi_identifiers if q.type in _CONTINUOUS]
    if not continuous:
        return None, None
    pairs = [_compared_values(q, published[q.name]) for q in continuous]
    before = np.column_stack([b for b, _ in pairs])
    after = np.column_stack([a for _, a in pairs])
    del pairs
    sd = sample_sd(before)
    return interval_disclosure(before, after, sd, p), il1s(before, after, sd)


def _compared_values(qi: QuasiIdentifier, published: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source and published values of a continuous QI as floats for the measures that compare
    them one by one (interval disclosure, IL1s): numbers :func:`rescaled`; instants as
    :func:`instant_pair` gives them."""
    if qi.type == "numeric":
        return rescaled(_values(qi), continuous_values(qi, published))
    return instant_pair(qi, published)


def instant_pair(qi: QuasiIdentifier, published: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source and published instants of a date or datetime QI in nanoseconds after the
    source's earliest, subtracted in integers (:func:`tclose.base.attributes.instant_offsets`; the
    source's are those its embedding standardizes); a published NULL is NaN."""
    assert qi.integers is not None, qi.name  # set for every date/datetime attribute
    instants = np.asarray(published).astype("datetime64[ns]")
    missing = np.isnat(instants)
    origin = int(qi.integers.min()) if len(qi.integers) else 0
    after = instant_offsets(np.where(missing, origin, instants.astype(np.int64)), origin)
    after[missing] = np.nan
    return instant_offsets(qi.integers, origin), after


def sample_sd(values: np.ndarray) -> np.ndarray:
    """Sample standard deviation of each column of ``(n, q)`` ``values``; exactly 0 for a
    constant column (the computed one need not be: three 0.1 give 1.7e-17) and with one row.

    >>> sample_sd(np.array([[0.1, 1.0], [0.1, 2.0], [0.1, 3.0]]))
    array([0., 1.])
    """
    if len(values) < 2:
        return np.zeros(values.shape[1])
    return np.where(_constant(values), 0.0, values.std(axis=0, ddof=1))


def _constant(values: np.ndarray) -> np.ndarray:
    """Which columns of ``(n, q)`` ``values`` hold one value (``-0.0`` equals ``0.0``)."""
    return values.min(axis=0) == values.max(axis=0)


def _release_linkage(
    encoded: EncodedTable, published: Mapping[str, np.ndarray], classes: np.ndarray
) -> float:
    """:func:`record_linkage` of the rows of a linked release."""
    qis = encoded.quasi_identifiers
    published_x = (
        np.hstack([embed_published(q, published[q.name]) for q in qis]) if qis else encoded.x
    )
    return record_linkage(encoded.x, published_x, classes)


def _values(qi: QuasiIdentifier) -> np.ndarray:
    """The source numbers of a numeric/date QI (always set for those types)."""
    assert qi.values is not None, qi.name
    return qi.values


def _codes(qi: QuasiIdentifier) -> np.ndarray:
    """The source codes of an ordinal/nominal QI (always set for those types)."""
    assert qi.codes is not None, qi.name
    return qi.codes


def _release_classes(columns: Sequence[np.ndarray], labels: np.ndarray | None) -> np.ndarray:
    """:func:`published_classes`, found among one row per cluster when ``labels`` are given
    (rows of a cluster share their published values)."""
    if labels is None or len(labels) == 0:
        return published_classes(columns)
    labels = np.asarray(labels, dtype=np.int64)
    first = np.full(int(labels.max()) + 1, len(labels), dtype=np.int64)
    np.minimum.at(first, labels, np.arange(len(labels)))
    first = first[first < len(labels)]
    lookup = np.zeros(int(labels.max()) + 1, dtype=np.int64)
    lookup[labels[first]] = published_classes([column[first] for column in columns])
    return lookup[labels]


def _attribute_section(
    classes: np.ndarray, confidential: Mapping[str, np.ndarray]
) -> dict[str, dict[str, float]]:
    section = {c: attribute_disclosure(classes, v) for c, v in confidential.items()}
    if section:
        section["overall"] = {
            "distinct_l": min(s["distinct_l"] for s in section.values()),
            "entropy_l": min(s["entropy_l"] for s in section.values()),
            "beta": max(s["beta"] for s in section.values()),
        }
    return section


def _correlations(encoded, published, confidential_types, confidential) -> float | None:
    numeric = [q for q in encoded.quasi_identifiers if q.type == "numeric"]
    extra = [c for c, kind in confidential_types.items() if kind == "numeric" and c in confidential]
    if len(numeric) + len(extra) < 2:
        return None
    pairs = [rescaled(q.values, continuous_values(q, published[q.name])) for q in numeric]
    pairs += [
        rescaled(
            np.asarray(encoded.confidential[c], dtype=np.float64),
            np.asarray(confidential[c], dtype=np.float64),
        )
        for c in extra
    ]
    # One (n, q) stack at a time (the matrices are what is compared).
    before = correlation_matrix(np.column_stack([b for b, _ in pairs]))
    after = correlation_matrix(np.column_stack([a for _, a in pairs]))
    return _max_off_diagonal(before, after)


def rescaled(original: np.ndarray, published: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both columns divided by one power of two when their magnitude nears the float64 limit
    (above ``2**500``), so that sums of squares cannot overflow, or multiplied by one when it
    is below ``2**-500`` (squares of ``1e-300`` underflow to 0: a deviation of 0 would make such
    a column constant); unchanged otherwise. Scaling by a power of two is exact, and every
    measure that uses it is scale-invariant (IL1s, interval disclosure, relative moments,
    correlations)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in (original, published)]
    top = max((float(np.max(np.abs(a))) for a in arrays if len(a)), default=0.0)
    if not math.isfinite(top) or top == 0.0 or 2.0**-500 <= top < 2.0**500:
        return arrays[0], arrays[1]
    exponent = math.frexp(top)[1]  # top < 2**exponent (which may itself not be a float64)
    return np.ldexp(arrays[0], -exponent), np.ldexp(arrays[1], -exponent)


# --- two DataFrames ------------------------------------------------------------------------------


def evaluate(
    original: pd.DataFrame,
    published: pd.DataFrame,
    quasi_identifiers: Sequence[str] | Mapping[str, Any],
    confidential: Sequence[str] | Mapping[str, Any] = (),
    *,
    p: float = INTERVAL_P,
) -> dict[str, dict[str, Any]]:
    """Risk and utility of ``published`` as a release of ``original``, for data anonymized
    anywhere.

    Rows are matched by index: ``published.loc[label]`` is the release of ``original.loc[label]``
    (both indexes unique and holding the same labels). ``quasi_identifiers`` and ``confidential``
    take the forms of :func:`tclose.anonymize` (a list means numeric; a mapping gives types or full
    attribute specs). Classes are the rows of ``published`` sharing all QI values.

    Returns:
        ``{"risk": {...}, "utility": {...}}`` as in the audit report (``docs/reports.md``).

    Raises:
        ConfigError: a column is missing, the indexes do not match, or ``p`` (the half-width of
            interval disclosure, in standard deviations) is not a finite number > 0.
    """
    from tclose.base.attributes import encode_confidential, encode_table
    from tclose.base.config import attribute_document, checked_interval_p, parse_attributes

    p = checked_interval_p(p, path=("p",))  # NaN would report an interval disclosure of 0
    document = attribute_document(quasi_identifiers, "quasi_identifier")
    document.update(attribute_document(confidential, "confidential"))
    specs = parse_attributes(document)
    for frame, which in ((original, "original"), (published, "published")):
        absent = [name for name in specs if name not in frame.columns]
        if absent:
            raise ConfigError(f"Column {absent[0]!r} is not in the {which} DataFrame.")
    if not original.index.is_unique or not published.index.is_unique:
        raise ConfigError("The indexes of both DataFrames must be unique (rows match by index).")
    if len(original) != len(published) or not original.index.isin(published.index).all():
        raise ConfigError(
            "The published DataFrame must hold the same index labels as the original: rows are "
            "matched by index (reset both indexes if they are aligned by position)."
        )
    encoded = encode_table(original, list(specs.values()))
    released = published.loc[original.index[~encoded.excluded]]
    kinds = {name: s.type for name, s in specs.items() if s.role == "confidential"}
    confidential_values = {
        name: encode_confidential(released[name], specs[name])[0] for name in kinds
    }
    values = {q.name: released[q.name].to_numpy() for q in encoded.quasi_identifiers}
    return measure_release(encoded, values, kinds, p, confidential_values)


def measure_configured(
    encoded: EncodedTable,
    published: Mapping[str, np.ndarray],
    attributes: Mapping[str, Any],
    p: float = INTERVAL_P,
    labels: np.ndarray | None = None,
    sampling_fraction: float = SAMPLING_FRACTION,
) -> dict[str, dict[str, Any]]:
    """:func:`measure_release` for a run: confidential types from the attribute specs
    (:class:`tclose.base.config.AttributeSpec`), the source's confidential values as published,
    ``labels`` the run's clusters (``published`` is ``encoded.aggregate(labels)``)."""
    kinds = {name: a.type for name, a in attributes.items() if a.role == "confidential"}
    return measure_release(
        encoded, published, kinds, p, labels=labels, sampling_fraction=sampling_fraction
    )


def measure_published(
    encoded: EncodedTable,
    source_keys: np.ndarray,
    frame: pd.DataFrame,
    attributes: Mapping[str, Any],
    p: float = INTERVAL_P,
    key: str | None = None,
    sampling_fraction: float = SAMPLING_FRACTION,
) -> dict[str, dict[str, Any]]:
    """The measures of ``tclose verify --source``: the encoded source and the published table as
    read back (QI and encoded confidential columns, and ``key`` when it was kept).

    With the source key in ``frame`` (``output.keep_key``) every published row is linked to its
    source row and every measure is computed; otherwise those that need the link are ``None``
    (``risk.linked`` says which case applied).
    """
    kinds = {name: a.type for name, a in attributes.items() if a.role == "confidential"}
    names = [q.name for q in encoded.quasi_identifiers]
    linked = False
    if key is not None and key in frame.columns and frame[key].is_unique:
        order = pd.Index(frame[key]).get_indexer(source_keys)
        if len(frame) == len(source_keys) and (order >= 0).all():
            frame, linked = frame.iloc[order], True
    values = {name: frame[name].to_numpy() for name in names}
    released = {name: frame[name].to_numpy() for name in kinds}
    result = measure_release(
        encoded,
        values,
        kinds,
        p,
        released,
        linked=linked,
        strict=False,
        sampling_fraction=sampling_fraction,
    )
    result["risk"]["linked"] = linked
    return result


def measure_lines(measures: Mapping[str, Any] | None) -> list[str]:
    """Lines of text for the measures (``tclose verify --source``); none for ``None``."""
    if not measures:
        return []
    risk, utility = measures["risk"], measures["utility"]

    def show(value: Any) -> str:
        return "-" if value is None else f"{value:.4g}"

    reid = risk["reidentification"]
    lines = [
        f"risk  record linkage {show(risk['record_linkage'])}, interval disclosure "
        f"{show(risk['interval_disclosure'])} (p = {risk['interval_p']:g}), prosecutor max "
        f"{show(reid['max'])} mean {show(reid['mean'])}"
    ]
    for column, figures in risk["attribute"].items():
        lines.append(
            f"risk  {column}: distinct l {figures['distinct_l']}, entropy l "
            f"{show(figures['entropy_l'])}, beta {show(figures['beta'])}"
        )
    lines.append(
        f"utility  IL1s {show(utility['il1s'])}, largest correlation change "
        f"{show(utility['correlation_max_diff'])}"
    )
    if not risk.get("linked", True):
        lines.append(
            "note  record linkage, interval disclosure and IL1s need each published row's source "
            "row: the run's report has them (or publish with output.keep_key: true)."
        )
    reasons = {**risk.get("not_computed", {}), **utility.get("not_computed", {})}
    for name, reason in reasons.items():
        if reason != UNLINKED and not name.startswith("moments."):
            measure, _, column = name.partition(".")
            label = measure.replace("_", " ") + (f" of {column!r}" if column else "")
            lines.append(f"note  {label} not computed: {reason}.")
    return lines


def risk_summary(risk: Mapping[str, Any]) -> str:
    """One line of the ``tclose run`` summary."""
    linkage = risk.get("record_linkage")
    reid = risk.get("reidentification", {})
    shown = "-" if linkage is None else f"{linkage:.2%}"
    return (
        f"risk:      record linkage {shown} of records, prosecutor risk max "
        f"{reid.get('max', 0):.2%} mean {reid.get('mean', 0):.2%}"
    )
