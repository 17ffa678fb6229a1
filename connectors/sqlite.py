"""Connector plugin ``sqlite``: SQLite files through Python's ``sqlite3``.

A writing session is one ``BEGIN IMMEDIATE`` transaction for the whole run — pass-1 read, staging
table, helper tables, ``INSERT ... SELECT``, verification read-back, ``DROP`` + ``ALTER TABLE ...
RENAME`` — committed at publish. ``IMMEDIATE`` takes the database's write lock at once, so no
other connection can change the source between the reads and the write (other writers wait or
get "database is locked"; readers go on). A killed run leaves a hot journal that SQLite rolls
back when the file is next opened: nothing of the run stays. A read-only session is a deferred
transaction with ``PRAGMA query_only``; its shared lock (or WAL snapshot) keeps its reads
consistent. ``tclose_row`` is declared ``INTEGER PRIMARY KEY`` (the rowid), so rows are stored in
new-key order. Bulk writes are ``executemany`` inside the transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import re
import sqlite3
import urllib.parse
import uuid
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool, StaticPool

from tclose.connector import TablesRead
from tclose.connectors.releases import content_identity, marked_run
from tclose.connectors.sql import (
    DriverSession,
    NativeType,
    SQLDatabase,
    TableName,
    _connection,
    driver_connection,
    vanishing_table,
)
from tclose.errors import DataError
from tclose.hookspecs import hookimpl

#: Seconds a connection waits for another connection's write lock.
BUSY_TIMEOUT_SECONDS = 30
#: The side files SQLite keeps next to a database file (write-ahead log, its index, rollback
#: journal): part of the database, as much as the file itself.
SIDE_FILES = ("-wal", "-shm", "-journal")

#: The mark a run adds at the end of its staging table's definition, naming the run (SQLite
#: keeps no comments). Only at the end: a column, which comes before the constraints, may be
#: named like it.
_RUN_MARK = r"CONSTRAINT tclose_run_([0-9a-f]{32}) CHECK \(1\)\s*\)\s*\Z"


class SQLiteSession(DriverSession):
    """A SQLite session: one transaction on one connection."""

    placeholder = "?"

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its declared type, as written in the table's definition (``PRAGMA
        table_info``; SQLite keeps any text there)."""
        schema = self.database.quote(table.schema) + "." if table.schema else ""
        rows = self.execute(f"PRAGMA {schema}table_info({self.database.quote(table.name)})")
        return {str(row[1]): str(row[2]) for row in rows}

    def begin(self, staging: sa.Table | None) -> None:
        if staging is None:
            if self.read_only:
                self.execute("PRAGMA query_only = ON")
            self.execute("BEGIN")
            return
        self.execute("BEGIN IMMEDIATE")
        run_id = staging.info.get("run_id")
        if run_id and not any(c.name == f"tclose_run_{run_id}" for c in staging.constraints):
            # SQLite keeps no table comment: the run id lives in a no-op constraint's name, in
            # the published table's definition (see SQLiteDatabase.table_comment).
            staging.append_constraint(sa.CheckConstraint("1", name=f"tclose_run_{run_id}"))
        self.prepare_staging(staging)

    def content_order(self, columns: Sequence[sa.ColumnElement]) -> list[sa.ColumnElement]:
        """Each value in SQLite's order (NULL, numbers by value, text, blobs), text by its
        bytes whatever the column's collation (``COLLATE BINARY``); then by its storage class,
        which tells an integer ``1`` from a real ``1.0`` in a column that holds both."""
        keys: list[sa.ColumnElement] = []
        for column in columns:
            # COLLATE applies to the column's text, whatever its declared type.
            as_text = sa.type_coerce(column, sa.String())
            keys += [as_text.collate("BINARY"), sa.func.typeof(column)]
        return keys

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """``executemany``; values ``sqlite3`` cannot bind (``Decimal``, dates and times, UUIDs,
        from another database) are stored as their text, as SQLAlchemy's SQLite types do.

        Raises:
            DataError: a value SQLite would change, naming the column and counting the rows: a
                float NaN (stored as NULL), or a decimal of more than 15 significant digits
                (a column of NUMERIC affinity keeps 15) that is not a 64-bit integer.
        """
        for i, values in enumerate(zip(*rows)):
            _refuse_changed(values, columns[i], table.c[columns[i]].type)
        if any(not isinstance(v, _BINDABLE) for row in rows for v in row):
            text = [isinstance(table.c[c].type, sa.String) for c in columns]
            rows = [tuple(_bindable(v, t) for v, t in zip(row, text, strict=True)) for row in rows]
        self.execute("SAVEPOINT tclose_rows")  # executemany stops at a row, after the others
        try:
            super().insert_rows(table, columns, rows)
        except OverflowError:  # sqlite3 binds integers of 64 bits only
            self.execute("ROLLBACK TO tclose_rows")
            super().insert_rows(table, columns, self.beyond_64_bits(table, columns, rows))
        self.execute("RELEASE tclose_rows")

    def beyond_64_bits(
        self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]
    ) -> list[tuple]:
        """``rows`` with each integer outside SQLite's signed 64-bit range (e.g. a MariaDB
        ``BIGINT UNSIGNED``) as its text, where its column is text; :class:`DataError` naming
        the first other column that holds one, and how many."""
        low, high = _INT64
        wide = set()
        for i, column in enumerate(columns):
            count = sum(isinstance(r[i], int) and not low <= r[i] <= high for r in rows)
            if count and isinstance(table.c[column].type, sa.String):
                wide.add(i)
            elif count:
                raise DataError(
                    f"Column {column!r} holds integers beyond SQLite's signed 64-bit range "
                    f"({count} of the {len(rows)} rows of the batch being written), which "
                    f"SQLite cannot store exactly. Publish into another kind of "
                    f"database, or drop the column (role: identifier)."
                )
        return [
            tuple(str(v) if i in wide and v is not None else v for i, v in enumerate(r))
            for r in rows
        ]

    def refuse_unstreamable(
        self, name: TableName, columns: Sequence[str], target_dialect: str
    ) -> None:
        """:class:`DataError` naming each column of ``columns`` holding values that another
        kind of database (``target_dialect``) would change: SQLite keeps any value in any
        column, whatever its declared type (:func:`_stored_otherwise`). A blob in a ``TEXT``
        column would be published as its hex text, a ``BOOLEAN`` 2 as true, a date-time with a
        time zone offset without the offset. Into another SQLite database values go as they are."""
        if target_dialect == self.database.dialect:
            return
        table = self.table(name)
        found_checks = {c: _stored_otherwise(table.c[c]) for c in columns}
        checks = {c: check for c, check in found_checks.items() if check is not None}
        if not checks:
            return
        counts = [sa.func.count().filter(condition) for condition, _ in checks.values()]
        with self.database.errors(f"reading {name}"):
            row = self.connection.execute(sa.select(*counts).select_from(table)).one()
        dialect = self.database.engine.dialect
        found = [
            f"Column {c!r} (declared {table.c[c].type.compile(dialect=dialect)}) holds "
            f"{checks[c][1]} in {n} row(s)"
            for c, n in zip(checks, row, strict=True)
            if n
        ]
        if found:
            raise DataError(
                "; ".join(found) + f". SQLite keeps any value in any column; {target_dialect} "
                f"would convert, drop or refuse these. Clean or cast them in a view of the "
                f"source, or drop the columns (role: identifier)."
            )

    def end(self) -> None:
        raw = driver_connection(self.connection)
        if raw.in_transaction and not self.published:
            self.execute("ROLLBACK")
        if self.read_only:
            self.execute("PRAGMA query_only = OFF")


