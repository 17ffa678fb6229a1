"""Risk and utility measures: hand-computed cases and plain O(n²) references on random tables."""

from __future__ import annotations

import doctest
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import tclose.measures as measures_module
from tclose.base.attributes import encode_table
from tclose.base.config import _attributes, _Checker
from tclose.errors import ConfigError, DataError
from tclose.measures import (
    LINK_TOLERANCE,
    attribute_disclosure,
    correlation_max_diff,
    embed_published,
    evaluate,
    il1s,
    interval_disclosure,
    moment_changes,
    published_classes,
    record_linkage,
    reidentification_risk,
    total_variation,
)


def test_doctests() -> None:
    assert doctest.testmod(measures_module).failed == 0


# --- plain references ------------------------------------------------------------------------


def linkage_reference(source: np.ndarray, published: np.ndarray) -> float:
    """The definition, row by row over every published row: O(n²)."""
    total = 0.0
    for i in range(len(source)):
        distances = np.sqrt(((source[i] - published) ** 2).sum(axis=1))
        members = np.flatnonzero(distances <= distances.min() + LINK_TOLERANCE)
        total += (i in members) / len(members)
    return total / len(source)


def interval_reference(original, published, sd, p):
    hits = 0
    for i in range(len(original)):
        hits += all(
            abs(original[i, j] - published[i, j]) <= p * sd[j] + 1e-12 * abs(original[i, j])
            for j in range(original.shape[1])
        )
    return hits / len(original)


def attribute_reference(classes, values):
    groups: dict[int, list] = {}
    for c, v in zip(classes, values):
        groups.setdefault(int(c), []).append(v)
    table = Counter(values.tolist())
    n = len(values)
    distinct, entropy, beta = [], [], 0.0
    for members in groups.values():
        counts = Counter(members)
        distinct.append(len(counts))
        h = -sum(c / len(members) * math.log(c / len(members)) for c in counts.values())
        entropy.append(math.exp(h))
        for value, c in counts.items():
            q, p = c / len(members), table[value] / n
            if q > p:
                beta = max(beta, (q - p) / p)
    return {"distinct_l": min(distinct), "entropy_l": min(entropy), "beta": beta}


def random_release(rng, n, d, k, integer):
    """A random table and a microaggregated release of it (clusters of about k along a sort)."""
    x = rng.integers(0, 4, size=(n, d)).astype(float) if integer else rng.normal(size=(n, d))
    order = np.lexsort(x.T[::-1])
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.minimum(np.arange(n) // k, max(n // k - 1, 0))
    means = np.zeros((labels.max() + 1, d))
    for j in range(d):
        means[:, j] = np.bincount(labels, weights=x[:, j]) / np.bincount(labels)
    return x, means[labels], labels


# --- record linkage --------------------------------------------------------------------------


def test_record_linkage_hand_cases() -> None:
    source = np.array([[0.0], [1.0], [10.0], [11.0]])
    # the two clusters' means: every record's nearest published rows are its own cluster's two rows
    assert record_linkage(source, np.array([[0.5], [0.5], [10.5], [10.5]])) == 0.5
    # published unchanged: each record links to itself alone
    assert record_linkage(source, source) == 1.0
    # rows 0 and 1 swapped: records 0 and 1 link to the other's row
    assert record_linkage(source, np.array([[1.0], [0.0], [10.0], [11.0]])) == 0.5
    # a tie: record 0 at 0 is equidistant from published -1 (its own) and 1: 1/2; record 1
    # at 5 links to its own row 1: 1
    assert record_linkage(np.array([[0.0], [5.0]]), np.array([[-1.0], [1.0]])) == 0.75


def test_record_linkage_no_qi_and_single_vector() -> None:
    assert record_linkage(np.zeros((3, 0)), np.zeros((3, 0))) == pytest.approx(1 / 3)
    assert record_linkage(np.array([[1.0], [2.0]]), np.array([[1.5], [1.5]])) == 0.5


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("integer", [False, True])
def test_record_linkage_equals_quadratic_reference(seed: int, integer: bool) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 160))
    x, published, _ = random_release(
        rng, n, int(rng.integers(1, 4)), int(rng.integers(1, 5)), integer
    )
    if seed % 2:  # some records published unchanged, some swapped: ties and misses both occur
        published[: n // 3] = x[: n // 3][::-1]
    assert abs(record_linkage(x, published) - linkage_reference(x, published)) <= 1e-12


def test_record_linkage_many_ties_batches(monkeypatch) -> None:
    monkeypatch.setattr(measures_module, "_BATCH", 7)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, size=(90, 2)).astype(float)
    published = rng.integers(0, 3, size=(90, 2)).astype(float)
    assert abs(record_linkage(x, published) - linkage_reference(x, published)) <= 1e-12


