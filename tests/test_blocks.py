"""Block decomposition (tclose.blocks.split) and blocked runs of the four algorithms.

Blocked runs here use ``workers=1`` (the tasks run in this process, through the same task
function as the pools); tests/test_executors.py checks that the pools give the same labels.
"""

from __future__ import annotations

import doctest
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose
from tclose.base.options import validate_options
from tclose.blocks import split as blocks_module
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.blocks.split import (
    AUTO_MIN_ROWS,
    auto_blocks,
    bisection_blocks,
    global_strata,
    principal_axis,
    stratified_blocks,
)
from tclose.errors import ConfigError
from tclose.interfaces import EMD_TOLERANCE, Problem
from tclose.kernels.blocks import RestrictedDistance, reference_of, restrict
from tclose.kernels.emd import OrderedEMD, max_emd_of_rows
from tclose.kernels.k_first import k_first
from tclose.kernels.merge import merge_until_t_close
from tclose.kernels.t_first import (
    cluster_size,
    strata_sizes,
    t_first,
    t_first_strata,
)
from tclose.plugins.k_first import KFirst
from tclose.plugins.mdav import MDAV
from tclose.plugins.merge import Merge
from tclose.plugins.t_first import TFirst

ALGORITHMS = {"t-first": TFirst(), "mdav": MDAV(), "merge": Merge(), "k-first": KFirst()}


def exact_emd(values: np.ndarray, group: np.ndarray) -> float:
    """EMD of the rows ``group`` against the whole column, in fractions, from the definition."""
    distinct = np.unique(values)
    m = len(distinct)
    if m == 1:
        return 0.0
    whole = np.searchsorted(distinct, values)
    part = whole[group]
    total = Fraction(0)
    gap = Fraction(0)
    for i in range(m - 1):
        gap += Fraction(int((part == i).sum()), len(part)) - Fraction(
            int((whole == i).sum()), len(values)
        )
        total += abs(gap)
    return float(total / (m - 1))


def table(draw, n_min: int = 8, n_max: int = 90) -> tuple[np.ndarray, np.ndarray]:
    """QIs with ties (few distinct values) and a confidential column with ties, odd n too."""
    n = draw(st.integers(n_min, n_max))
    d = draw(st.integers(1, 3))
    levels = draw(st.integers(2, 6))
    x = np.array(
        draw(st.lists(st.integers(0, levels), min_size=n * d, max_size=n * d)), dtype=np.float64
    ).reshape(n, d)
    distinct = draw(st.integers(1, n))
    y = np.array(draw(st.lists(st.integers(0, distinct), min_size=n, max_size=n)), dtype=np.float64)
    return x, y


def standardized(x: np.ndarray) -> np.ndarray:
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)


# ------------------------------------------------------------------------------------------------
# Decomposition


def test_doctests() -> None:
    assert doctest.testmod(blocks_module).failed == 0


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_stratified_blocks_keep_strata_balanced(data) -> None:
    n = data.draw(st.integers(2, 400))
    k = data.draw(st.integers(1, 6))
    t = data.draw(st.sampled_from((0.01, 0.05, 0.1, 0.25, 0.5, 1.0)))
    k_effective = cluster_size(n, k, t)
    sizes = strata_sizes(n, k_effective)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(0, data.draw(st.integers(1, 5)), size=(n, 2)).astype(np.float64)
    ranks = rng.permutation(n)
    stratum = global_strata(ranks, sizes)
    wanted = data.draw(st.integers(1, 40))
    blocks = stratified_blocks(x, stratum, sizes, wanted)

    q = n // k_effective
    assert len(blocks) == min(wanted, q)
    everything = np.concatenate(blocks)
    assert np.array_equal(np.sort(everything), np.arange(n))  # a partition of the rows
    clusters = 0
    for rows in blocks:
        assert np.all(np.diff(rows) > 0)
        counts = np.bincount(stratum[rows], minlength=k_effective)
        q_b = int(counts.min())
        extras = counts - q_b
        assert q_b >= 1
        assert int(extras.sum()) <= q_b and int(extras.sum()) < k_effective
        assert np.all(extras <= sizes - q)  # extras only where the whole table has them
        clusters += q_b
        labels = t_first_strata(x[rows], stratum[rows], counts)
        for c in range(q_b):  # one record per global stratum, at most one extra
            per_stratum = np.bincount(stratum[rows][labels == c], minlength=k_effective)
            assert per_stratum.min() == 1 and per_stratum.sum() <= k_effective + 1
    assert clusters == q


