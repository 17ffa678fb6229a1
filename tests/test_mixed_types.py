"""Mixed-type tables end to end: nominal, ordinal and date attributes, hierarchies, NULLs.

The data imitate sdcMicro's household survey test data (categorical QIs such as urban/rural,
roof, sex, relationship, education; a numeric income and a nominal water-source attribute as
confidential), generated here.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose
from tclose.app.cli import main

EDUCATION = ["none", "primary", "secondary", "tertiary"]
WATER_TREE = {
    "any": {
        "piped": ["piped_inside", "piped_yard", "public_tap"],
        "well": ["protected_well", "open_well"],
        "other": ["river", "vendor"],
    }
}
WATER = [
    "piped_inside",
    "piped_yard",
    "public_tap",
    "protected_well",
    "open_well",
    "river",
    "vendor",
]


def household_table(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    urban = rng.integers(0, 2, n)
    education = rng.choice(4, n, p=[0.2, 0.4, 0.3, 0.1])
    water = np.where(urban == 1, rng.choice(3, n), rng.choice(np.arange(2, 7), n))
    start = dt.date(2023, 1, 1)
    return pd.DataFrame(
        {
            "hid": np.arange(1, n + 1),
            "head_name": [f"person {i}" for i in range(n)],
            "urbrur": np.where(urban == 1, "urban", "rural"),
            "roof": rng.choice(["metal", "tile", "thatch", "concrete"], n),
            "sex": rng.choice(["female", "male"], n),
            "age": rng.integers(15, 90, n),
            "education": np.array(EDUCATION)[education],
            "interview": [start + dt.timedelta(days=int(d)) for d in rng.integers(0, 365, n)],
            "income": np.round(rng.lognormal(7 + 0.3 * education + 0.3 * urban, 0.6), 2),
            "water": np.array(WATER)[water],
            "weight": rng.uniform(50, 150, n).round(1),
        }
    )


def write_sqlite(frame: pd.DataFrame, path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE households (hid INTEGER PRIMARY KEY, head_name TEXT, urbrur TEXT, "
            "roof TEXT, sex TEXT, age INTEGER, education TEXT, interview DATE, income REAL, "
            "water TEXT, weight REAL)"
        )
        rows = [(*r[:7], r[7].isoformat(), *r[8:]) for r in frame.itertuples(index=False)]
        connection.executemany("INSERT INTO households VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)


def config(path, algorithm: str, **extra_attributes) -> dict:
    attributes = {
        "head_name": {"role": "identifier"},
        "urbrur": {"role": "quasi_identifier", "type": "nominal"},
        "roof": {"role": "quasi_identifier", "type": "nominal"},
        "sex": {"role": "quasi_identifier", "type": "nominal", "weight": 0.5},
        "age": {"role": "quasi_identifier", "type": "numeric", "round": True},
        "education": {"role": "quasi_identifier", "type": "ordinal", "categories": EDUCATION},
        "interview": {"role": "quasi_identifier", "type": "date"},
        "income": {"role": "confidential", "type": "numeric"},
        "water": {"role": "confidential", "type": "nominal", "hierarchy": WATER_TREE},
        # every column has a declared fate; 1,001 weights over 200 rows single out
        # most rows (the linkage check), which this test is not about
        "weight": {"role": "other", "allow_unique": True},
    }
    attributes.update(extra_attributes)
    return {
        "source": {"url": f"sqlite:///{path}", "table": "households", "key": "hid"},
        "target": {"table": "households_anon", "if_exists": "replace"},
        "attributes": attributes,
        "privacy": {"k": 4, "t": 0.3},
        "algorithm": {"name": algorithm},
    }


def tv_emd(cluster: np.ndarray, whole: np.ndarray) -> float:
    values = np.unique(whole)
    return 0.5 * sum(abs((cluster == v).mean() - (whole == v).mean()) for v in values)


@pytest.mark.parametrize("algorithm", ["t-first", "merge", "k-first"])
def test_mixed_types_run_end_to_end_from_yaml(tmp_path, sqlite_run, algorithm):
    frame = household_table(300, seed=2)
    database = tmp_path / "households.db"
    write_sqlite(frame, database)
    report_path = tmp_path / "report.json"
    path = sqlite_run.write(config(database, algorithm))

    assert main(["run", str(path), "--report", str(report_path)]) == 0

    with sqlite3.connect(database) as connection:
        out = pd.read_sql("SELECT * FROM households_anon", connection)
    assert len(out) == 300 and "head_name" not in out.columns
    qis = ["urbrur", "roof", "sex", "age", "education", "interview"]
    sizes = out.groupby(qis).size()
    assert sizes.min() >= 4
    assert set(out["roof"]) <= {"metal", "tile", "thatch", "concrete"}
    assert set(out["education"]) <= set(EDUCATION)
    assert all(dt.date.fromisoformat(v) for v in out["interview"])
    assert (out["age"] == out["age"].round()).all()
    assert sorted(out["water"]) == sorted(frame["water"])
    # Independent check of t for the nominal attribute: total variation is an upper bound of the
    # hierarchical EMD, so check the hierarchical one with the tree: piped/well/other groups.
    report = json.loads(report_path.read_text())
    assert report["privacy"]["distance"] == {"income": "emd-ordered", "water": "nominal-ranking"}
    assert report["privacy"]["t_achieved"]["water"] <= 0.3 + 1e-9
    assert report["verification"]["passed"]
    group = {leaf: top for top, leaves in WATER_TREE["any"].items() for leaf in leaves}
    coarse = out["water"].map(group).to_numpy()
    for _, rows in out.groupby(qis).groups.items():
        # moving mass between top-level groups costs 1 in this tree: a lower bound of the EMD
        assert tv_emd(coarse[out.index.get_indexer(rows)], coarse) <= 0.3 + 1e-9


def test_missing_values_are_set_aside_or_kept_as_a_category(tmp_path, sqlite_run):
    frame = household_table(200, seed=3)
    database = tmp_path / "households.db"
    write_sqlite(frame, database)
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE households SET age = NULL WHERE hid IN (1, 2, 3)")
        connection.execute("UPDATE households SET roof = NULL WHERE hid IN (10, 11)")
    document = config(database, "t-first")
    path = sqlite_run.write(document)
    assert main(["run", str(path)]) == 3  # default policy: error, naming the column

    document["attributes"]["age"]["missing"] = "exclude-rows"
    document["attributes"]["roof"]["missing"] = "category"
    report_path = tmp_path / "r.json"
    assert main(["run", str(sqlite_run.write(document)), "--report", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["source"]["rows"] == 200
    assert report["source"]["rows_set_aside"] == 3
    assert report["source"]["rows_set_aside_by_column"] == {"age": 3}
    assert report["target"]["rows"] == 197
    with sqlite3.connect(database) as connection:
        out = pd.read_sql("SELECT * FROM households_anon", connection)
    assert len(out) == 197
    assert sorted(out["income"]) == sorted(frame["income"][3:])


def test_missing_error_names_column_and_count(tmp_path, sqlite_run, capsys):
    frame = household_table(50, seed=4)
    database = tmp_path / "households.db"
    write_sqlite(frame, database)
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE households SET water = NULL WHERE hid IN (5, 7)")
    assert main(["run", str(sqlite_run.write(config(database, "t-first")))]) == 3
    err = capsys.readouterr().err
    assert "'water'" in err and "2 missing" in err and "rows 5, 7" in err


def test_unknown_hierarchy_value_names_its_row_not_its_value(tmp_path, sqlite_run, capsys):
    frame = household_table(50, seed=5)
    frame.loc[3, "water"] = "rain_tank"
    database = tmp_path / "households.db"
    write_sqlite(frame, database)
    assert main(["run", str(sqlite_run.write(config(database, "t-first")))]) == 3
    err = capsys.readouterr().err
    assert "rain_tank" not in err
    assert "1 distinct value(s) are not leaves" in err and "(rows " in err


def test_hierarchy_from_a_csv_file_next_to_the_config(tmp_path, sqlite_run):
    frame = household_table(120, seed=6)
    database = tmp_path / "households.db"
    write_sqlite(frame, database)
    lines = [f"{leaf};{top};any" for top, leaves in WATER_TREE["any"].items() for leaf in leaves]
    (tmp_path / "water.csv").write_text("\n".join(lines) + "\n")
    document = config(database, "merge")
    document["attributes"]["water"]["hierarchy"] = "water.csv"
    assert main(["run", str(sqlite_run.write(document))]) == 0


def test_anonymize_api_with_mapping_specs():
    frame = household_table(200, seed=7)
    result = tclose.anonymize(
        frame,
        quasi_identifiers={
            "urbrur": "nominal",
            "age": "numeric",
            "education": {"type": "ordinal", "categories": EDUCATION},
        },
        confidential={"water": {"type": "nominal", "hierarchy": WATER_TREE}},
        k=5,
        t=0.35,
        algorithm="t-first",
        identifiers=["head_name", "hid"],
        # every column has a role; income is unique per row by design here, and
        # the interview date and weight single out rows with the others
        other={
            "roof": {},
            "sex": {},
            "interview": {"allow_unique": True},
            "weight": {"allow_unique": True},
            "income": {"allow_unique": True},
        },
    )
    assert result.data.groupby(["urbrur", "age", "education"]).size().min() >= 5
    assert result.report["privacy"]["t_achieved"]["water"] <= 0.35 + 1e-9
    assert result.report["algorithm"]["info"]["stratified_by"] == "water"


@st.composite
def mixed_tables(draw):
    n = draw(st.integers(6, 50))
    k = draw(st.integers(2, 5))
    rows = draw(
        st.lists(
            st.tuples(
                st.sampled_from("abc"),
                st.integers(0, 3),
                st.sampled_from(EDUCATION),
                st.sampled_from("xyz"),
                st.integers(0, 5),
            ),
            min_size=n,
            max_size=n,
        )
    )
    frame = pd.DataFrame(rows, columns=["kind", "size", "education", "label", "score"])
    return frame, min(k, n), draw(st.sampled_from([0.1, 0.3, 0.6]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_tables(), st.sampled_from(["t-first", "merge", "k-first"]))
def test_mixed_type_properties(table, algorithm):
    frame, k, t = table
    result = tclose.anonymize(
        frame,
        quasi_identifiers={
            "kind": "nominal",
            "size": "numeric",
            "education": {"type": "ordinal", "categories": EDUCATION},
        },
        confidential={"label": "nominal", "score": "numeric"},
        k=k,
        t=t,
        algorithm=algorithm,
    )
    classes = result.data.groupby(["kind", "size", "education"]).ngroup().to_numpy()
    assert np.bincount(classes).min() >= k
    for c in np.unique(classes):
        # the release is shuffled; its own label column is what is published
        members = result.data["label"].to_numpy()[classes == c]
        assert tv_emd(members, frame["label"].to_numpy()) <= t + 1e-9