# --- interval disclosure, IL1s, correlations, moments ------------------------------------------


def test_interval_disclosure_hand_case() -> None:
    original = np.array([[10.0, 1.0], [20.0, 2.0], [30.0, 3.0]])
    published = np.array([[10.4, 1.0], [20.0, 2.6], [31.0, 3.0]])
    sd = np.array([10.0, 1.0])
    # p = 0.05: widths 0.5 and 0.05; only row 0 (0.4 <= 0.5, 0 <= 0.05) has every value inside
    assert interval_disclosure(original, published, sd, 0.05) == pytest.approx(1 / 3)
    # p = 0.1: widths 1 and 0.1: rows 0 and 2
    assert interval_disclosure(original, published, sd, 0.1) == pytest.approx(2 / 3)


@pytest.mark.parametrize("seed", range(4))
def test_interval_disclosure_and_il1s_equal_references(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, published, _ = random_release(rng, 120, 3, 4, integer=bool(seed % 2))
    sd = x.std(axis=0, ddof=1)
    for p in (0.05, 0.3, 1.0):
        assert interval_disclosure(x, published, sd, p) == interval_reference(x, published, sd, p)
    reference = sum(
        abs(x[i, j] - published[i, j]) / (math.sqrt(2) * sd[j])
        for i in range(len(x))
        for j in range(3)
    ) / (len(x) * 3)
    assert abs(il1s(x, published, sd) - reference) <= 1e-12


def test_il1s_hand_case() -> None:
    # sdcMicro's IL1s: |x - x'| / (sqrt(2) sd) averaged: (2 + 0) / sqrt(2) / 2
    assert il1s(np.array([[3.0], [5.0]]), np.array([[5.0], [5.0]]), np.array([1.0])) == (
        pytest.approx(1 / math.sqrt(2))
    )


@pytest.mark.parametrize("seed", range(4))
def test_correlation_max_diff_equals_corrcoef(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, published, _ = random_release(rng, 80, 4, 5, integer=False)
    before, after = np.corrcoef(x.T), np.corrcoef(published.T)
    expected = max(abs(before[i, j] - after[i, j]) for i in range(4) for j in range(4) if i != j)
    assert abs(correlation_max_diff(x, published) - expected) <= 1e-12


def test_correlation_constant_column_and_single_column() -> None:
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 7.0]])
    b = np.array([[2.0, 2.0], [2.0, 4.0], [2.0, 7.0]])  # the first column became constant
    expected = abs(np.corrcoef(a.T)[0, 1] - 0.0)
    assert correlation_max_diff(a, b) == pytest.approx(expected)
    assert correlation_max_diff(a[:, :1], b[:, :1]) is None


def test_moment_changes_and_total_variation() -> None:
    # mean 4 -> 4; population variance 8/3 -> 2
    assert moment_changes(np.array([2.0, 4.0, 6.0]), np.array([3.0, 3.0, 6.0])) == {
        "mean": 0.0,
        "variance": pytest.approx(-0.25),
    }
    assert moment_changes(np.array([-1.0, 1.0]), np.array([0.0, 0.0]))["mean"] is None
    assert total_variation(np.array([0, 1, 1, 2]), np.array([1, 1, 1, 1]), 3) == 0.5


# --- classes: attribute disclosure and re-identification ---------------------------------------


