"""The verifier's equivalence classes by hash are exactly pandas' grouping of equal rows.

``tclose.core.verify.equivalence_classes`` (and the measures' ``published_classes``) group integer and
float columns by a hash of each row (``tclose.base.arrays.equal_row_classes``), then check every row
against its class's first row; these tests compare it with the grouping
it replaces (``groupby(dropna=False, sort=False).ngroup()``) on any frame, signed zeros, NaNs and
infinities included, and force hash collisions to show that they fall back to the grouping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tclose.base.arrays as arrays
from tclose.core.verify import equivalence_classes
from tclose.measures import published_classes

FLOATS = [0.0, -0.0, 1.5, -1.5, np.nan, np.inf, -np.inf, 5e-324, 1e308]


def _grouped(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    return (
        frame.groupby(columns, dropna=False, sort=False, observed=True)
        .ngroup()
        .to_numpy(dtype=np.int64)
    )


@st.composite
def frames(draw):
    rows = draw(st.integers(1, 60))
    count = draw(st.integers(1, 4))
    data = {}
    for i in range(count):
        if draw(st.booleans()):
            dtype = draw(st.sampled_from([np.float64, np.float32]))
            pool = FLOATS if dtype == np.float64 else [v for v in FLOATS if abs(v) != 1e308]
            values = draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows))
            data[f"q{i}"] = np.array(values, dtype=dtype)
        else:
            pool = st.sampled_from([0, 1, -1, 2**62, -(2**63)])
            data[f"q{i}"] = np.array(draw(st.lists(pool, min_size=rows, max_size=rows)), np.int64)
    return pd.DataFrame(data)


@settings(max_examples=300, deadline=None)
@given(frames())
def test_the_classes_by_hash_are_those_of_equal_rows(frame):
    columns = list(frame.columns)
    classes = equivalence_classes(frame, columns)
    assert classes.dtype == np.int64
    assert classes.tolist() == _grouped(frame, columns).tolist()
    published = published_classes([frame[c].to_numpy() for c in columns])
    assert published.tolist() == classes.tolist()


@settings(max_examples=100, deadline=None)
@given(frames())
def test_colliding_hashes_fall_back_to_the_grouping(frame):
    columns = list(frame.columns)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(arrays, "_MIX", np.uint64(0))  # every row hashes to 0
        assert equivalence_classes(frame, columns).tolist() == _grouped(frame, columns).tolist()
        published = published_classes([frame[c].to_numpy() for c in columns])
        assert published.tolist() == _grouped(frame, columns).tolist()
        if len(frame.drop_duplicates()) > 1:
            assert arrays.equal_row_classes([frame[c].to_numpy() for c in columns]) is None


def test_signed_zeros_and_nans_are_one_value_each():
    frame = pd.DataFrame({"a": [0.0, -0.0, np.nan, np.nan, 1.0], "b": [1, 1, 2, 2, 1]})
    assert equivalence_classes(frame, ["a", "b"]).tolist() == [0, 0, 1, 1, 2]


def test_text_and_nullable_columns_are_grouped_by_pandas():
    frame = pd.DataFrame(
        {"a": ["x", "y", "x", None], "b": pd.array([1, None, 1, None], dtype="Int64")}
    )
    assert equivalence_classes(frame, ["a", "b"]).tolist() == _grouped(frame, ["a", "b"]).tolist()
