"""The example third-party connector (examples/tclose-sqlitewal), installed as a distribution,
passes check_connector and runs a YAML configuration through its entry point. CI installs it
(.ci/run); locally the tests skip unless it is installed
(`python3 -m pip install ./examples/tclose-sqlitewal`)."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.testing import check_connector


@pytest.fixture(scope="module", autouse=True)
def _installed(require_example):
    require_example("tclose-sqlitewal", "connector")


@pytest.fixture(autouse=True)
def _opted_in(monkeypatch):
    """The suite disables plugin autoload (conftest.py); these tests load the example by name."""
    monkeypatch.setenv("TCLOSE_PLUGINS", "sqlitewal")


def test_entry_point_registers_the_connector_with_its_distribution():
    registry = load_registry()
    provided = registry.connectors["sqlitewal"]
    assert (provided.provider, provided.version, provided.plugin) == (
        "tclose-sqlitewal",
        "0.1.0",
        "sqlitewal",
    )
    assert registry.connector_for("sqlitewal") is provided.obj


def test_the_registered_connector_passes_check_connector(tmp_path):
    path = tmp_path / "check.db"
    sqlite3.connect(path).close()
    connector = load_registry().connector_for("sqlitewal")
    check_connector(connector, f"sqlitewal:///{path}", decimal_digits=15)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_a_config_runs_through_the_example_connector(sqlite_run, tmp_path):
    document = sqlite_run.config()
    document["source"]["url"] = f"sqlitewal:///{sqlite_run.db}"
    document["report"] = {"json": str(tmp_path / "r.json")}

    assert main(["run", str(sqlite_run.write(document))]) == 0

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["plugins"]["connector:sqlitewal"] == "tclose-sqlitewal 0.1.0"
    assert report["verification"]["passed"] is True
    assert len(sqlite_run.rows("discharges_anon")) == 400
    assert not any("__tclose_s_" in t for t in sqlite_run.tables())
