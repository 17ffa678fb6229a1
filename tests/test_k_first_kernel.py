"""k-anonymity-first (Algorithm 2), against a straightforward slow implementation."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.interfaces import EMD_TOLERANCE, Problem
from tclose.kernels import k_first as k_first_module
from tclose.kernels.emd import OrderedEMD, OrderedParts
from tclose.kernels.k_first import k_first
from tclose.kernels.merge import merge_until_t_close


def exact_numerator(codes: np.ndarray, cum: np.ndarray, group_codes: list[int]) -> int:
    """E = sum_{i<m-1} |n F_i - s G_i| with Python integers."""
    n, s = len(codes), len(group_codes)
    numer, f = 0, 0
    for i in range(len(cum) - 1):
        f += group_codes.count(i)
        numer += abs(n * f - s * int(cum[i]))
    return numer


def exact_emd(d: OrderedEMD, group: list[int]) -> float:
    if d.m == 1:
        return 0.0
    numer = exact_numerator(d.codes, d.cum_counts, [int(d.codes[r]) for r in group])
    return float(numer) / float(d.n * len(group) * (d.m - 1))


def sq_dist(a: np.ndarray, b: np.ndarray) -> float:
    total = 0.0
    for j in range(len(a)):
        total += (float(a[j]) - float(b[j])) ** 2
    return total


def reference_k_first(x, distances, k, t):
    """Algorithm 2 as printed, with the conventions of the kernel's documentation."""
    n = len(x)
    remaining = list(range(n))  # ascending
    labels = np.full(n, -1, dtype=np.int64)
    label = 0

    def emd(group):
        return max(exact_emd(d, group) for d in distances)

    def generate(source):
        if len(remaining) < 2 * k:
            return list(remaining)
        others = sorted((sq_dist(x[r], x[source]), r) for r in remaining if r != source)
        cluster = [source] + [r for _, r in others[: k - 1]]
        candidates = [r for _, r in others[k - 1 :]]
        current = emd(cluster)
        while current > t + EMD_TOLERANCE and candidates:
            y = candidates.pop(0)
            best = None
            for out in sorted(cluster):
                value = emd([r for r in cluster if r != out] + [y])
                if best is None or value < best[0]:
                    best = (value, out)
            if best[0] < current:
                cluster = [r for r in cluster if r != best[1]] + [y]
                current = best[0]
        return cluster

    while remaining:
        centroid = [0.0] * x.shape[1]
        for r in remaining:
            for j in range(x.shape[1]):
                centroid[j] += float(x[r, j])
        centroid = np.array([c / len(remaining) for c in centroid])
        x0 = max(remaining, key=lambda r: (sq_dist(x[r], centroid), -r))
        for source in (x0, None):
            if source is None:
                if not remaining:
                    break
                source = max(remaining, key=lambda r: (sq_dist(x[r], x[x0]), -r))
            cluster = generate(source)
            labels[cluster] = label
            label += 1
            remaining[:] = [r for r in remaining if r not in set(cluster)]
    return labels


