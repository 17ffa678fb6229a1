"""The run plan on its own: built from a configuration and a reflected SQLite table, no run.

Also the one parser of what a run protects (``parse_settings``), shared by YAML and the API, and
the default distances declared by the distance plugins.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.base.config import parse_config, parse_settings
from tclose.base.registry import load_registry
from tclose.core.plan import JOIN, STREAM, build_plan, resolve_plugins
from tclose.errors import ConfigError, DataError
from tclose.naming import ROW_COLUMN, STAGING_MARK, TableName


@pytest.fixture(scope="module")
def registry():
    return load_registry(entry_points=False)


def _create(path: Path, table: str = "people", primary_key: bool = True) -> None:
    key = "id INTEGER PRIMARY KEY" if primary_key else "id INTEGER"
    with sqlite3.connect(path) as connection:
        connection.execute(
            f"CREATE TABLE {table} ({key}, name TEXT, age REAL, zip INTEGER, "
            f"diagnosis TEXT, salary REAL)"
        )
        connection.executemany(
            f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)",
            [
                (i, f"p{i}", 20 + i, 1000 + i % 3, "flu" if i % 2 else "cold", 10.0 * i)
                for i in range(12)
            ],
        )
    connection.close()


def _document(path: Path, **changes) -> dict:
    document = {
        "source": {"url": f"sqlite:///{path}", "table": "people"},
        "target": {"table": "people_anon"},
        "attributes": {
            "name": "identifier",
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "zip": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "diagnosis": {"role": "confidential", "type": "nominal"},
            "salary": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 3, "t": 0.5},
    }
    for key, value in changes.items():
        document[key] = value
    return document


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "people.db"
    _create(path)
    return path


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        names = {r[0] for r in rows}
    connection.close()
    return names


def test_the_plan_of_a_same_database_run(source, registry):
    plan = build_plan(parse_config(_document(source)), registry, run_id="abc123" * 4)
    # every name as the database resolves it: SQLite's main database (tests/test_rule_names.py)
    assert (plan.source, plan.target) == (
        TableName("main", "people"),
        TableName("main", "people_anon"),
    )
    assert plan.staging == TableName("main", "people_anon" + STAGING_MARK + "abc123abc123")
    assert plan.audit is None
    # key omitted: the single-column primary key, dropped with the identifier
    assert plan.key == "id" and plan.config.source.key == "id"
    assert plan.output_columns == ["age", "zip", "diagnosis", "salary"]
    assert plan.columns == [ROW_COLUMN, "age", "zip", "diagnosis", "salary"]
    assert plan.numeric == ["age", "zip"] and plan.rounded == ["zip"]
    assert plan.write == JOIN and plan.joined and plan.target_db is plan.source_db
    assert not plan.replace and not plan.dry_run
    # the built-in audit_table plugin's hook runs inside SQLite's publishing transaction
    assert plan.audit_in_publish
    assert plan.resolved.algorithm.name == "t-first"
    distances = {c: d.name for c, (d, _) in plan.resolved.distances.items()}
    assert distances == {"diagnosis": "nominal-ranking", "salary": "emd-ordered"}
    assert [c.name for c in plan.staging_table.columns] == plan.columns
    assert plan.staging_table.comment == f"tclose run {plan.run_id}"
    assert _tables(source) == {"people"}  # deciding writes nothing


def test_keep_key_and_no_primary_key(tmp_path, registry):
    keyed = tmp_path / "keyed.db"
    _create(keyed)
    plan = build_plan(parse_config(_document(keyed, output={"keep_key": True})), registry)
    assert plan.key == "id" and plan.output_columns[0] == "id"
    bare = tmp_path / "bare.db"
    _create(bare, primary_key=False)
    document = _document(bare)
    document["attributes"]["id"] = "other"
    # no key and no primary key: SQLite's rowid identifies the rows and is never published
    plan = build_plan(parse_config(document), registry)
    assert plan.key is None and plan.config.source.key is None
    assert plan.output_columns == ["id", "age", "zip", "diagnosis", "salary"]
    with pytest.raises(ConfigError, match="no key column to keep"):
        build_plan(parse_config({**document, "output": {"keep_key": True}}), registry)


def test_a_target_in_another_database_is_streamed(source, tmp_path, registry):
    other = tmp_path / "other.db"
    other.touch()  # an empty file is an empty SQLite database
    document = _document(source, target={"url": f"sqlite:///{other}", "table": "out"})
    plan = build_plan(parse_config(document), registry)
    assert plan.write == STREAM and not plan.joined
    assert plan.target_db is not plan.source_db


@pytest.mark.parametrize("spelling", ["PEOPLE", "main.people", "MAIN.People"])
def test_the_source_named_another_way_is_refused(source, registry, spelling):
    document = _document(source, target={"table": spelling, "if_exists": "replace"})
    with pytest.raises(ConfigError, match="is the source table"):
        build_plan(parse_config(document), registry)


def test_an_existing_target(source, registry):
    with sqlite3.connect(source) as connection:
        connection.execute("CREATE TABLE people_anon (x INTEGER)")
    connection.close()
    with pytest.raises(DataError, match="already exists and target.if_exists is 'fail'"):
        build_plan(parse_config(_document(source)), registry)
    assert build_plan(parse_config(_document(source)), registry, dry_run=True).dry_run
    replacing = _document(source, target={"table": "people_anon", "if_exists": "replace"})
    for dry_run in (False, True):  # a table tclose did not publish is never replaced
        with pytest.raises(
            ConfigError, match="table people_anon exists and is not a release tclose"
        ):
            build_plan(parse_config(replacing), registry, dry_run=dry_run)
    replacing["target"]["table"] = "people_new"
    assert build_plan(parse_config(replacing), registry).replace


def test_columns_without_a_fate(source, registry):
    document = _document(source)
    document["attributes"]["height"] = {"role": "quasi_identifier"}
    with pytest.raises(DataError, match=r"Column 'height' \(attributes.height\) does not exist"):
        build_plan(parse_config(document), registry)
    document = _document(source)
    del document["attributes"]["salary"]
    with pytest.raises(ConfigError, match="no role: salary"):
        build_plan(parse_config(document), registry)
    document = _document(source)
    document["attributes"]["id"] = {"role": "quasi_identifier"}
    with pytest.raises(ConfigError, match="row key of the source"):
        build_plan(parse_config(document), registry)


def test_plugins_are_resolved_before_any_connection(tmp_path, registry):
    missing = tmp_path / "no" / "such.db"  # no source at all: the plugin error comes first
    with pytest.raises(ConfigError, match="Unknown algorithm 'nope'"):
        build_plan(parse_config(_document(missing, algorithm={"name": "nope"})), registry)
    with pytest.raises(ConfigError, match="does not enforce t-closeness"):
        build_plan(parse_config(_document(missing, algorithm={"name": "mdav"})), registry)


def test_audit_table_and_report_files(source, tmp_path, registry):
    plan = build_plan(parse_config(_document(source, report={"table": "audit"})), registry)
    assert plan.audit == TableName("main", "audit")
    with pytest.raises(ConfigError, match="audit table people is the source"):
        build_plan(parse_config(_document(source, report={"table": "people"})), registry)
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": 1}')
    with pytest.raises(ConfigError, match="not a report of tclose"):
        build_plan(parse_config(_document(source)), registry, report_path=str(foreign))


# --- one parser: YAML and the API -----------------------------------------------------------------


def test_the_api_and_yaml_parse_alike():
    yaml_settings = parse_settings(
        {
            "attributes": {
                "age": {"role": "quasi_identifier", "type": "numeric"},
                "salary": {"role": "confidential", "type": "numeric"},
            },
            "privacy": {"k": 3, "t": 0.25},
            "algorithm": {"name": "merge", "options": {"partner": "nearest"}},
        }
    )
    assert yaml_settings.k == 3 and yaml_settings.t == 0.25 and yaml_settings.algorithm == "merge"
    assert yaml_settings.attributes["salary"].distance is None  # the registry's default
    frame = pd.DataFrame({"age": np.arange(12.0), "salary": np.arange(12.0)})
    for bad_k in (0, True, 2.5):
        with pytest.raises(ConfigError, match="'k' parameter must be an integer >= 1") as yaml:
            parse_settings({**_minimal(), "privacy": {"k": bad_k}})
        with pytest.raises(ConfigError, match="'k' parameter must be an integer >= 1") as api:
            tclose.anonymize(frame, ["age"], ["salary"], k=bad_k)
        assert str(yaml.value) == str(api.value)
    with pytest.raises(ConfigError, match="at least one attribute with role confidential"):
        parse_settings({**_minimal(), "privacy": {"k": 2, "t": 0.5}})
    with pytest.raises(ConfigError, match="at least one attribute with role confidential"):
        tclose.anonymize(frame, ["age"], other=["salary"], k=2, t=0.5)


def _minimal() -> dict:
    return {"attributes": {"age": "quasi_identifier"}, "privacy": {"k": 2}}


def test_default_distances_come_from_the_plugins(registry):
    assert registry.default_distance("numeric") == "emd-ordered"
    assert registry.default_distance("date") == "emd-ordered"
    assert registry.default_distance("nominal") == "nominal-ranking"
    with pytest.raises(ConfigError, match="No distance plugin is the default for colour"):
        registry.default_distance("colour")
    settings = parse_settings(
        {
            "attributes": {"q": "quasi_identifier", "v": {"role": "confidential"}},
            "privacy": {"k": 2, "t": 0.5},
        }
    )
    resolved = resolve_plugins(settings, registry)
    assert resolved.distances["v"][0].name == "emd-ordered"
