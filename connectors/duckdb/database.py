"""The DuckDB database (:class:`DuckDBDatabase`) and the connector plugin ``duckdb``."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from tclose.connectors.duckdb.catalog import (
    _base_tables,
    _files_globbed,
    _names_read,
    _unlisted_calls,
    _view_select,
)
from tclose.connectors.duckdb.dialect import DRIVER, duckdb_engine
from tclose.connectors.duckdb.session import DuckDBSession
from tclose.connectors.duckdb.types import WIDEST_DECIMAL
from tclose.connectors.sql import (
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    _existing_tables,
    tables_read_through,
    vanishing_table,
)
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl


def _holds_duckdb(path: Path) -> bool:
    """Whether ``path`` is empty or holds DuckDB's magic bytes ``DUCK`` at offset 8 (a missing
    file is the engine's error)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(12)
    except OSError:
        return True
    return not head or head[8:12] == b"DUCK"


class DuckDBDatabase(SQLDatabase):
    """A DuckDB database file (see the module's docstring)."""

    row_level_security = False  # no row-level security: no read is filtered

    session_class = DuckDBSession
    #: DuckDB's MVCC: a transaction reads the snapshot taken when it began.
    declared = dataclasses.replace(
        SQLDatabase.declared, snapshot_reads=True, table_dependencies=True, stream_check=True
    )
    interval_type = True

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
        url = self.url.set(drivername=DRIVER)
        if self.read_only and path != ":memory:":
            # Both DuckDB's argument and its setting: a URL's own ?access_mode= is the setting.
            url = url.update_query_dict({"access_mode": "read_only"})
            return sa.create_engine(url, poolclass=NullPool, connect_args={"read_only": True})
        return sa.create_engine(url, poolclass=NullPool)

    def files(self) -> list[Path]:
        """The database file and its write-ahead log (``.wal``); none in memory."""
        path = self.url.database or ":memory:"
        if path == ":memory:":
            return []
        return [Path(path), Path(path + ".wal")]

    def describe(self, error: BaseException | None, action: str) -> DataError:
        described = super().describe(error, action)
        if "different configuration" in str(error):
            return DataError(
                f"{described} (this process has the file open in another mode: a source is "
                f"opened read-only unless the target is in its database, and DuckDB opens a "
                f"file one way per process; a target in the source's file must be named by "
                f"the source's URL: leave target.url out, or write it as source.url)"
            )
        if "lock" in str(error).lower() and "conflicting lock" in str(error).lower():
            return DataError(
                f"{described} (another process has this DuckDB file open: DuckDB lets one "
                f"process write a file at a time; another tclose run may be using it)"
            )
        return described

    def check_table_name(self, name: TableName, path: str = "target.table") -> None:
        """As :meth:`SQLDatabase.check_table_name`; and a target's file must be a DuckDB
        database: DuckDB also opens a Parquet or CSV file, as views in a database in memory
        (a table published there vanished with the run, which said "published" and exit 0),
        and, with its ``sqlite`` extension, a SQLite file (outside the source = target
        guard, which compares a SQLite file's tables as SQLite names them)."""
        super().check_table_name(name, path)
        database = self.url.database or ":memory:"
        if database != ":memory:" and not _holds_duckdb(Path(database)):
            raise ConfigError(
                f"The file {Path(database).absolute()} is not "
                f"a DuckDB database (DuckDB opens a Parquet, CSV or SQLite file as another kind "
                f"of database, where a published table is not kept, or is not checked). Name "
                f"a DuckDB file; a Parquet file is written through a parquet:/// URL.",
                path=(path.split(".")[0], "url"),
            )

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
        reflected = sa.Table(
            name.name,
            sa.MetaData(),
            *[sa.Column(c["name"], c["type"], primary_key=c["name"] in primary) for c in columns],
            schema=name.schema,
        )
        reflected.info["name"] = name
        return reflected

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

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` in the schema DuckDB's binder places it in: the plan of ``CREATE TABLE
        name`` (``json_serialize_plan``: bound, never run, so a read-only database answers
        too) names the database, the schema and whether the table is temporary; the schema as
        the catalog spells it, the table as an existing one is spelled (``name`` itself for a
        missing one, unless ``create``). Refused
        (:class:`ConfigError`): a name the binder does not place (the ``temp`` catalog, a
        schema that does not exist, the ``system`` catalog: DuckDB's reason is quoted), a
        temporary table, a database without a file (``duckdb_databases()``: ``:memory:``, an
        attached in-memory one), any database but the URL's."""
        with (
            self.errors(f"resolving the table name {name}"),
            self.engine.connect() as connection,
        ):
            database, schema, temporary = self._placed(connection, name, path)
            current, file, spelled = connection.execute(
                sa.text(
                    "SELECT current_database(), (SELECT path FROM duckdb_databases() WHERE "
                    "database_name = :d), (SELECT schema_name FROM duckdb_schemas() WHERE "
                    "database_name = :d AND lower(schema_name) = lower(:s))"
                ),
                {"d": database, "s": schema},
            ).one()
            resolved = TableName(spelled or schema, name.name)
            found = self._catalog_name(connection, resolved) if database == current else None
        if found is None and not create:
            return name
        if temporary or not file:
            where = "a temporary table" if temporary else "kept in memory"
            raise vanishing_table(
                name,
                path,
                f"in DuckDB's database {database!r}, {where} (it has no file)",
                database=database == current,
            )
        if database != current:
            raise ConfigError(
                f"DuckDB places {name} in the database {database!r}, not in the "
                f"URL's ({current!r}); tclose reads and writes the URL's database only.",
                path=tuple(path.split(".")),
            )
        return TableName(*found) if found is not None else resolved

    def _placed(self, connection: Connection, name: TableName, path: str) -> tuple[str, str, bool]:
        """``(database, schema, temporary)`` of ``CREATE TABLE name`` as DuckDB's binder places
        it (the plan of the statement, bound but never run); :class:`ConfigError` quoting
        DuckDB's reason when the binder refuses it."""
        statement = f"CREATE TABLE {self.qualified(name)} (x INTEGER)"
        plan = connection.execute(
            sa.text("SELECT json_serialize_plan(:s)"), {"s": statement}
        ).scalar()
        plan = json.loads(plan) if isinstance(plan, str) else plan
        if not isinstance(plan, dict):
            raise DataError(f"DuckDB gave no plan for {statement}.")
        if plan.get("error"):
            raise ConfigError(
                f"DuckDB does not place {name} in a table kept in the database "
                f"file ({plan.get('error_message')}); a temporary or in-memory table would "
                f"vanish with the run. Name a table of one of the file's schemas (schema.table).",
                path=tuple(path.split(".")),
            )
        info = plan["plans"][0]["info"]
        database, schema, _table = info["qualified_name"]["path"]
        return str(database), str(schema), bool(info.get("temporary"))

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

    def release_of(
        self, connection: Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """The table's schema and name as DuckDB's catalog spells them, and its identity: its
        columns (name, type, nullability) and its content, the row count and the sum of
        DuckDB's ``hash`` of each row's values. DuckDB gives a table no lasting identity (its
        catalog's ids are new each time the file is opened), so the same table is the same
        name holding the same columns and rows."""
        found = self._catalog_name(connection, name)
        if found is None:
            return None
        home = TableName(*found)
        described = connection.execute(
            sa.text(
                "SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE "
                "database_name = current_database() AND schema_name = :s AND table_name = :t "
                "ORDER BY column_index"
            ),
            {"s": home.schema, "t": home.name},
        ).all()
        if not described:  # a view: no table a release can be
            return home, None
        columns = [self.quote(column) for column, _type, _null in described]
        count, total = connection.exec_driver_sql(
            f"SELECT count(*), sum(hash({', '.join(columns)})::HUGEINT) FROM {self.qualified(home)}"
        ).one()
        declared = ", ".join(
            f"{column} {kind}{'' if null else ' not null'}"
            for column, (_name, kind, null) in zip(columns, described, strict=True)
        )
        return home, f"content {count} rows, columns {declared}, hash sum {total}"

    def tables_read(self, name: TableName) -> TablesRead:
        """The identities of ``name`` and, if it is a view, of every table its ``SELECT`` names
        (DuckDB's own parser, ``json_serialize_sql``, gives its base tables), transitively, and
        of every file it reads (``read_parquet('x.parquet')``, ``FROM 'x.csv'``; the identity of
        a Parquet or CSV target, :meth:`tclose.connectors.files.FileDatabase.table_identity`).
        DuckDB keeps no record of what a view reads, and binds its names only when it is read.
        Unknown (:class:`TablesRead`) when a view calls a macro, a client's function or a
        table function that reads what its text names (:func:`_unlisted_calls`)."""
        return tables_read_through(self, name, self._view_reads)

    def _view_reads(
        self, table: TableName, identity: tuple
    ) -> tuple[list[TableName], list, str | None]:
        """The tables and the files the ``SELECT`` of view ``table`` names (none for a table),
        and why the catalog cannot list everything it reads (:func:`_unlisted_calls`)."""
        with self.errors(f"reading the definition of {table}"), self.engine.connect() as c:
            definition = c.execute(
                sa.text(
                    "SELECT sql FROM duckdb_views() WHERE NOT internal AND "
                    "database_name IN (current_database(), 'temp') AND "
                    "lower(schema_name) = :s AND lower(view_name) = :t"
                ),
                {"s": identity[2], "t": identity[3]},
            ).scalar()
            if definition is None:
                return [], [], None
            tree = c.execute(
                sa.text("SELECT json_serialize_sql(:q)"), {"q": _view_select(definition)}
            ).scalar()
            tree = json.loads(tree) if isinstance(tree, str) else tree
            files = _files_globbed(c, _names_read(tree))
            built_in = {
                name
                for name, internal in c.exec_driver_sql(
                    "SELECT lower(function_name), bool_and(internal) FROM duckdb_functions() "
                    "GROUP BY 1"
                )
                if internal
            }
        unlisted = _unlisted_calls(tree, built_in)
        why = (
            f"view {table} calls {', '.join(unlisted)}, whose reads the catalog does not list "
            f"(a macro or a function that reads tables by name)"
            if unlisted
            else None
        )
        return _base_tables(tree), files, why

    def adapt_portable_type(self, generic: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """A float of another database keeps its precision: ``FLOAT`` is 32 bits in DuckDB, so
        a float type of more than 24 bits (or unknown precision) becomes ``DOUBLE``. A decimal
        without precision (PostgreSQL's ``numeric``, SQLite's ``NUMERIC``) becomes
        ``DECIMAL(38,18)`` (DuckDB's plain ``NUMERIC`` is ``DECIMAL(18,3)``, which rounded
        ``1.2345`` to ``1.235``); one of more than 38 digits (MariaDB's ``DECIMAL(65,30)``,
        PostgreSQL's ``numeric(50,10)``), which DuckDB refused with "DECIMAL type width must be
        between 1 and 38", becomes ``DECIMAL(38,s)``, keeping its scale ``s`` (at most 38). A
        value the new type cannot hold exactly is refused when written."""
        if isinstance(generic, sa.Float) and not isinstance(generic, sa.Double):
            bits = generic.precision
            return sa.Double() if bits is None or bits > 24 else generic
        if isinstance(generic, sa.Numeric) and not isinstance(generic, sa.Float):
            if generic.precision is None:
                return sa.Numeric(*WIDEST_DECIMAL)
            widest = WIDEST_DECIMAL[0]
            if generic.precision > widest:
                return sa.Numeric(widest, min(generic.scale or 0, widest))
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
