"""The merge loop (Algorithm 1), against a slow reference that recomputes everything each step."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.interfaces import EMD_TOLERANCE
from tclose.kernels import merge as merge_module
from tclose.kernels.emd import OrderedEMD
from tclose.kernels.merge import merge_until_t_close


def exact_emd(codes: np.ndarray, m: int, group: list[int]) -> float:
    """EMD of a group, from scratch: E = sum_{i<m-1} |n F_i - s G_i| in Python integers."""
    if m == 1:
        return 0.0
    n, s = len(codes), len(group)
    numer, f, g = 0, 0, 0
    in_group = [int(codes[r]) for r in group]
    for i in range(m - 1):
        f += in_group.count(i)
        g += int(np.sum(codes == i))
        numer += abs(n * f - s * g)
    return float(numer) / float(n * s * (m - 1))


def row_sum(x: np.ndarray, rows: list[int]) -> list[float]:
    """Sum of the rows, added in ascending row order, column by column (plain floats)."""
    total = [0.0] * x.shape[1]
    for r in sorted(rows):
        for j in range(x.shape[1]):
            total[j] += float(x[r, j])
    return total


def reference_merge(x, labels, distances, t, partner="nearest", candidates=5):
    """Algorithm 1 written plainly: every EMD recomputed at every step.

    Centroids are sums / sizes, where a cluster's sum is the row sum of an input cluster and the
    sum of the two sums at a merge (as the kernel documents).
    """
    ids = sorted(set(labels.tolist()))
    members = {c: [r for r in range(len(labels)) if labels[r] == ids[c]] for c in range(len(ids))}
    sums = {c: row_sum(x, rows) for c, rows in members.items()}

    def emd(rows):
        return max(exact_emd(d.codes, d.m, rows) for d in distances)

    def centroid(c):
        return [v / len(members[c]) for v in sums[c]]

    def sq_dist(a, b):
        total = 0.0
        for j in range(len(a)):
            total += (a[j] - b[j]) * (a[j] - b[j])
        return total

    merges = 0
    while len(members) > 1:
        emds = {c: emd(rows) for c, rows in members.items()}
        c = max(members, key=lambda c: (emds[c], -c))
        if emds[c] <= t + EMD_TOLERANCE:
            break
        others = sorted((sq_dist(centroid(c), centroid(o)), o) for o in members if o != c)
        if partner == "nearest":
            p = others[0][1]
        else:
            scored = [
                (emd(members[o] + members[c]), i, o) for i, (_, o) in enumerate(others[:candidates])
            ]
            p = min(scored)[2]
        members[p] = members[p] + members.pop(c)
        sums[p] = [a + b for a, b in zip(sums[p], sums.pop(c), strict=True)]
        merges += 1
    out = np.empty(len(labels), dtype=np.int64)
    for new, c in enumerate(sorted(members)):
        out[members[c]] = new
    return out, merges


def random_partition(rng, n, k):
    """A random partition into clusters of k..2k-1 rows (labels shuffled, not dense)."""
    order = rng.permutation(n)
    labels = np.empty(n, dtype=np.int64)
    n_clusters = max(1, n // k)
    for c, chunk in enumerate(np.array_split(order, n_clusters)):
        labels[chunk] = 10 * c + 3
    return labels


def check_postconditions(x, labels_in, labels_out, distances, t):
    assert labels_out.dtype == np.int64
    assert set(labels_out.tolist()) == set(range(labels_out.max() + 1))
    for d in distances:
        assert d.cluster_emd(labels_out).max() <= t + EMD_TOLERANCE
    smallest_in = np.unique(labels_in, return_counts=True)[1].min()
    assert np.bincount(labels_out).min() >= smallest_in
    # Each output cluster is a union of input clusters: no input cluster is split.
    for c in np.unique(labels_in):
        assert np.unique(labels_out[labels_in == c]).size == 1


@st.composite
def cases(draw):
    n = draw(st.integers(2, 40))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    grid = draw(st.booleans())  # heavy ties: QIs on a tiny integer grid
    x = rng.integers(0, 3, (n, d)).astype(float) if grid else rng.normal(size=(n, d))
    n_attr = draw(st.integers(1, 2))
    distances = [OrderedEMD.fit(rng.integers(0, draw(st.integers(1, 8)), n)) for _ in range(n_attr)]
    k = draw(st.integers(1, max(1, n // 2)))
    t = draw(st.sampled_from([0.01, 0.1, 0.2, 0.3, 0.5, 1.0]))
    return x, random_partition(rng, n, k), distances, t


@settings(max_examples=150, deadline=None)
@given(cases(), st.sampled_from(["nearest", "min-emd"]))
def test_matches_reference(case, partner):
    x, labels, distances, t = case
    out, merges = merge_until_t_close(x, labels, distances, t, partner=partner, candidates=3)
    expected, expected_merges = reference_merge(x, labels, distances, t, partner, 3)
    np.testing.assert_array_equal(out, expected)
    assert merges == expected_merges
    check_postconditions(x, labels, out, distances, t)


def test_postconditions_on_larger_data():
    rng = np.random.default_rng(11)
    n = 3000
    x = rng.normal(size=(n, 4))
    charge = x[:, 0] * 3 + rng.normal(size=n)  # correlated with the QIs: many merges
    distances = [OrderedEMD.fit(np.round(charge, 2)), OrderedEMD.fit(rng.integers(0, 5, n))]
    labels = random_partition(rng, n, 3)
    for t in (0.05, 0.2):
        out, merges = merge_until_t_close(x, labels, distances, t)
        assert merges == np.unique(labels).size - out.max() - 1
        check_postconditions(x, labels, out, distances, t)
        again, _ = merge_until_t_close(x, labels, distances, t)
        np.testing.assert_array_equal(out, again)  # deterministic


def test_constant_confidential_column_needs_no_merge():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 2))
    labels = random_partition(rng, 50, 2)
    out, merges = merge_until_t_close(x, labels, [OrderedEMD.fit(np.full(50, 9.0))], 0.01)
    assert merges == 0
    np.testing.assert_array_equal(out, np.unique(labels, return_inverse=True)[1].reshape(-1))


def test_worst_case_is_one_cluster():
    x = np.arange(10.0)[:, None]
    charge = OrderedEMD.fit(np.arange(10.0))  # perfectly correlated with the QI
    out, merges = merge_until_t_close(x, np.arange(10) // 2, [charge], 0.01)
    assert merges == 4
    np.testing.assert_array_equal(out, np.zeros(10))


def test_heavy_ties_all_equal_qis():
    x = np.zeros((12, 2))
    charge = OrderedEMD.fit(np.repeat([1, 2, 3], 4))
    labels = np.repeat(np.arange(6), 2)
    out, merges = merge_until_t_close(x, labels, [charge], 0.2)
    expected, expected_merges = reference_merge(x, labels, [charge], 0.2)
    np.testing.assert_array_equal(out, expected)
    assert merges == expected_merges
    check_postconditions(x, labels, out, [charge], 0.2)


def test_min_emd_partner_picks_the_best_union():
    # Cluster 0 = {1} is the farthest from t; its nearest cluster {1} does not help, the second
    # nearest {9} does.
    x = np.array([[0.0], [1.0], [-1.5], [50.0], [50.0], [50.0]])
    charge = OrderedEMD.fit(np.array([1, 1, 9, 9, 9, 9]))
    labels = np.array([0, 1, 2, 3, 3, 3])
    nearest, _ = merge_until_t_close(x, labels, [charge], 0.5, partner="nearest")
    np.testing.assert_array_equal(nearest, [0, 0, 0, 1, 1, 1])
    best, _ = merge_until_t_close(x, labels, [charge], 0.5, partner="min-emd", candidates=2)
    np.testing.assert_array_equal(best, [0, 1, 0, 1, 1, 1])


def test_validation():
    x = np.zeros((4, 1))
    d = OrderedEMD.fit(np.arange(4))
    labels = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"'t' parameter of merge must be in \(0, 1\]"):
        merge_until_t_close(x, labels, [d], 1.5)
    with pytest.raises(ValueError, match="'partner'"):
        merge_until_t_close(x, labels, [d], 0.5, partner="farthest")
    with pytest.raises(ValueError, match="'candidates'"):
        merge_until_t_close(x, labels, [d], 0.5, candidates=0)
    with pytest.raises(ValueError, match="labels"):
        merge_until_t_close(x, labels[:3], [d], 0.5)
    with pytest.raises(ValueError, match="fitted on 5 rows"):
        merge_until_t_close(x, labels, [OrderedEMD.fit(np.arange(5))], 0.5)
    with pytest.raises(ValueError, match="At least one"):
        merge_until_t_close(x, labels, [], 0.5)


def test_other_distances_use_emd_of_counts():
    """A distance that is not an OrderedEMD goes through emd_of_counts: same result here."""

    class Proxy:
        def __init__(self, inner):
            self.inner = inner
            self.name, self.codes, self.m = inner.name, inner.codes, inner.m
            self.global_counts, self.ranks, self.column = inner.global_counts, inner.ranks, None

        def cluster_emd(self, labels):
            return self.inner.cluster_emd(labels)

        def emd_of_counts(self, counts):
            return self.inner.emd_of_counts(counts)

    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3))
    d = OrderedEMD.fit(np.round(x[:, 0] + rng.normal(size=300), 1))
    labels = random_partition(rng, 300, 2)
    fast = merge_until_t_close(x, labels, [d], 0.1)
    slow = merge_until_t_close(x, labels, [Proxy(d)], 0.1)
    np.testing.assert_array_equal(fast[0], slow[0])
    assert fast[1] == slow[1]


def test_doctests():
    assert doctest.testmod(merge_module).failed == 0