def test_attribute_disclosure_hand_case() -> None:
    classes = np.array([0, 0, 0, 1, 1, 1])
    values = np.array(["flu", "flu", "hiv", "flu", "cold", "hiv"], dtype=object)
    result = attribute_disclosure(classes, values)
    assert result["distinct_l"] == 2
    # class 0: shares 2/3, 1/3: exp(H) = exp(-(2/3 ln 2/3 + 1/3 ln 1/3))
    expected = math.exp(-(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)))
    assert result["entropy_l"] == pytest.approx(expected, abs=1e-12)
    # cold: table 1/6, class 1 1/3 -> gain 1; flu: table 1/2, class 0 2/3 -> 1/3
    assert result["beta"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(5))
def test_attribute_disclosure_equals_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 200))
    classes = rng.integers(0, max(n // 6, 1), n)
    classes = np.unique(classes, return_inverse=True)[1]
    values = rng.integers(0, int(rng.integers(2, 9)), n).astype(float)
    result = attribute_disclosure(classes, values)
    reference = attribute_reference(classes, values)
    assert result["distinct_l"] == reference["distinct_l"]
    assert abs(result["entropy_l"] - reference["entropy_l"]) <= 1e-12
    assert abs(result["beta"] - reference["beta"]) <= 1e-12


def test_reidentification_hand_case() -> None:
    risk = reidentification_risk(np.array([0, 0, 0, 1, 1, 2, 2, 2, 2]))
    assert risk == {"max": 0.5, "mean": 3 / 9, "records_at_max": 2 / 9}


def test_published_classes_group_equal_rows_including_nulls() -> None:
    a = np.array([1.0, 1.0, 2.0, 1.0])
    b = np.array(["x", None, None, "x"], dtype=object)
    classes = published_classes([a, b])
    assert classes[0] == classes[3]
    assert len(set(classes.tolist())) == 3


# --- the mixed distance and the DataFrame API --------------------------------------------------


def _specs(document):
    return list(_attributes(_Checker({}), document).values())


def test_embedding_realizes_the_mixed_distance() -> None:
    rng = np.random.default_rng(0)
    n = 60
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "level": rng.choice(["low", "mid", "high"], n),
            "city": rng.choice(["a", "b", "c", "d"], n),
        }
    )
    specs = _specs(
        {
            "age": {"role": "quasi_identifier", "type": "numeric", "weight": 2.0},
            "level": {
                "role": "quasi_identifier",
                "type": "ordinal",
                "categories": ["low", "mid", "high"],
            },
            "city": {"role": "quasi_identifier", "type": "nominal", "weight": 0.5},
        }
    )
    encoded = encode_table(frame, specs)
    other = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    published = {c: other[c].to_numpy() for c in frame.columns}
    embedded = np.hstack([embed_published(q, published[q.name]) for q in encoded.quasi_identifiers])
    squared = ((encoded.x - embedded) ** 2).sum(axis=1)
    expected = sum(q.weight * q.squared_error(published[q.name]) for q in encoded.quasi_identifiers)
    np.testing.assert_allclose(squared, expected, atol=1e-12)
    # the same values embed to the same rows, bit for bit
    same = np.hstack(
        [embed_published(q, frame[q.name].to_numpy()) for q in encoded.quasi_identifiers]
    )
    assert np.array_equal(same, encoded.x)


def test_unknown_published_category_is_an_error_naming_the_column() -> None:
    frame = pd.DataFrame({"city": ["a", "b", "a"]})
    encoded = encode_table(frame, _specs({"city": {"role": "quasi_identifier", "type": "nominal"}}))
    with pytest.raises(DataError, match="'city'.*1 value"):
        embed_published(encoded.quasi_identifiers[0], np.array(["a", "z", "a"], dtype=object))


def _two_frames():
    rng = np.random.default_rng(2)
    n = 40
    original = pd.DataFrame(
        {"age": rng.integers(20, 60, n), "zip": rng.integers(0, 5, n), "pay": rng.normal(size=n)},
        index=pd.Index(rng.permutation(1000)[:n]),
    )
    labels = np.argsort(np.argsort(original["age"].to_numpy())) // 4
    published = original.copy()
    for column in ("age", "zip"):
        published[column] = original.groupby(labels)[column].transform("mean").to_numpy()
    return original, published


