"""MDAV kernel: partition shape, compiled == NumPy reference, and agreement with sdcMicro.

``_sdcmicro_mdav`` below is a line-by-line Python transliteration of sdcMicro's C++ routine
``Mdav`` (``src/Mdav.cpp`` of sdcTools/sdcMicro): linked list of active rows, variance weights,
single-precision distances, 65,536-bucket sort of the distances. It shares no code with the kernel.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.kernels.mdav import mdav, mdav_reference

# --------------------------------------------------------------------------------------------
# Independent transliteration of sdcMicro's Mdav (plain Python loops)
# --------------------------------------------------------------------------------------------

_N_BUCKETS = 1 << 16  # es_NbHashListXX
_f32 = np.float32


def _sdcmicro_mdav(data: np.ndarray, k: int) -> np.ndarray:
    """Cluster labels, in order of creation, of sdcMicro's ``Mdav`` (no missing values)."""
    n, d = data.shape
    rows = [[float(v) for v in data[i]] for i in range(n)]
    weight = [1.0] * d
    for j in range(d):
        avr = sum(rows[i][j] for i in range(n)) / n
        squared_sum = sum(rows[i][j] ** 2 for i in range(n)) / n
        variance = squared_sum - avr**2
        if variance:
            weight[j] /= variance

    def dist(a: list[float], b: list[float]) -> np.float32:
        total = _f32(0.0)
        for j in range(d):
            total = _f32(total + _f32((a[j] - b[j]) ** 2 * weight[j]))
        return total

    next_index = list(range(1, n)) + [-1]
    prev_index = [-1] + list(range(n - 1))
    first_index = 0
    labels = [-1] * n
    label = 0
    left = n

    def active():
        i = first_index
        while i >= 0:
            yield i
            i = next_index[i]

    while left - k >= k:
        n_groups = 1 if left - 2 * k < k else 2
        center = [0.0] * d
        count = 0
        for i in active():
            for j in range(d):
                center[j] += rows[i][j]
            count += 1
        center = [c / count for c in center]
        p_dist = [_f32(0.0)] * n
        current_farthest = first_index
        for i in active():
            p_dist[i] = dist(rows[i], center)
            if p_dist[i] > p_dist[current_farthest]:
                current_farthest = i
        for _ in range(n_groups):
            farthest = closest = first_index
            seed = rows[current_farthest]
            for i in active():
                p_dist[i] = dist(rows[i], seed)
                if p_dist[i] > p_dist[farthest]:
                    farthest = i
                elif p_dist[i] < p_dist[closest]:
                    closest = i
            current_farthest = farthest
            # Hash sort from closest to farthest.
            min_d = p_dist[closest]
            delta_d = _f32(p_dist[farthest] - min_d)
            if not delta_d:
                delta_d = _f32(delta_d + _f32(1.0))
            delta_d = _f32(float(delta_d) * ((_N_BUCKETS + 1.0) / _N_BUCKETS))
            hash_list: dict[int, int] = {}  # bucket -> head; missing bucket == -1
            next_in_hash = [-1] * n
            for i in active():
                di = p_dist[i]
                bucket = int(_f32(_f32(_N_BUCKETS) * _f32(di - min_d)) / delta_d)
                index = hash_list.get(bucket, -1)
                if index >= 0 and p_dist[index] < di:
                    while next_in_hash[index] >= 0 and p_dist[next_in_hash[index]] < di:
                        index = next_in_hash[index]
                    next_in_hash[i] = next_in_hash[index]
                    next_in_hash[index] = i
                else:
                    next_in_hash[i] = index
                    hash_list[bucket] = i
            taken = 0
            for bucket in sorted(hash_list):
                index = hash_list[bucket]
                while index >= 0 and taken < k:
                    labels[index] = label
                    if first_index == index:
                        first_index = next_index[index]
                    if prev_index[index] >= 0:
                        next_index[prev_index[index]] = next_index[index]
                    if next_index[index] >= 0:
                        prev_index[next_index[index]] = prev_index[index]
                    taken += 1
                    index = next_in_hash[index]
                if taken >= k:
                    break
            label += 1
        left -= k * n_groups
    for i in active():
        labels[i] = label
    return np.asarray(labels, dtype=np.int64)


def _zscores(raw: np.ndarray) -> np.ndarray:
    std = raw.std(axis=0)
    return (raw - raw.mean(axis=0)) / np.where(std > 0, std, 1.0)


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


@st.composite
def _data(draw, max_k: int = 6):
    """(x, k): n in [k, 5k], rows either continuous or on a small integer grid (many ties)."""
    k = draw(st.integers(1, max_k))
    n = draw(st.integers(k, 5 * k))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):
        x = rng.integers(0, draw(st.integers(1, 4)), size=(n, d)).astype(np.float64)
    else:
        x = rng.normal(size=(n, d))
    return x, k


