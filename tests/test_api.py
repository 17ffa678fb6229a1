"""The Python API, tclose.anonymize, on DataFrames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.app.demo import QI_COLUMNS, discharge_table
from tclose.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    # Every column needs a role: the tests keep the columns they use.
    return discharge_table(300, seed=5).drop(
        columns=["patient_id", "procedures", "diagnoses", "severity", "ward"]
    )


def anon(df, quasi_identifiers, confidential=(), *args, identifiers=(), **kwargs):
    """tclose.anonymize with every column the call does not name passed through (``other``,
    allowed to be unique: these tests are not about the linkage check)."""
    named = {*quasi_identifiers, *confidential, *identifiers}
    other = {c: {"allow_unique": True} for c in df.columns if c not in named}
    return tclose.anonymize(
        df, quasi_identifiers, confidential, *args, identifiers=identifiers, other=other, **kwargs
    )


@pytest.mark.parametrize("algorithm", ["t-first", "merge", "k-first"])
def test_anonymize_gives_k_anonymous_t_close_data(table, algorithm):
    result = anon(
        table,
        quasi_identifiers=list(QI_COLUMNS[:4]),
        confidential=["charge"],
        k=4,
        t=0.2,
        algorithm=algorithm,
        identifiers=["name"],
    )
    assert result.labels.shape == (300,)
    assert np.bincount(result.labels).min() >= 4
    data = result.data
    # the release is shuffled with a fresh index
    assert "name" not in data.columns and isinstance(data.index, pd.RangeIndex)
    assert data.groupby(list(QI_COLUMNS[:4])).size().min() >= 4
    assert sorted(data["charge"]) == sorted(table["charge"])
    assert result.report["privacy"]["t_achieved"]["charge"] <= 0.2 + 1e-9
    assert result.report["verification"]["passed"]


def test_mapping_form_and_options(table):
    result = anon(
        table,
        quasi_identifiers={"age": "numeric", "zip": {"type": "numeric"}},
        confidential={"charge": "numeric"},
        k=3,
        t=0.25,
        algorithm="merge",
        partner="min-emd",
    )
    assert result.report["algorithm"]["options"]["partner"] == "min-emd"
    assert np.bincount(result.labels).min() >= 3


def test_mdav_without_t(table):
    result = anon(table, quasi_identifiers=["age", "zip"], k=5, algorithm="mdav")
    sizes = np.bincount(result.labels)
    assert sizes.min() >= 5 and sizes.max() <= 9


def test_round_keeps_integers(table):
    result = anon(
        table,
        quasi_identifiers={"age": {"type": "numeric", "round": True}},
        confidential=["charge"],
        k=3,
        t=0.3,
    )
    assert np.allclose(result.data["age"], np.rint(result.data["age"]))


def test_errors_name_the_problem(table):
    with pytest.raises(ConfigError, match="'weight' is not in the DataFrame"):
        anon(table, quasi_identifiers=["weight"], confidential=["charge"], t=0.2)
    with pytest.raises(ConfigError, match=r"The 't' parameter must be in \(0, 1\]. Got 1.5"):
        anon(table, quasi_identifiers=["age"], confidential=["charge"], t=1.5)
    with pytest.raises(ConfigError, match="needs t"):
        anon(table, quasi_identifiers=["age"], confidential=["charge"], algorithm="t-first")
    with_nan = table.copy()
    with_nan.loc[[1, 2, 3], "age"] = np.nan
    with pytest.raises(DataError, match="'age' has 3 missing"):
        anon(with_nan, quasi_identifiers=["age"], confidential=["charge"], t=0.2)
    with pytest.raises(DataError, match="fewer than k"):
        anon(table.head(3), quasi_identifiers=["age"], confidential=["charge"], k=4, t=0.2)


def test_duplicate_or_non_string_column_labels_are_refused_by_name(table):
    """A frame with two columns of one name, or with labels that are not strings, gets a
    ConfigError that names the columns (not an AttributeError or 'not in the DataFrame')."""
    frame = table[["age", "charge"]].copy()
    doubled = pd.concat([frame, frame[["age"]]], axis=1)
    with pytest.raises(ConfigError, match="2 columns named 'age'"):
        tclose.anonymize(doubled, ["age"], ["charge"], t=0.3)
    numbered = frame.set_axis([0, 1], axis=1)
    with pytest.raises(ConfigError, match=r"column labels must be strings.*0 \(int\)"):
        tclose.anonymize(numbered, [0], [1], t=0.3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (lambda n: pd.Timestamp("2020-01-01") + pd.to_timedelta(np.arange(n), unit="D"), "dates"),
        (lambda n: pd.to_timedelta(np.arange(n), unit="h"), "durations"),
    ],
)
@pytest.mark.parametrize("role", ["quasi_identifiers", "confidential"])
def test_dates_or_durations_declared_numeric_are_refused(table, values, message, role):
    """A list of columns means numeric attributes: a ``datetime64`` (or ``timedelta64``) column
    named there is a DataError naming the column and the type to declare, never published as float
    nanoseconds."""
    frame = table[["age", "zip", "charge"]].copy()
    frame["when"] = values(len(frame))
    names = {"quasi_identifiers": ["age", "zip"], "confidential": ["charge"]}
    names[role] = [*names[role], "when"]
    with pytest.raises(DataError, match=f"'when' is declared numeric but holds {message}"):
        tclose.anonymize(frame, names["quasi_identifiers"], names["confidential"], k=5, t=0.5)
    if message == "dates":
        declared = {c: "numeric" for c in names[role]} | {"when": "datetime"}
        names[role] = declared
        result = tclose.anonymize(
            frame, names["quasi_identifiers"], names["confidential"], k=5, t=0.5
        )
        assert result.data["when"].dtype.kind == "M"