def test_evaluate_matches_rows_by_index() -> None:
    original, published = _two_frames()
    result = evaluate(original, published, ["age", "zip"], ["pay"])
    shuffled = published.sample(frac=1.0, random_state=5)
    assert evaluate(original, shuffled, ["age", "zip"], ["pay"]) == result
    risk, utility = result["risk"], result["utility"]
    x = original[["age", "zip"]].to_numpy(float)
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    zp = (published[["age", "zip"]].to_numpy(float) - x.mean(axis=0)) / x.std(axis=0)
    assert abs(risk["record_linkage"] - linkage_reference(z, zp)) <= 1e-12
    assert risk["reidentification"]["max"] <= 1 / 4
    assert utility["moments"]["age"]["mean"] == pytest.approx(0.0, abs=1e-12)
    assert utility["moments"]["age"]["variance"] < 0
    assert set(risk["attribute"]) == {"pay", "overall"}


@pytest.mark.parametrize("p", [float("nan"), float("inf"), 0.0, -0.05, "0.05", True])
def test_evaluate_refuses_an_interval_half_width_that_is_not_a_positive_number(p) -> None:
    """NaN made every ``|x - x'| <= p * sd`` false: an interval disclosure of 0, "no record at
    risk" (the run's ``report.interval_p`` was already checked; ``evaluate`` was not)."""
    original, published = _two_frames()
    with pytest.raises(ConfigError, match="At key: p"):
        evaluate(original, published, ["age", "zip"], ["pay"], p=p)


def test_evaluate_takes_a_numpy_interval_half_width() -> None:
    original, published = _two_frames()
    wide = evaluate(original, published, ["age", "zip"], ["pay"], p=np.float32(0.5))
    assert wide == evaluate(original, published, ["age", "zip"], ["pay"], p=float(np.float32(0.5)))


def test_evaluate_rejects_unaligned_frames() -> None:
    original, published = _two_frames()
    with pytest.raises(ConfigError, match="same index labels"):
        evaluate(original, published.reset_index(drop=True), ["age"], ["pay"])
    with pytest.raises(ConfigError, match="'zap'"):
        evaluate(original, published, ["zap"])


@pytest.mark.parametrize("min_rows", [0, measures_module.KERNEL_MIN_ROWS])
@pytest.mark.parametrize(("leaf", "buffer"), [(1, 64), (2, 1), (16, 0), (16, 64)])
@pytest.mark.parametrize("integer", [False, True])
def test_record_linkage_every_path_equals_reference(monkeypatch, leaf, buffer, integer, min_rows):
    """The compiled search with tiny and default leaves, and with a tie buffer that overflows
    (those rows go to the tree's ball query); below KERNEL_MIN_ROWS rows (150 here) the NumPy
    pairwise comparison settles every row."""
    monkeypatch.setattr(measures_module, "_LEAF_SIZE", leaf)
    monkeypatch.setattr(measures_module, "_TIE_BUFFER", buffer)
    monkeypatch.setattr(measures_module, "KERNEL_MIN_ROWS", min_rows)
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        x, published, _ = random_release(rng, 150, 3, 3, integer)
        published[:20] = x[:20][::-1]
        assert abs(record_linkage(x, published) - linkage_reference(x, published)) <= 1e-12


def contributions_reference(source: np.ndarray, published: np.ndarray) -> np.ndarray:
    """Every row's share by the definition (O(n²))."""
    shares = np.zeros(len(source))
    for i in range(len(source)):
        distances = np.sqrt(((source[i] - published) ** 2).sum(axis=1))
        members = np.flatnonzero(distances <= distances.min() + LINK_TOLERANCE)
        shares[i] = (i in members) / len(members)
    return shares


@pytest.mark.parametrize("seed", range(3))
def test_compiled_search_gives_the_small_paths_shares_row_for_row(monkeypatch, seed) -> None:
    """Above and below KERNEL_MIN_ROWS the shares are the same, row for row, bit for bit, and
    the definition's: clusters, duplicated published vectors, records published unchanged,
    swapped or equidistant from two vectors, in 1 to 5 dimensions."""
    rng = np.random.default_rng(seed)
    n, d = 2500, 1 + seed * 2
    x, published, _ = random_release(rng, n, d, 4, integer=seed == 1)
    published[:300] = x[:300][::-1]
    published[300:400] = published[400:500]  # two clusters publishing the same vector
    x[500:520] = (published[520:540] + published[540:560]) / 2  # midway between two vectors
    above = measures_module.linkage_contributions(x, published)
    monkeypatch.setattr(measures_module, "KERNEL_MIN_ROWS", n + 1)
    below = measures_module.linkage_contributions(x, published)
    assert np.array_equal(above, below)
    sample = rng.choice(n, 300, replace=False)
    reference = contributions_reference(x, published)
    assert np.array_equal(above[sample], reference[sample])


