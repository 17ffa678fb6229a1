"""Adversarial: ``tclose.anonymize`` in the hands of a careless user or an attacker.

The release (``result.data``) carries nothing of the input's index, its rows are shuffled, its
values keep their meaning (a time zone, a date outside the nanosecond range) and its dtypes say
nothing the rows do not; ``result.labels`` follows the input rows by position; bad input is a
:class:`tclose.errors.TcloseError` naming the column, never a pandas or NumPy traceback and never
an index label (which may be a person's id); the input frame is never modified.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.errors import ConfigError, DataError

N = 24


def frame(n: int = N) -> pd.DataFrame:
    """Two numeric QIs with repeats and a confidential column."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 70, n),
            "zip": rng.integers(1000, 1006, n),
            "charge": rng.integers(1, 5, n) * 100,
        }
    )


def anonymize(df: pd.DataFrame, **kwargs) -> tclose.AnonymizationResult:
    """``tclose.anonymize`` with the defaults of these tests; the input must come out unchanged,
    whether the call succeeds or raises."""
    kwargs.setdefault("quasi_identifiers", ["age", "zip"])
    kwargs.setdefault("confidential", ["charge"])
    kwargs.setdefault("k", 3)
    before = df.copy(deep=True)
    try:
        return tclose.anonymize(df, **kwargs)
    finally:
        pd.testing.assert_frame_equal(df, before, check_exact=True)
        assert df.index.equals(before.index) and df.index.names == before.index.names


def ssn_index(n: int = N) -> pd.Index:
    return pd.Index([f"123-45-{6000 + i}" for i in range(n)], name="ssn")


@pytest.mark.parametrize(
    "index",
    [
        ssn_index(),
        pd.Index([i // 2 for i in range(N)]),  # duplicate labels
        pd.MultiIndex.from_arrays([[f"p{i}" for i in range(N)], range(N)], names=["id", "n"]),
        pd.Index(range(N - 1, -1, -1), name="person"),  # unsorted integers, named
    ],
    ids=["ssn", "duplicates", "multiindex", "reversed"],
)
def test_the_release_and_report_carry_nothing_of_the_index(index):
    df = frame().set_axis(index, axis=0)
    result = anonymize(df, seed=1)
    assert isinstance(result.data.index, pd.RangeIndex) and result.data.index.name is None
    assert list(result.data.columns) == ["age", "zip", "charge"]
    assert "123-45-" not in json.dumps(result.report, allow_nan=False)
    # labels follow the input rows by position: the rows of one cluster publish one QI tuple
    reference = anonymize(frame(), seed=1)
    assert (result.labels == reference.labels).all()
    kept = anonymize(df, keep_order=True)
    assert kept.data.index.equals(df.index)
    for label in np.unique(kept.labels):
        rows = kept.data.iloc[np.flatnonzero(kept.labels == label)]
        assert len(rows) >= 3 and len(rows[["age", "zip"]].drop_duplicates()) == 1


def test_error_messages_number_rows_by_position_not_by_index_label():
    df = frame().set_axis(ssn_index(), axis=0).astype({"age": float})
    df.iloc[4, 0] = np.nan
    with pytest.raises(DataError, match=r"'age' has 1 missing .*rows 4\)") as error:
        anonymize(df)
    assert "123-45-" not in str(error.value)
    df = frame().set_axis(ssn_index(), axis=0).assign(s=["a", "b"] * (N // 2))
    df.iloc[3, 3] = "x"
    with pytest.raises(DataError, match=r"rows 3; values are not shown") as error:
        anonymize(
            df,
            quasi_identifiers={
                "age": "numeric",
                "s": {"type": "nominal", "categories": ["a", "b"]},
            },
            other=["zip"],
        )
    assert "123-45-" not in str(error.value)


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True])
def test_a_bad_seed_is_a_config_error(seed):
    with pytest.raises(ConfigError, match="seed must be a non-negative integer"):
        anonymize(frame(), seed=seed)
