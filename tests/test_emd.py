"""The ordered-distance EMD: hand-computed values, edge cases, and the fast paths against a naive
dense implementation."""

from __future__ import annotations

import doctest
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.interfaces import FittedDistance
from tclose.kernels import emd as emd_module
from tclose.kernels.emd import (
    OrderedEMD,
    emd_ordered,
    max_emd_of_rows,
    numerator_of_rows,
)

SALARIES = np.arange(3, 12) * 1000.0  # Li et al. (2007): 3k, 4k, ..., 11k


def naive_emd(values: np.ndarray, in_group: np.ndarray) -> float:
    """The definition, term by term, with fractions: 1/(m-1) sum_i |sum_{j<=i} (p_j - q_j)|.

    ``in_group`` is a boolean mask of the group's rows.
    """
    distinct = sorted(set(values.tolist()))
    m = len(distinct)
    if m == 1:
        return 0.0
    group = values[in_group]
    p = [Fraction(int(np.sum(group == v)), group.size) for v in distinct]
    q = [Fraction(int(np.sum(values == v)), len(values)) for v in distinct]
    total, running = Fraction(0), Fraction(0)
    for i in range(m - 1):
        running += p[i] - q[i]
        total += abs(running)
    return float(total / (m - 1))


def naive_cluster_emd(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A dense (clusters x m) computation in floats, independent of the module's code."""
    distinct, codes = np.unique(values, return_inverse=True)
    m = distinct.size
    counts = np.zeros((labels.max() + 1, m))
    np.add.at(counts, (labels, codes), 1)
    p = counts / counts.sum(axis=1, keepdims=True)
    q = np.bincount(codes, minlength=m) / values.size
    if m == 1:
        return np.zeros(counts.shape[0])
    return np.abs(np.cumsum(p - q, axis=1)[:, :-1]).sum(axis=1) / (m - 1)


def test_li_et_al_examples():
    d = OrderedEMD.fit(SALARIES)
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1])
    assert d.cluster_emd(labels)[0] == pytest.approx(0.375, abs=1e-15)
    group = np.array([0, 0, 0, 1, 0, 1, 0, 0, 1])  # {6k, 8k, 11k}
    assert d.cluster_emd(1 - group)[0] == pytest.approx(1 / 6, abs=1e-15)
    counts = np.array([[1, 1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 1, 0, 0, 1]])
    np.testing.assert_allclose(d.emd_of_counts(counts), [0.375, 1 / 6], atol=1e-15)
    assert emd_ordered(counts[0], np.ones(9)) == pytest.approx(0.375)
    assert emd_ordered(counts[1], np.ones(9)) == pytest.approx(1 / 6)