def kdtree_contributions(source: np.ndarray, published: np.ndarray) -> np.ndarray:
    """A reference for the small-table path: SciPy's KD-tree answers every row's two nearest
    distinct vectors, and rows whose two nearest are within 2·tolerance get the tree's ball query
    (``_settle_ties``), distances recomputed on the unrotated vectors."""
    from scipy.spatial import cKDTree

    n = len(source)
    if source.shape[1] == 0:
        return np.full(n, 1.0 / n)
    classes = np.unique(published, axis=0, return_inverse=True)[1].reshape(-1)
    counts = np.bincount(classes)
    first = np.full(len(counts), n, dtype=np.int64)
    np.minimum.at(first, classes, np.arange(n))
    distinct = np.ascontiguousarray(published[first])
    basis = measures_module.principal_axes(distinct)
    tree = cKDTree(distinct @ basis)
    neighbours = min(2, len(distinct))
    distance, index = tree.query(source @ basis, k=neighbours)
    distance = distance.reshape(n, neighbours)
    nearest = index.reshape(n, neighbours)[:, 0]
    out = np.where(classes == nearest, 1.0 / counts[nearest], 0.0)
    if neighbours == 2:
        tied = np.flatnonzero(distance[:, 1] <= distance[:, 0] + 2 * LINK_TOLERANCE)
        measures_module._settle_ties(
            tree,
            basis,
            source,
            distinct,
            counts,
            classes,
            tied,
            distance[tied, 0],
            LINK_TOLERANCE,
            out,
        )
    return out


#: Shifts of one published coordinate: exact ties (0), and distances that differ by about the
#: tolerance, just inside and just outside it, and by twice it.
_NUDGES = [0.0] + [
    sign * factor * LINK_TOLERANCE
    for sign in (1.0, -1.0)
    for factor in (1.0, 1.0 - 1e-3, 1.0 + 1e-3, 0.5, 2.0)
]


@st.composite
def linkage_tables(draw):
    """``(source, published)``: source rows on a small grid (duplicated rows, exact ties),
    published rows drawn from them with repeats and halved (a row halfway between two grid
    points ties with both), some published coordinates shifted by about the tolerance; 0, 1,
    several or 9 columns (NumPy sums 8 or more terms pairwise); 1, 2, up to 30 or 1999 rows
    (the largest table below KERNEL_MIN_ROWS: its arrays come from a drawn seed)."""
    n = draw(st.one_of(st.sampled_from([1, 2, 1999]), st.integers(1, 30)))
    d = draw(st.sampled_from([0, 1, 2, 3, 9]))
    if n > 30:
        return seeded_linkage_table(draw(st.integers(0, 2**32 - 1)), n, d)
    grid = st.integers(-2, 2).map(float)
    x = np.array(draw(st.lists(st.lists(grid, min_size=d, max_size=d), min_size=n, max_size=n)))
    picks = np.array(draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)))
    nudges = np.array(draw(st.lists(st.sampled_from(_NUDGES), min_size=n, max_size=n)))
    columns = np.array(draw(st.lists(st.integers(0, max(d - 1, 0)), min_size=n, max_size=n)))
    return _nudged(x.reshape(n, d), picks, nudges, columns)