def _created(raw: sqlite3.Connection, name: TableName) -> TableName | None:
    """``name`` in the database where ``CREATE TABLE name`` would put it, as SQLite's own
    program for it says: ``EXPLAIN`` compiles the statement without running it (nothing is
    written, the file is not touched), and its ``CreateBtree`` names the database by its
    number (``PRAGMA database_list``; 1 is ``temp``, listed only once used). ``None`` when
    SQLite refuses to compile it (no such database: the run's own statements then fail with
    SQLite's message)."""
    quoted = ".".join('"' + p.replace('"', '""') + '"' for p in (name.schema, name.name) if p)
    try:
        program = raw.execute(f"EXPLAIN CREATE TABLE {quoted} (x)").fetchall()
    except sqlite3.Error:
        return None
    number = next((row[2] for row in program if row[1] == "CreateBtree"), None)
    if number is None:
        return None
    listed = {row[0]: row[1] for row in raw.execute("PRAGMA database_list")}
    return TableName(listed.get(number, "temp" if number == 1 else str(number)), name.name)


_BINDABLE = (int, float, str, bytes, type(None))
#: Significant decimal digits that SQLite's NUMERIC affinity keeps (as a 64-bit float).
_EXACT_DIGITS = 15
_INT64 = (-(2**63), 2**63 - 1)


