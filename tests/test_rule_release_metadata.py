"""Rule: the metadata of every column of :func:`tclose.anonymize`'s release is derived from the
published rows alone.

A ``category`` dtype's category list is data: a category names a value someone held. The
release's category list is the values its published rows show, in the input's category order
(an ordered category keeps that order): no category of an excluded row, of a value the
aggregation replaced, of a row held only by an identifier, or of a domain declared beyond the
input's rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tclose

N = 24


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"age": rng.integers(20, 80, N), "zip": rng.integers(1000, 1010, N)})


def _unique_allowed(*columns: str) -> dict:
    """``other`` columns whose values may single a row out (the test is not about linkage)."""
    return {column: {"allow_unique": True} for column in columns}


def _categories(result, column: str) -> list:
    return list(result.data[column].cat.categories)


def _present(result, column: str) -> set:
    return set(result.data[column].dropna())


def test_an_attacker_reads_the_excluded_rows_values_in_the_category_list():
    """Rows whose QI is missing are excluded (``missing: exclude-rows``); the ``other`` column
    ``dx`` of the one excluded row held ``hiv``: its category list must not name it."""
    df = _frame().assign(dx=pd.Categorical(["flu", "cold"] * (N // 2 - 1) + ["flu", "hiv"]))
    df["age"] = df["age"].astype(float)
    df.loc[N - 1, "age"] = np.nan
    result = tclose.anonymize(
        df,
        {"age": {"type": "numeric", "missing": "exclude-rows"}},
        other=_unique_allowed("dx", "zip"),
    )
    assert len(result.data) == N - 1
    assert "hiv" not in _categories(result, "dx")
    assert set(_categories(result, "dx")) == _present(result, "dx") == {"cold", "flu"}


# --- the rule, column by column and role by role ------------------------------------------------


@pytest.mark.parametrize("keep_order", [False, True])
def test_a_frame_cut_from_a_larger_table_names_none_of_the_other_rows_values(keep_order):
    """The frame is one ward's rows of a hospital table whose ``category`` dtypes were made
    on all wards: the release names only what its rows show, in every role."""
    everyone = pd.CategoricalDtype(["cancer", "cold", "flu", "hiv", "sprain"])
    wards = pd.CategoricalDtype(["icu", "oncology", "surgery"])
    grades = pd.CategoricalDtype(["low", "mid", "high", "critical"], ordered=True)
    df = _frame().assign(
        dx=pd.Series(["flu", "cold", "sprain"] * (N // 3), dtype=everyone),
        ward=pd.Series(["surgery"] * N, dtype=wards),
        grade=pd.Series(["low", "high"] * (N // 2), dtype=grades),
    )
    result = tclose.anonymize(
        df,
        {"age": "numeric", "grade": "ordinal"},
        {"dx": "nominal"},
        k=3,
        other=_unique_allowed("ward", "zip"),
        keep_order=keep_order,
    )
    for column in ("dx", "ward", "grade"):
        assert set(_categories(result, column)) == _present(result, column), column
    assert _categories(result, "ward") == ["surgery"]
    assert "hiv" not in _categories(result, "dx") and "cancer" not in _categories(result, "dx")
    grade = result.data["grade"].dtype
    assert grade.ordered and list(grade.categories) == [
        g for g in grades.categories if g in _present(result, "grade")
    ]


def test_a_value_only_an_identifier_holds_is_not_named_by_a_column_sharing_its_dtype():
    """``name`` (dropped) and ``alias`` (published) share one category dtype, the union of
    both: the release's ``alias`` names no one's name."""
    names = [f"person{i}" for i in range(N)]
    shared = pd.CategoricalDtype(names + ["anon-a", "anon-b"])
    df = _frame().assign(
        name=pd.Series(names, dtype=shared),
        alias=pd.Series(["anon-a", "anon-b"] * (N // 2), dtype=shared),
    )
    result = tclose.anonymize(
        df, ["age"], k=3, identifiers=["name"], other=_unique_allowed("alias", "zip")
    )
    assert _categories(result, "alias") == ["anon-a", "anon-b"]


def test_a_qi_category_the_aggregation_replaced_is_not_named():
    """Every cluster publishes one value of ``dx``: the values it replaced in the input are in
    no category of the release, however many rows held them."""
    df = _frame().assign(dx=pd.Categorical(["a"] * 8 + ["b"] * 8 + ["c"] * 8))
    result = tclose.anonymize(
        df, {"age": "numeric", "dx": "nominal"}, k=12, other=_unique_allowed("zip")
    )
    assert set(_categories(result, "dx")) == _present(result, "dx")
    assert len(_present(result, "dx")) < 3