def seeded_linkage_table(seed: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """A table as :func:`linkage_tables` draws them, from a seed (half the rows nudged)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=(n, d)).astype(float)
    nudges = np.where(rng.random(n) < 0.5, 0.0, rng.choice(_NUDGES, size=n))
    return _nudged(x, rng.integers(0, n, size=n), nudges, rng.integers(0, max(d, 1), size=n))


def _nudged(x, picks, nudges, columns) -> tuple[np.ndarray, np.ndarray]:
    published = x[picks] / 2.0
    if x.shape[1]:
        published[np.arange(len(x)), columns] += nudges
    return x, published


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(linkage_tables(), st.sampled_from([None, 1, 100]))
@example(seeded_linkage_table(0, 1999, 3), None)
@example(seeded_linkage_table(1, 1999, 1), 1)
@example(seeded_linkage_table(2, 1999, 9), 100)
@example(seeded_linkage_table(3, 1999, 0), None)
@example(seeded_linkage_table(4, 2, 1), None)
@example(seeded_linkage_table(5, 1, 2), None)
def test_small_tables_pairwise_shares_equal_the_definition_and_the_kd_tree(table, chunk) -> None:
    """Below KERNEL_MIN_ROWS every row's share is the definition's (row by row over every
    published row) and the former SciPy KD-tree path's, bit for bit, whatever the chunk of rows
    (1 byte: one row a chunk); and no KD-tree is built."""
    x, published = table
    assert len(x) < measures_module.KERNEL_MIN_ROWS

    def no_tree(*args):
        raise AssertionError("a KD-tree was built below KERNEL_MIN_ROWS")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(measures_module, "_tree", no_tree)
        if chunk is not None:
            patch.setattr(measures_module, "_PAIRWISE_BYTES", chunk)
        shares = measures_module.linkage_contributions(x, published)
    assert np.array_equal(shares, contributions_reference(x, published))
    assert np.array_equal(shares, kdtree_contributions(x, published))


def test_compiled_search_in_parallel_chunks_equals_one_chunk(monkeypatch) -> None:
    """Chunks on several threads (and rows of one class split between chunks) change nothing."""
    rng = np.random.default_rng(7)
    x, published, _ = random_release(rng, 3000, 3, 5, integer=True)
    published[:100] = x[:100][::-1]
    monkeypatch.setattr(measures_module, "KERNEL_MIN_ROWS", 0)
    monkeypatch.setattr(measures_module, "_workers", lambda: 1)
    one = measures_module.linkage_contributions(x, published)
    monkeypatch.setattr(measures_module, "_workers", lambda: 3)
    monkeypatch.setattr(measures_module, "_CHUNK", 37)
    many = measures_module.linkage_contributions(x, published)
    assert np.array_equal(one, many)
    assert abs(one.mean() - linkage_reference(x, published)) <= 1e-12


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_compiled_search_on_tiny_inputs(monkeypatch, n) -> None:
    monkeypatch.setattr(measures_module, "KERNEL_MIN_ROWS", 0)
    rng = np.random.default_rng(n)
    for _ in range(5):
        x = rng.integers(0, 3, size=(n, 2)).astype(float)
        published = x[rng.integers(0, n, size=n)]
        assert abs(record_linkage(x, published) - linkage_reference(x, published)) <= 1e-12


def test_compiled_search_with_many_equidistant_vectors(monkeypatch) -> None:
    """A row at the centre of the 2**6 corners of a cube (and rows on its faces) ties with many
    vectors: more than the buffer, so the tree's ball query settles it."""
    monkeypatch.setattr(measures_module, "KERNEL_MIN_ROWS", 0)
    corners = np.array(np.meshgrid(*[[0.0, 2.0]] * 6)).reshape(6, -1).T
    x = np.vstack([corners, np.ones((1, 6)), corners[:10] * 0.5 + 0.5])
    published = np.vstack([corners, corners[:11]])
    for buffer in (0, 3, 64):
        monkeypatch.setattr(measures_module, "_TIE_BUFFER", buffer)
        shares = measures_module.linkage_contributions(x, published)
        assert np.array_equal(shares, contributions_reference(x, published))


def test_classes_from_cluster_labels_merge_clusters_with_equal_values() -> None:
    from tclose.measures import measure_release

    frame = pd.DataFrame({"a": [1.0, 3.0, 0.0, 4.0, 9.0, 11.0], "c": [1, 2, 3, 4, 5, 6]})
    encoded = encode_table(
        frame,
        _specs(
            {
                "a": {"role": "quasi_identifier", "type": "numeric"},
                "c": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
            }
        ),
    )
    labels = np.array([0, 0, 1, 1, 2, 2])
    published = {"a": encoded.aggregate(labels)["a"]}  # clusters 0 and 1 both publish 2.0
    with_labels = measure_release(encoded, published, {"c": "numeric"}, labels=labels)
    without = measure_release(encoded, published, {"c": "numeric"})
    assert with_labels == without
    assert with_labels["risk"]["classes"] == 2
    assert with_labels["risk"]["reidentification"]["max"] == 0.5


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=n, max_size=n),
            st.lists(st.integers(0, n - 1), min_size=n, max_size=n),
        )
    ),
    st.tuples(
        st.sampled_from([1, 2, 16]), st.sampled_from([0, 1, 64]), st.sampled_from([0, 10**9])
    ),
)
def test_record_linkage_property_equals_reference(case, layout) -> None:
    """Any small grid table (many exact ties) and any published rows drawn from it, through the
    compiled search (tiny leaves, overflowing tie buffers) and through the NumPy comparison."""
    rows, picks = case
    x = np.array(rows, dtype=float)
    published = x[np.array(picks)] / 2.0
    leaf, buffer, min_rows = layout
    names = ("_LEAF_SIZE", "_TIE_BUFFER", "KERNEL_MIN_ROWS")
    saved = [getattr(measures_module, name) for name in names]
    for name, value in zip(names, (leaf, buffer, min_rows)):
        setattr(measures_module, name, value)
    try:
        assert abs(record_linkage(x, published) - linkage_reference(x, published)) <= 1e-12
    finally:
        for name, value in zip(names, saved):
            setattr(measures_module, name, value)