def test_one_block_is_the_unblocked_t_first() -> None:
    rng = np.random.default_rng(3)
    x = standardized(rng.normal(size=(1001, 3)))
    ranks = rng.permutation(1001)
    labels, k_effective = t_first(x, ranks, 3, 0.2)
    sizes = strata_sizes(1001, k_effective)
    stratum = global_strata(ranks, sizes)
    [rows] = stratified_blocks(x, stratum, sizes, 1)
    assert np.array_equal(rows, np.arange(1001))
    assert np.array_equal(t_first_strata(x, stratum, sizes), labels)


def test_t_first_strata_rejects_unclusterable_strata() -> None:
    # One cluster (one record of stratum 1) cannot take the two extras of stratum 0.
    with pytest.raises(ValueError, match="at most one extra"):
        t_first_strata(np.zeros((4, 1)), np.array([0, 0, 0, 1]), np.array([3, 1]))
    with pytest.raises(ValueError, match="at most one extra"):
        t_first_strata(np.zeros((2, 1)), np.array([0, 0]), np.array([2, 0]))
    with pytest.raises(ValueError, match="count"):
        t_first_strata(np.zeros((7, 1)), np.array([0, 0, 0, 1, 1, 1, 1]), np.array([4, 3]))
    assert t_first_strata(
        np.zeros((7, 1)), np.array([0, 0, 0, 0, 1, 1, 1]), np.array([4, 3])
    ).tolist() == [0, 0, 1, 2, 0, 1, 2]