def test_fit_attributes():
    values = np.array([5.0, 1.0, 5.0, 3.0, 1.0, 5.0])
    d = OrderedEMD.fit(values)
    assert isinstance(d, FittedDistance)
    assert d.name == "emd-ordered"
    assert d.m == 3
    np.testing.assert_array_equal(d.values, [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(d.codes, [2, 0, 2, 1, 0, 2])
    np.testing.assert_array_equal(d.global_counts, [2, 1, 3])
    np.testing.assert_array_equal(d.ranks, [3, 0, 4, 2, 1, 5])  # ties by row index
    assert d.codes.dtype == d.ranks.dtype == d.global_counts.dtype == np.int64
    np.testing.assert_array_equal(np.sort(d.ranks), np.arange(6))


def test_fit_any_sortable_dtype_and_errors():
    d = OrderedEMD.fit(np.array(["b", "a", "c", "a"]))
    np.testing.assert_array_equal(d.codes, [1, 0, 2, 0])
    with pytest.raises(ValueError, match="NaN"):
        OrderedEMD.fit(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="shape"):
        OrderedEMD.fit(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="shape"):
        OrderedEMD.fit(np.array([]))


def test_single_value_gives_zero():
    d = OrderedEMD.fit(np.full(5, 7.0))
    assert d.m == 1
    np.testing.assert_array_equal(d.cluster_emd(np.array([0, 0, 1, 1, 2])), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(d.emd_of_counts(np.array([[2], [3]])), [0.0, 0.0])
    assert emd_ordered([3], [1]) == 0.0


def test_whole_table_gives_zero():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 20, 200)
    d = OrderedEMD.fit(values)
    assert d.cluster_emd(np.zeros(200, dtype=np.int64))[0] == 0.0
    assert float(d.emd_of_counts(d.global_counts)) == 0.0


def test_ties():
    values = np.array([1, 1, 1, 2, 2, 3])
    d = OrderedEMD.fit(values)
    labels = np.array([0, 1, 0, 1, 0, 1])
    expected = [naive_emd(values, labels == c) for c in (0, 1)]
    np.testing.assert_allclose(d.cluster_emd(labels), expected, atol=1e-15)
    # {1, 1, 2} vs {1,1,1,2,2,3}: CDF gaps (2/3 - 1/2) and (1 - 5/6), over m - 1 = 2.
    assert d.cluster_emd(labels)[0] == pytest.approx((1 / 6 + 1 / 6) / 2)


def test_bad_labels():
    d = OrderedEMD.fit(np.arange(4.0))
    with pytest.raises(ValueError, match="dense"):
        d.cluster_emd(np.array([0, 0, 2, 2]))
    with pytest.raises(ValueError, match="shape"):
        d.cluster_emd(np.array([0, 0]))
    with pytest.raises(ValueError, match="nonnegative"):
        d.cluster_emd(np.array([0, -1, 0, 0]))
    with pytest.raises(ValueError, match="at least one row"):
        d.emd_of_counts(np.array([[1, 0, 0, 0], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="shape"):
        d.emd_of_counts(np.array([1, 0, 0]))


@st.composite
def partitions(draw):
    n = draw(st.integers(1, 60))
    m_max = draw(st.integers(1, 12))
    values = np.array(draw(st.lists(st.integers(0, m_max), min_size=n, max_size=n)))
    n_clusters = draw(st.integers(1, n))
    raw = np.array(draw(st.lists(st.integers(0, n_clusters - 1), min_size=n, max_size=n)))
    labels = np.unique(raw, return_inverse=True)[1].reshape(-1)
    return values, labels


@settings(max_examples=200, deadline=None)
@given(partitions())
def test_cluster_emd_matches_naive(case):
    values, labels = case
    d = OrderedEMD.fit(values)
    fast = d.cluster_emd(labels)
    np.testing.assert_allclose(fast, naive_cluster_emd(values, labels), atol=1e-12)
    # Every exact path gives the same bits: the histogram path and the per-cluster compiled one.
    counts = np.zeros((labels.max() + 1, d.m), dtype=np.int64)
    np.add.at(counts, (labels, d.codes), 1)
    np.testing.assert_array_equal(d.emd_of_counts(counts), fast)
    for c in range(labels.max() + 1):
        rows = np.flatnonzero(labels == c)
        assert max_emd_of_rows([d], rows) == fast[c]
        numer = numerator_of_rows(d.codes, rows, d.cum_counts, d.cum_prefix, d.n)
        assert (numer / (d.n * rows.size * (d.m - 1)) if d.m > 1 else 0.0) == fast[c]
        assert fast[c] == pytest.approx(naive_emd(values, labels == c), abs=1e-12)


def test_float_fallback_agrees_with_exact_path():
    rng = np.random.default_rng(5)
    values = rng.normal(size=300)
    labels = rng.integers(0, 40, 300)
    labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    d = OrderedEMD.fit(values)
    exact = d.cluster_emd(labels)
    d.exact = False  # as for a table too large for int64 numerators
    np.testing.assert_allclose(d.cluster_emd(labels), exact, atol=1e-12)
    counts = np.zeros((labels.max() + 1, d.m), dtype=np.int64)
    np.add.at(counts, (labels, d.codes), 1)
    np.testing.assert_allclose(d.emd_of_counts(counts), exact, atol=1e-12)


def test_max_over_attributes():
    a = OrderedEMD.fit(np.array([1, 2, 3, 4]))
    b = OrderedEMD.fit(np.array([4, 3, 2, 1]))
    rows = np.array([0, 1])
    assert max_emd_of_rows([a, b], rows) == max(
        a.cluster_emd(np.array([0, 0, 1, 1]))[0], b.cluster_emd(np.array([0, 0, 1, 1]))[0]
    )


def test_large_partition_stays_exact():
    """1M rows, 100k clusters, 1M distinct values: still the exact int64 path (timing: bench/)."""
    rng = np.random.default_rng(0)
    n = 1_000_000
    d = OrderedEMD.fit(rng.permutation(n))
    assert d.exact
    labels = np.unique(rng.integers(0, 100_000, n), return_inverse=True)[1].reshape(-1)
    out = d.cluster_emd(labels)
    assert out.shape == (labels.max() + 1,) and (out >= 0).all() and (out <= 1).all()


def test_doctests():
    assert doctest.testmod(emd_module).failed == 0