class UuidText(NativeType):
    """A SQLite column declared ``UUID``, ``GUID`` or ``UNIQUEIDENTIFIER`` (SQLite has no such
    type: the name gives NUMERIC affinity, so SQLAlchemy reflected ``NUMERIC`` and the run
    wrote UUID texts into a decimal column of the target: PostgreSQL's and MariaDB's errors,
    an internal error into DuckDB). Into SQLite it keeps its declared name; into another kind
    of database it is text, each value its text as stored (any spelling, any version or
    variant: exactly as written). A value SQLite stored as a number (a UUID written as 32
    decimal digits) is refused before the write (:func:`_stored_otherwise`)."""

    cache_ok = True

    def as_generic(self, allow_nulltype: bool = False) -> sa.types.TypeEngine:
        return sa.Text()


#: Declared type names that :class:`UuidText` reads (case-insensitive).
_UUID_NAMES = re.compile(r"\s*(UUID|GUID|UNIQUEIDENTIFIER)\s*(\(\s*\d+\s*\))?\s*", re.IGNORECASE)

#: Texts of a NUMERIC column that PostgreSQL's ``numeric`` reads as NaN or infinities (the
#: other targets refuse those with a message of their own).
_SPECIAL_TEXTS = ("nan", "infinity", "+infinity", "-infinity", "inf", "+inf", "-inf")


def _stored_otherwise(column: sa.Column) -> tuple[sa.ColumnElement[bool], str] | None:
    """The condition on a row under which ``column``'s value is not what its declared type
    says (``typeof``: SQLite keeps any value in any column), or, for a date-time, carries a
    time zone offset that a target's timestamp would drop; with what such values are.
    ``None`` for types not checked (types SQLAlchemy does not know). A decimal column may hold
    integers and reals (its storage class varies with the value); text there is never a number
    (NUMERIC affinity converts every well-formed number), except NaN or an infinity spelled
    out."""
    kind = sa.func.typeof(column)
    column_type = column.type
    if isinstance(column_type, UuidText):
        return (
            kind.not_in(["text", "null"]),
            "values that are not text (blobs, or numbers: SQLite stores a UUID written as "
            "decimal digits only, e.g. 00000000000000000000000000000000, as a number, which is "
            "not its text any more)",
        )
    if isinstance(column_type, sa.Numeric) and not isinstance(column_type, sa.Float):
        special = sa.func.lower(sa.func.trim(column)).in_(_SPECIAL_TEXTS)
        return (
            sa.or_(kind == "blob", sa.and_(kind == "text", sa.not_(special))),
            "values that are not numbers (text or blobs, which SQLite keeps in a column of "
            "NUMERIC affinity; a target's decimal refuses them)",
        )
    if isinstance(column_type, sa.Boolean):
        other = sa.and_(column.is_not(None), sa.or_(kind != "integer", column.not_in([0, 1])))
        return other, "values other than 0 and 1 (a target would publish 2 as true)"
    if isinstance(column_type, sa.Integer):
        return kind.not_in(["integer", "null"]), "values that are not integers"
    if isinstance(column_type, sa.Float):
        return kind.not_in(["real", "integer", "null"]), "values that are not numbers"
    if isinstance(column_type, sa.LargeBinary):
        return kind.not_in(["blob", "null"]), "values that are not blobs"
    if isinstance(column_type, sa.DateTime):
        sign = ("+", "-")
        offset = sa.or_(  # ends with ±hh:mm, ±hhmm or Z (three GLOBs took 3.5x as long)
            sa.and_(sa.func.substr(column, -6, 1).in_(sign), sa.func.substr(column, -3, 1) == ":"),
            sa.func.substr(column, -5, 1).in_(sign),
            sa.func.substr(column, -1).in_(["Z", "z"]),
        )
        return (
            sa.or_(kind.not_in(["text", "null"]), sa.and_(kind == "text", offset)),
            "values that are not text, or date-times with a time zone offset (a timestamp "
            "would drop it: '2020-01-02 03:04:05+02:00' would become 2020-01-02 03:04:05)",
        )
    if isinstance(column_type, (sa.Date, sa.Time)):
        return kind.not_in(["text", "null"]), "values that are not text"
    if isinstance(column_type, sa.String):
        return (
            kind.not_in(["text", "null"]),
            "values that are not text (a blob would be published as its hex text)",
        )
    return None