def test_stratified_split_follows_the_principal_axis() -> None:
    # Two strata, records spread along x = y: the first block holds the low end of each stratum.
    t = np.arange(16, dtype=np.float64)
    x = np.column_stack([t, t + 0.01 * (t % 3)])
    stratum = np.array([0, 1] * 8)
    first, second = stratified_blocks(x, stratum, np.array([8, 8]), 2)
    assert first.tolist() == list(range(8)) and second.tolist() == list(range(8, 16))


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 300),
    k=st.integers(1, 7),
    wanted=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_bisection_blocks_sizes(n: int, k: int, wanted: int, seed: int) -> None:
    x = np.random.default_rng(seed).integers(0, 4, size=(n, 3)).astype(np.float64)
    blocks = bisection_blocks(x, k, wanted)
    assert len(blocks) == max(1, min(wanted, n // k))
    assert np.array_equal(np.sort(np.concatenate(blocks)), np.arange(n))
    if n >= k:
        assert all(len(rows) >= k for rows in blocks)
        assert all(len(rows) % k == 0 for rows in blocks[:-1])


def test_principal_axis_sign_and_direction() -> None:
    rng = np.random.default_rng(0)
    t = rng.normal(size=500)
    x = np.column_stack([-3 * t, 0.1 * rng.normal(size=500)])
    axis = principal_axis(x)
    assert axis[0] > 0.99  # the largest-magnitude component is made positive
    assert principal_axis(np.ones((4, 2))).tolist() == [1.0, 0.0]


def test_auto_rule() -> None:
    assert auto_blocks(AUTO_MIN_ROWS - 1, 10**6) == 1
    assert auto_blocks(1_000_000, 100_000) == 34  # ceil(100,000 / 3,000)
    assert auto_blocks(AUTO_MIN_ROWS, 1) == 1


# ------------------------------------------------------------------------------------------------
# Distances restricted to a block, against the whole table


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_restricted_emd_equals_the_whole_table_emd(data) -> None:
    n = data.draw(st.integers(2, 120))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(0, data.draw(st.integers(1, n)), size=n).astype(np.float64)
    whole = OrderedEMD.fit(values)
    rows = np.sort(rng.choice(n, size=data.draw(st.integers(1, n)), replace=False))
    groups = rng.integers(0, data.draw(st.integers(1, len(rows))), size=len(rows))
    groups = np.unique(groups, return_inverse=True)[1].reshape(-1)
    view = restrict(reference_of(whole), whole.codes[rows], whole.ranks[rows])

    # The whole table's own EMD for the same groups (other rows in one extra cluster).
    full = np.full(n, groups.max() + 1)
    full[rows] = groups
    expected = whole.cluster_emd(full)[: groups.max() + 1]
    assert np.array_equal(view.cluster_emd(groups), expected)  # bit for bit

    hist = np.zeros((groups.max() + 1, view.m), dtype=np.int64)
    np.add.at(hist, (groups, view.codes), 1)
    assert np.array_equal(view.emd_of_counts(hist), expected)
    assert view.emd_of_counts(hist[0]) == expected[0]
    assert abs(expected[0] - exact_emd(values, rows[groups == 0])) < 1e-12
    assert np.array_equal(np.argsort(view.ranks), np.argsort(whole.ranks[rows]))

    # The compiled kernels' path (OrderedParts) gives the same numbers.
    parts = view.ordered_parts()
    assert parts.table_rows == n and np.array_equal(parts.codes, whole.codes[rows])
    first = np.flatnonzero(groups == 0)
    assert max_emd_of_rows([view], first) == expected[0]


class _WithoutParts:
    """A restricted view with its ``ordered_parts`` hidden: the kernels' generic paths."""

    def __init__(self, view) -> None:
        self.view = view
        self.name, self.column, self.codes, self.m = view.name, "y", view.codes, view.m
        self.ranks, self.global_counts = view.ranks, view.global_counts

    def cluster_emd(self, labels):
        return self.view.cluster_emd(labels)

    def emd_of_counts(self, counts):
        return self.view.emd_of_counts(counts)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_kernels_agree_on_compiled_and_generic_paths_in_a_block(data) -> None:
    x, y = table(data.draw, 12, 80)
    x = standardized(x)
    n = len(y)
    rows = np.sort(np.random.default_rng(n).choice(n, size=n // 2 + 1, replace=False))
    whole = OrderedEMD.fit(y)
    view = restrict(reference_of(whole), whole.codes[rows], whole.ranks[rows])
    k = data.draw(st.integers(1, 3))
    t = data.draw(st.sampled_from((0.05, 0.2, 0.4)))
    fast = k_first(x[rows], [view], k, t)
    assert np.array_equal(fast, k_first(x[rows], [_WithoutParts(view)], k, t))
    merged = merge_until_t_close(x[rows], fast, [view], t)
    assert merged[1] == merge_until_t_close(x[rows], fast, [_WithoutParts(view)], t)[1]
    assert np.array_equal(
        merged[0], merge_until_t_close(x[rows], fast, [_WithoutParts(view)], t)[0]
    )


def test_generic_restricted_distance_delegates() -> None:
    values = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 8.0])
    whole = OrderedEMD.fit(values)

    class Opaque:  # a fitted distance tclose knows nothing about
        name, column, codes, m, ranks = "opaque", "y", whole.codes, whole.m, whole.ranks
        global_counts = whole.global_counts
        cluster_emd = staticmethod(whole.cluster_emd)
        emd_of_counts = staticmethod(whole.emd_of_counts)

    rows = np.array([1, 4, 5, 6])
    view = restrict(reference_of(Opaque()), whole.codes[rows], whole.ranks[rows])
    assert isinstance(view, RestrictedDistance)
    got = view.cluster_emd(np.array([0, 1, 1, 0]))
    expected = [exact_emd(values, np.array([1, 6])), exact_emd(values, np.array([4, 5]))]
    assert np.allclose(got, expected)


# ------------------------------------------------------------------------------------------------
# Blocked runs: k-anonymous and t-close, for all four algorithms


def run(algorithm: str, x: np.ndarray, y: np.ndarray, k: int, t: float, **options):
    plugin = ALGORITHMS[algorithm]
    validated = validate_options(plugin.name, options_schema(plugin), options, "algorithm.options")
    distance = OrderedEMD.fit(y)
    distance.column = "y"
    return run_algorithm(plugin, Problem(x, [distance], k, t, validated))


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_blocked_output_is_k_anonymous_and_t_close(algorithm: str, data) -> None:
    x, y = table(data.draw)
    x = standardized(x)
    k = data.draw(st.integers(1, 4))
    t = data.draw(st.sampled_from((0.1, 0.2, 0.3, 0.5)))
    wanted = data.draw(st.integers(2, 8))
    if len(y) < k:
        return
    partition = run(algorithm, x, y, k, t, blocks=wanted, workers=1)
    clusters = len(y) // (cluster_size(len(y), k, t) if algorithm == "t-first" else k)
    assert ("blocks" in partition.info) == (clusters >= 2)  # the blocked path ran
    labels = np.unique(partition.labels, return_inverse=True)[1].reshape(-1)
    assert np.bincount(labels).min() >= k
    if algorithm != "mdav":
        for c in range(labels.max() + 1):
            assert exact_emd(y, np.flatnonzero(labels == c)) <= t + EMD_TOLERANCE


def test_blocked_info_and_merges() -> None:
    rng = np.random.default_rng(5)
    x = standardized(rng.normal(size=(2001, 3)))
    y = (rng.random(2001) < 0.7).astype(np.float64)  # 70/30 binary: t-first's bound fails
    partition = run("t-first", x, y, 2, 0.25, blocks=4, workers=1)
    info = partition.info
    assert info["blocks"] == 4 and info["executor"] == "local"
    assert info["merges"] == info["merges_in_blocks"] + info["merges_global"] > 0
    assert info["merged_to_enforce_t"] is True and info["k_effective"] == 2
    labels = np.unique(partition.labels, return_inverse=True)[1]
    emd = OrderedEMD.fit(y).cluster_emd(labels)
    assert emd.max() <= 0.25 + EMD_TOLERANCE


def test_default_blocks_leave_small_tables_unblocked() -> None:
    rng = np.random.default_rng(7)
    x = standardized(rng.normal(size=(999, 4)))
    y = rng.normal(size=999)
    for name in ALGORITHMS:
        default = run(name, x, y, 3, 0.3)
        one = run(name, x, y, 3, 0.3, blocks=1)
        assert "blocks" not in default.info
        assert np.array_equal(default.labels, one.labels)
    assert np.array_equal(
        run("t-first", x, y, 3, 0.3).labels, t_first(x, OrderedEMD.fit(y).ranks, 3, 0.3)[0]
    )


def test_blocks_option_is_validated() -> None:
    schema = options_schema(TFirst())
    assert validate_options("t-first", schema, {"blocks": 8}, "o")["blocks"] == 8
    assert validate_options("t-first", schema, {}, "o")["blocks"] == "auto"
    for bad in (0, -2, "many", 2.5, True):
        with pytest.raises(ConfigError, match="'blocks' option of t-first must be of type"):
            validate_options("t-first", schema, {"blocks": bad}, "o")
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigError, match="needs executor 'dask'"):
        run(
            "t-first",
            rng.normal(size=(50, 2)),
            rng.normal(size=50),
            2,
            0.3,
            scheduler="tcp://127.0.0.1:1",
        )


def test_anonymize_with_blocks_end_to_end() -> None:
    rng = np.random.default_rng(11)
    n = 1501
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "zip": rng.integers(0, 40, n),
            "charge": np.round(rng.lognormal(8, 1, n), 2),
        }
    )
    for algorithm in ("t-first", "mdav", "merge", "k-first"):
        t = None if algorithm == "mdav" else 0.2  # mdav does not enforce t
        result = tclose.anonymize(
            frame, ["age", "zip"], ["charge"], k=3, t=t, algorithm=algorithm, blocks=4, workers=1
        )
        assert result.report["verification"]["passed"]
        assert result.report["privacy"]["k_achieved"] >= 3
        assert result.report["algorithm"]["info"]["blocks"] == 4


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_blocked_runs_pass_the_conformance_suite(algorithm: str) -> None:
    from tclose.testing import check_algorithm

    assert check_algorithm(ALGORITHMS[algorithm], {"blocks": 3, "workers": 1}) > 0


def test_blocked_runs_with_a_nominal_attribute() -> None:
    # Not an OrderedEMD: block tasks go through RestrictedDistance (whole-table reference).
    rng = np.random.default_rng(4)
    n = 1200
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "d": rng.choice(["flu", "cold", "hiv", "none"], n, p=[0.35, 0.35, 0.05, 0.25]),
        }
    )
    nominal = {"d": {"type": "nominal", "distance": "nominal-ranking"}}
    for algorithm in ("t-first", "merge"):
        result = tclose.anonymize(
            frame, ["a", "b"], nominal, k=3, t=0.25, algorithm=algorithm, blocks=3, workers=1
        )
        assert result.report["algorithm"]["info"]["blocks"] == 3
        assert result.report["verification"]["passed"]
        assert result.report["privacy"]["t_achieved"]["d"] <= 0.25 + EMD_TOLERANCE
