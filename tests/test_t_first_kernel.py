"""t-first kernel (Algorithm 3): cluster size, strata, cluster structure, EMD bound, Table 3.

The EMD, the strata and the worst-case EMD of a cluster structure are computed here by small
independent functions; the kernel's own helpers are used only as the objects under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.kernels import _compiled
from tclose.kernels import t_first as t_first_module
from tclose.kernels._compiled import sq_dist_reference, t_first_column_sum
from tclose.kernels.onehot import column_layout
from tclose.kernels.onehot import sq_dist_reference as onehot_sq_dist
from tclose.kernels.t_first import (
    cluster_size,
    strata_sizes,
    t_first,
    t_first_reference,
)

T_VALUES = (0.01, 0.05, 0.09, 0.13, 0.17, 0.21, 0.25)

_NUMPY_BELOW = t_first_module.NUMPY_BELOW


def setup_module() -> None:
    # t_first runs the compiled kernel at every size here, so that comparing it with the NumPy
    # twin (t_first_reference) tests something on small tables too.
    t_first_module.NUMPY_BELOW = 0


def teardown_module() -> None:
    t_first_module.NUMPY_BELOW = _NUMPY_BELOW


# Table 3 of the paper (t-closeness-first, n = 1,080): "minimum/average" cluster size for each t
# of T_VALUES. The MCD and HCD columns are identical, as the paper notes.
TABLE_3 = {
    2: ("49/49", "10/10", "6/6", "4/4", "3/3", "3/3", "2/2"),
    5: ("49/49", "10/10", "6/6", "5/5", "5/5", "5/5", "5/5"),
    10: ("49/49", "10/10", "10/10", "10/10", "10/10", "10/10", "10/10"),
    15: ("49/49", "15/15", "15/15", "15/15", "15/15", "15/15", "15/15"),
    20: ("49/49", "20/20", "20/20", "20/20", "20/20", "20/20", "20/20"),
    25: ("49/49", "25/25", "25/25", "25/25", "25/25", "25/25", "25/25"),
    30: ("49/49", "30/30", "30/30", "30/30", "30/30", "30/30", "30/30"),
}


# --------------------------------------------------------------------------------------------
# Independent helpers
# --------------------------------------------------------------------------------------------


def _emd_distinct(cluster_ranks: np.ndarray, n: int) -> float:
    """Ordered EMD between a cluster and a table of n distinct values (ranks 0..n-1)."""
    if n == 1:
        return 0.0
    in_cluster = np.zeros(n)
    in_cluster[cluster_ranks] = 1.0 / len(cluster_ranks)
    cumulative_gap = np.cumsum(in_cluster - 1.0 / n)
    return float(np.abs(cumulative_gap).sum() / (n - 1))


def _expected_strata_bounds(n: int, kp: int) -> list[int]:
    """First rank of each stratum, plus n: floor(n/k') each, remainder to the middle one(s)."""
    q, r = n // kp, n % kp
    sizes = [q] * kp
    if kp % 2 == 1:
        sizes[(kp + 1) // 2 - 1] += r
    else:
        sizes[kp // 2 - 1] += math.ceil(r / 2)
        sizes[kp // 2] += r // 2
    return [sum(sizes[:i]) for i in range(kp + 1)]


def _stratum_counts(cluster_ranks: np.ndarray, bounds: list[int]) -> np.ndarray:
    return np.histogram(cluster_ranks, bins=bounds)[0]


def _worst_emd(n: int, bounds: list[int], per_stratum: np.ndarray) -> float:
    """Largest EMD over all clusters with per_stratum[j] records in stratum j (1 or 2).

    In stratum j the cluster's cumulative count only depends on the records chosen there (the
    count before the stratum is fixed), so the maximum is a sum of per-stratum maxima, each found
    by trying every choice of offsets.
    """
    size = int(per_stratum.sum())
    total = 0.0
    before = 0
    for j in range(len(per_stratum)):
        ranks = np.arange(bounds[j], bounds[j + 1])
        uniform = (ranks + 1) / n
        if per_stratum[j] == 1:
            choices = [(u,) for u in range(len(ranks))]
        else:
            choices = [(u, v) for u in range(len(ranks)) for v in range(u + 1, len(ranks))]
        best = 0.0
        for chosen in choices:
            count = before + sum((ranks >= bounds[j] + u) for u in chosen)
            best = max(best, float(np.abs(count / size - uniform).sum()))
        total += best
        before += int(per_stratum[j])
    return total / (n - 1)


def _random_case(rng: np.random.Generator, n: int, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    return rng.normal(size=(n, d)), rng.permutation(n).astype(np.int64)


def _check_structure(labels: np.ndarray, ranks: np.ndarray, k: int, kp: int) -> None:
    """Partition, sizes and "one record of every stratum plus at most one central extra"."""
    n = ranks.shape[0]
    q, r = n // kp, n % kp
    assert kp >= min(k, n)
    assert labels.shape == (n,) and labels.dtype == np.int64
    sizes = np.bincount(labels, minlength=q)
    assert sizes.shape == (q,) and sizes.sum() == n  # every row once, q dense labels
    assert (sizes[:r] == kp + 1).all() and (sizes[r:] == kp).all()
    assert sizes.min() >= min(k, n)
    bounds = _expected_strata_bounds(n, kp)
    extras_strata = {j for j in range(kp) if bounds[j + 1] - bounds[j] > q}
    for c in range(q):
        counts = _stratum_counts(ranks[labels == c], bounds)
        assert (counts >= 1).all() and counts.sum() - kp == (1 if c < r else 0)
        assert set(np.flatnonzero(counts == 2)) <= extras_strata


# --------------------------------------------------------------------------------------------
# Cluster size
# --------------------------------------------------------------------------------------------


def test_cluster_size_table_3_values():
    for k, row in TABLE_3.items():
        assert [cluster_size(1080, k, t) for t in T_VALUES] == [int(c.split("/")[0]) for c in row]


def test_cluster_size_uses_floor_in_the_adjustment():
    # n = 1080, t = 0.01: ceil(1080 / 22.58) = 48; 1080 mod 48 = 24 and floor(1080/48) = 22, so
    # the floor adds 1 (49, Table 3) where the pseudocode's ceiling would add 2 (50).
    assert cluster_size(1080, 2, 0.01) == 49


def test_cluster_size_ceiling_is_exact_for_decimal_t():
    # n = 326, t = 0.011: 2 (n-1) t + 1 = 8.15 and 326 / 8.15 = 40 exactly, but the quotient in
    # doubles is 40.000000000000007, whose ceiling 41 would then be adjusted to 46.
    assert math.ceil(326 / (2 * 325 * 0.011 + 1)) == 41
    assert cluster_size(326, 2, 0.011) == 40  # 326 mod 40 = 6 < floor(326/40) = 8: kept
    assert math.ceil(481 / (2 * 480 * 0.019 + 1)) == 26  # 481 / 19.24 = 25 exactly
    assert cluster_size(481, 2, 0.019) == 25


def test_cluster_size_edges():
    assert cluster_size(0, 3, 0.1) == 0
    assert cluster_size(5, 7, 0.1) == 5  # k > n: one cluster (callers reject n < k)
    assert cluster_size(10, 6, 0.5) == 10  # k' > n/2 becomes n through the adjustment
    assert cluster_size(10, 1, 1.0) == 1
    with pytest.raises(ValueError, match="'t' parameter"):
        cluster_size(10, 2, 0.0)
    with pytest.raises(ValueError, match="'k' parameter"):
        cluster_size(10, 0, 0.1)


def test_after_adjustment_fewer_extras_than_clusters():
    for n in range(1, 400):
        for k in range(1, min(n, 40) + 1):
            for t in (0.005, 0.01, 0.05, 0.13, 0.25, 0.5, 1.0):
                kp = cluster_size(n, k, t)
                assert min(k, n) <= kp <= n
                assert n % kp < n // kp or kp == n  # kp == n: n mod n = 0 < 1


def test_strata_sizes():
    assert strata_sizes(11, 3).tolist() == [3, 5, 3]
    assert strata_sizes(11, 4).tolist() == [2, 4, 3, 2]
    assert strata_sizes(13, 4).tolist() == [3, 4, 3, 3]
    assert strata_sizes(7, 2).tolist() == [4, 3]
    for n in range(1, 60):
        for kp in range(1, n + 1):
            bounds = _expected_strata_bounds(n, kp)
            assert strata_sizes(n, kp).tolist() == np.diff(bounds).tolist()


# --------------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------------


def test_table_3_reproduced():
    rng = np.random.default_rng(1080)
    x, ranks = _random_case(rng, 1080, d=2)
    for k, row in TABLE_3.items():
        for t, cell in zip(T_VALUES, row, strict=True):
            labels, _ = t_first(x, ranks, k, t)
            sizes = np.bincount(labels)
            assert f"{sizes.min()}/{round(sizes.mean())}" == cell, (k, t)


@pytest.mark.parametrize("n", [5, 1079, 2001])
def test_odd_n_with_k_2(n):
    rng = np.random.default_rng(n)
    x, ranks = _random_case(rng, n)
    labels, kp = t_first(x, ranks, 2, 0.25)
    assert kp == 2
    _check_structure(labels, ranks, 2, kp)
    sizes = np.bincount(labels)
    assert sizes[0] == 3 and (sizes[1:] == 2).all()


def test_odd_n_3_with_k_2_is_one_cluster():
    # ceil(3 / 2) = 2, then 3 mod 2 = 1 = floor(3 / 2) adds 1: k' = 3.
    labels, kp = t_first(np.zeros((3, 1)), np.array([2, 0, 1]), 2, 0.25)
    assert kp == 3 and labels.tolist() == [0, 0, 0]


def test_n_1079_all_k_and_several_t():
    rng = np.random.default_rng(1079)
    x, ranks = _random_case(rng, 1079)
    for k in range(2, 31):
        for t in (0.01, 0.05, 0.13, 0.25):
            labels, kp = t_first(x, ranks, k, t)
            _check_structure(labels, ranks, k, kp)


def test_compiled_equals_reference_larger():
    rng = np.random.default_rng(3)
    for n, k, t in ((1079, 2, 0.25), (1079, 5, 0.05), (997, 3, 0.13), (600, 2, 0.01)):
        x, ranks = _random_case(rng, n)
        x[n // 2 :] = x[: n - n // 2]  # duplicated QI rows: ties in every search
        labels, kp = t_first(x, ranks, k, t)
        ref_labels, ref_kp = t_first_reference(x, ranks, k, t)
        assert kp == ref_kp
        np.testing.assert_array_equal(labels, ref_labels)


def test_compiled_equals_reference_with_one_hot_groups():
    # Nominal QIs: the kernel looks their distances up in a table per group (onehot.py).
    rng = np.random.default_rng(4)
    for n, k, t in ((1079, 2, 0.25), (997, 5, 0.05)):
        codes = rng.integers(0, 9, n)
        x = np.hstack(
            [rng.normal(size=(n, 1)), np.eye(9)[codes] / np.sqrt(2.0), np.eye(3)[codes % 3]]
        )
        ranks = rng.permutation(n)
        labels, kp = t_first(x, ranks, k, t)
        _check_structure(labels, ranks, k, kp)
        ref_labels, _ = t_first_reference(x, ranks, k, t)
        np.testing.assert_array_equal(labels, ref_labels)


def test_docstring_example():
    x = np.array([[0.0], [0.1], [5.0], [5.1]])
    labels, kp = t_first(x, np.array([0, 2, 1, 3]), 2, 0.25)
    assert (labels.tolist(), kp) == ([0, 0, 1, 1], 2)


def test_golden_small():
    # n = 6, k = 2, t = 0.5: k' = max(2, ceil(6 / 6)) = 2, strata ranks {0,1,2} and {3,4,5}.
    # QIs on a line; ranks put rows 0, 2, 4 in the low stratum. Centroid 2.5: row 0 (x = 0) and
    # row 5 (x = 5) tie as farthest -> row 0. Its cluster: row 0 (low stratum) + the closest
    # high-stratum row, row 1. x1 = farthest from row 0 among the rest = row 5 (high) + row 4.
    x = np.arange(6.0)[:, None]
    ranks = np.array([0, 3, 1, 4, 2, 5])
    labels, kp = t_first(x, ranks, 2, 0.5)
    assert kp == 2
    assert labels.tolist() == [0, 0, 2, 2, 1, 1]


def test_bound_is_only_approximate_when_k_does_not_divide_n():
    # QIs equal to the ranks (the worst correlation): every cluster takes the records of each
    # stratum nearest to an extreme seed, i.e. the extreme ranks of each stratum.
    # n = 11, k' = 2: the low stratum holds ranks 0-5 (with the extra), the high one 6-10. The
    # first cluster takes ranks 0 and 1 (the extra) and 6: EMD 0.267 > t = 0.25.
    ranks = np.arange(11)
    labels, kp = t_first(ranks[:, None].astype(float), ranks, 2, 0.25)
    assert kp == 2
    first = np.flatnonzero(labels == 0)
    assert first.tolist() == [0, 1, 6]
    assert _emd_distinct(first, 11) == pytest.approx(4 / 15)
    # Clusters without an extra exceed it too, the strata being unequal: n = 5, t = 0.21,
    # k' = 2, strata {0, 1, 2} and {3, 4}; Proposition 2 gives 3/16 <= 0.21, but the cluster
    # {2, 4} has EMD 0.25.
    ranks = np.arange(5)
    labels, kp = t_first(ranks[:, None].astype(float), ranks, 2, 0.21)
    assert kp == 2 and (5 - 2) / (2 * 4 * 2) <= 0.21
    second = np.flatnonzero(labels == 1)
    assert second.tolist() == [2, 4]
    assert _emd_distinct(second, 5) == pytest.approx(0.25)
    bounds = _expected_strata_bounds(5, 2)
    assert _worst_emd(5, bounds, np.array([1, 1])) == pytest.approx(0.25)


@st.composite
def _t_first_case(draw):
    n = draw(st.integers(1, 60))
    k = draw(st.integers(1, min(n, 8)))
    t = draw(st.sampled_from((0.01, 0.03, 0.05, 0.09, 0.13, 0.2, 0.25, 0.33, 0.5, 1.0)))
    d = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(("integers", "normal", "one-hot")))
    if kind == "integers":
        x = rng.integers(0, draw(st.integers(1, 3)), size=(n, d)).astype(np.float64)
    elif kind == "normal":
        x = rng.normal(size=(n, d))
    else:  # nominal QIs as the encoding embeds them: one-hot groups next to numeric columns
        width = draw(st.integers(2, 6))
        one_hot = np.eye(width)[rng.integers(0, width, n)] / np.sqrt(2.0)
        x = np.hstack([rng.normal(size=(n, d - 1)), one_hot, one_hot[:, ::-1] * 0.5])
    return x, rng.permutation(n).astype(np.int64), k, t


@settings(max_examples=200, deadline=None)
@given(_t_first_case())
def test_properties(case):
    x, ranks, k, t = case
    n = x.shape[0]
    labels, kp = t_first(x, ranks, k, t)
    _check_structure(labels, ranks, k, kp)
    again, _ = t_first(x.copy(), ranks.copy(), k, t)
    np.testing.assert_array_equal(labels, again)
    ref_labels, ref_kp = t_first_reference(x, ranks, k, t)
    assert ref_kp == kp
    np.testing.assert_array_equal(labels, ref_labels)

    bounds = _expected_strata_bounds(n, kp)
    proposition_2 = (n - kp) / (2 * (n - 1) * kp) if n > 1 else 0.0
    for c in range(n // kp):
        members = ranks[labels == c]
        emd = _emd_distinct(members, n)
        if n % kp == 0:
            # Proposition 2 (k' divides n): EMD <= (n - k') / (2 (n-1) k') <= t.
            assert emd <= proposition_2 + 1e-12
            assert proposition_2 <= t + 1e-12
        elif n <= 30:
            # Otherwise the exact property is the bound of the cluster's structure.
            per_stratum = _stratum_counts(members, bounds)
            assert emd <= _worst_emd(n, bounds, per_stratum) + 1e-12


def test_empty_and_one_row():
    labels, kp = t_first(np.empty((0, 2)), np.empty(0, dtype=np.int64), 2, 0.1)
    assert labels.tolist() == [] and kp == 0
    labels, kp = t_first(np.zeros((1, 2)), np.array([0]), 1, 0.1)
    assert labels.tolist() == [0] and kp == 1


@pytest.mark.parametrize(
    ("x", "ranks", "message"),
    [
        (np.zeros(3), np.arange(3), "2-D"),
        (np.array([[np.inf], [0.0]]), np.arange(2), "finite"),
        (np.zeros((3, 1)), np.arange(2), "shape"),
        (np.zeros((3, 1)), np.array([0.0, 1.0, 2.0]), "integer"),
        (np.zeros((3, 1)), np.array([0, 1, 1]), "permutation"),
        (np.zeros((3, 1)), np.array([0, 1, 3]), "permutation"),
    ],
)
def test_rejects_bad_input(x, ranks, message):
    with pytest.raises(ValueError, match=message):
        t_first(x, ranks, 1, 0.5)


# --------------------------------------------------------------------------------------------
# One-hot look-ups decide exactly as the column sum (same labels, same SSE)
# --------------------------------------------------------------------------------------------


def _nominal_table(rng: np.random.Generator, n: int, widths: tuple[int, ...], numeric: int):
    """Numeric columns then one-hot groups with skewed category frequencies and awkward scales:
    many duplicated rows, so many exact and near ties."""
    parts = [np.round(rng.normal(size=(n, numeric)), 1)]
    for g, width in enumerate(widths):
        weights = 1.0 / np.arange(1, width + 1) ** 1.5
        codes = rng.choice(width, n, p=weights / weights.sum())
        scale = (0.5**0.5, 0.3, 1.7 / 3.0, 1.0)[g % 4]
        group = np.zeros((n, width))
        group[np.arange(n), codes] = scale
        parts.append(group)
    return np.hstack(parts)


def _strata(n: int, ranks: np.ndarray, kp: int) -> tuple[np.ndarray, np.ndarray]:
    sizes = strata_sizes(n, kp)
    return np.repeat(np.arange(kp, dtype=np.int64), sizes)[ranks], sizes


def test_look_ups_are_not_bit_identical_but_decisions_are():
    # Adult-like: 2 numeric columns, groups of 2, 5, 7 and 42 categories.
    rng = np.random.default_rng(14)
    n = 3000
    x = _nominal_table(rng, n, (2, 5, 7, 42), 2)
    layout = column_layout(x)
    assert layout.group_lo.shape[0] == 4
    centroid = x.mean(axis=0)
    rows = np.arange(n)
    look_up = onehot_sq_dist(layout, x, rows, centroid)
    column = sq_dist_reference(x, centroid)
    assert (look_up != column).any()  # the look-ups round differently: the test is not vacuous
    for k, t in ((5, 0.15), (2, 0.25), (3, 0.05)):
        ranks = rng.permutation(n).astype(np.int64)
        labels, kp = t_first(x, ranks, k, t)
        _check_structure(labels, ranks, k, kp)
        stratum, sizes = _strata(n, ranks, kp)
        np.testing.assert_array_equal(labels, t_first_column_sum(x, stratum, sizes))


@st.composite
def _nominal_case(draw):
    n = draw(st.integers(2, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    widths = tuple(draw(st.lists(st.integers(2, 9), min_size=1, max_size=4)))
    x = _nominal_table(rng, n, widths, draw(st.integers(0, 2)))
    k = draw(st.integers(1, min(n, 6)))
    t = draw(st.sampled_from((0.05, 0.13, 0.25, 0.5)))
    return x, rng.permutation(n).astype(np.int64), k, t


@settings(max_examples=150, deadline=None)
@given(_nominal_case())
def test_look_ups_decide_as_the_column_sum(case):
    x, ranks, k, t = case
    n = x.shape[0]
    labels, kp = t_first(x, ranks, k, t)
    _check_structure(labels, ranks, k, kp)  # every row in one cluster, clusters >= k
    stratum, sizes = _strata(n, ranks, kp)
    np.testing.assert_array_equal(labels, t_first_column_sum(x, stratum, sizes))
    np.testing.assert_array_equal(labels, t_first_reference(x, ranks, k, t)[0])
    if n % kp == 0:
        bound = (n - kp) / (2 * (n - 1) * kp)
        assert bound <= t + 1e-12
        for c in range(n // kp):
            assert _emd_distinct(ranks[labels == c], n) <= bound + 1e-12


def test_small_tables_take_the_numpy_twin_with_the_same_labels(monkeypatch):
    rng = np.random.default_rng(15)
    cases = [(_nominal_table(rng, n, (3, 5), 1), rng.permutation(n)) for n in (10, 97, 299)]
    compiled = [t_first(x, ranks, 3, 0.2) for x, ranks in cases]  # NUMPY_BELOW = 0 here

    def no_compiled(*args):
        raise AssertionError("the compiled kernel was loaded for a small table")

    monkeypatch.setattr(t_first_module, "NUMPY_BELOW", _NUMPY_BELOW)
    monkeypatch.setattr(_compiled, "t_first_compiled", no_compiled)
    for (x, ranks), (labels, kp) in zip(cases, compiled, strict=True):
        small, small_kp = t_first(x, ranks, 3, 0.2)
        assert small_kp == kp
        np.testing.assert_array_equal(small, labels)
    big = _nominal_table(rng, _NUMPY_BELOW, (3,), 1)
    with pytest.raises(AssertionError, match="compiled kernel was loaded"):
        t_first(big, rng.permutation(_NUMPY_BELOW), 3, 0.2)