def _integer64(value: Decimal) -> bool:
    """Whether ``value`` is a whole number that SQLite stores exactly (a 64-bit integer)."""
    return value.is_finite() and value == value.to_integral_value() and -(2**63) <= value < 2**63


def _refuse_changed(values: Sequence[Any], column: str, column_type: sa.types.TypeEngine) -> None:
    """:class:`DataError` if SQLite would store some of ``values`` (a batch of column
    ``column``, of ``column_type``) as another value (see :meth:`SQLiteSession.insert_rows`)."""
    if not isinstance(column_type, (sa.Numeric, sa.Float)):
        return
    nan = sum(1 for v in values if isinstance(v, float) and v != v)
    if nan:
        raise DataError(
            f"Column {column!r} holds NaN in {nan} row(s) of a batch of {len(values)}: SQLite "
            f"stores a NaN as NULL. Publish into another kind of database, or drop the column "
            f"(role: identifier)."
        )
    if isinstance(column_type, sa.Float):  # (a Numeric in SQLAlchemy 2.0, not in 2.1)
        return
    rounded = sum(
        1
        for v in values
        if isinstance(v, Decimal)
        and v.is_finite()
        and len(v.normalize().as_tuple().digits) > _EXACT_DIGITS
        and not _integer64(v)
    )
    if rounded:
        raise DataError(
            f"Column {column!r} holds numbers of more than 15 significant digits in {rounded} "
            f"row(s) of a batch of {len(values)}: SQLite keeps 15 significant digits of a "
            f"number in a column of NUMERIC affinity, so they would be rounded. Cast the "
            f"column to text in a view of the source, or drop it (role: identifier)."
        )


