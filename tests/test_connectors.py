"""The connector contract (tclose.connector), the generic SQLAlchemy connector and check_connector,
on SQLite and the real PostgreSQL and MariaDB servers (see conftest.py)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from tclose.base.config import load_config
from tclose.base.registry import load_registry
from tclose.connector import Connector, Database, Session, protocol_members
from tclose.connectors.duckdb import DuckDBConnector
from tclose.connectors.mysql import MySQLConnector
from tclose.connectors.postgresql import PostgreSQLConnector
from tclose.connectors.sql import Session as GenericSession
from tclose.connectors.sql import SQLAlchemyConnector, SQLDatabase, TableName
from tclose.connectors.sqlite import SQLiteConnector
from tclose.core.runner import run
from tclose.errors import ConfigError, DataError
from tclose.testing import ConformanceError, check_connector

BUILT_IN = {
    "sqlite": SQLiteConnector,
    "postgresql": PostgreSQLConnector,
    "mysql": MySQLConnector,
    "duckdb": DuckDBConnector,
}
#: Significant digits of the fixture's decimals: SQLite stores NUMERIC as a 64-bit float.
DIGITS = {"sqlite": 15, "postgresql": 30, "mysql": 30, "duckdb": 30}


def _url(db) -> str:
    if db.dialect == "sqlite":
        sqlite3.connect(db.url.removeprefix("sqlite:///")).close()  # tclose never creates files
    return db.url


def test_every_built_in_connector_passes_check_connector(db):
    check_connector(BUILT_IN[db.dialect](), _url(db), decimal_digits=DIGITS[db.dialect])
    assert db.tables() == set()


def test_the_generic_connector_passes_check_connector_on_every_server(db):
    if db.dialect == "duckdb":
        # duckdb-engine reflects tables with PostgreSQL catalog queries that DuckDB cannot run
        # (pg_collation, regclass): the generic connector cannot read a DuckDB table's columns.
        # The duckdb connector reads DuckDB's own catalog instead; shown here, then stop.
        with pytest.raises(ConformanceError):
            check_connector(SQLAlchemyConnector(), _url(db), decimal_digits=DIGITS[db.dialect])
        return
    check_connector(SQLAlchemyConnector(), _url(db), decimal_digits=DIGITS[db.dialect])
    assert db.tables() == set()


def test_built_ins_and_generic_follow_the_protocols(lite):
    for connector in (SQLiteConnector(), SQLAlchemyConnector()):
        assert isinstance(connector, Connector)
        database = connector.connect(_url(lite))
        assert all(hasattr(database, m) for m in protocol_members(Database))
        with database.session(read_only=True) as session:
            assert all(hasattr(session, m) for m in protocol_members(Session))


class _LossyDatabase(SQLDatabase):
    """Stores every float as 32 bits (a DOUBLE written as REAL), which the verification must
    catch."""

    def adapt_portable_type(self, generic):
        return sa.REAL() if isinstance(generic, sa.Double) else generic


class _LeakySession(GenericSession):
    """Never drops its staging table (on SQLite through pysqlite, CREATE TABLE commits)."""

    def end(self) -> None:
        if self.transaction is not None and self.transaction.is_active:
            self.transaction.rollback()


class _LeakyDatabase(SQLDatabase):
    session_class = _LeakySession


class _Make:
    def __init__(self, cls):
        self.cls, self.name, self.dialects = cls, cls.__name__, ("*",)

    def connect(self, url, password_file=None):
        return self.cls(url, password_file)


def test_check_connector_catches_doubles_stored_as_32_bit(pg):
    with pytest.raises(ConformanceError, match="read_rows: column '(qi|dbl)' holds|out of range"):
        check_connector(_Make(_LossyDatabase), pg.url)
    assert pg.tables() == set()


def test_check_connector_catches_a_staging_table_left_after_a_failure(lite):
    with pytest.raises(ConformanceError, match="failure while filling: the staging table"):
        check_connector(_Make(_LeakyDatabase), _url(lite), decimal_digits=15)


def test_unknown_dialects_go_to_the_generic_connector_only_if_sqlalchemy_has_them():
    registry = load_registry(entry_points=False)
    assert registry.connector_for("oracle").name == "sqlalchemy"
    assert registry.connector_for("sqlite").name == "sqlite"
    with pytest.raises(ConfigError, match="SQLAlchemy has no dialect of that name"):
        registry.connector_for("nosuchdb")
    with pytest.raises(DataError, match="No driver for oracle"):
        registry.connector_for("oracle").connect("oracle+oracledb://u@h/db")


@pytest.mark.parametrize(
    ("source_type", "dialect", "stored"),
    [
        (sqlite.REAL(), postgresql.dialect(), "DOUBLE PRECISION"),  # SQLite REAL is 64-bit
        (postgresql.REAL(), mysql.dialect(), "DOUBLE"),  # widening a 32-bit float is exact
        (mysql.DOUBLE(), sqlite.dialect(), "DOUBLE"),
        (postgresql.NUMERIC(30, 10), sqlite.dialect(), "NUMERIC(30, 10)"),
        (postgresql.TIMESTAMP(timezone=True), postgresql.dialect(), "TIMESTAMP WITH TIME ZONE"),
        (postgresql.TIMESTAMP(), mysql.dialect(), "DATETIME(6)"),
    ],
)
def test_portable_types_lose_no_precision(source_type, dialect, stored):
    database = SQLDatabase.__new__(SQLDatabase)  # no connection: only the dialect is needed
    database.dialect = dialect.name
    database.engine = SimpleNamespace(dialect=dialect)  # type: ignore[assignment]
    assert database.portable_type(source_type, "c").compile(dialect=dialect) == stored


def _generic_registry():
    """The built-ins without the sqlite and postgresql connectors: the generic one serves them."""
    registry = load_registry(entry_points=False)
    for name in ("sqlite", "postgresql"):
        del registry.connectors[name]
    return registry


def test_a_run_through_the_generic_connector_publishes_a_verified_table(sqlite_run):
    registry = _generic_registry()
    assert registry.connector_for("sqlite").name == "sqlalchemy"
    config = load_config(sqlite_run.write(sqlite_run.config()))
    result = run(config, registry=registry)
    assert result.published and result.verification.passed
    assert result.report["plugins"]["connector:sqlalchemy"].startswith("tclose ")
    assert len(sqlite_run.rows("discharges_anon")) == 400
    assert not any("__tclose_s_" in t for t in sqlite_run.tables())


def test_generic_postgresql_run_keeps_pass_through_types_exactly(pg):
    source, target = pg.name("src"), pg.name("dst")
    pg.create_patients(source, n=120)
    pg.execute(
        f"ALTER TABLE {pg.quote(source)} ADD COLUMN precise NUMERIC(30, 10), "
        f"ADD COLUMN stamp TIMESTAMP(6), ADD COLUMN ratio DOUBLE PRECISION"
    )
    pg.execute(
        f"UPDATE {pg.quote(source)} SET precise = 12345678901234567890.0123456789 + patient_id, "
        f"stamp = TIMESTAMP '2024-02-29 13:45:07.123456' + patient_id * INTERVAL '1 microsecond',"
        f" ratio = 1.0 / (patient_id + 3)"
    )
    document = pg.config(source, target)
    for column in ("precise", "stamp", "ratio"):
        document["attributes"][column] = {"role": "other", "allow_unique": True}
    result = run(load_config(pg.write_config(document)), registry=_generic_registry())
    assert result.published
    assert pg.column_types(target)["precise"] == "NUMERIC(30, 10)"
    assert pg.column_types(target)["ratio"] == "DOUBLE PRECISION"
    assert pg.column_types(target)["stamp"] == "TIMESTAMP(6) WITHOUT TIME ZONE"
    columns = "code, precise, stamp, ratio"
    assert sorted(pg.rows(target, columns)) == sorted(pg.rows(source, columns))
    key, precise, stamp, _ratio = pg.rows(source, "patient_id, precise, stamp, ratio", "1")[0]
    assert precise == Decimal(f"{12345678901234567890 + key}.0123456789")
    assert stamp == dt.datetime(2024, 2, 29, 13, 45, 7, 123456) + dt.timedelta(microseconds=key)
    assert (precise, stamp) in {r[1:3] for r in pg.rows(target, columns)}


def test_generic_publish_refuses_a_table_that_lost_rows(lite):
    database = SQLAlchemyConnector().connect(_url(lite))
    columns = [sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.Integer)]
    lite.create(lite.name("src"), columns, [{"id": 1, "v": 5}])
    source = database.table(TableName(None, lite.name("src")))
    staging = database.staging_table(TableName(None, lite.name("stg")), source, ["v"], ())
    with (
        pytest.raises(DataError, match="holds 1 rows, 2 were written"),
        database.session(staging) as session,
    ):
        session.fill_streamed(staging, [[(5,)]])
        session.rows_written = 2  # as if a row went missing in the rename
        session.publish(TableName(None, lite.name("stg")), TableName(None, lite.name("t")), False)
    assert lite.tables() == {lite.name("src")}


def test_generic_session_drops_its_staging_table_when_its_connection_broke(lite):
    database = SQLAlchemyConnector().connect(_url(lite))
    lite.create(lite.name("src"), [sa.Column("id", sa.Integer, primary_key=True)], [{"id": 1}])
    source = database.table(TableName(None, lite.name("src")))
    staging = database.staging_table(TableName(None, lite.name("stg")), source, [], ())
    with pytest.raises(RuntimeError, match="interrupted"), database.session(staging) as session:
        assert lite.name("stg") in lite.tables()  # pysqlite committed the CREATE TABLE
        session.connection.invalidate()  # as an interrupt can leave it
        raise RuntimeError("interrupted")
    assert lite.tables() == {lite.name("src")}