@pytest.mark.parametrize("seed", range(3))
def test_memory_lean_measures_equal_the_whole_array_formulas(seed) -> None:
    """interval_disclosure (column by column), il1s and the correlations (in place) give the
    figures of the direct whole-array expressions, bit for bit."""
    from tclose.measures import correlation_matrix, correlation_max_diff, il1s
    from tclose.measures import interval_disclosure as interval

    rng = np.random.default_rng(seed)
    original = rng.normal(size=(500, 4)) * [1.0, 10.0, 1e-3, 1e6]
    published = original + rng.normal(size=original.shape) * 0.05 * original.std(axis=0)
    published[::7] = original[::7]
    sd = original.std(axis=0, ddof=1)
    allowance = 1e-12 * np.maximum(1.0, np.abs(original)) + 0.05 * sd
    assert interval(original, published, sd) == float(
        (np.abs(original - published) <= allowance).all(axis=1).mean()
    )
    assert il1s(original, published, sd) == float(
        (np.abs(original - published) / (np.sqrt(2.0) * sd)).mean()
    )
    centred = original - original.mean(axis=0)
    z = centred / np.sqrt((centred**2).sum(axis=0))
    assert np.array_equal(correlation_matrix(original), z.T @ z)
    expected = np.abs(correlation_matrix(original) - correlation_matrix(published))
    assert correlation_max_diff(original, published) == float(
        expected[~np.eye(4, dtype=bool)].max()
    )


@pytest.mark.parametrize("seed", range(4))
def test_linkage_tree_partitions_the_points_into_tight_boxes(seed) -> None:
    """build_tree: the children of a node split its points at the median, boxes are tight, and
    coinciding points stay in one leaf however many they are."""
    from tclose.measures._linkage import build_tree

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 400))
    points = rng.integers(0, 3, size=(m, 3)).astype(float) if seed % 2 else rng.normal(size=(m, 3))
    if seed == 3:
        points[: m // 2] = points[0]
    perm, start, stop, left, lo, hi = build_tree(points, 4)
    assert sorted(perm.tolist()) == list(range(m))
    for node in range(len(start)):
        inside = points[perm[start[node] : stop[node]]]
        assert (inside.min(axis=0) == lo[node]).all() and (inside.max(axis=0) == hi[node]).all()
        child = left[node]
        if child < 0:
            assert stop[node] - start[node] <= 4 or (lo[node] == hi[node]).all()
            continue
        assert start[child] == start[node] and stop[child + 1] == stop[node]
        assert stop[child] == start[child + 1] == (start[node] + stop[node]) // 2
        widest = int(np.argmax(hi[node] - lo[node]))
        assert hi[child, widest] <= lo[child + 1, widest]
