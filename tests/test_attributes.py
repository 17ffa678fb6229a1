"""Encoding and aggregation of quasi-identifiers and confidential attributes of every type."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from tclose.base.attributes import (
    MISSING,
    encode_confidential,
    encode_quasi_identifier,
    rows_to_exclude,
)
from tclose.base.hierarchy import Hierarchy
from tclose.errors import DataError


def spec(name, type_, **extra):
    return SimpleNamespace(name=name, type=type_, **extra)


def sq_dist(x, i, j):
    return float(((x[i] - x[j]) ** 2).sum())


def test_numeric_is_standardized_and_aggregated_by_mean():
    qi = encode_quasi_identifier(pd.Series([1.0, 2.0, 3.0, 10.0]), spec("a", "numeric"))
    assert qi.embedding[:, 0].mean() == pytest.approx(0) and qi.embedding.std() == pytest.approx(1)
    assert list(qi.aggregate(np.array([0, 0, 1, 1]))) == [1.5, 1.5, 6.5, 6.5]
    rounded = encode_quasi_identifier(pd.Series([1, 2, 4, 4]), spec("a", "numeric", round=True))
    assert list(rounded.aggregate(np.array([0, 0, 0, 1]))) == [2.0, 2.0, 2.0, 4.0]


def test_ordinal_rank_distance_and_lower_median():
    values = pd.Series(["low", "high", "mid", "mid", "low"])
    qi = encode_quasi_identifier(
        values, spec("level", "ordinal", categories=["low", "mid", "high"])
    )
    assert sq_dist(qi.embedding, 0, 1) == pytest.approx(1.0)  # low..high = (2/2)^2
    assert sq_dist(qi.embedding, 0, 2) == pytest.approx(0.25)  # low..mid = (1/2)^2
    assert list(qi.aggregate(np.array([0, 0, 0, 1, 1]))) == ["mid", "mid", "mid", "low", "low"]


def test_ordinal_natural_order_is_numeric_when_values_are_numbers():
    qi = encode_quasi_identifier(pd.Series(["10", "9", "100"]), spec("n", "ordinal"))
    assert qi.categories == ["9", "10", "100"]


def test_nominal_zero_one_distance_and_mode():
    values = pd.Series(["a", "b", "b", "c"])
    qi = encode_quasi_identifier(values, spec("kind", "nominal", weight=2.0))
    assert sq_dist(qi.embedding, 0, 1) == pytest.approx(2.0)  # weight * 1
    assert sq_dist(qi.embedding, 1, 2) == pytest.approx(0.0)
    assert list(qi.aggregate(np.zeros(4, dtype=np.int64))) == ["b"] * 4


def test_nominal_hierarchy_embedding_realizes_the_hierarchical_distance():
    tree = Hierarchy.from_mapping({"*": {"X": ["a", "b"], "Y": {"Z": ["c"], "W": ["d"]}}})
    values = pd.Series(["a", "b", "c", "d"])
    qi = encode_quasi_identifier(values, spec("dx", "nominal", hierarchy=tree))
    matrix = tree.leaf_distance_matrix(["a", "b", "c", "d"])
    for i in range(4):
        for j in range(4):
            assert sq_dist(qi.embedding, i, j) == pytest.approx(matrix[i, j])
    # medoid of {a, a, c}: a (distance 0+0+1) beats c (1+1+0)
    qi2 = encode_quasi_identifier(pd.Series(["a", "a", "c"]), spec("dx", "nominal", hierarchy=tree))
    assert list(qi2.aggregate(np.zeros(3, dtype=np.int64))) == ["a"] * 3


def test_dates_average_to_a_date():
    values = pd.Series(pd.to_datetime(["2020-01-01", "2020-01-03", "2021-06-01"]))
    qi = encode_quasi_identifier(values, spec("admitted", "date"))
    out = qi.aggregate(np.array([0, 0, 1]))
    assert str(out[0]) == "2020-01-02" and str(out[2]) == "2021-06-01"


def test_missing_policies():
    values = pd.Series(["a", None, "b", None])
    with pytest.raises(DataError, match=r"'kind' has 2 missing.*rows 1, 3"):
        encode_quasi_identifier(values, spec("kind", "nominal", missing="error"))
    qi = encode_quasi_identifier(values, spec("kind", "nominal", missing="category"))
    assert MISSING in qi.categories
    assert list(qi.aggregate(np.array([0, 1, 2, 1]))) == ["a", None, "b", None]
    with pytest.raises(DataError, match="ordinal and nominal attributes only"):
        encode_quasi_identifier(pd.Series([1.0, None]), spec("n", "numeric", missing="category"))
    frame = pd.DataFrame({"a": [1, None, 3], "b": ["x", "y", None]})
    specs = [spec("a", "numeric", missing="exclude-rows"), spec("b", "nominal", missing="error")]
    assert list(rows_to_exclude(frame, specs)) == [False, True, False]


def test_confidential_encodings():
    ordinal, _ = encode_confidential(
        pd.Series(["hi", "lo", "hi"]), spec("r", "ordinal", categories=["lo", "hi"])
    )
    assert list(ordinal) == [1.0, 0.0, 1.0]
    tree = {"*": ["x", "y"]}
    nominal, extra = encode_confidential(
        pd.Series(["x", "y"]), spec("d", "nominal", hierarchy=tree, categories=None)
    )
    assert list(nominal) == ["x", "y"] and extra == {"hierarchy": tree}
    with pytest.raises(
        DataError,
        match=r"1 distinct value\(s\) not in attributes.r.categories \(rows 0; values are not shown",
    ):
        encode_confidential(pd.Series(["mid"]), spec("r", "ordinal", categories=["lo", "hi"]))
