"""Connector plugin ``duckdb``: DuckDB database files through ``duckdb-engine`` (extra ``[duckdb]``).

URLs: ``duckdb:///relative/path.duckdb``, ``duckdb:////absolute/path.duckdb``. tclose never
creates a database file (as for SQLite); ``duckdb:///:memory:`` is a fresh, empty database.

What DuckDB gives, and so what a run gets:

- Snapshot: a writing session is one transaction for the whole run — pass-1 read, staging table,
  helper tables, ``INSERT ... SELECT ... JOIN``, verification read-back, ``DROP`` + ``ALTER TABLE
  ... RENAME`` — committed at publish. DuckDB's MVCC gives the transaction a snapshot taken at its
  start and its DDL is transactional: the staging table is never visible to another connection,
  and a killed run leaves nothing (DuckDB's write-ahead log holds no uncommitted change).
- Run lock: a DuckDB file opened for writing is locked by the operating system for the whole
  process, so a run in another process fails at once with "could not set lock" (no waiting).
  Two runs in one process share the database: DuckDB's optimistic concurrency then lets one of
  two conflicting publications fail at commit ("Transaction conflict"), and nothing of the loser
  is published.
- Reads: results stream from DuckDB in chunks (``fetchmany``), in key order.
- Bulk writes: rows are handed to DuckDB as a pandas DataFrame it scans in place (``INSERT ...
  SELECT`` from the registered frame), never row by row (``executemany`` is slow in DuckDB).
- Types: read from DuckDB's own catalog (``duckdb_columns()``), so a type stays exactly what it
  was: ``DOUBLE`` stays ``DOUBLE``, ``DECIMAL(p,s)``, ``TIMESTAMP``, ``TIMESTAMP WITH TIME ZONE``,
  ``HUGEINT``, lists and structs included (a type without a generic SQLAlchemy equivalent can be
  published only into DuckDB).

Parquet and CSV files are read and written through the same machinery by
:mod:`tclose.connectors.files`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import registry as dialect_registry
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from tclose.errors import DataError
from tclose.hookspecs import hookimpl

from .sql import (  # noqa: F401 (NativeType: re-exported, it was defined here)
    NativeType,
    Session,
    SQLDatabase,
    TableName,
    _connection,
    _existing_tables,
    driver_connection,
    random_suffix,
)

try:  # the [duckdb] extra; without it, connecting says which package to install
    import duckdb_engine
except ImportError:  # pragma: no cover - exercised only without the extra
    duckdb_engine = None  # type: ignore[assignment]

#: The SQLAlchemy driver name under which :class:`QuotingDialect` is registered.
DRIVER = "duckdb+tclose"


if duckdb_engine is not None:

    class QuotingPreparer(duckdb_engine.DuckDBIdentifierPreparer):
        """Quotes every identifier: ``duckdb-engine`` knows PostgreSQL's reserved words, not
        DuckDB's (a column named ``at`` would break a ``CREATE TABLE``)."""

        def _requires_quotes(self, value: str) -> bool:
            return True

    class QuotingDialect(duckdb_engine.Dialect):
        """``duckdb-engine``'s dialect with :class:`QuotingPreparer`, and without PostgreSQL's
        63-character limit on names (DuckDB has none)."""

        supports_statement_cache = False
        preparer = QuotingPreparer
        max_identifier_length = 1 << 16

        def _check_max_identifier_length(self, connection: Any) -> int | None:
            return None

        def get_columns(
            self, connection: Any, table_name: str, schema: str | None = None, **_kw: Any
        ) -> list[Any]:
            """The columns from DuckDB's catalog (``duckdb-engine`` asks PostgreSQL's
            ``pg_collation``, which DuckDB does not have), with :func:`duckdb_type` types."""
            rows = connection.execute(
                sa.text(
                    "SELECT column_name, data_type, is_nullable, column_default "
                    "FROM duckdb_columns() WHERE lower(schema_name) = lower(:s) "
                    "AND lower(table_name) = lower(:t) AND NOT internal ORDER BY column_index"
                ),
                {"s": schema or "main", "t": table_name},
            ).fetchall()
            return [
                {"name": n, "type": duckdb_type(t), "nullable": bool(null), "default": default}
                for n, t, null, default in rows
            ]

    dialect_registry.register("duckdb.tclose", __name__, "QuotingDialect")


