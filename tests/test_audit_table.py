"""The built-in audit-table plugin (``report.table``): one row per run, queryable with SQL."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid

import pytest
import sqlalchemy as sa

import tclose
from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.core.runner import run
from tclose.errors import VerificationError
from tclose.plugins.audit_table import COLUMNS, append_report, audit_row

SERVERS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test",
}


def _rows(helpers, table="tclose_audit"):
    with sqlite3.connect(helpers.db) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(r) for r in connection.execute(f'SELECT * FROM "{table}" ORDER BY started_at')]


def test_each_run_appends_one_row(sqlite_run, tmp_path):
    document = sqlite_run.config()
    document["report"] = {"table": "tclose_audit", "json": str(tmp_path / "r.json")}
    config = sqlite_run.write(document)
    assert main(["run", str(config), "--dry-run"]) == 0
    assert main(["run", str(config)]) == 0

    rows = _rows(sqlite_run)
    assert len(rows) == 2
    assert list(rows[0]) == list(COLUMNS)
    dry, real = rows
    assert (dry["dry_run"], dry["published"], real["dry_run"], real["published"]) == (1, 0, 0, 1)
    report = json.loads((tmp_path / "r.json").read_text())
    assert real["run_id"] == report["run"]["id"] != dry["run_id"]
    assert real["config_sha256"] == report["config_sha256"]
    assert (real["k"], real["k_achieved"], real["rows_in"], real["rows_out"]) == (
        3,
        report["privacy"]["k_achieved"],
        400,
        400,
    )
    assert real["t"] == 0.2 and real["t_achieved"] == report["privacy"]["t_achieved"]["charge"]
    assert real["verified"] == 1 and real["algorithm"] == "t-first"
    assert real["source_table"] == "discharges" and real["target_table"] == "discharges_anon"
    assert json.loads(real["report"])["run"]["id"] == real["run_id"]


def test_a_failed_verification_is_recorded(sqlite_run, singletons_registry):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "singletons"}
    document["report"] = {"table": "tclose_audit"}
    registry = singletons_registry
    with pytest.raises(VerificationError):
        run(load_config(sqlite_run.write(document)), registry=registry)
    (row,) = _rows(sqlite_run)
    assert (row["verified"], row["published"], row["k_achieved"]) == (0, 0, 1)
    assert "discharges_anon" not in sqlite_run.tables()


def test_an_incompatible_table_is_refused_before_any_work(sqlite_run, capsys):
    """An audit table whose row could not be written is refused before any work, in a dry run as in
    a publish (``test_audit_in_publish``)."""
    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("CREATE TABLE tclose_audit (run_id TEXT PRIMARY KEY, note TEXT)")
    document = sqlite_run.config()
    document["report"] = {"table": "tclose_audit"}
    config = str(sqlite_run.write(document))
    for dry_run in (["--dry-run"], []):
        assert main(["run", config, *dry_run]) == 2
        err = capsys.readouterr().err
        assert "==> At report ==> At key: table" in err
        assert "lacks the column(s) started_at" in err and "Nothing was written" in err
        assert "partitioning" not in err
    assert "discharges_anon" not in sqlite_run.tables()
    with sqlite3.connect(sqlite_run.db) as connection:
        assert connection.execute("SELECT count(*) FROM tclose_audit").fetchone() == (0,)


def test_no_table_configured_writes_nothing(sqlite_run):
    assert main(["run", str(sqlite_run.write(sqlite_run.config()))]) == 0
    assert "tclose_audit" not in sqlite_run.tables()


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory):
    from tclose.app.demo import discharge_table

    frame = discharge_table(60, seed=2)[["age", "zip", "charge"]]  # every column a role
    return tclose.anonymize(frame, ["age", "zip"], ["charge"], k=3, t=0.3).report


def _server_engine(name: str) -> sa.Engine:
    engine = sa.create_engine(SERVERS[name])
    try:
        with engine.connect():
            pass
    except Exception as error:  # no server, or no driver
        engine.dispose()
        message = f"{name} server at {SERVERS[name]} unavailable: {type(error).__name__}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs it: {message}")
        pytest.skip(message)
    return engine


@pytest.mark.parametrize(
    "server",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def test_audit_table_on_database_servers(server, sample_report):
    engine = _server_engine(server)
    table = f"tclose_audit_{uuid.uuid4().hex[:8]}"
    first = {**sample_report, "run": {**sample_report["run"], "id": uuid.uuid4().hex}}
    second = {**sample_report, "run": {**sample_report["run"], "id": uuid.uuid4().hex}}
    try:
        append_report(engine, table, first)
        append_report(engine, table, second)
        with engine.connect() as connection:
            rows = connection.execute(sa.text(f"SELECT run_id, k, verified, report FROM {table}"))
            rows = rows.all()
            if server == "postgresql":  # the report is JSONB: queryable in SQL
                k_values = (
                    connection.execute(
                        sa.text(f"SELECT (report->'privacy'->>'k')::int FROM {table}")
                    )
                    .scalars()
                    .all()
                )
                assert k_values == [3, 3]
        assert {r.run_id for r in rows} == {first["run"]["id"], second["run"]["id"]}
        assert all(r.k == 3 and bool(r.verified) for r in rows)
        stored = rows[0].report if isinstance(rows[0].report, dict) else json.loads(rows[0].report)
        assert stored["privacy"]["k_achieved"] == sample_report["privacy"]["k_achieved"]
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        engine.dispose()


def test_audit_row_maps_the_report():
    report = {
        "run": {"id": "ab", "started": "2024-05-01T10:00:00Z", "published": True},
        "privacy": {"k": 5, "t": 0.1, "k_achieved": 6, "t_achieved": {"a": 0.05, "b": 0.09}},
        "verification": {"passed": True},
    }
    row = audit_row(report)
    assert row["t_achieved"] == 0.09 and row["started_at"].year == 2024
    assert row["published"] is True and row["dry_run"] is False and row["finished_at"] is None