def _check_partition(labels: np.ndarray, n: int, k: int) -> None:
    assert labels.shape == (n,) and labels.dtype == np.int64
    sizes = np.bincount(labels)
    assert sizes.sum() == n and (sizes > 0).all()  # dense labels, every row once
    if n < 2 * k:
        assert sizes.tolist() == [n]
    else:
        assert (sizes[:-1] == k).all()
        assert k <= sizes[-1] < 2 * k


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(_data())
def test_partition_shape_and_compiled_equals_reference(case):
    x, k = case
    for ties in ("lowest", "sdcmicro"):
        labels = mdav(x, k, ties=ties)
        _check_partition(labels, x.shape[0], k)
        np.testing.assert_array_equal(labels, mdav_reference(x, k, ties=ties))


def test_compiled_equals_reference_larger():
    rng = np.random.default_rng(7)
    for n, d, k in ((503, 3, 2), (400, 7, 5), (257, 2, 13)):
        x = rng.normal(size=(n, d))
        x[n // 2 :] = x[: n - n // 2]  # half the rows duplicated
        np.testing.assert_array_equal(mdav(x, k), mdav_reference(x, k))


def test_golden_one_dimension():
    # n = 9 = 3k: centroid 11, rows 0 and 8 tie as farthest -> row 0 (lowest index); its cluster
    # is rows 0-2; s = row 8 (farthest from row 0) with rows 6-7; rows 3-5 are the rest.
    x = np.array([[0.0], [1.0], [2.0], [10.0], [11.0], [12.0], [20.0], [21.0], [22.0]])
    assert mdav(x, 3).tolist() == [0, 0, 0, 2, 2, 2, 1, 1, 1]


def test_golden_ties_in_nearest_search():
    # Centroid 3: row 5 (7.0) is farthest; cluster {5, 4}. s = row 0 (0.0, first of three zeros
    # at distance 49 from 7.0). Around 0.0, rows 0, 1, 2 tie at distance 0: lowest index takes
    # rows 0 and 1; sdcMicro's bucket sort takes the highest indices first, rows 2 and 1.
    x = np.array([[0.0], [0.0], [0.0], [5.0], [6.0], [7.0]])
    assert mdav(x, 2).tolist() == [1, 1, 2, 2, 0, 0]
    assert mdav(x, 2, ties="sdcmicro").tolist() == [2, 1, 1, 2, 0, 0]
    assert _sdcmicro_mdav(x, 2).tolist() == [2, 1, 1, 2, 0, 0]


def test_docstring_example():
    x = np.array([[0.0], [0.1], [5.0], [5.1], [9.0], [9.2]])
    assert mdav(x, 2).tolist() == [0, 0, 2, 2, 1, 1]


@pytest.mark.parametrize("seed", range(6))
def test_same_clusters_as_sdcmicro_on_continuous_data(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 90))
    k = int(rng.integers(2, 6))
    raw = rng.normal(size=(n, 3)) * [1.0, 40.0, 0.01] + [0.0, 1000.0, 5.0]
    expected = _sdcmicro_mdav(raw, k)  # sdcMicro scales raw data itself
    z = _zscores(raw)
    np.testing.assert_array_equal(mdav(z, k), expected)
    np.testing.assert_array_equal(mdav(z, k, ties="sdcmicro"), expected)


@pytest.mark.parametrize("seed", range(10))
def test_same_clusters_as_sdcmicro_with_duplicate_rows(seed):
    # Distinct points are continuous; each is repeated 1-3 times, so the ties are between exact
    # duplicates, which single and double precision see alike. With k >= 4 no centroid step can
    # face only two distinct points of equal multiplicity (at most 6 rows < 2k): their centroid
    # would be their midpoint, a tie in exact arithmetic that each precision breaks its own way.
    rng = np.random.default_rng(100 + seed)
    points = rng.normal(size=(int(rng.integers(8, 25)), 2)) * [3.0, 0.5]
    raw = np.repeat(points, rng.integers(1, 4, size=points.shape[0]), axis=0)
    raw = raw[rng.permutation(raw.shape[0])]
    k = int(rng.integers(4, 6))
    np.testing.assert_array_equal(mdav(_zscores(raw), k, ties="sdcmicro"), _sdcmicro_mdav(raw, k))


def test_small_inputs():
    assert mdav(np.empty((0, 3)), 2).tolist() == []
    assert mdav(np.ones((1, 2)), 3).tolist() == [0]  # n < k: one cluster (callers reject it)
    assert mdav(np.zeros((5, 2)), 3).tolist() == [0] * 5  # n < 2k: one cluster
    assert mdav(np.zeros((7, 0)), 2).tolist() == [0, 0, 1, 1, 2, 2, 2]  # no QI: all tied


@pytest.mark.parametrize(
    ("x", "k", "message"),
    [
        (np.zeros(4), 2, "2-D"),
        (np.array([[0.0], [np.nan]]), 1, "finite"),
        (np.zeros((4, 1)), 0, "k must be"),
        (np.zeros((4, 1)), 1.5, "k must be"),
    ],
)
def test_rejects_bad_input(x, k, message):
    with pytest.raises(ValueError, match=message):
        mdav(x, k)
    with pytest.raises(ValueError, match="ties"):
        mdav(np.zeros((4, 1)), 2, ties="first")
