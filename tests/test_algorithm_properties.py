"""Properties every t-closeness algorithm plugin must keep, whatever the data.

For t-first, merge (on every base) and k-first, on small generated tables with heavy ties,
constant confidential columns, n just above k and several confidential attributes: every row is in
exactly one cluster, every cluster has at least k rows, every cluster's EMD is at most t for every
confidential attribute (computed here by an independent naive EMD), and the same input gives the
same labels.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tclose.base.arrays import standardize
from tclose.base.registry import load_registry
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.interfaces import Problem
from tclose.kernels.emd import OrderedEMD

REGISTRY = load_registry(entry_points=False)
ALGORITHMS = [
    ("t-first", {}),
    ("merge", {"base": "mdav"}),
    ("merge", {"base": "k-first"}),
    ("merge", {"base": "t-first"}),
    ("merge", {"base": "mdav", "partner": "min-emd"}),
    ("k-first", {}),
    ("merge", {"base": "mdav", "partner": "gain", "split": True, "refine": True}),
    ("t-first", {"refine": True}),
    ("k-first", {"refine": True}),
    ("auto", {}),
]


def naive_emd(cluster_values: np.ndarray, all_values: np.ndarray) -> float:
    """EMD with the ordered distance, straight from the definition."""
    distinct = np.unique(all_values)
    m = len(distinct)
    if m == 1:
        return 0.0
    p = np.array([(cluster_values == v).mean() for v in distinct])
    q = np.array([(all_values == v).mean() for v in distinct])
    return float(np.abs(np.cumsum(p - q))[:-1].sum() / (m - 1))


@st.composite
def tables(draw):
    k = draw(st.integers(1, 5))
    n = draw(st.integers(k, k + draw(st.sampled_from([0, 1, 3, 25, 60]))))
    d = draw(st.integers(1, 3))
    qi = np.array(
        draw(st.lists(st.lists(st.integers(0, 6), min_size=d, max_size=d), min_size=n, max_size=n)),
        dtype=np.float64,
    )
    n_conf = draw(st.integers(1, 2))
    columns = []
    for _ in range(n_conf):
        kind = draw(st.sampled_from(["distinct", "ties", "binary", "constant"]))
        if kind == "distinct":
            column = np.array(draw(st.permutations(range(n))), dtype=np.float64)
        elif kind == "ties":
            column = np.array(
                draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), dtype=np.float64
            )
        elif kind == "binary":
            column = np.array(
                draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=np.float64
            )
        else:
            column = np.full(n, 7.0)
        columns.append(column)
    t = draw(st.sampled_from([0.05, 0.15, 0.25, 0.5, 1.0]))
    return qi, columns, k, t


def run(name, options, qi, columns, k, t):
    algorithm = REGISTRY.algorithms[name].obj
    fitted = [OrderedEMD.fit(c) for c in columns]
    defaults = {key: option.default for key, option in options_schema(algorithm).items()}
    problem = Problem(standardize(qi), fitted, k, t, {**defaults, **options})
    return np.asarray(run_algorithm(algorithm, problem).labels)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_every_algorithm_keeps_its_promise(table):
    qi, columns, k, t = table
    n = len(qi)
    for name, options in ALGORITHMS:
        labels = run(name, options, qi, columns, k, t)
        assert labels.shape == (n,), name
        _, sizes = np.unique(labels, return_counts=True)
        assert sizes.sum() == n
        assert sizes.min() >= k, (name, options, sizes.min(), k)
        for column in columns:
            for label in np.unique(labels):
                emd = naive_emd(column[labels == label], column)
                assert emd <= t + 1e-9, (name, options, emd, t)
        assert np.array_equal(labels, run(name, options, qi, columns, k, t)), name


def test_golden_partition_of_a_tiny_table():
    """Six records, k = 2, t = 0.5, a confidential attribute perfectly correlated with the QI.

    t-first: k' = max(2, ceil(6 / (2 * 5 * 0.5 + 1))) = 2, strata {0,1,2} and {3,4,5} by
    confidential rank. Centroid 2.5; the farthest record from it is row 0 (ties: lowest index);
    from each stratum the closest to row 0: rows 0 and 3. Then the farthest remaining record from
    row 0 is row 5; closest per stratum: rows 2 and 5. The rest: rows 1 and 4.
    """
    qi = np.arange(6, dtype=np.float64)[:, None]
    confidential = [np.arange(6, dtype=np.float64) * 10]
    labels = run("t-first", {}, qi, confidential, 2, 0.5)
    groups = sorted(sorted(np.flatnonzero(labels == c).tolist()) for c in np.unique(labels))
    assert groups == [[0, 3], [1, 4], [2, 5]]


@st.composite
def nominal_tables(draw):
    """QIs as the encoding embeds nominal attributes: one-hot groups (scaled by 1/sqrt(2)) next
    to a numeric column, so that the t-first kernel takes its table look-up path."""
    k = draw(st.integers(1, 4))
    n = draw(st.integers(max(k, 6), 80))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    groups = [
        np.eye(width)[rng.integers(0, width, n)] / np.sqrt(2.0)
        for width in draw(st.lists(st.integers(2, 6), min_size=1, max_size=3))
    ]
    x = np.hstack([rng.normal(size=(n, 1)), *groups])
    kind = draw(st.sampled_from(["distinct", "binary"]))
    column = rng.permutation(n).astype(float) if kind == "distinct" else rng.integers(0, 2, n)
    t = draw(st.sampled_from([0.15, 0.25, 0.5]))
    blocks = draw(st.sampled_from([1, 2, 3]))
    return x, np.asarray(column, dtype=np.float64), k, t, blocks


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nominal_tables())
def test_t_first_with_nominal_quasi_identifiers(table):
    x, column, k, t, blocks = table
    algorithm = REGISTRY.algorithms["t-first"].obj
    defaults = {key: option.default for key, option in options_schema(algorithm).items()}
    options = {**defaults, "blocks": blocks, "workers": 1}
    problem = Problem(x, [OrderedEMD.fit(column)], k, t, options)
    labels = np.asarray(run_algorithm(algorithm, problem).labels)
    _, sizes = np.unique(labels, return_counts=True)
    assert labels.shape == (len(x),) and sizes.sum() == len(x)
    assert sizes.min() >= k
    for label in np.unique(labels):
        assert naive_emd(column[labels == label], column) <= t + 1e-9