def _bindable(value: Any, text: bool = False) -> Any:
    """``value`` as ``sqlite3`` binds it into a column of text (``text``) or other affinity."""
    if isinstance(value, _BINDABLE):
        return value
    if isinstance(value, Decimal) and not text and _integer64(value):
        return int(value)  # its text ("12345678901234567.0") would be read as a REAL, rounded
    if isinstance(value, (Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return value


class SQLiteDatabase(SQLDatabase):
    """A SQLite database file (``sqlite:///path``; ``sqlite://`` is an in-memory database)."""

    row_level_security = False  # no row-level security: no read is filtered

    session_class = SQLiteSession

    def name_problem(self, name: str) -> str | None:
        """Also: a name SQLite keeps for itself (``sqlite_`` in any case: "object name
        reserved for internal use")."""
        problem = super().name_problem(name)
        if problem is None and name.lower().startswith("sqlite_"):
            problem = "reserved by SQLite for its own tables (names beginning with sqlite_)"
        return problem

    @property
    def joins_in_snapshot(self) -> bool:
        """True: the run's one transaction is a snapshot (see the module docstring)."""
        return True

    declared = dataclasses.replace(
        SQLDatabase.declared, snapshot_reads=True, table_dependencies=True, stream_check=True
    )

    def describe(self, error: BaseException | None, action: str) -> DataError:
        described = super().describe(error, action)
        if "locked" in str(error):
            return DataError(
                f"{described} (another connection is writing to this database; "
                f"waited {BUSY_TIMEOUT_SECONDS} s)"
            )
        code = getattr(error, "sqlite_errorname", "")
        if self.read_only and code.startswith("SQLITE_READONLY_"):
            return DataError(
                f"{described}. SQLite cannot read the source without writing to it ({code}: "
                f"e.g. a writer that stopped in the middle of a transaction left a journal to "
                f"roll back, or a write-ahead log to recover); tclose opens its source "
                f"read-only and never writes it. Open the database once with a program that "
                f"writes it (e.g. sqlite3 FILE 'PRAGMA quick_check'), then run again."
            )
        return described

    def create_engine(self) -> Engine:
        """The engine; for a source opened read-only (:meth:`open_read_only`) the file is
        opened as a URI with ``mode=ro``, however the URL names it (a path, or a ``file:`` URI
        whose own ``mode`` is replaced): SQLite then never writes the database file or its
        write-ahead log (it reads a pending log without checkpointing it into the file; its
        readers still write the log's shared-memory index ``-shm``). An in-memory database
        has no file to protect."""
        memory = self.url.database in (None, "", ":memory:")
        uri = self.url.query.get("uri") in ("true", "1") or str(self.url.database).startswith(
            "file:"
        )
        if not memory and not uri and not Path(str(self.url.database)).is_file():
            path = Path(str(self.url.database)).absolute()
            raise DataError(
                f"The SQLite database file {path} does not exist"
                + (" (it is a folder)" if path.is_dir() else "")
                + "; tclose never creates a database file. Check the URL (sqlite:///relative/"
                "path or sqlite:////absolute/path), or create the file first."
            )
        url = self.url
        if self.read_only and not memory and url.query.get("mode") != "memory":
            if not uri:
                quoted = urllib.parse.quote(str(Path(str(url.database)).absolute()))
                url = url.set(database=f"file:{quoted}")
            url = url.update_query_dict({"mode": "ro", "uri": "true"})
        return sa.create_engine(
            url,
            poolclass=StaticPool if memory else NullPool,
            connect_args={"timeout": BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )

    def table_identity(self, name: TableName) -> tuple | None:
        """The database file (device and inode: every path, link and spelling of it) and the
        table name as ``sqlite_master`` stores it (SQLite compares names without case); the
        ``main.``/``temp.`` prefixes and attached schemas are resolved as SQLite does."""
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            found = self._catalog_entry(connection, name, "('table', 'view')")
        if found is None:
            return None
        home, file = found
        return ("sqlite", self._file_identity(file, str(home.schema).lower()), home.name.lower())

    def _catalog_entry(
        self, connection: sa.Connection, name: TableName, kinds: str
    ) -> tuple[TableName, str] | None:
        """Table (or view: ``kinds``, an SQL list of ``sqlite_master`` types) ``name`` as SQLite
        finds it: its schema (an unqualified name searched in ``temp``, ``main``, then the
        attached databases) and its name as ``sqlite_master`` stores it (names compared without
        case); and the schema's file (``""`` in memory)."""
        files = {
            row[1].lower(): (row[1], row[2])
            for row in connection.exec_driver_sql("PRAGMA database_list").fetchall()
        }
        schemas = (
            [name.schema.lower()]
            if name.schema
            else ["temp", "main"] + sorted(set(files) - {"temp", "main"})
        )
        for schema in schemas:
            if schema not in files:
                continue
            master = "sqlite_temp_master" if schema == "temp" else "sqlite_master"
            row = connection.exec_driver_sql(
                f"SELECT name FROM {self.quote(schema)}.{master} WHERE type IN {kinds} "
                f"AND name = ? COLLATE NOCASE",
                (name.name,),
            ).first()
            if row is not None:
                spelled, file = files[schema]
                return TableName(spelled, row[0]), file
        return None

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` in the database (SQLite's schema: ``main``, ``temp`` or an attached one)
        SQLite resolves it to: where an existing table or view is (:meth:`_catalog_entry`),
        else, with ``create``, where a ``CREATE TABLE`` of it would land (SQLite's compiled
        program for it, never run). Refused (:class:`ConfigError`) when that database has no
        file (``PRAGMA database_list``: the temporary database, an in-memory one, a private
        temporary one, however the URL or the name spells it) or keeps its journal in memory
        (a ``memdb`` URI names a file, which it keeps in memory). Both names as SQLite spells
        them."""
        with (
            self.errors(f"resolving the table name {name}"),
            self.engine.connect() as connection,
        ):
            found = self._catalog_entry(connection, name, "('table', 'view')")
            home = found[0] if found is not None else None
            if home is None and create:
                home = _created(driver_connection(connection), name)
            if home is None:
                return name
            listed = connection.exec_driver_sql("PRAGMA database_list").fetchall()
            files = {row[1]: row[2] for row in listed}
            journal = None
            if files.get(home.schema):
                pragma = f"PRAGMA {self.quote(str(home.schema))}.journal_mode"
                journal = connection.exec_driver_sql(pragma).scalar()
        if journal is None or str(journal).lower() == "memory":
            raise vanishing_table(
                name,
                path,
                f"in {home.schema!r}, a database SQLite keeps in memory or in a temporary file "
                f"(it names no file for it, or keeps its journal in memory)",
                database=home.schema == "main",
            )
        return home

    def release_of(
        self, connection: sa.Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """The schema (``main``, an attached database) and the table's name as ``sqlite_master``
        stores it, found as SQLite finds an unqualified name; and its identity: its content
        (:func:`~tclose.connectors.releases.content_identity`). SQLite gives a table no lasting
        identity (a table dropped and made again takes the same root page and catalog row), so
        the same table is the same name holding the same definition (its ``CREATE TABLE`` as
        ``sqlite_master`` keeps it: columns, types, constraints) and the same rows. A ``temp``
        table has none a release can have."""
        found = self._catalog_entry(connection, name, "('table')")
        if found is None:
            return None
        home = found[0]
        if home.schema == "temp":
            return home, None
        definition = self._definition(connection, home)
        result = connection.exec_driver_sql(f"SELECT * FROM {self.qualified(home)}")
        digest = hashlib.sha256(str(definition).encode()).hexdigest()[:16]
        return home, f"definition {digest}, {content_identity(list(result.keys()), result)}"

    def _definition(self, connection: sa.Connection, home: TableName) -> str | None:
        """The ``CREATE TABLE`` of table ``home`` as ``sqlite_master`` keeps it."""
        return connection.exec_driver_sql(
            f"SELECT sql FROM {self.quote(str(home.schema))}.sqlite_master "
            f"WHERE type = 'table' AND name = ?",
            (home.name,),
        ).scalar()

    @property
    def marks_releases(self) -> bool:
        """A release's definition ends with its run's mark (:meth:`table_comment`)."""
        return True

    def release_mark(self, connection: sa.Connection, home: TableName) -> str | None:
        """The run the mark at the end of its definition names (:data:`_RUN_MARK`)."""
        definition = self._definition(connection, home)
        found = re.search(_RUN_MARK, definition or "")
        return marked_run(f"tclose run {found.group(1)}") if found else None

    def tables_read(self, name: TableName) -> TablesRead:
        """The identities of ``name`` and of every table SQLite reads to read it (a view's
        tables, transitively): the tables its authorizer is asked about while it prepares
        ``SELECT * FROM name``. Always the whole closure: SQLite keeps no functions in the
        database (a view calling a client's function fails to prepare without it), and the
        authorizer is asked about every table the prepared statement reads."""
        identity = self.table_identity(name)
        if identity is None:
            return TablesRead()
        read: set[tuple[str, str]] = set()

        def authorize(action: int, table: str | None, _column, schema: str | None, _view) -> int:
            if action == sqlite3.SQLITE_READ and table and schema:
                read.add((schema, table))
            return sqlite3.SQLITE_OK

        with self.errors(f"reading the definition of {name}"), self.engine.connect() as c:
            raw: Any = c.connection.driver_connection
            raw.set_authorizer(authorize)
            try:
                raw.execute(f"SELECT * FROM {self.qualified(name)} LIMIT 0").fetchall()
            finally:
                raw.set_authorizer(None)
        found = TablesRead([identity])
        for schema, table in sorted(read):
            other = self.table_identity(TableName(schema, table))
            if other is not None and other not in found:
                found.append(other)
        return found

    def replace_blockers(self, name: TableName) -> list[str]:
        """The views that read table ``name``: with one, SQLite's ``ALTER TABLE ... RENAME``
        of the publish fails (it checks every view of the schema)."""
        identity = self.table_identity(name)
        if identity is None:
            return []
        with self.errors(f"looking for what depends on {name}"), self.engine.connect() as c:
            schemas = [row[1] for row in c.exec_driver_sql("PRAGMA database_list").fetchall()]
            views = [
                TableName(schema, view)
                for schema in schemas
                for (view,) in c.exec_driver_sql(
                    f"SELECT name FROM {self.quote(schema)}."
                    f"{'sqlite_temp_master' if schema == 'temp' else 'sqlite_master'} "
                    f"WHERE type = 'view'"
                ).fetchall()
            ]
        return [f"view {view}" for view in views if identity in self.tables_read(view)[1:]]

    def files(self) -> list[Path]:
        """Each database file of the connection (``PRAGMA database_list``: the main one and
        any attached one, however the URL spells it) and its ``-wal``, ``-shm`` and
        ``-journal`` side files."""
        with self.errors("listing the database files"), self.engine.connect() as connection:
            rows = connection.exec_driver_sql("PRAGMA database_list").fetchall()
        found = [Path(row[2]) for row in rows if row[2]]
        return [f.with_name(f.name + side) for f in found for side in ("", *SIDE_FILES)]

    def _file_identity(self, path: str, schema: str) -> tuple:
        if not path:  # in-memory or temporary: only this connection's engine reaches it
            return ("memory", id(self.engine), schema)
        stat = os.stat(path)
        return ("file", stat.st_dev, stat.st_ino)

    def declared_types(self, connection: sa.Connection, name: TableName) -> dict[str, str]:
        """The declared type of each column as ``PRAGMA table_info`` gives it (``""`` for an
        untyped column, any name SQLAlchemy does not map, such as ``BLOBBY``)."""
        pragma = f"PRAGMA {self.quote(name.schema or 'main')}.table_info({self.quote(name.name)})"
        return {row[1]: row[2] for row in connection.exec_driver_sql(pragma)}

    def table(self, name: TableName, connection: sa.Connection | None = None) -> sa.Table:
        """As :meth:`SQLDatabase.table`; a column declared ``UUID`` (``GUID``,
        ``UNIQUEIDENTIFIER``), which SQLAlchemy reflects as ``NUMERIC``, is a
        :class:`UuidText`."""
        table = super().table(name, connection)
        numeric = [c for c in table.columns if type(c.type) is sa.NUMERIC]
        if numeric:
            with (
                self.errors(f"reading the definition of table {name}"),
                _connection(self.engine, connection) as bound,
            ):
                declared = self.declared_types(bound, name)
            for column in numeric:
                spelled = declared.get(column.name, "")
                if _UUID_NAMES.fullmatch(spelled):
                    column.type = UuidText(spelled)
        return table

    def table_comment(self, name: TableName) -> str | None:
        """``tclose run <id>`` when the table's definition ends with the constraint
        ``tclose_run_<id>`` a run adds to its staging table (SQLite keeps no comments). Only at
        the end: a column, which comes before the constraints, may be named like it (it would
        attribute the table, and an audit record, to a run that never happened)."""
        schema = self.quote(name.schema) + "." if name.schema else ""
        with self.errors(f"reading the definition of {name}"), self.engine.connect() as connection:
            row = connection.exec_driver_sql(
                f"SELECT sql FROM {schema}sqlite_master WHERE type = 'table' AND name = ? "
                f"COLLATE NOCASE",
                (name.name,),
            ).first()
        found = re.search(_RUN_MARK, row[0] or "") if row else None
        return f"tclose run {found.group(1)}" if found else None

    def adapt_portable_type(self, generic: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """JSON of another database becomes ``TEXT``, its values their JSON text as written:
        SQLite has no JSON type (its JSON functions read text), and a column declared ``JSON``
        has NUMERIC affinity, which would store a JSON text such as ``-0``, ``1e400`` or a
        number of more than 15 digits as an SQLite number. For the same reason a decimal type
        of more than 15 digits (or of any precision: PostgreSQL's ``numeric``; MariaDB's
        ``BIGINT UNSIGNED``, 20 digits) becomes ``TEXT``, each value its exact text; a narrower
        one stays ``NUMERIC`` (its values as SQLite numbers, which hold 15 digits)."""
        if isinstance(generic, sa.JSON):
            return sa.Text()
        if isinstance(generic, sa.Numeric) and not isinstance(generic, sa.Float):
            digits = generic.precision or _EXACT_DIGITS + 1  # no precision: any number of digits
            if digits > _EXACT_DIGITS:
                return sa.Text()  # NUMERIC affinity would keep 15 digits of a wider decimal
        return super().adapt_portable_type(generic)

    def row_type(self) -> sa.types.TypeEngine:
        return sa.Integer()  # INTEGER PRIMARY KEY: the rowid, rows stored in key order

    def row_key(self, table: sa.Table, key: str | None) -> sa.ColumnElement:
        """As :meth:`SQLDatabase.row_key`, falling back to the ``rowid``."""
        if key is None and len(table.primary_key.columns) != 1:
            qualified = self.engine.dialect.identifier_preparer.format_table(table)
            return sa.literal_column(f"{qualified}.rowid", sa.Integer)
        return super().row_key(table, key)


class SQLiteConnector:
    """Connector for SQLite files (``sqlite:///path/to/file.db`` URLs)."""

    name = "sqlite"
    dialects = ("sqlite",)

    def connect(self, url: str, password_file: str | None = None) -> SQLiteDatabase:
        return SQLiteDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(SQLiteConnector())