@st.composite
def cases(draw):
    n = draw(st.integers(1, 36))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    d = draw(st.integers(1, 3))
    grid = draw(st.booleans())  # heavy ties: QIs on a tiny integer grid
    x = rng.integers(0, 3, (n, d)).astype(float) if grid else rng.normal(size=(n, d))
    distances = [
        OrderedEMD.fit(rng.integers(0, draw(st.integers(1, 12)), n))
        for _ in range(draw(st.integers(1, 2)))
    ]
    k = draw(st.integers(1, max(1, n // 2)))
    t = draw(st.sampled_from([0.01, 0.1, 0.2, 0.3, 0.6, 1.0]))
    return x, distances, k, t


@settings(max_examples=150, deadline=None)
@given(cases())
def test_matches_reference(case):
    x, distances, k, t = case
    x_before = x.copy()
    labels = k_first(x, distances, k, t)
    np.testing.assert_array_equal(x, x_before)  # the input is not modified
    np.testing.assert_array_equal(labels, reference_k_first(x, distances, k, t))
    check_partition(labels, k)


def check_partition(labels, k):
    n = labels.size
    assert labels.dtype == np.int64 and (labels >= 0).all()
    sizes = np.bincount(labels)
    assert sizes.sum() == n  # every row exactly once
    if n >= 2 * k:
        assert (sizes[:-1] == k).all() and k <= sizes[-1] < 2 * k
    else:
        assert sizes.tolist() == [n]


def test_larger_data_then_merge_is_t_close():
    rng = np.random.default_rng(7)
    n = 2000
    x = rng.normal(size=(n, 3))
    charge = OrderedEMD.fit(np.round(x[:, 0] + 0.5 * rng.normal(size=n), 2))
    other = OrderedEMD.fit(rng.integers(0, 4, n))
    for k, t in ((2, 0.05), (3, 0.15), (5, 0.25)):
        labels = k_first(x, [charge, other], k, t)
        check_partition(labels, k)
        np.testing.assert_array_equal(labels, k_first(x, [charge, other], k, t))  # determinism
        merged, _ = merge_until_t_close(x, labels, [charge, other], t)
        assert charge.cluster_emd(merged).max() <= t + EMD_TOLERANCE
        assert other.cluster_emd(merged).max() <= t + EMD_TOLERANCE
        assert np.bincount(merged).min() >= k


def test_swaps_lower_the_emd():
    """With swaps the clusters are closer to t than MDAV-like clusters of the k nearest."""
    rng = np.random.default_rng(1)
    n = 600
    x = rng.normal(size=(n, 2))
    charge = OrderedEMD.fit(x[:, 0] + 0.1 * rng.normal(size=n))
    swapped = charge.cluster_emd(k_first(x, [charge], 3, 0.2))
    plain = charge.cluster_emd(k_first(x, [charge], 3, 1.0))  # t = 1: never swaps
    assert swapped.mean() < 0.7 * plain.mean()
    assert (swapped <= 0.2 + EMD_TOLERANCE).mean() > 2 * (plain <= 0.2 + EMD_TOLERANCE).mean()


class BlockDistance:
    """A fitted distance over some rows of a table, measured against the whole table.

    Without ``ordered_parts`` the kernels take their plain paths (``emd_of_counts``); with it,
    their compiled ones. Both must agree.
    """

    def __init__(self, whole: OrderedEMD, block: np.ndarray, parts: bool) -> None:
        self.whole, self.name, self.column, self.m = whole, whole.name, None, whole.m
        self.codes = whole.codes[block]
        self.global_counts = np.bincount(self.codes, minlength=self.m)
        self.ranks = np.argsort(np.argsort(self.codes, kind="stable"))
        if parts:
            self.ordered_parts = lambda: OrderedParts(
                self.codes, whole.cum_counts, whole.cum_prefix, whole.n
            )

    def emd_of_counts(self, counts):
        return self.whole.emd_of_counts(counts)

    def cluster_emd(self, labels):
        counts = np.zeros((labels.max() + 1, self.m), dtype=np.int64)
        np.add.at(counts, (labels, self.codes), 1)
        return self.whole.emd_of_counts(counts)


def test_compiled_and_plain_paths_agree():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(150, 2))
    d = OrderedEMD.fit(np.round(x[:, 0] + rng.normal(size=150), 1))
    block = np.sort(rng.choice(150, 90, replace=False))  # as one block of a blocked run
    for k, t in ((2, 0.1), (4, 0.2)):
        compiled = k_first(x[block], [BlockDistance(d, block, parts=True)], k, t)
        plain = k_first(x[block], [BlockDistance(d, block, parts=False)], k, t)
        np.testing.assert_array_equal(compiled, plain)
        for parts in (True, False):
            merged = merge_until_t_close(x[block], compiled, [BlockDistance(d, block, parts)], t)
            np.testing.assert_array_equal(
                merged[0],
                merge_until_t_close(x[block], compiled, [BlockDistance(d, block, not parts)], t)[0],
            )
    # A whole-table OrderedEMD and its plain-path twin agree too.
    whole = BlockDistance(d, np.arange(150), parts=False)
    np.testing.assert_array_equal(k_first(x, [whole], 3, 0.15), k_first(x, [d], 3, 0.15))


def brute_force_marks(codes: np.ndarray, cum: np.ndarray, members: list[int]) -> np.ndarray:
    """Codes c for which replacing some member's code by c lowers the exact numerator."""
    zs = [int(codes[r]) for r in members]
    base = exact_numerator(codes, cum, zs)
    out = np.zeros(len(cum), dtype=bool)
    for c in range(len(cum)):
        for q in range(len(zs)):
            if exact_numerator(codes, cum, zs[:q] + [c] + zs[q + 1 :]) < base:
                out[c] = True
                break
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(1, 15), st.integers(1, 12))
def test_improving_codes_are_exactly_the_improving_ones(seed, n, m_max, s):
    """The O(k) test of a code against the segment table equals brute force, for every code."""
    rng = np.random.default_rng(seed)
    d = OrderedEMD.fit(rng.integers(0, m_max, n))
    members = np.sort(rng.choice(n, min(s, n), replace=False))
    s = members.size
    cluster = k_first_module._CompiledCluster([d.ordered_parts()], [], s, 0.5)
    rows = np.arange(n)
    k_first_module._build_table(
        0,
        members,
        rows,
        cluster.o_codes,
        cluster.o_off,
        cluster.o_cuts,
        cluster.o_prefix,
        cluster.o_rows,
        cluster.tables,
        cluster.n_segments,
        cluster.segment_of,
        cluster.order,
    )
    no_tree = np.zeros(0, dtype=np.int64)
    fast = np.array(
        [
            k_first_module._candidate_improves(
                0,
                int(np.flatnonzero(d.codes == c)[0]),  # a row of code c
                members,
                rows,
                cluster.o_codes,
                cluster.o_off,
                cluster.o_prefix,
                cluster.o_rows,
                cluster.tables,
                cluster.n_segments,
                np.zeros((0, n), dtype=np.int64),
                *[no_tree] * 9,  # no nominal attribute
                cluster.stamp,
                cluster.verdict,
                cluster.generation,
            )
            for c in range(d.m)
        ]
    )
    np.testing.assert_array_equal(fast, brute_force_marks(d.codes, d.cum_counts, members.tolist()))


def test_validation():
    x = np.zeros((4, 1))
    d = OrderedEMD.fit(np.arange(4))
    with pytest.raises(ValueError, match=r"'t' parameter of k-first must be in \(0, 1\]"):
        k_first(x, [d], 2, 0.0)
    with pytest.raises(ValueError, match="'k' parameter"):
        k_first(x, [d], 0, 0.5)
    with pytest.raises(ValueError, match="fitted on 4 rows"):
        k_first(np.zeros((3, 1)), [d], 1, 0.5)
    with pytest.raises(ValueError, match="finite"):
        k_first(np.full((4, 1), np.nan), [d], 1, 0.5)


def test_doctests():
    assert doctest.testmod(k_first_module).failed == 0


def test_progress_reports_rows_clustered(monkeypatch):
    """The progress callable sees nondecreasing counts ending at (n, n); labels do not change."""
    monkeypatch.setattr(k_first_module, "PROGRESS_INTERVAL", 0.0)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 2))
    d = OrderedEMD.fit(np.round(x[:, 0], 1))
    calls = []
    labels = k_first(x, [d], 3, 0.1, progress=lambda done, total: calls.append((done, total)))
    np.testing.assert_array_equal(labels, k_first(x, [d], 3, 0.1))
    assert len(calls) > 10
    assert calls[-1] == (300, 300)
    assert all(total == 300 for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_plugin_updates_the_phase_bar():
    """Inside the runner's phase_counts, the k-first plugin reports to the phase's line."""
    from tclose.base.notices import phase_counts
    from tclose.plugins.k_first import KFirst

    rng = np.random.default_rng(4)
    x = rng.normal(size=(200, 2))
    d = OrderedEMD.fit(np.round(x[:, 0], 1))
    seen = []
    plugin = KFirst()
    options = {key: option.default for key, option in plugin.options_schema.items()}
    problem = Problem(x, [d], 2, 0.2, options)
    with phase_counts(lambda line, **counts: seen.append((line, counts)), "partitioning"):
        plugin.partition(problem)
    assert seen[-1] == ("partitioning", {"done": 200, "total": 200})
    seen.clear()
    plugin.partition(problem)  # outside a phase: nothing reported
    assert seen == []


def load_previous():
    """``tests/k_first_previous.py``, the reference kernel (importlib mode: load by path)."""
    import importlib.util
    import sys
    from pathlib import Path

    if "k_first_previous" not in sys.modules:
        path = Path(__file__).with_name("k_first_previous.py")
        spec = importlib.util.spec_from_file_location("k_first_previous", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["k_first_previous"] = module
        spec.loader.exec_module(module)
    return sys.modules["k_first_previous"]


def follow_order(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The adversarial case: every QI column sorted and handed out in the order of ``values``."""
    rank = np.empty(len(values), dtype=np.int64)
    rank[np.argsort(values, kind="stable")] = np.arange(len(values))
    return np.sort(x, axis=0)[rank]


@pytest.mark.parametrize("seed", [0, 1])
def test_same_partitions_as_the_previous_kernel_ordered(seed):
    """Medium inputs (too large for the Python reference): adversarial order, ties, grids."""
    previous = load_previous()
    rng = np.random.default_rng(seed)
    n = 700
    values = np.round(rng.lognormal(0, 1, n), 1 + seed)  # ties
    x = follow_order(rng.normal(size=(n, 3)), values)
    grid = rng.integers(0, 4, (n, 2)).astype(float)  # tied distances
    other = OrderedEMD.fit(rng.integers(0, 5, n))
    for qi in (x, grid):
        for k, t in ((2, 0.05), (2, 0.25), (3, 0.15), (7, 0.1)):
            distances = [OrderedEMD.fit(values)]
            expected = previous.k_first(qi, distances, k, t)
            np.testing.assert_array_equal(k_first(qi, distances, k, t), expected)
        expected = previous.k_first(qi, [OrderedEMD.fit(values), other], 3, 0.1)
        np.testing.assert_array_equal(
            k_first(qi, [OrderedEMD.fit(values), other], 3, 0.1), expected
        )


@pytest.mark.parametrize("hierarchical", [False, True])
def test_same_partitions_as_the_previous_kernel_nominal(hierarchical):
    """The compiled nominal path against the previous kernel's plain path (``emd_of_counts``),
    alone and next to an ordered attribute."""
    from tclose.base.hierarchy import Hierarchy
    from tclose.kernels.nominal import NominalEMD

    previous = load_previous()
    rng = np.random.default_rng(5)
    n = 160
    x = rng.normal(size=(n, 2))
    letters = np.array(list("abcdefgh"))
    values = letters[np.clip((x[:, 0] * 2 + 4 + rng.normal(size=n)).astype(int), 0, 7)]
    tree = Hierarchy.from_mapping(
        {"*": {"P": ["a", "b", "c"], "Q": {"R": ["d", "e"], "S": list("fgh")}}}
    )
    nominal = NominalEMD.fit(values, hierarchy=tree if hierarchical else None)
    ordered = OrderedEMD.fit(np.round(x[:, 1], 1))
    for distances in ([nominal], [nominal, ordered], [ordered, nominal]):
        for k, t in ((2, 0.2), (4, 0.3)):
            expected = previous.k_first(x, distances, k, t)
            np.testing.assert_array_equal(k_first(x, distances, k, t), expected)


class PlainNominal:
    """A NominalEMD seen without ``tree_parts``: k-first takes its plain path."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.column = inner, inner.name, None
        self.codes, self.m, self.ranks = inner.codes, inner.m, inner.ranks
        self.global_counts = inner.global_counts

    def emd_of_counts(self, counts):
        return self.inner.emd_of_counts(counts)

    def cluster_emd(self, labels):
        return self.inner.cluster_emd(labels)


def naive_equal_emd(group: np.ndarray, column: np.ndarray) -> float:
    """Total variation distance, from the definition."""
    values = np.unique(column)
    p = np.array([(group == v).mean() for v in values])
    q = np.array([(column == v).mean() for v in values])
    return 0.5 * float(np.abs(p - q).sum())


@st.composite
def nominal_cases(draw):
    n = draw(st.integers(2, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(0, 3, (n, 2)).astype(float)  # ties in the distances
    letters = np.array(list("abcdef"))[: draw(st.integers(1, 6))]
    columns = [rng.choice(letters, n) for _ in range(draw(st.integers(1, 2)))]
    with_ordered = draw(st.booleans())
    ordered = rng.integers(0, 4, n) if with_ordered else None
    k = draw(st.integers(1, max(1, n // 2)))
    t = draw(st.sampled_from([0.05, 0.2, 0.5, 1.0]))
    return x, columns, ordered, k, t, draw(st.booleans())


@settings(max_examples=80, deadline=None)
@given(nominal_cases())
def test_nominal_and_mixed_attributes_keep_the_promise(case):
    """Nominal (equal or hierarchical) and mixed attributes: compiled path equals the plain path;
    after the merge loop every row is in one cluster of >= k rows, every EMD <= t."""
    from tclose.base.hierarchy import Hierarchy
    from tclose.kernels.nominal import NominalEMD

    x, columns, ordered, k, t, hierarchical = case
    tree = Hierarchy.from_mapping({"*": {"P": ["a", "b"], "Q": {"R": ["c", "d"], "S": ["e", "f"]}}})
    nominal = [NominalEMD.fit(c, hierarchy=tree if hierarchical else None) for c in columns]
    distances = nominal + ([OrderedEMD.fit(ordered)] if ordered is not None else [])
    labels = k_first(x, distances, k, t)
    plain = [PlainNominal(d) for d in nominal] + distances[len(nominal) :]
    np.testing.assert_array_equal(labels, k_first(x, plain, k, t))
    check_partition(labels, k)
    merged, _ = merge_until_t_close(x, labels, distances, t)
    sizes = np.bincount(merged)
    assert sizes.sum() == len(x) and sizes.min() >= k
    for d, column in zip(nominal, columns):
        assert d.cluster_emd(merged).max() <= t + EMD_TOLERANCE
        if not hierarchical:
            for label in range(sizes.size):
                group = column[merged == label]
                assert naive_equal_emd(group, column) <= t + 1e-9
    if ordered is not None:
        assert distances[-1].cluster_emd(merged).max() <= t + EMD_TOLERANCE


def test_block_view_of_a_nominal_attribute_takes_the_compiled_path():
    """A block's view of a nominal attribute (EMDs against the whole table) offers tree_parts;
    the compiled path gives the plain path's partition."""
    from tclose.kernels.blocks import reference_of, restrict
    from tclose.kernels.nominal import NominalEMD, tree_parts

    rng = np.random.default_rng(8)
    x = rng.normal(size=(300, 2))
    whole = NominalEMD.fit(rng.choice(list("abcdefg"), 300))
    block = np.sort(rng.choice(300, 120, replace=False))
    view = restrict(reference_of(whole), whole.codes[block])
    assert tree_parts(view) is not None
    for k, t in ((2, 0.3), (4, 0.2)):
        np.testing.assert_array_equal(
            k_first(x[block], [view], k, t), k_first(x[block], [PlainNominal(view)], k, t)
        )
