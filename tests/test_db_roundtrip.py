"""End-to-end runs on SQLite, PostgreSQL and MariaDB: the same tests for each dialect (``db``).

Round trips through the ``tclose`` command, types and NULLs, odd names and schemas, the shuffled
physical order, leftover cleanup, the run lock, and targets in another database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import subprocess
import sys
from decimal import Decimal

import pandas as pd
import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.core.runner import run
from tclose.errors import DataError

QI = ["age", "zip", "length_of_stay"]


def _content(frame: pd.DataFrame, columns: list[str]) -> list[tuple]:
    """Rows of ``columns`` as sortable tuples (NULL shown as ``<NULL>``)."""
    values = frame[columns].astype(object).where(frame[columns].notna(), "<NULL>")
    return sorted(map(tuple, values.itertuples(index=False)))


def test_round_trip_publishes_a_verified_table(db, tmp_path):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source)
    before = db.rows(source, order="patient_id")
    report_path = tmp_path / "report.json"
    config = db.write_config(db.config(source, target))

    assert main(["run", str(config), "--report", str(report_path)]) == 0

    out, src = db.frame(target), db.frame(source)
    assert len(out) == 400
    assert list(out.columns) == [
        "tclose_row",
        "age",
        "zip",
        "admission_day",
        "length_of_stay",
        "procedures",
        "diagnoses",
        "severity",
        "charge",
        "ward",
        "note",
        "code",
    ]
    assert sorted(out["tclose_row"]) == list(range(1, 401))
    assert out.groupby(QI).size().min() >= 3
    # Pass-through columns travel with their row, NULLs included; the confidential values are the
    # source's; the quasi-identifiers are replaced.
    passthrough = ["code", "charge", "ward", "note", "severity", "procedures"]
    assert _content(out, passthrough) == _content(src, passthrough)
    assert out["note"].isna().sum() == src["note"].isna().sum() == 400 // 7
    assert _content(out, QI) != _content(src, QI)

    report = json.loads(report_path.read_text())
    assert report["verification"]["passed"] is True
    assert report["source"]["rows"] == report["target"]["rows"] == 400
    assert {"read", "kernel", "write", "verify", "publish"} <= set(report["timings"])
    assert db.tables() == {source, target}
    assert db.rows(source, order="patient_id") == before
    assert main(["verify", str(config)]) == 0


def test_published_rows_are_stored_in_content_order_not_the_sources(db):
    """Stored in ``tclose_row`` order, the content order (tests/test_rule_release_order.py),
    which for the demo table follows the source keys no more than chance."""
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source)
    assert main(["run", str(db.write_config(db.config(source, target))), "-q"]) == 0

    physical = [int(code[1:]) for (code,) in db.rows(target, "code")]  # no ORDER BY
    rising = sum(b > a for a, b in zip(physical, physical[1:], strict=False)) / (len(physical) - 1)
    assert 0.35 < rising < 0.65, "the stored order still follows the source order"
    stored_keys = [k for (k,) in db.rows(target, "tclose_row")]
    assert stored_keys == sorted(stored_keys)


def _typed_columns(db) -> list[sa.Column]:
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("small_qi", sa.SmallInteger),
        sa.Column("int_qi", sa.Integer),
        sa.Column("conf", sa.Numeric(10, 2)),
        sa.Column("amount", sa.Numeric(12, 2)),
        sa.Column("label", sa.String(40)),
        sa.Column("day", sa.Date),
        sa.Column("at", sa.DateTime),
        sa.Column("flag", sa.Boolean),
        sa.Column("big", sa.BigInteger),
        sa.Column("ratio", sa.Double),
        sa.Column("memo", sa.Text),
    ]


def _typed_rows(n: int = 120) -> list[dict]:
    return [
        {
            "id": i,
            "small_qi": 20 + (i * 7) % 50,
            "int_qi": (i * 13) % 97,
            "conf": Decimal(f"{(i * 37) % 500}.{i % 100:02d}"),
            "amount": None if i % 9 == 0 else Decimal(f"{i * 1000}.25"),
            "label": f"label {i}",
            "day": dt.date(2020, 1, 1) + dt.timedelta(days=i),
            "at": dt.datetime(2021, 5, 4, 3, 2, 1) + dt.timedelta(hours=i),
            "flag": i % 2 == 0,
            "big": 2**62 + i,  # not representable as float64
            "ratio": None if i % 5 == 0 else i / 7,
            "memo": None if i % 4 == 0 else "x" * i,
        }
        for i in range(1, n + 1)
    ]


#: Every column has a declared fate. The typed table's pass-through columns; some are
#: unique per row by design (the test matches output rows to source rows), hence allow_unique.
PASS_THROUGH = {
    c: {"role": "other", "allow_unique": True}
    for c in ("amount", "label", "day", "at", "flag", "big", "ratio", "memo")
}


def test_types_precision_and_nulls_are_preserved(db):
    source, target = db.name("typed"), db.name("typed_anon")
    db.create(source, _typed_columns(db), _typed_rows())
    document = db.config(source, target)
    document["source"]["key"] = "id"
    document["attributes"] = {
        "small_qi": {"role": "quasi_identifier", "type": "numeric", "round": True},
        "int_qi": {"role": "quasi_identifier", "type": "numeric"},
        "conf": {"role": "confidential", "type": "numeric"},
        **PASS_THROUGH,
    }
    assert main(["run", str(db.write_config(document)), "-q"]) == 0

    source_types, target_types = db.column_types(source), db.column_types(target)
    passthrough = ["conf", "amount", "label", "day", "at", "flag", "big", "ratio", "memo"]
    assert {c: target_types[c] for c in passthrough} == {c: source_types[c] for c in passthrough}
    assert target_types["small_qi"] == source_types["small_qi"]  # rounded: integer type kept
    assert "DOUBLE" in target_types["int_qi"].upper()  # a mean, stored in double precision
    out, src = db.frame(target), db.frame(source)
    assert _content(out, passthrough) == _content(src, passthrough)  # exact, 2**62 + i included
    assert all(isinstance(v, int) for v in out["small_qi"])
    assert out.groupby(["small_qi", "int_qi"]).size().min() >= 3


@pytest.fixture
def odd(db):
    """Schema-qualified, oddly named source and target tables; the schema dropped afterwards."""
    odd_schema = f"{db.prefix} Odd Schema"
    schema = {"sqlite": "main", "postgresql": odd_schema, "mysql": None, "duckdb": odd_schema}[
        db.dialect
    ]
    if db.dialect in ("postgresql", "duckdb"):
        db.execute(f"CREATE SCHEMA {db.quote(schema)}")
    if db.dialect == "mysql":
        schema = db.engine.url.database
    db.schemas.append(schema)
    yield schema
    if db.dialect in ("postgresql", "duckdb"):
        db.execute(f"DROP SCHEMA {db.quote(schema)} CASCADE")
        db.schemas.remove(schema)


def test_odd_names_and_schema_qualified_tables(db, odd):
    source, target = db.name("Odd Patients 100%"), db.name("Odd Anon 100%")
    names = {
        "age": "Patient Age",
        "zip": "ZIP",
        "los": "select",
        "charge": "charge %",
        "note": 'note "quoted"',
        "order": "Order",
        "naive": "naïve",
    }
    columns = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)]
    columns += [sa.Column(names[c], sa.Integer) for c in ("age", "zip", "los")]
    columns += [
        sa.Column(names["charge"], sa.Double),
        sa.Column(names["note"], sa.Text),
        sa.Column(names["order"], sa.Integer),
        sa.Column(names["naive"], sa.String(20)),
    ]
    rows = [
        {
            "id": i,
            names["age"]: 20 + i % 60,
            names["zip"]: 10000 + (i * 31) % 900,
            names["los"]: i % 17,
            names["charge"]: float((i * 7919) % 10007),
            names["note"]: None if i % 3 == 0 else f"n{i}",
            names["order"]: i,
            names["naive"]: f"v{i}",
        }
        for i in range(1, 201)
    ]
    db.create(source, columns, rows, schema=odd)
    document = db.config(f"{odd}.{source}", f"{odd}.{target}")
    document["source"]["key"] = "id"
    document["attributes"] = {
        names["age"]: {"role": "quasi_identifier", "type": "numeric", "round": True},
        names["zip"]: {"role": "quasi_identifier", "type": "numeric"},
        names["los"]: {"role": "quasi_identifier", "type": "numeric"},
        names["charge"]: {"role": "confidential", "type": "numeric"},
        # every column has a declared fate; these are unique per row by design here
        **{names[c]: {"role": "other", "allow_unique": True} for c in ("note", "order", "naive")},
    }
    assert main(["run", str(db.write_config(document)), "-q"]) == 0

    out = db.frame(target, schema=odd)
    assert list(out.columns) == ["tclose_row", *[names[c] for c in names]]
    assert len(out) == 200
    assert out.groupby([names["age"], names["zip"], names["los"]]).size().min() >= 3
    kept = [names["charge"], names["note"], names["order"], names["naive"]]
    assert _content(out, kept) == _content(pd.DataFrame(rows), kept)
    assert f"{odd}.{source}" in db.tables() or source in db.tables()
    assert not any("__tclose_" in t for t in db.tables())


def test_tables_named_like_leftovers_are_never_dropped(db, caplog):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    look_alikes = [
        f"{target}__tclose_staging",
        f"{target}__tclose_staging__tclose_map",
        f"{target}__tclose_old",
        f"{target}__tclose_s_0123456789ab",
        f"{target}__tclose_o_0123456789ab",
    ]
    for name in look_alikes:
        db.create(name, [sa.Column("x", sa.Integer)], [{"x": 1}])

    with caplog.at_level("WARNING", logger="tclose"):
        assert run(load_config(db.write_config(db.config(source, target)))).published
        document = db.config(source, target)
        document["target"]["if_exists"] = "replace"
        assert run(load_config(db.write_config(document))).published

    assert db.tables() == {source, target, *look_alikes}
    assert all(db.rows(name) == [(1,)] for name in look_alikes)
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]


def test_a_second_run_on_the_same_target_waits_then_fails(db, monkeypatch):
    from tclose.connectors import sqlite
    from tclose.connectors.mysql import session as mysql
    from tclose.connectors.postgresql import session as postgresql

    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    config = load_config(db.write_config(db.config(source, target)))
    monkeypatch.setattr(postgresql, "LOCK_WAIT_SECONDS", 1)
    monkeypatch.setattr(mysql, "LOCK_WAIT_SECONDS", 1)
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_SECONDS", 0.5)
    if db.dialect == "duckdb":
        # DuckDB has no lock a connection could hold: the operating system's lock on the file
        # excludes any other process (another run) at once, without waiting.
        with (
            _duckdb_held_by_another_process(db.engine.url.database),
            pytest.raises(DataError, match="another process has this DuckDB file open"),
        ):
            run(config)
        assert db.tables() == {source}
        return
    holder = sa.create_engine(db.url, poolclass=sa.pool.NullPool)
    with holder.connect() as connection:  # another run's lock, held by this connection
        if db.dialect == "postgresql":
            connection.exec_driver_sql(
                f"SELECT pg_advisory_lock({postgresql.run_lock_key(f'public.{target}')})"
            )
        elif db.dialect == "mysql":
            schema = db.engine.url.database
            connection.exec_driver_sql(
                f"SELECT GET_LOCK('{mysql.run_lock_name(schema, target)}', 0)"
            )
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        with pytest.raises(DataError, match="Another tclose run|another connection"):
            run(config)
    holder.dispose()
    assert db.tables() == {source}


@contextlib.contextmanager
def _duckdb_held_by_another_process(path: str):
    """A child process with DuckDB file ``path`` open for writing, until the block ends."""
    script = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('open', flush=True); input()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        yield
    finally:
        child.communicate("\n", timeout=30)


def test_dry_run_leaves_nothing(db):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    assert main(["run", str(db.write_config(db.config(source, target))), "--dry-run", "-q"]) == 0
    assert db.tables() == {source}


# --- targets in another database ----------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.mysql
def test_postgresql_source_to_mariadb_target(pg, maria):
    source, target = pg.name("typed"), maria.name("typed_anon")
    pg.create(source, _typed_columns(pg), _typed_rows())
    document = pg.config(source, target)
    document["source"]["key"] = "id"
    document["target"]["url"] = maria.url
    document["attributes"] = {
        "small_qi": {"role": "quasi_identifier", "type": "numeric", "round": True},
        "int_qi": {"role": "quasi_identifier", "type": "numeric"},
        "conf": {"role": "confidential", "type": "numeric"},
        **PASS_THROUGH,
    }
    assert main(["run", str(pg.write_config(document)), "-q"]) == 0

    types = maria.column_types(target)
    assert types["amount"] == "DECIMAL(12, 2)" and types["label"] == "VARCHAR(40)"
    assert types["memo"] == "LONGTEXT" and types["at"] == "DATETIME(6)"
    assert types["big"].startswith("BIGINT") and types["small_qi"].startswith("SMALLINT")
    out, src = maria.frame(target), pg.frame(source)
    out["flag"] = out["flag"].map(bool)  # MariaDB's BOOLEAN is TINYINT(1)
    passthrough = ["conf", "amount", "label", "day", "at", "flag", "big", "ratio", "memo"]
    assert _content(out, passthrough) == _content(src, passthrough)
    assert maria.tables() == {target} and pg.tables() == {source}


@pytest.mark.postgres
def test_sqlite_source_to_postgresql_target(lite, pg):
    source, target = lite.name("patients"), pg.name("anon")
    lite.create_patients(source)
    document = lite.config(source, target)
    document["target"]["url"] = pg.url
    assert main(["run", str(lite.write_config(document)), "-q"]) == 0

    out, src = pg.frame(target), lite.frame(source)
    assert len(out) == 400
    passthrough = ["code", "charge", "ward", "note", "severity"]
    assert _content(out, passthrough) == _content(src, passthrough)
    physical = [int(code[1:]) for (code,) in pg.rows(target, "code")]
    rising = sum(b > a for a, b in zip(physical, physical[1:], strict=False)) / (len(physical) - 1)
    assert 0.35 < rising < 0.65, "a streamed PostgreSQL target must be stored shuffled"
    assert pg.tables() == {target} and lite.tables() == {source}


@pytest.mark.mysql
def test_mariadb_without_snapshot_isolation_streams_from_the_snapshot(maria, monkeypatch):
    from tclose.connectors.mysql import MySQLDatabase

    monkeypatch.setattr(MySQLDatabase, "joins_in_snapshot", property(lambda self: False))
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source)
    assert main(["run", str(maria.write_config(maria.config(source, target))), "-q"]) == 0
    out, src = maria.frame(target), maria.frame(source)
    assert _content(out, ["code", "charge", "note"]) == _content(src, ["code", "charge", "note"])
    assert maria.tables() == {source, target}
