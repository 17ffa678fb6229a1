"""The Python API, tclose.anonymize, on DataFrames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.demo import QI_COLUMNS, discharge_table
from tclose.errors import ConfigError, DataError


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return discharge_table(300, seed=5)


@pytest.mark.parametrize("algorithm", ["t-first", "merge", "k-first"])
def test_anonymize_gives_k_anonymous_t_close_data(table, algorithm):
    result = tclose.anonymize(
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
    assert "name" not in data.columns and list(data.index) == list(table.index)
    assert data.groupby(list(QI_COLUMNS[:4])).size().min() >= 4
    assert (data["charge"] == table["charge"]).all()
    assert result.report["privacy"]["t_achieved"]["charge"] <= 0.2 + 1e-9
    assert result.report["verification"]["passed"]


def test_mapping_form_and_options(table):
    result = tclose.anonymize(
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
    result = tclose.anonymize(table, quasi_identifiers=["age", "zip"], k=5, algorithm="mdav")
    sizes = np.bincount(result.labels)
    assert sizes.min() >= 5 and sizes.max() <= 9


def test_round_keeps_integers(table):
    result = tclose.anonymize(
        table,
        quasi_identifiers={"age": {"type": "numeric", "round": True}},
        confidential=["charge"],
        k=3,
        t=0.3,
    )
    assert np.allclose(result.data["age"], np.rint(result.data["age"]))


def test_errors_name_the_problem(table):
    with pytest.raises(ConfigError, match="'weight' is not in the DataFrame"):
        tclose.anonymize(table, quasi_identifiers=["weight"], confidential=["charge"], t=0.2)
    with pytest.raises(ConfigError, match=r"The 't' parameter must be in \(0, 1\]. Got 1.5"):
        tclose.anonymize(table, quasi_identifiers=["age"], confidential=["charge"], t=1.5)
    with pytest.raises(ConfigError, match="needs t"):
        tclose.anonymize(table, quasi_identifiers=["age"], confidential=["charge"])
    with_nan = table.copy()
    with_nan.loc[[1, 2, 3], "age"] = np.nan
    with pytest.raises(DataError, match="'age' has 3 missing"):
        tclose.anonymize(with_nan, quasi_identifiers=["age"], confidential=["charge"], t=0.2)
    with pytest.raises(DataError, match="fewer than k"):
        tclose.anonymize(
            table.head(3), quasi_identifiers=["age"], confidential=["charge"], k=4, t=0.2
        )
