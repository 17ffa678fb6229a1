"""The compact layout of one-hot column groups (framework/kernels/onehot.py): which columns form a
group, and that table look-ups give the squared distances of the full one-hot columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.base.attributes import encode_table
from tclose.base.config import AttributeSpec
from tclose.kernels.onehot import column_layout, sq_dist_reference


def _plain(x: np.ndarray, point: np.ndarray) -> np.ndarray:
    return ((x - point) ** 2).sum(axis=1)


def test_encoded_nominal_columns_become_groups():
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "country": rng.choice([f"c{i}" for i in range(12)], n),
            "level": rng.choice(["low", "mid", "high"], n),
            "race": rng.choice(["a", "b", "c"], n),
        }
    )
    specs = [
        AttributeSpec("age", "quasi_identifier", "numeric"),
        AttributeSpec("sex", "quasi_identifier", "nominal"),
        AttributeSpec("country", "quasi_identifier", "nominal", weight=2.0),
        AttributeSpec("level", "quasi_identifier", "ordinal", categories=("low", "mid", "high")),
        AttributeSpec("race", "quasi_identifier", "nominal"),
    ]
    x = encode_table(frame, specs).x
    layout = column_layout(x)
    assert layout.numeric.tolist() == [0, 15]
    assert layout.group_lo.tolist() == [1, 3, 16]
    assert layout.group_hi.tolist() == [3, 15, 19]
    np.testing.assert_allclose(layout.group_value, [0.5**0.5, 1.0, 0.5**0.5])
    for g, column in ((0, "sex"), (1, "country"), (2, "race")):
        assert len(set(zip(layout.codes[g], frame[column], strict=True))) == len(set(frame[column]))
    rows = np.arange(n)
    for point in (x[7], x.mean(axis=0), x[rng.integers(0, n, 9)].mean(axis=0)):
        np.testing.assert_allclose(
            sq_dist_reference(layout, x, rows, point), _plain(x, point), rtol=1e-12, atol=1e-12
        )
    # A record as the point: its table holds exactly 0 for its own category, so the records
    # equal to it are at distance exactly 0.
    dist = sq_dist_reference(layout, x, rows, x[7])
    identical = (x == x[7]).all(axis=1)
    assert (dist[identical] == 0).all() and (dist[~identical] > 0).all()


@pytest.mark.parametrize(
    "x, groups",
    [
        (np.zeros((4, 3)), []),  # all-zero columns stay numeric
        (np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), []),  # a row with two non-zeros
        (np.array([[1.0, 0.0], [0.0, 2.0]]), []),  # two different non-zero values
        (np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), []),  # a row with none
        (np.array([[1.0], [1.0]]), []),  # a single column is no group
        (np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]]), [(0, 2), (2, 4)]),
        (np.array([[0.5, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 1.0, 0.0]]), [(1, 3)]),
    ],
)
def test_detection_edge_cases(x, groups):
    layout = column_layout(x)
    assert list(zip(layout.group_lo.tolist(), layout.group_hi.tolist(), strict=True)) == groups
    covered = {j for lo, hi in groups for j in range(lo, hi)}
    assert sorted(covered | set(layout.numeric.tolist())) == list(range(x.shape[1]))


@st.composite
def _matrix(draw):
    n = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("normal", "small integers", "one-hot", "zero")))
        if kind == "normal":
            parts.append(rng.normal(size=(n, 1)))
        elif kind == "small integers":
            parts.append(rng.integers(0, 2, size=(n, 2)).astype(float))
        elif kind == "one-hot":
            width = draw(st.integers(1, 5))
            scale = draw(st.sampled_from((1.0, 0.5**0.5, 0.3)))
            parts.append(np.eye(width)[rng.integers(0, width, n)] * scale)
        else:
            parts.append(np.zeros((n, 1)))
    x = np.hstack(parts)
    return x, rng.normal(size=x.shape[1]), int(rng.integers(0, n))


@settings(max_examples=200, deadline=None)
@given(_matrix())
def test_table_distances_equal_column_distances(case):
    # Whatever columns are taken as groups, the distances are those of the full columns.
    x, point, row = case
    layout = column_layout(x)
    rows = np.arange(x.shape[0])
    for target in (point, x[row], x.mean(axis=0)):
        np.testing.assert_allclose(
            sq_dist_reference(layout, x, rows, target),
            _plain(x, target),
            rtol=1e-12,
            atol=1e-12,
        )


def test_column_total_adds_in_row_order_without_a_copy_of_x():
    # Blocks of rows, each after the sums so far: the additions of one cumsum over all rows.
    from tclose.kernels._compiled import _TOTAL_BLOCK, column_total

    rng = np.random.default_rng(5)
    for n in (0, 1, _TOTAL_BLOCK, _TOTAL_BLOCK + 1, 3 * _TOTAL_BLOCK + 17):
        x = rng.normal(size=(n, 4)) * 10.0 ** rng.integers(-8, 8, size=(n, 4))
        expected = np.cumsum(x, axis=0)[-1] if n else np.zeros(4)
        assert column_total(x).tobytes() == expected.tobytes()


def test_encoded_embeddings_are_views_of_x():
    # The one-hot matrices are held once: each QI's embedding is its block of x.
    rng = np.random.default_rng(6)
    frame = pd.DataFrame(
        {"age": rng.integers(18, 90, 50), "country": rng.choice(["a", "b", "c", "d"], 50)}
    )
    specs = [
        AttributeSpec("age", "quasi_identifier", "numeric"),
        AttributeSpec("country", "quasi_identifier", "nominal"),
    ]
    encoded = encode_table(frame, specs)
    x = encoded.x
    assert x.flags.c_contiguous and x.dtype == np.float64 and x.shape == (50, 5)
    age, country = encoded.quasi_identifiers
    assert np.shares_memory(age.embedding, x) and np.shares_memory(country.embedding, x)
    np.testing.assert_array_equal(np.hstack([age.embedding, country.embedding]), x)
    np.testing.assert_array_equal(country.embedding.argmax(axis=1), country.codes)