#: DuckDB type names (as ``duckdb_columns()`` spells them) that have an exact SQLAlchemy type
#: which ``duckdb-engine`` compiles back to the same DuckDB type.
_GENERIC: dict[str, Any] = {
    "BOOLEAN": sa.Boolean,
    "SMALLINT": sa.SmallInteger,
    "INTEGER": sa.Integer,
    "BIGINT": sa.BigInteger,
    "FLOAT": sa.REAL,
    "DOUBLE": sa.Double,
    "VARCHAR": sa.String,
    "BLOB": sa.LargeBinary,
    "DATE": sa.Date,
    "TIME": sa.Time,
    "TIMESTAMP": sa.DateTime,
    "TIMESTAMP WITH TIME ZONE": lambda: sa.DateTime(timezone=True),
    "UUID": sa.Uuid,
    "INTERVAL": sa.Interval,
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


def duckdb_type(name: str) -> sa.types.TypeEngine:
    """The SQLAlchemy type of DuckDB type ``name`` (as ``duckdb_columns().data_type`` gives it)."""
    decimal = _DECIMAL.fullmatch(name)
    if decimal:
        return sa.Numeric(int(decimal.group(1)), int(decimal.group(2)))
    factory = _GENERIC.get(name)
    return factory() if factory is not None else NativeType(name)


class DuckDBSession(Session):
    """A DuckDB session: one transaction on one connection (see the module's docstring)."""

    database: DuckDBDatabase

    def insert_arrays(
        self, table: sa.Table, arrays: Mapping[str, np.ndarray], chunk_size: int = 50_000
    ) -> None:
        """One ``INSERT ... SELECT`` from the arrays, scanned by DuckDB in place."""
        import pandas as pd

        frame = pd.DataFrame({f"c{i}": np.asarray(a) for i, a in enumerate(arrays.values())})
        self.insert_frame(table, list(arrays), frame)

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Rows as a DataFrame of Python objects (no pandas conversion: an integer column with
        NULLs stays integers), which DuckDB scans and casts to the column types; ``Decimal``
        values go as text, so that no precision depends on the values DuckDB samples."""
        import pandas as pd

        if not rows:
            return
        data: dict[str, Any] = {}
        for i, values in enumerate(zip(*rows, strict=True)):
            if any(isinstance(v, Decimal) for v in values):
                values = tuple(None if v is None else str(v) for v in values)
            data[f"c{i}"] = pd.Series(values, dtype=object)
        self.insert_frame(table, columns, pd.DataFrame(data))

    def insert_frame(self, table: sa.Table, columns: Sequence[str], frame: Any) -> None:
        """``INSERT INTO table (columns) SELECT c0, c1, ... FROM`` the registered ``frame``."""
        view = f"tclose_frame_{random_suffix()}"
        raw = driver_connection(self.connection)
        selected = [sa.cast(sa.column(f"c{i}"), table.c[c].type) for i, c in enumerate(columns)]
        statement = table.insert().from_select(
            list(columns), sa.select(*selected).select_from(sa.table(view))
        )
        with self.database.errors(f"writing {table.fullname}"):
            raw.register(view, frame)
            try:
                self.connection.execute(statement)
            except BaseException as error:
                # After a failed statement DuckDB refuses everything until ROLLBACK, this too:
                # that refusal must not replace the reason the statement failed.
                with contextlib.suppress(Exception):
                    raw.unregister(view)
                if isinstance(error, sa.exc.DBAPIError):
                    raise self._named(error, table, columns) from None
                raise
            raw.unregister(view)

    def _named(self, error: sa.exc.DBAPIError, table: sa.Table, columns: Sequence[str]):
        """The :class:`DataError` of a failed :meth:`insert_frame`, which also says which
        column each ``c<i>`` of DuckDB's message (the frame's columns) is."""
        described = self.database.describe(error.orig, f"writing {table.fullname}")
        text = str(error.orig)
        source = re.findall(r"source column c(\d+)\b", text)  # the column the cast failed on
        cited = sorted({int(i) for i in source or re.findall(r"\bc(\d+)\b", text)})
        named = [f"c{i} is column {columns[i]!r}" for i in cited if i < len(columns)]
        return DataError(f"{described} ({'; '.join(named)})") if named else described


class DuckDBDatabase(SQLDatabase):
    """A DuckDB database file (see the module's docstring)."""

    session_class = DuckDBSession
    #: DuckDB's MVCC: a transaction reads the snapshot taken when it began.
    snapshot_reads = True

    @property
    def joins_in_snapshot(self) -> bool:
        """Yes: a same-database target is joined inside the source's snapshot."""
        return True

    def create_engine(self) -> Engine:
        if duckdb_engine is None:
            raise DataError(
                "DuckDB support is not installed: pip install 'tclose[duckdb]' "
                "(the duckdb and duckdb-engine packages)."
            )
        path = self.url.database or ":memory:"
        if path != ":memory:" and not Path(path).is_file():
            absolute = Path(path).absolute()
            raise DataError(
                f"The DuckDB database file {absolute} does not exist"
                + (" (it is a folder)" if absolute.is_dir() else "")
                + "; tclose never creates a database file. Check the URL (duckdb:///relative/"
                "path or duckdb:////absolute/path), or create the file first (python -c "
                f"\"import duckdb; duckdb.connect('{path}')\")."
            )
        return sa.create_engine(self.url.set(drivername=DRIVER), poolclass=NullPool)

    def describe(self, error: BaseException | None, action: str) -> DataError:
        described = super().describe(error, action)
        if "lock" in str(error).lower() and "conflicting lock" in str(error).lower():
            return DataError(
                f"{described} (another process has this DuckDB file open: DuckDB lets one "
                f"process write a file at a time; another tclose run may be using it)"
            )
        return described

    def table(self, name: TableName, connection: Connection | None = None) -> sa.Table:
        """The table (or view) with its columns and primary key as DuckDB's catalog gives them
        (``duckdb-engine``'s PostgreSQL-style reflection does not work on DuckDB)."""
        with (
            self.errors(f"reading the definition of table {name}"),
            _connection(self.engine, connection) as bound,
        ):
            found = self._catalog_name(bound, name)
            if found is None:
                inspector = sa.inspect(bound)
                raise DataError(
                    f"Table {name} does not exist in {self.redacted_url}. "
                    f"{_existing_tables(inspector, name.schema)}"
                )
            schema, table = found
            columns = self.engine.dialect.get_columns(bound, table, schema)
            keys = bound.execute(
                sa.text(
                    "SELECT constraint_column_names FROM duckdb_constraints() "
                    "WHERE schema_name = :s AND table_name = :t AND constraint_type = 'PRIMARY KEY'"
                ),
                {"s": schema, "t": table},
            ).fetchall()
        primary = set(keys[0][0]) if keys else set()
        return sa.Table(
            name.name,
            sa.MetaData(),
            *[sa.Column(c["name"], c["type"], primary_key=c["name"] in primary) for c in columns],
            schema=name.schema,
        )

    def _catalog_name(self, bound: Connection, name: TableName) -> tuple[str, str] | None:
        """``(schema, table)`` as DuckDB's catalog spells the table or view ``name`` (DuckDB
        matches names without case), searching the schema ``main`` when none is given."""
        row = bound.execute(
            sa.text(
                "SELECT schema_name, table_name FROM duckdb_tables() "
                "WHERE lower(schema_name) = lower(:s) AND lower(table_name) = lower(:t) "
                "AND database_name = current_database() "
                "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
                "WHERE lower(schema_name) = lower(:s) AND lower(view_name) = lower(:t) "
                "AND NOT internal AND database_name IN (current_database(), 'temp')"
            ),
            {"s": name.schema or "main", "t": name.name},
        ).first()
        return (row[0], row[1]) if row else None

    def table_identity(self, name: TableName) -> tuple | None:
        """The database file (device and inode) and the table name as DuckDB's catalog spells
        it, in lower case (DuckDB compares names without case)."""
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            found = self._catalog_name(connection, name)
        if found is None:
            return None
        path = self.url.database or ":memory:"
        if path == ":memory:":
            where: tuple = ("memory", id(self.engine))
        else:
            stat = os.stat(path)
            where = ("file", stat.st_dev, stat.st_ino)
        return ("duckdb", where, found[0].lower(), found[1].lower())

    def adapt_portable_type(self, generic: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """A float of another database keeps its precision: ``FLOAT`` is 32 bits in DuckDB, so
        a float type of more than 24 bits (or unknown precision) becomes ``DOUBLE``."""
        if isinstance(generic, sa.Float) and not isinstance(generic, sa.Double):
            bits = generic.precision
            return sa.Double() if bits is None or bits > 24 else generic
        return generic


class DuckDBConnector:
    """Connector for DuckDB files (``duckdb:///path/to/file.duckdb`` URLs)."""

    name = "duckdb"
    dialects = ("duckdb",)

    def connect(self, url: str, password_file: str | None = None) -> DuckDBDatabase:
        return DuckDBDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(DuckDBConnector())
