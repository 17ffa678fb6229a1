"""Attribute types: how a column is encoded for the kernels and aggregated for the output.

Quasi-identifiers become columns of one float matrix ``x`` whose squared Euclidean distance is
the documented mixed distance between records::

    d(r, s)^2 = sum_numeric w * ((r - s) / std)^2           numeric, date, datetime
              + sum_ordinal w * ((rank_r - rank_s) / (c - 1))^2   ordinal (c categories)
              + sum_nominal w * [r != s]                      nominal, no hierarchy
              + sum_nominal w * (H - depth(LCA(r, s))) / H    nominal with a hierarchy

(``w`` is the attribute's ``weight``, 1 by default). A nominal value is embedded as a one-hot
vector scaled by ``1/sqrt(2)`` (two different values are at squared distance 1); with a hierarchy
of height ``H`` the embedding is the one-hot of the value's ancestor at every depth ``1..H``,
scaled by ``1/sqrt(2H)``, so two leaves differ in exactly ``H - depth(LCA)`` levels. The mean of
the embedded rows of a cluster is therefore a well-defined "average record" for MDAV and the
algorithms' farthest/nearest searches.

Aggregation (the value every record of a cluster receives): numeric — the mean (rounded with
``round: true``); date/datetime — the mean instant (dates rounded to the day); ordinal — the lower
median in the declared order; nominal — the most frequent value (ties: first in the category
order), or with a hierarchy the medoid (the member value with the least total hierarchical
distance to the cluster's records; ties: first in leaf order).

Missing values (``missing:`` per attribute): ``error`` (default), ``category`` (for ordinal and
nominal attributes NULL becomes a value of its own, written back as NULL), or ``exclude-rows``
(the rows are set aside before anonymizing and never published; the report counts them).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.hierarchy import Hierarchy
from tclose.errors import DataError

#: The value a NULL takes under ``missing: category``; written back as NULL.
MISSING = "(missing)"


def _rows(mask: np.ndarray, index: pd.Index) -> str:
    labels = [str(label) for label in index[mask][:5]]
    return ", ".join(labels) + (", ..." if int(mask.sum()) > 5 else "")


def missing_mask(values: pd.Series) -> np.ndarray:
    """Which rows are NULL (``None``, NaN, NaT)."""
    return values.isna().to_numpy()


def rows_to_exclude(frame: pd.DataFrame, specs: Sequence[Any]) -> np.ndarray:
    """Boolean mask of the rows set aside by ``missing: exclude-rows`` attributes."""
    mask = np.zeros(len(frame), dtype=bool)
    for spec in specs:
        if getattr(spec, "missing", "error") == "exclude-rows":
            mask |= missing_mask(frame[spec.name])
    return mask


def _check_missing(values: pd.Series, spec: Any, role: str) -> np.ndarray:
    missing = missing_mask(values)
    policy = getattr(spec, "missing", "error")
    if missing.any() and policy == "error":
        # 'category' is offered only where the configuration accepts it (ordinal, nominal)
        policies = (
            "'category' or 'exclude-rows'"
            if spec.type in ("ordinal", "nominal")
            else "'exclude-rows'"
        )
        raise DataError(
            f"The {role} column {spec.name!r} has {int(missing.sum())} missing (NULL) value(s) "
            f"in {len(values)} rows (rows {_rows(missing, values.index)}). Set "
            f"attributes.{spec.name}.missing to {policies}, or fill them."
        )
    if missing.any() and policy == "category" and spec.type not in ("ordinal", "nominal"):
        raise DataError(
            f"The {role} column {spec.name!r} ({spec.type}) has {int(missing.sum())} NULL(s); "
            f"missing: category applies to ordinal and nominal attributes only. Use "
            f"'exclude-rows' or fill them."
        )
    return missing


def _instants(values: pd.Series, spec: Any, role: str) -> np.ndarray:
    """Dates and datetimes as ``int64`` nanoseconds since the epoch (UTC): exact."""
    converted = pd.to_datetime(values, errors="coerce")
    bad = converted.isna().to_numpy()
    if bad.any():
        raise DataError(
            f"The {role} column {spec.name!r} is declared {spec.type} but "
            f"{int(bad.sum())} row(s) hold values that are not dates (rows "
            f"{_rows(bad, values.index)})."
        )
    if getattr(converted.dt, "tz", None) is not None:
        converted = converted.dt.tz_convert("UTC").dt.tz_localize(None)
    # NumPy's cast to nanoseconds wraps silently (2500-01-01 becomes 1915-06-14)
    outside = ((converted < pd.Timestamp.min) | (converted > pd.Timestamp.max)).to_numpy()
    if outside.any():
        raise DataError(
            f"The {role} column {spec.name!r} holds {int(outside.sum())} date(s) outside the "
            f"range tclose computes with, {pd.Timestamp.min:%Y-%m-%d} to "
            f"{pd.Timestamp.max:%Y-%m-%d} (rows {_rows(outside, values.index)})."
        )
    return converted.to_numpy(dtype="datetime64[ns]").astype(np.int64)


def _exact_item(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            return float(value)
    return value  # Decimal, and any other number type the driver gives


def exact_numbers(values: pd.Series, spec: Any, role: str) -> np.ndarray:
    """A numeric, date or datetime column in a type that orders it exactly: ``int64`` (or
    ``uint64``) integers, ``float64`` floats, ``int64`` nanoseconds for instants, else an
    ``object`` array of Python ``int``/``Decimal``/``float`` (compared exactly by Python).
    Nothing passes through ``float64`` that was not a float: distinct values stay distinct."""
    if spec.type in ("date", "datetime"):
        return _instants(values, spec, role)
    _numbers(values, spec, role)  # the checks and their messages (NULL, text, infinite)
    dtype = values.dtype
    if dtype.kind in "iu":  # NumPy, nullable (Int64) or sparse integers
        return values.to_numpy(
            dtype=getattr(dtype, "numpy_dtype", getattr(dtype, "subtype", dtype))
        )
    if dtype.kind == "b":
        return values.to_numpy(dtype=np.int64)
    if dtype.kind == "f":
        return values.to_numpy(dtype=np.float64)
    items = [_exact_item(v) for v in values.tolist()]
    kinds = {type(v) for v in items}
    if kinds == {int} and min(items) >= -(2**63) and max(items) < 2**63:
        return np.array(items, dtype=np.int64)
    if kinds == {float}:
        return np.array(items, dtype=np.float64)
    result = np.empty(len(items), dtype=object)
    result[:] = items
    return result


def _numbers(values: pd.Series, spec: Any, role: str) -> np.ndarray:
    if spec.type in ("date", "datetime"):
        return _instants(values, spec, role).astype(np.float64)
    kind = getattr(values.dtype, "kind", "O")
    if kind in "mM":  # pandas would take the nanoseconds for numbers, and publish them
        what = "dates or times" if kind == "M" else "durations"
        advice = (
            "declare its type date or datetime"
            if kind == "M"
            else "convert it to a number (e.g. of seconds) first"
        )
        raise DataError(
            f"The {role} column {spec.name!r} is declared numeric but holds {what} (dtype "
            f"{values.dtype}): {advice}."
        )
    if kind == "c" or isinstance(values.dtype, pd.PeriodDtype):
        # NumPy would drop the imaginary parts, pandas would take periods for their ordinals
        what, advice = (
            ("complex numbers", "convert them to real numbers")
            if kind == "c"
            else ("periods", "convert them to date-times (declared datetime)")
        )
        raise DataError(
            f"The {role} column {spec.name!r} is declared numeric but holds {what} (dtype "
            f"{values.dtype}): {advice} first."
        )
    try:
        converted = pd.to_numeric(values, errors="coerce")
    except OverflowError:  # a Python int beyond the double range (10**400): infinite below
        wide = values.map(lambda v: _float_or_infinity(v) if isinstance(v, int) else v)
        converted = pd.to_numeric(wide, errors="coerce")
    bad = converted.isna().to_numpy()
    if bad.any():
        raise DataError(
            f"The {role} column {spec.name!r} is declared numeric but {int(bad.sum())} row(s) "
            f"hold non-numeric values (rows {_rows(bad, values.index)}). Clean them, or declare "
            f"another type."
        )
    result = converted.to_numpy(dtype=np.float64)
    infinite = ~np.isfinite(result)
    if infinite.any():
        raise DataError(
            f"The {role} column {spec.name!r} holds infinite values, or values beyond the "
            f"double precision range (about 1.8e308), in {int(infinite.sum())} row(s) (rows "
            f"{_rows(infinite, values.index)})."
        )
    return result


def _float_or_infinity(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def spelled_apart(strings: np.ndarray, values: pd.Series, known: Collection[str]) -> dict:
    """Text → a value it spells, for the texts of ``strings`` (each row's ``str``) not in
    ``known``: values equal as values but spelled apart (``0.0`` and ``-0.0``; ``1``, ``1.0``
    and ``True``), which :func:`pandas.unique` takes as one. Empty in the usual case."""
    rows = ~pd.Index(strings).isin(list(known)) & (strings != MISSING)
    if not rows.any():
        return {}
    return dict(zip(strings[rows], values.to_numpy(dtype=object)[rows]))


def _categories(
    values: pd.Series, spec: Any, missing: np.ndarray, role: str
) -> tuple[list[str], np.ndarray]:
    """Category list (declared order, or natural order) and each row's code."""
    strings = values.astype(object).where(~missing, MISSING).map(str).to_numpy(dtype=object)
    spelled_as_null = (strings == MISSING) & ~missing
    if spelled_as_null.any():  # it would be taken for NULL, or for another category
        raise DataError(
            f"The {role} column {spec.name!r} holds the text {MISSING!r} in "
            f"{int(spelled_as_null.sum())} row(s) (rows {_rows(spelled_as_null, values.index)}): "
            f"tclose names NULL so (missing: category). Replace that text first."
        )
    declared = getattr(spec, "categories", None)
    present = list(pd.unique(strings))
    if declared is not None:
        categories = [str(c) for c in declared]
        if missing.any() and MISSING not in categories:
            categories.append(MISSING)
        unknown = sorted(set(present) - set(categories))
        if unknown:
            raise DataError(
                f"The {role} column {spec.name!r} holds {len(unknown)} distinct value(s) not "
                f"in attributes.{spec.name}.categories (rows "
                f"{_rows(np.isin(strings, unknown), values.index)}; values are not shown)."
                + _near_miss_hint(unknown, categories, "a category")
            )
    else:
        non_missing = [v for v in present if v != MISSING]
        try:
            distinct = pd.unique(values[~missing].to_numpy(dtype=object))
        except TypeError:  # lists or dicts: no equality tclose could publish back
            unhashable = np.array([not isinstance(v, Hashable) for v in values], dtype=bool)
            raise DataError(
                f"The {role} column {spec.name!r} holds {int(unhashable.sum())} value(s) that "
                f"are not single values (lists, dicts, ...; rows "
                f"{_rows(unhashable, values.index)}). Turn them into text first."
            ) from None
        raw = pd.Series(distinct, dtype=object)
        numeric = pd.to_numeric(raw, errors="coerce")  # on the distinct values: fast
        if len(raw) and not numeric.isna().any():
            order = {str(v): float(n) for v, n in zip(raw.map(str), numeric)}
            for spelling, value in spelled_apart(strings, values, order).items():
                order[spelling] = float(pd.to_numeric(pd.Series([value], dtype=object)).iloc[0])
            categories = sorted(non_missing, key=lambda v: (order[v], v))
        else:
            categories = sorted(non_missing)
        if missing.any():
            categories.append(MISSING)
    index = {c: i for i, c in enumerate(categories)}  # a repeated category: its last position
    lookup = pd.Index(list(index), dtype=object)
    positions = np.fromiter(index.values(), dtype=np.int64, count=len(index))
    return categories, positions[lookup.get_indexer(strings)]


@dataclass
class QuasiIdentifier:
    """One encoded quasi-identifier: its block of the matrix ``x`` and how to aggregate it."""

    name: str
    type: str
    embedding: np.ndarray
    values: np.ndarray | None = None  # numeric/date: the numbers (ns for dates)
    #: exact ``int64`` values (``values`` are floats): ns for date/datetime, the integers of a
    #: rounded numeric QI of an integer column; their means are computed in integers
    integers: np.ndarray | None = None
    codes: np.ndarray | None = None  # ordinal/nominal
    categories: list[str] = field(default_factory=list)
    hierarchy: Hierarchy | None = None
    round: bool = False
    std: float = 1.0
    weight: float = 1.0  # the attribute's weight in the mixed distance

    def aggregate(self, labels: np.ndarray) -> np.ndarray:
        """The published value of every row given dense cluster labels."""
        n_clusters = int(labels.max()) + 1 if len(labels) else 0
        if self.type in ("numeric", "date", "datetime"):
            assert self.values is not None  # set for every numeric/date attribute
            counts = np.bincount(labels, minlength=n_clusters)
            if len(self.values) and self.values.min() == self.values.max():
                # a constant column publishes its value: the mean of three 0.1 computes as
                # 0.10000000000000002, of seven as 0.09999999999999999, and their rounding
                # noise would be the only variation (and correlation) the column has
                means = np.full(n_clusters, self.values[0])
            else:
                means = _cluster_means(labels, self.values, counts, n_clusters)
            out = means[labels]
            if self.type == "numeric":
                if self.round and self.integers is not None:
                    return exact_rounded_means(self.integers, labels, n_clusters)[labels]
                return np.rint(out) if self.round else out
            if self.integers is not None:  # the exact mean instant, not its float64 rounding
                nanoseconds = exact_rounded_means(self.integers, labels, n_clusters)[labels]
            else:
                nanoseconds = np.rint(out).astype(np.int64)
            instants = nanoseconds.astype("datetime64[ns]")
            if self.type == "date":
                instants = (instants + np.timedelta64(12, "h")).astype("datetime64[D]")
            return instants
        if self.type == "ordinal":
            assert self.codes is not None  # set for every ordinal/nominal attribute
            order = np.lexsort((self.codes, labels))
            sizes = np.bincount(labels, minlength=n_clusters)
            starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            median = self.codes[order][starts + (sizes - 1) // 2]
            return self._decode(median[labels])
        return self._decode(self._nominal_centre(labels, n_clusters)[labels])

    def _nominal_centre(self, labels: np.ndarray, n_clusters: int) -> np.ndarray:
        assert self.codes is not None  # set for every ordinal/nominal attribute
        m = len(self.categories)
        counts = np.zeros((n_clusters, m))
        np.add.at(counts, (labels, self.codes), 1.0)
        if self.hierarchy is None:
            return counts.argmax(axis=1)
        # cost[c, v]: H times the total distance of cluster c's records to value v, in integers
        # so that equal costs are equal (6 * 2/3 is 4.0 but 2 * 1/3 + 5 * 2/3 is 3.9999999999999996)
        steps = np.rint(self.ground_distances() * self.hierarchy.height).astype(np.int64)
        cost = counts.astype(np.int64) @ steps
        cost[counts == 0] = np.iinfo(np.int64).max  # the medoid is a member value
        leaf_order = {leaf: i for i, leaf in enumerate(self.hierarchy.leaves)}
        by_leaf = np.array(
            sorted(range(m), key=lambda v: leaf_order.get(self.categories[v], len(leaf_order) + v)),
            dtype=np.int64,
        )  # ties: the first in leaf order ((missing) last)
        return by_leaf[cost[:, by_leaf].argmin(axis=1)]

    def _decode(self, codes: np.ndarray) -> np.ndarray:
        table = np.array([None if c == MISSING else c for c in self.categories], dtype=object)
        return table[codes]

    def squared_error(self, published: np.ndarray) -> np.ndarray:
        """Per-row term of the mixed distance between original and published values (weight
        excluded): the squared standardized difference for numbers and dates, the squared
        scaled rank difference for ordinals, the 0/1 or hierarchical distance for nominals."""
        if self.type == "numeric":
            assert self.values is not None  # set for every numeric/date attribute
            return _squared_gap(self.values, np.asarray(published, dtype=np.float64), self.std)
        if self.type in ("date", "datetime"):
            numbers = published.astype("datetime64[ns]").astype(np.int64).astype(np.float64)
            assert self.values is not None  # set for every numeric/date attribute
            return _squared_gap(self.values, numbers, self.std)
        names = pd.Series(published, dtype=object).fillna(MISSING).astype(str)
        codes = pd.Categorical(names, categories=self.categories).codes.astype(np.int64)
        if self.type == "ordinal":
            span = max(len(self.categories) - 1, 1)
            return ((self.codes - codes) / span) ** 2
        return self.ground_distances()[self.codes, codes]

    def ground_distances(self) -> np.ndarray:
        """Nominal only: ``(m, m)`` distances between categories (0/1, or the hierarchy's)."""
        m = len(self.categories)
        ground = np.ones((m, m)) - np.eye(m)
        if self.hierarchy is not None:
            leaves = [c for c in self.categories if c != MISSING]
            positions = [self.categories.index(leaf) for leaf in leaves]
            ground[np.ix_(positions, positions)] = self.hierarchy.leaf_distance_matrix(leaves)
        return ground


def _standardization(numbers: np.ndarray) -> tuple[float, float, float, float]:
    """``(divisor, centre, spread, std)``: the z-score of ``x`` is
    ``(x / divisor - centre) / spread`` and ``std`` the population standard deviation (1 for a
    constant column, whose values all map to 0). Values so large that the plain formula
    overflows (near ``1e308``), or so small that its squares underflow (a deviation below
    :data:`_TINY_STD`), are divided by their largest magnitude first, so the z-scores and the
    deviation stay finite and exact. No values (an empty table) standardize as a constant
    column."""
    if numbers.size == 0:
        return 1.0, 0.0, 1.0, 1.0
    if numbers.min() == numbers.max():  # a constant column: every z-score 0, exactly
        # (its computed mean and deviation need not be: three 0.1 average 0.10000000000000002,
        # and a deviation of 1e-17 would make the rounding of a published mean a distance of ~1)
        return 1.0, float(numbers.flat[0]), 1.0, 1.0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        mean, std = numbers.mean(), numbers.std()
    if np.isfinite(mean) and np.isfinite(std) and std >= _TINY_STD:
        return 1.0, float(mean), float(std), float(std)
    magnitude = float(np.abs(numbers).max())
    scaled = numbers / magnitude
    centre = float(scaled.mean())
    spread = float(np.sqrt(np.mean((scaled - centre) ** 2)))
    if spread == 0.0:
        return magnitude, centre, 1.0, 1.0
    return magnitude, centre, spread, spread * magnitude


#: Below this population deviation the squares of the differences underflow (``[0, 1e-300]``
#: has a computed deviation of 0, and would standardize as a constant column).
_TINY_STD = 1e-150


def instant_offsets(nanoseconds: np.ndarray, origin: int) -> np.ndarray:
    """``nanoseconds - origin`` (``int64``) as floats, rounded once: the 2**20-ns parts are
    subtracted apart from the rest, so that instants 585 years apart do not overflow ``int64``
    (and instants a microsecond apart around 2020 keep their exact difference, which as float64
    nanoseconds since 1970 is rounded to 256 ns)."""
    step = 1 << 20
    high = (nanoseconds // step - origin // step).astype(np.float64) * step
    return high + (nanoseconds % step - origin % step).astype(np.float64)


def standardized(numbers: np.ndarray) -> tuple[np.ndarray, float]:
    """Z-scores of ``numbers`` and their population standard deviation (see
    :func:`_standardization`; finite even for values near ``1e308``)."""
    divisor, centre, spread, std = _standardization(numbers)
    return (numbers / divisor - centre) / spread, std


def standardized_like(numbers: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``numbers`` standardized as :func:`standardized` standardizes ``reference`` (the same
    operations, so a value of ``reference`` maps to its own z-score bit for bit)."""
    divisor, centre, spread, _std = _standardization(reference)
    return (numbers / divisor - centre) / spread


def _cluster_means(
    labels: np.ndarray, values: np.ndarray, counts: np.ndarray, n_clusters: int
) -> np.ndarray:
    """Mean of ``values`` per cluster, without overflow for values near ``1e308``."""
    with np.errstate(over="ignore", invalid="ignore"):
        means = np.bincount(labels, weights=values, minlength=n_clusters) / counts
    if np.isfinite(means).all() or not len(values):
        return means
    magnitude = float(np.abs(values).max())
    return (
        np.bincount(labels, weights=values / magnitude, minlength=n_clusters) / counts * magnitude
    )


def exact_rounded_means(values: np.ndarray, labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """Mean of ``int64`` (or ``uint64``) ``values`` per cluster, rounded half to even (as
    ``np.rint``), computed exactly in integers: no ``float64`` rounding of values beyond
    ``2**53`` (nanosecond instants are ~1.6e18). A mean lies within its members' range, so it
    has ``values``' dtype. Clusters of fewer than ``2**30`` rows."""
    # v = high * 2**32 + low with 0 <= low < 2**32: each sum is exact in int64
    high = (values >> 32).astype(np.int64)
    low = (values & 0xFFFFFFFF).astype(np.int64)
    high_sum = np.zeros(n_clusters, dtype=np.int64)
    low_sum = np.zeros(n_clusters, dtype=np.int64)
    np.add.at(high_sum, labels, high)
    np.add.at(low_sum, labels, low)
    count = np.maximum(np.bincount(labels, minlength=n_clusters), 1).astype(np.int64)
    # sum = high_sum * 2**32 + low_sum; floor(sum / count) = q1 * 2**32 + q2, remainder r2
    q1, r1 = np.divmod(high_sum, count)
    q2, r2 = np.divmod(r1 * 2**32 + low_sum, count)  # r1 < count: no overflow below 2**30
    up = (2 * r2 > count) | ((2 * r2 == count) & (q2 % 2 == 1))
    q2 = q2 + up
    wide = np.uint64 if values.dtype.kind == "u" else np.int64
    return (q1.astype(wide) << wide(32)) + q2.astype(wide)


def _squared_gap(original: np.ndarray, published: np.ndarray, std: float) -> np.ndarray:
    """``((original - published) / std)^2`` without overflow in the difference."""
    with np.errstate(over="ignore", invalid="ignore"):
        gap = (original - published) / std
    if not np.isfinite(gap).all():
        gap = original / std - published / std
    return gap**2


def _refuse_binary(values: pd.Series, spec: Any) -> None:
    """:class:`DataError` naming the rows of an ordinal or nominal QI that hold binary values
    (``BLOB``, ``bytea``): a category is published as text, and the text of ``b'\\x01'`` is
    no value of the column (PostgreSQL refused it in a message showing the value; SQLite
    published it)."""
    if values.dtype != object:
        return
    binary = np.array([isinstance(v, (bytes, bytearray, memoryview)) for v in values], dtype=bool)
    if binary.any():
        raise DataError(
            f"The quasi-identifier column {spec.name!r} ({spec.type}) holds binary values "
            f"(BLOB, bytea) in {int(binary.sum())} row(s) (rows {_rows(binary, values.index)}); "
            f"its categories would be published as text that is no value of the column. Give "
            f"it role identifier or other, or convert it to text first."
        )


def encode_quasi_identifier(values: pd.Series, spec: Any) -> QuasiIdentifier:
    """Encode one QI column (see the module docstring for the distance it realizes)."""
    missing = _check_missing(values, spec, "quasi-identifier")
    if spec.type in ("ordinal", "nominal"):
        _refuse_binary(values, spec)
    weight = float(getattr(spec, "weight", 1.0))
    scale = np.sqrt(weight)
    if spec.type in ("numeric", "date", "datetime"):
        integers = None
        if spec.type in ("date", "datetime"):
            integers = _instants(values, spec, "quasi-identifier")
            numbers = integers.astype(np.float64)
        else:
            numbers = _numbers(values, spec, "quasi-identifier")
            if getattr(spec, "round", False):
                exact = exact_numbers(values, spec, "quasi-identifier")
                integers = exact if exact.dtype == np.int64 else None
        # instants standardized from their exact distance to the earliest: as float64
        # nanoseconds since 1970 they are rounded to 128-256 ns
        z_scores, std = standardized(
            numbers
            if integers is None or spec.type == "numeric"
            else instant_offsets(integers, int(integers.min()) if len(integers) else 0)
        )
        embedding = (z_scores * scale)[:, None]
        column = QuasiIdentifier(
            spec.name,
            spec.type,
            embedding,
            values=numbers,
            integers=integers,
            round=bool(getattr(spec, "round", False)),
            std=std,
        )
    elif spec.type == "ordinal":
        categories, codes = _categories(values, spec, missing, "quasi-identifier")
        span = max(len(categories) - 1, 1)
        embedding = (codes / span * scale)[:, None]
        column = QuasiIdentifier(
            spec.name, spec.type, embedding, codes=codes, categories=categories
        )
    elif spec.type == "nominal":
        hierarchy = getattr(spec, "hierarchy", None)
        if hierarchy is not None and not isinstance(hierarchy, Hierarchy):
            hierarchy = Hierarchy.load(hierarchy, ("attributes", spec.name, "hierarchy"))
        categories, codes = _categories(values, spec, missing, "quasi-identifier")
        if hierarchy is not None:
            _check_leaves(hierarchy, values, categories, codes, spec.name)
            embedding = _hierarchy_embedding(hierarchy, categories, codes) * scale
        else:
            embedding = np.zeros((len(codes), len(categories)))
            embedding[np.arange(len(codes)), codes] = scale / np.sqrt(2.0)
        column = QuasiIdentifier(
            spec.name, spec.type, embedding, codes=codes, categories=categories, hierarchy=hierarchy
        )
    else:
        raise DataError(f"Unknown attribute type {spec.type!r} for {spec.name!r}.")
    column.weight = weight
    return column


def _near_miss_hint(unknown: Collection[str], known: Collection[str], what: str) -> str:
    """Sentences for an error about ``unknown`` values (matched as text, exactly): how many are
    ``known`` ones with surrounding spaces (a ``CHAR(n)`` column pads its values: PostgreSQL
    returns them padded), and how many equal one as numbers (``1.0`` read from a REAL column
    and the category ``1``); ``""`` if none. Counts only: values are data."""
    numbers: dict[float, str] = {}
    for value in known:
        with contextlib.suppress(ValueError):
            numbers.setdefault(float(value), value)
    padded = numeric = 0
    for value in unknown:
        if value != value.strip() and value.strip() in known:
            padded += 1
            continue
        with contextlib.suppress(ValueError):
            numeric += float(value) in numbers
    hint = ""
    if padded:
        hint += (
            f" {padded} of them equal {what} once their surrounding spaces are removed (a "
            f"CHAR(n) column pads its values with spaces): trim them in the source, or read a "
            f"view that trims them."
        )
    if numeric:
        hint += (
            f" {numeric} of them equal {what} as numbers but are spelled otherwise (1.0 read "
            f"from a REAL column is not the text 1): write them as the column holds them."
        )
    return hint


def _check_leaves(
    hierarchy: Hierarchy, values: pd.Series, categories: list[str], codes: np.ndarray, name: str
) -> None:
    """:class:`DataError` naming the rows whose value is not a leaf of the hierarchy."""
    leaves = set(hierarchy.leaves)
    bad = np.array([c != MISSING and c not in leaves for c in categories], dtype=bool)
    if bad.any():
        unknown = [c for c, b in zip(categories, bad) if b]
        raise DataError(
            f"Column {name!r}: {int(bad.sum())} distinct value(s) are not leaves of its "
            f"hierarchy (rows {_rows(bad[codes], values.index)}; values are not shown). Add "
            f"them to the hierarchy." + _near_miss_hint(unknown, leaves, "a leaf")
        )


def _hierarchy_embedding(
    hierarchy: Hierarchy, categories: list[str], codes: np.ndarray
) -> np.ndarray:
    height = hierarchy.height
    levels = []
    for category in categories:
        if category == MISSING:
            levels.append([MISSING] * height)
            continue
        chain = [category, *hierarchy.ancestors(category)][::-1][1:]  # depth 1 .. leaf
        chain += [chain[-1]] * (height - len(chain))  # shallow leaves repeat themselves
        levels.append(chain)
    blocks = []
    for depth in range(height):
        names = sorted({row[depth] for row in levels})
        index = {name: i for i, name in enumerate(names)}
        # intp: with no category (every row set aside) an empty list is no float index
        per_category = np.array([index[row[depth]] for row in levels], dtype=np.intp)
        blocks.append(np.eye(len(names))[per_category[codes]])
    return np.hstack(blocks) / np.sqrt(2.0 * height)


def encode_confidential(values: pd.Series, spec: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """A confidential column as the values its distance is fitted on, and extra distance options.

    numeric → the values in their own exact type (:func:`exact_numbers`: integers, floats,
    ``Decimal``); date/datetime → ``int64`` nanoseconds; ordinal → the rank of each value in
    the declared order; nominal → strings (NULL as ``(missing)`` under ``missing: category``), with
    the attribute's ``hierarchy`` and ``categories`` passed to the distance. With a hierarchy,
    ``(missing)`` is added as a leaf under its root: at distance 1 from every value.
    """
    missing = _check_missing(values, spec, "confidential")
    if spec.type in ("numeric", "date", "datetime"):
        return exact_numbers(values, spec, "confidential"), {}
    categories, codes = _categories(values, spec, missing, "confidential")
    if spec.type == "ordinal":
        return codes, {}
    extra: dict[str, Any] = {}
    hierarchy = getattr(spec, "hierarchy", None)
    if hierarchy is not None:
        if isinstance(hierarchy, Hierarchy):
            _check_leaves(hierarchy, values, categories, codes, spec.name)
        if MISSING in categories:
            # NULL is a value of its own, at distance 1 from every other (as for a QI)
            tree = Hierarchy.load(hierarchy, ("attributes", spec.name, "hierarchy"))
            hierarchy = tree.with_leaf_under_root(MISSING)
        extra["hierarchy"] = hierarchy
    if getattr(spec, "categories", None) is not None:
        extra["categories"] = categories
    return np.array([categories[c] for c in codes], dtype=object), extra


@dataclass
class EncodedTable:
    """A table's QI and confidential columns, encoded for the kernels.

    Attributes:
        x: ``(n_kept, p)`` float matrix whose squared Euclidean distances are the mixed distance.
        quasi_identifiers: the encoded QIs, in configuration order (they aggregate themselves).
        confidential: column → values its distance is fitted on.
        distance_options: column → options the attribute adds to its distance.
        excluded: ``(n,)`` mask of rows set aside by ``missing: exclude-rows``.
        excluded_by: column → how many rows it set aside (a row may count for several columns).
        suppressed: ``(n,)`` mask of rows left out as outliers (:meth:`without`), ``None``
            when none is.
        suppressed_loss: QI column → the sum over the suppressed rows of the distance term
            between each row and the aggregate of the whole table (:meth:`without`).
    """

    x: np.ndarray
    quasi_identifiers: list[QuasiIdentifier]
    confidential: dict[str, np.ndarray]
    distance_options: dict[str, dict[str, Any]]
    excluded: np.ndarray
    excluded_by: dict[str, int]
    suppressed: np.ndarray | None = None
    suppressed_loss: dict[str, float] = field(default_factory=dict)

    @property
    def left_out(self) -> np.ndarray:
        """``(n,)`` mask of the rows not partitioned: set aside or suppressed."""
        return self.excluded if self.suppressed is None else self.excluded | self.suppressed

    def without(self, rows: np.ndarray) -> EncodedTable:
        """This table with the kept rows of the mask ``rows`` (shape ``(n_kept,)``) left out
        as suppressed. Every other row keeps its encoding: the standardization, categories and
        confidential values of the table before suppression, so that information loss stays
        measured in the source's units. ``suppressed_loss`` records, per QI, the sum of the
        distance terms between the suppressed rows and the table's aggregate as one class."""
        keep = ~rows
        whole = self.aggregate(np.zeros(len(self.x), dtype=np.int64))
        loss = {
            q.name: float(q.squared_error(whole[q.name])[rows].sum()) if rows.any() else 0.0
            for q in self.quasi_identifiers
        }
        x = np.ascontiguousarray(self.x[keep])
        quasi, start = [], 0
        for q in self.quasi_identifiers:
            stop = start + q.embedding.shape[1]
            quasi.append(_kept_rows(q, keep, x[:, start:stop]))
            start = stop
        suppressed = np.zeros(len(self.excluded), dtype=bool)
        suppressed[np.flatnonzero(~self.left_out)[rows]] = True
        if self.suppressed is not None:
            suppressed |= self.suppressed
        confidential = {c: v[keep] for c, v in self.confidential.items()}
        return EncodedTable(
            x,
            quasi,
            confidential,
            self.distance_options,
            self.excluded,
            self.excluded_by,
            suppressed,
            loss,
        )

    def aggregate(self, labels: np.ndarray) -> dict[str, np.ndarray]:
        """Column → the published value of every kept row."""
        return {qi.name: qi.aggregate(labels) for qi in self.quasi_identifiers}

    def information_loss(self, published: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """The paper's normalized SSE over the mixed distance (weights excluded): the mean over
        rows and QIs of each attribute's distance term between original and published values;
        per attribute as well. For numeric QIs the term is ``((a - a') / std)^2``."""
        per_attribute = {
            qi.name: float(qi.squared_error(published[qi.name]).mean())
            if len(qi.embedding)
            else 0.0
            for qi in self.quasi_identifiers
        }
        sse = float(np.mean(list(per_attribute.values()))) if per_attribute else 0.0
        return {"sse": sse, "sse_per_attribute": per_attribute}


def _kept_rows(qi: QuasiIdentifier, keep: np.ndarray, embedding: np.ndarray) -> QuasiIdentifier:
    """``qi`` restricted to the rows of the mask ``keep``, its embedding ``embedding``."""

    def rows(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else values[keep]

    return dataclasses.replace(
        qi,
        embedding=embedding,
        values=rows(qi.values),
        integers=rows(qi.integers),
        codes=rows(qi.codes),
    )


def _stack_embeddings(quasi: list[QuasiIdentifier], n: int) -> np.ndarray:
    """``np.hstack`` of the embeddings, C-contiguous ``float64``; each ``embedding`` then becomes
    a view of its columns, so that the one-hot matrices are held once, not twice. Each
    embedding is freed as soon as it is copied: the pages of ``x`` (``np.empty``) are only
    committed as they are written, so the peak is about one ``x``, not two."""
    x = np.empty((n, sum(q.embedding.shape[1] for q in quasi)))
    start = 0
    for q in quasi:
        stop = start + q.embedding.shape[1]
        x[:, start:stop] = q.embedding
        q.embedding = x[:, start:stop]
        start = stop
    return x


def encode_table(frame: pd.DataFrame, specs: Sequence[Any]) -> EncodedTable:
    """Encode the QI and confidential columns of ``frame`` as configured by ``specs``
    (:class:`tclose.base.config.AttributeSpec`), after setting aside ``exclude-rows`` rows."""
    relevant = [s for s in specs if s.role in ("quasi_identifier", "confidential")]
    excluded = rows_to_exclude(frame, relevant)
    excluded_by = {
        s.name: int(missing_mask(frame[s.name]).sum())
        for s in relevant
        if getattr(s, "missing", "error") == "exclude-rows"
    }
    kept = frame[~excluded]
    quasi = [
        encode_quasi_identifier(kept[s.name], s) for s in relevant if s.role == "quasi_identifier"
    ]
    x = _stack_embeddings(quasi, len(kept))
    confidential, options = {}, {}
    for s in relevant:
        if s.role == "confidential":
            confidential[s.name], options[s.name] = encode_confidential(kept[s.name], s)
    return EncodedTable(
        x,
        quasi,
        confidential,
        options,
        excluded,
        excluded_by,
    )
