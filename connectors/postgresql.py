"""Connector plugin ``postgresql``: PostgreSQL through psycopg 3.

- Snapshot: one ``REPEATABLE READ`` transaction holds the whole run on a same-database target —
  pass-1 read, staging table, helper tables, ``INSERT ... SELECT``, verification read-back and
  the swap — so the staging table is never visible to anyone else, and a killed run leaves
  nothing (the server rolls the transaction back). A source read for another database is a
  ``REPEATABLE READ, READ ONLY`` transaction.
- Reads: frames (``read``) of ``smallint``/``integer``/``bigint``/``real``/``double precision``
  columns come from ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)``, cut by NumPy (chunks with a
  NULL built from psycopg's values); everything else (and ``read_rows``) through
  psycopg server-side (named) cursors in binary format. All in the session's transaction.
- Verification (``read_with_digest``): the content digest's binary ``COPY`` of every column is
  hashed and, in the same pass, cut by NumPy into the frames of the QI and confidential columns
  when they are all fixed-width numbers (else a ``read`` of them, then the digest's ``COPY``).
- Bulk writes: ``COPY ... FROM STDIN``; helper tables of integers and doubles are sent in COPY's
  binary format, built by NumPy in one pass. The join's ``INSERT ... SELECT`` fills the staging
  table without its primary key, added back (same name) after it.
- Runs on one target exclude each other through an advisory lock taken before the run's
  transaction begins, so that its snapshot sees what a run it waited for published.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tclose.base.digests import COPY_DIGEST_ALGORITHM
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl
from tclose.naming import RELEASES_TABLE

if TYPE_CHECKING:
    import pandas as pd

from tclose.connectors.sql import (
    KEY_LABEL,
    ORDER_IS_IDENTITY,
    ROW_COLUMN,
    DriverSession,
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    bits_as_text,
    driver_connection,
    random_suffix,
    vanishing_table,
    wait_in_slices,
)

#: Seconds a run waits for another run on the same target to finish before giving up.
LOCK_WAIT_SECONDS = 30
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_COPY_HEADER = _COPY_SIGNATURE + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)
#: NumPy formats of the fixed-width types in binary COPY, by type OID (int2, int4, int8,
#: float4, float8), and the struct that decodes each.
_FIXED_WIDTH = {21: ">i2", 23: ">i4", 20: ">i8", 700: ">f4", 701: ">f8"}


#: Column types read in binary format by psycopg's built-in loaders.
_BINARY_SAFE = (sa.Integer, sa.Float, sa.Numeric, sa.String, sa.Boolean, sa.Date, sa.DateTime)


def run_lock_key(target: str) -> int:
    """The advisory lock key of the runs that write table ``target`` (``schema.name``)."""
    digest = hashlib.sha256(f"tclose:{target}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgreSQLSession(DriverSession):
    """A PostgreSQL session: one ``REPEATABLE READ`` transaction."""

    database: PostgreSQLDatabase

    #: The advisory lock key this session holds (:meth:`lock`), released by :meth:`end`.
    lock_key: int | None = None
    #: The session's own temporary schema, whatever the search path says.
    helper_schema = "pg_temp"

    def begin(self, staging: sa.Table | None) -> None:
        if staging is not None:
            # Before the snapshot: a run that waited for another must see what that one published
            # (a snapshot taken before the wait saw no target, or the replaced one).
            self.lock(staging.info.get("target") or TableName(staging.schema, staging.name))
        mode = " READ ONLY" if self.read_only else ""
        self.execute(f"BEGIN ISOLATION LEVEL REPEATABLE READ{mode}")
        # A long kernel leaves the transaction idle: a server-wide timeout must not end it. A
        # killed client is noticed while a statement runs, so its locks are released soon.
        self.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
        if self.database.server_version >= 140000:
            self.execute("SET LOCAL client_connection_check_interval = '2s'")
        if staging is not None:
            self.prepare_staging(staging)

    def lock(self, target: TableName) -> None:
        """Take the run lock of ``target``: a session-level advisory lock, taken outside the
        transaction (whose snapshot must begin after the wait) and released by :meth:`end` or
        when the connection closes. An unqualified name is qualified with ``current_schema()``
        first, so that every spelling takes one lock. The wait, up to
        :data:`LOCK_WAIT_SECONDS`, is made in slices (``lock_timeout``,
        :func:`~tclose.connectors.sql.wait_in_slices`): a signal stops it within one."""
        if target.schema is None:
            target = TableName(self.execute("SELECT current_schema()")[0][0], target.name)
        key = run_lock_key(target.qualified)
        if self.database.server_version >= 140000:  # a killed client stops waiting, too
            self.execute("SET client_connection_check_interval = '2s'")

        def attempt(seconds: int) -> bool:
            self.execute(f"SET lock_timeout = '{seconds}s'")
            try:
                self.execute(f"SELECT pg_advisory_lock({key})")
            except sa.exc.OperationalError as error:
                if getattr(error.orig, "sqlstate", None) == "55P03":  # lock_not_available
                    return False
                raise
            return True

        if not wait_in_slices(attempt, LOCK_WAIT_SECONDS):
            raise DataError(
                f"Another tclose run is writing {target} (waited {LOCK_WAIT_SECONDS} s); "
                f"nothing was written. Retry when it has finished."
            )
        self.lock_key = key
        self.execute("SET lock_timeout = 0")

    def hold(self, name: TableName) -> None:
        """Lock table ``name`` (``ACCESS SHARE``) before the snapshot begins (call it first in
        a read-only session): a publish under way commits first, and is then read whole, or
        waits until this session ends. A snapshot taken before a publish would find no table
        under the name, or the new one empty. A missing table is left to the read to report."""
        self.execute("SAVEPOINT tclose_hold")
        try:
            self.execute(f"LOCK TABLE {self.database.qualified(name)} IN ACCESS SHARE MODE")
        except sa.exc.DBAPIError:
            self.execute("ROLLBACK TO SAVEPOINT tclose_hold")
        self.execute("RELEASE SAVEPOINT tclose_hold")

    def end(self) -> None:
        """Roll back unless published, then release the run lock."""
        try:
            super().end()
        finally:
            if self.lock_key is not None:
                self.execute(f"SELECT pg_advisory_unlock({self.lock_key})")
                self.lock_key = None

    def stream(
        self,
        statement: sa.Select,
        chunk_size: int,
        column_types: Sequence[sa.types.TypeEngine] = (),
    ) -> Iterator[list[tuple]]:
        """A psycopg server-side cursor; in binary format (~1.7x faster) when every column is of
        a type psycopg decodes from binary by itself, else in text format (psycopg returns the
        binary form of a type it does not know — an enum, an extension's type — as bytes).

        ``json`` and ``jsonb`` values come as their text, unparsed, as every other driver
        returns JSON: ``json`` keeps the text as written (key order, spacing, duplicate keys),
        a JSON ``null`` stays apart from SQL NULL, and a number no float holds stays as it is;
        psycopg's own loaders would give Python objects that it cannot write back (``dict``)
        or that lose these. Arrays (never in binary format) come as their text too, which keeps
        their bounds (see :func:`_as_text`)."""
        import psycopg

        sql = str(statement.compile(dialect=self.database.engine.dialect))
        raw = driver_connection(self.connection)
        binary = all(
            isinstance(t, _BINARY_SAFE) and not isinstance(t, (sa.Enum, postgresql.CITEXT))
            for t in column_types
        )
        cursor = raw.cursor(name=f"tclose_{random_suffix()}", binary=binary)
        _as_text(cursor)
        try:
            cursor.execute(sql, {})  # parameters given so that psycopg turns %% back into %
            while True:
                try:
                    rows = cursor.fetchmany(chunk_size)
                except psycopg.DataError:  # a value Python's dates and times cannot hold?
                    cursor.close()
                    try:
                        unreadable = self._unreadable_times(statement, column_types)
                    except sa.exc.SQLAlchemyError:
                        unreadable = []
                    if not unreadable:
                        raise
                    raise DataError(
                        "; ".join(
                            f"Column {c!r} holds {n} value(s) that Python's dates and times "
                            f"cannot hold (infinity, a year outside 1-9999, or 24:00:00)"
                            for c, n in unreadable
                        )
                        + ". Cast the column to text in a view of the source, or drop it "
                        "(role: identifier)."
                    ) from None
                if not rows:
                    break
                yield rows
        finally:
            cursor.close()

    def _unreadable_times(
        self, statement: sa.Select, column_types: Sequence[sa.types.TypeEngine]
    ) -> list[tuple[str, int]]:
        """The date and time columns of ``statement`` (the last ones are of ``column_types``)
        holding values psycopg cannot load into Python (``infinity``, years outside 1-9999,
        ``24:00:00``), each with its count of such values."""
        rows = statement.subquery()
        found = []
        typed = list(rows.columns)[len(rows.columns) - len(column_types) :]
        for column, column_type in zip(typed, column_types, strict=True):
            if isinstance(column_type, (sa.Date, sa.DateTime)):
                year = sa.extract("year", column)
                bad = sa.or_(~sa.func.isfinite(column), year > 9999, year < 1)
            elif isinstance(column_type, sa.Time):
                bad = sa.cast(column, sa.Time) == sa.text("'24:00:00'::time")
            else:
                continue
            count = self.connection.execute(
                sa.select(sa.func.count()).select_from(rows).where(bad)
            ).scalar()
            if count:
                found.append((column.name, int(count)))
        return found

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`read_rows` as DataFrames, the same ones (values, dtypes, chunks), faster when
        the result's columns are all ``smallint``, ``integer``, ``bigint``, ``real`` or ``double
        precision`` (the type OIDs the server reports): then the ``SELECT`` runs as ``COPY (...)
        TO STDOUT (FORMAT BINARY)`` in the session's transaction, and each chunk whose rows hold
        no NULL is cut by NumPy into ``int64`` and ``float64`` columns (:func:`_copy_frames`); a
        chunk with a NULL is built from the tuples psycopg would give, as the generic path
        builds it. Any other result reads through :meth:`read_rows` (a server-side cursor)."""
        import pandas as pd

        statement, types = self.read_statement(name, columns, key, with_key)
        names = ([KEY_LABEL] if with_key else []) + list(columns)
        # The statement has no parameters: psycopg would only turn the compiler's %% into %.
        sql = str(statement.compile(dialect=self.database.engine.dialect)).replace("%%", "%")
        with self.database.errors(f"reading {name}"):
            formats = self.fixed_width_formats(sql)
            if formats is None:
                for rows in self.stream(statement, chunk_size, types):
                    yield pd.DataFrame.from_records(rows, columns=names)
                return
            yield from self._copy_read(sql, names, formats, chunk_size)

    def fixed_width_formats(self, sql: str) -> list[str] | None:
        """The NumPy formats (``>i2``, ``>i4``, ``>i8``, ``>f4``, ``>f8``) of the result
        columns of ``sql`` in binary ``COPY``, from the type OIDs the server describes for it
        (a ``LIMIT 0`` run; a domain is described by its base type, which it sends in binary);
        ``None`` if any column has another type, or there is none. ``sql`` is final (no ``%%``
        escapes)."""
        formats = self.result_formats(sql)
        return None if None in formats or not formats else [f for f in formats if f is not None]

    def result_formats(self, sql: str) -> list[str | None]:
        """The NumPy format of each result column of ``sql`` in binary ``COPY`` (see
        :meth:`fixed_width_formats`), ``None`` for a column of any other type."""
        cursor = driver_connection(self.connection).cursor()
        try:
            cursor.execute(f"SELECT * FROM ({sql}) AS tclose_read LIMIT 0")
            oids = [column.type_code for column in cursor.description or ()]
        finally:
            cursor.close()
        return [_FIXED_WIDTH.get(oid) for oid in oids]

    def _copy_read(
        self, sql: str, names: list[str], formats: list[str], chunk_size: int
    ) -> Iterator[pd.DataFrame]:
        """The DataFrames of a binary ``COPY`` of ``sql``, ``chunk_size`` rows each (see
        :meth:`read`)."""
        cursor = driver_connection(self.connection).cursor()
        with cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT BINARY)") as copy:
            yield from _copy_frames(copy, names, list(enumerate(formats)), len(formats), chunk_size)

    def insert_arrays(
        self, table: sa.Table, arrays: Mapping[str, np.ndarray], chunk_size: int = 100_000
    ) -> None:
        """``COPY`` in binary format when every array holds integers or floats and every column
        is ``BIGINT`` or ``DOUBLE PRECISION``; the text format otherwise."""
        columns = list(arrays)
        values = [np.asarray(a) for a in arrays.values()]
        binary = all(
            (v.dtype.kind in "iu" and isinstance(table.c[c].type, sa.BigInteger))
            or (v.dtype.kind == "f" and isinstance(table.c[c].type, sa.Double))
            for c, v in zip(columns, values, strict=True)
        )
        if not binary:
            super().insert_arrays(table, arrays, chunk_size)
            return
        layout = [("fields", ">i2")]
        for i, v in enumerate(values):
            layout += [(f"size{i}", ">i4"), (f"value{i}", ">i8" if v.dtype.kind in "iu" else ">f8")]
        n = len(values[0]) if values else 0
        with self.copy(table, columns, binary=True) as copy:
            copy.write(_COPY_HEADER)
            for start in range(0, n, chunk_size):
                stop = min(start + chunk_size, n)
                record = np.empty(stop - start, dtype=layout)
                record["fields"] = len(values)
                for i, v in enumerate(values):
                    record[f"size{i}"] = 8
                    record[f"value{i}"] = v[start:stop]
                copy.write(record.tobytes())
            copy.write(_COPY_TRAILER)

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """``COPY ... FROM STDIN`` in text format; psycopg formats each Python value.

        Raises:
            DataError: text holding a NUL character (SQLite's and MariaDB's text can), which
                PostgreSQL's cannot, naming the columns and counting the rows.
        """
        if not rows:
            return
        rows = bits_as_text(table, columns, rows)
        try:
            with self.copy(table, columns, binary=False) as copy:
                for row in rows:
                    copy.write_row(row)
        except Exception as error:
            if "NUL (0x00)" in str(error):
                raise _nul_error(columns, rows) from None
            raise

    def copy(self, table: sa.Table, columns: Sequence[str], binary: bool) -> Any:
        names = ", ".join(self.database.quote(c) for c in columns)
        options = " (FORMAT BINARY)" if binary else ""
        cursor = driver_connection(self.connection).cursor()
        return cursor.copy(f"COPY {self.database.qualified(table)} ({names}) FROM STDIN{options}")

    def content_digest(
        self, table: sa.Table, published_as: TableName | None = None
    ) -> dict[str, Any]:
        """The content digest of ``table`` as :data:`tclose.base.digests.COPY_DIGEST_ALGORITHM`
        defines it: the SHA-256 of the binary ``COPY`` of its columns in name order, rows in
        ``tclose_row`` order, with the client encoding UTF-8. The bytes are hashed as they
        arrive (constant memory); ``statement`` is the ``COPY`` an auditor can run in ``psql``
        and pipe to ``sha256sum``, naming ``published_as`` (the target a staging table
        becomes) if given."""
        columns = sorted(table.c.keys())
        sha256 = hashlib.sha256()
        with (
            self._utf8(),
            driver_connection(self.connection)
            .cursor()
            .copy(self.digest_statement(table, columns)) as copy,
        ):
            for data in copy:
                sha256.update(data)
        return self._digest(table, columns, sha256, published_as)

    def _digest(
        self,
        table: sa.Table,
        columns: list[str],
        sha256: Any,
        published_as: TableName | None,
    ) -> dict[str, Any]:
        return {
            "algorithm": COPY_DIGEST_ALGORITHM,
            "columns": columns,
            "sha256": sha256.hexdigest(),
            "statement": self.digest_statement(self._qualified_name(table, published_as), columns),
        }

    def _qualified_name(self, table: sa.Table, published_as: TableName | None) -> TableName:
        """``published_as`` (else ``table``'s name) in the schema of ``table``: an unqualified
        name resolves through the ``search_path``, which an auditor's session may not share."""
        named = published_as or TableName(table.schema, table.name)
        if named.schema is not None:
            return named
        (schema,) = self.execute(
            "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE c.oid = to_regclass({_literal(self.database.qualified(table))})"
        )[0]
        return TableName(schema, named.name)

    @contextlib.contextmanager
    def _utf8(self) -> Iterator[None]:
        """The client encoding UTF-8 inside the block (the digest's bytes depend on it)."""
        raw = driver_connection(self.connection)
        encoding = raw.execute("SHOW client_encoding").fetchone()[0]
        utf8 = encoding.upper() in ("UTF8", "UNICODE")
        if utf8:
            yield
            return
        raw.execute("SET LOCAL client_encoding = 'UTF8'")
        restore = f"SET LOCAL client_encoding = {_literal(encoding)}"
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):  # the error in the block is the one to see
                raw.execute(restore)
            raise
        raw.execute(restore)

    def digest_statement(self, table: sa.Table | TableName, columns: Sequence[str]) -> str:
        """The ``COPY ... TO STDOUT (FORMAT binary)`` whose output :meth:`content_digest`
        hashes."""
        return f"COPY ({self._digest_select(table, columns)}) TO STDOUT (FORMAT binary)"

    def _digest_select(self, table: sa.Table | TableName, columns: Sequence[str]) -> str:
        names = ", ".join(self.database.quote(c) for c in columns)
        return (
            f"SELECT {names} FROM {self.database.qualified(table)} ORDER BY "
            f"{self.database.quote('tclose_row')}"
        )

    def read_with_digest(
        self,
        name: TableName,
        columns: Sequence[str],
        digest: dict[str, Any],
        chunk_size: int = 50_000,
        published_as: TableName | None = None,
    ) -> Iterator[pd.DataFrame]:
        """The frames of ``read(name, columns, "tclose_row", chunk_size, with_key=False)`` and,
        once they are all read, :meth:`content_digest` of the table put into ``digest``: the
        same frames (chunks, values, dtypes) and the same digest, from one binary ``COPY`` —
        the digest's own — when every one of ``columns`` is ``smallint``, ``integer``,
        ``bigint``, ``real`` or ``double precision`` (the type OIDs the server reports).

        Each chunk of ``chunk_size`` row messages is joined into one buffer, hashed, and cut
        by NumPy: one vectorized step per column walks the fields of all rows (a field is its
        length, ``-1`` for NULL, then its bytes), the values of ``columns`` are gathered at
        their positions and converted as :meth:`read` converts them; a chunk where one of them
        is NULL is built from the tuples of Python values :meth:`read` builds it from. Any
        other case reads twice: :meth:`read`, then :meth:`content_digest`. ``digest`` stays
        empty if the frames are not all read."""
        table = self.table_with(name, columns)
        every = sorted(table.c.keys())
        with self.database.errors(f"reading {name}"):
            formats = self.result_formats(self._digest_select(table, every))
        positions = [every.index(c) for c in columns]
        wanted = [(p, f) for p in positions if len(formats) == len(every) and (f := formats[p])]
        if len(wanted) < len(columns) or len(set(positions)) < len(positions):
            yield from self.read(name, columns, ROW_COLUMN, chunk_size, with_key=False)
            digest.update(self.content_digest(table, published_as))
            return
        sha256 = hashlib.sha256()
        cursor = driver_connection(self.connection).cursor()
        with (
            self.database.errors(f"reading {name}"),
            self._utf8(),
            cursor.copy(self.digest_statement(table, every)) as copy,
        ):
            yield from _copy_frames(copy, list(columns), wanted, len(every), chunk_size, sha256)
        digest.update(self._digest(table, every, sha256, published_as))

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its type as the catalog spells it (``format_type``: ``character
        varying(40)``, ``timestamp with time zone``), with ``COLLATE`` and the collation when
        it is not the type's default: the same text whatever SQLAlchemy's version."""
        rows = self.connection.execute(
            sa.text(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) || CASE WHEN "
                "a.attcollation <> t.typcollation THEN ' COLLATE ' || quote_ident(c.collname) "
                "ELSE '' END FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
                "WHERE a.attrelid = to_regclass(:name) AND a.attnum > 0 AND NOT a.attisdropped"
            ),
            {"name": self.database.qualified(table)},
        ).fetchall()
        return {str(name): str(kind) for name, kind in rows}

    def relation_kind(self, table: sa.Table) -> str | None:
        """``"view"``, ``"materialized view"``, ``"foreign table"``, ``"index"``, ``"sequence"``
        or ``"type"`` when the name (resolved as the ``search_path`` resolves it) stands for
        one, ``"table with row-level security"`` when its rows depend on the session (a policy
        may hide rows from others than the auditor, whom as owner or superuser it does not
        filter), else ``None``."""
        rows = self.execute(
            "SELECT relkind, relrowsecurity FROM pg_class WHERE oid = "
            f"to_regclass({_literal(self.database.qualified(table))})"
        )
        kind, secured = rows[0] if rows else ("", False)
        if kind in ("r", "p") and secured:
            return "table with row-level security"
        return {
            "v": "view",
            "m": "materialized view",
            "f": "foreign table",
            "i": "index",
            "I": "index",
            "S": "sequence",
            "c": "type",
        }.get(str(kind))

    def unique_rows(self, table: sa.Table, columns: Sequence[str]) -> int:
        """How many rows of ``table`` hold a tuple of ``columns`` no other row holds, counted
        by the database: ``GROUP BY`` the columns' :meth:`identity` (NULL is one group) ``HAVING
        count(*) = 1``."""
        keys = [key for c in columns for key in self.identity(table.c[c])]
        groups = (
            sa.select(sa.literal(1)).select_from(table).group_by(*keys).having(sa.func.count() == 1)
        )
        self._shortest_floats()
        counted = sa.select(sa.func.count()).select_from(groups.subquery("tclose_unique"))
        return int(self.connection.execute(counted).scalar() or 0)

    def identity(self, column: sa.ColumnElement) -> list[sa.ColumnElement]:
        """Expressions of ``column`` equal for two values exactly when they are the same
        value, and in an order of the values: integers, booleans, dates, times, UUIDs and
        ``bytea`` by value; text by its bytes (``COLLATE "C"``, whatever the column's
        collation); a float by value, then by its bits (``-0`` apart from ``0``); a numeric by
        value, then by its scale (``1.0`` apart from ``1.00``); any other type (intervals,
        whose ``'1 day'`` equals ``'24 hours'``, arrays, JSON, geometry, case-insensitive text)
        by its text form, byte by byte (:meth:`_shortest_floats`)."""
        kind = column.type
        if isinstance(kind, sa.Float):
            return [column, sa.func.float8send(sa.cast(column, sa.Double()))]
        if isinstance(kind, sa.Numeric):
            return [column, sa.func.scale(column)]
        if isinstance(kind, sa.String) and not isinstance(kind, (sa.Enum, postgresql.CITEXT)):
            return [column.collate("C")]
        if isinstance(kind, ORDER_IS_IDENTITY):
            return [column]
        return [sa.cast(column, sa.Text()).collate("C")]

    def content_order(self, columns: Sequence[sa.ColumnElement]) -> list[sa.ColumnElement]:
        """Each column's :meth:`identity`, NULL first."""
        return [key.nulls_first() for column in columns for key in self.identity(column)]

    def _shortest_floats(self) -> None:
        """Floats in text (in an array, say) shortest exact, for the rest of the transaction,
        whatever the session's ``extra_float_digits`` was (any value above 0 gives them)."""
        self.execute(
            "SELECT set_config('extra_float_digits', '1', true) "
            "WHERE current_setting('extra_float_digits')::int < 1"
        )

    #: The name of the staging table's primary key while :meth:`insert_joined` has dropped it.
    _dropped_key: str | None = None

    def insert_joined(self, staging: sa.Table, insert: sa.Insert) -> int:
        """The join's ``INSERT`` into the staging table without its primary key, which
        :meth:`joined_rows_written` adds back under the same name: PostgreSQL then builds the
        index once from the sorted keys, ~0.2-0.3 s less server CPU at 1M rows than 1M index
        insertions (``ALTER TABLE`` on the run's own, still invisible, table; ``tclose_row``
        stays ``NOT NULL``, and a duplicate key would fail the ``ADD``, so the table written is
        the same)."""
        self._dropped_key = self.primary_key_name(staging)
        self._shortest_floats()  # the content order compares some values by their text
        self.execute(
            f"ALTER TABLE {self.database.qualified(staging)} "
            f"DROP CONSTRAINT {self.database.quote(self._dropped_key)}"
        )
        return super().insert_joined(staging, insert)

    def joined_rows_written(self, staging: sa.Table) -> None:
        constraint, self._dropped_key = self._dropped_key, None
        if constraint is not None:
            self.execute(
                f"ALTER TABLE {self.database.qualified(staging)} ADD CONSTRAINT "
                f"{self.database.quote(constraint)} PRIMARY KEY ({self.database.quote(ROW_COLUMN)})"
            )

    def map_key(self, key_type: sa.types.TypeEngine) -> list[sa.schema.SchemaItem]:
        """``src_key`` without an index: the join hashes (or sorts) the helper table and never
        looks a key up, and a primary key's index doubles the server time of its ``COPY`` (~0.4 s
        at 1M rows). The keys are the source's unique key as pass 1 read it, and the join's row
        count is checked, so no duplicate can slip in."""
        return [sa.Column("src_key", key_type, nullable=False)]

    def helpers_loaded(self, tables: Sequence[sa.Table]) -> None:
        # Temporary tables are never analyzed by autovacuum; the join plan needs their sizes.
        for table in tables:
            self.execute(f"ANALYZE {self.database.qualified(table)}")

    def primary_key_name(self, table: sa.Table | TableName) -> str:
        name = self.database.qualified(table)
        rows = self.execute(
            "SELECT c.conname FROM pg_constraint c WHERE c.contype = 'p' AND c.conrelid = "
            f"to_regclass({_literal(name)})"
        )
        return rows[0][0]

    def hold_target(self, target: TableName) -> None:
        """``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`` (the publish drops it anyway): a table
        dropped and made again under the name before the lock is the one locked, and checked."""
        self.execute(f"LOCK TABLE {self.database.qualified(target)} IN ACCESS EXCLUSIVE MODE")

    def create_registry(self, table: sa.Table) -> None:
        """Make the registry of releases if it does not exist, owned by the connecting role
        and written by no other (the only registry a run trusts,
        :meth:`PostgreSQLDatabase.registry_problem`: a registry others may write may record
        any table). Other roles may read it. In a savepoint: a run publishing into the same
        schema that made the registry first, uncommitted then, makes this one fail on its name
        once it commits; the registry is then there."""
        qualified = self.database.qualified(table)
        if self.execute(f"SELECT to_regclass({_literal(qualified)})")[0][0] is not None:
            return
        self.execute("SAVEPOINT tclose_registry")
        try:
            super().create_registry(table)
            self.execute(f"GRANT SELECT ON {qualified} TO PUBLIC")
        except sa.exc.IntegrityError:
            self.execute("ROLLBACK TO SAVEPOINT tclose_registry")
        self.execute("RELEASE SAVEPOINT tclose_registry")

    def renamed(self, target: TableName) -> None:
        # The staging table's primary key index keeps its random name unless it can take the
        # conventional one; either way no later staging table collides with it.
        old = self.primary_key_name(target)
        wanted = f"{target.name}_pkey"
        index = TableName(target.schema, wanted)
        taken = self.execute(f"SELECT to_regclass({_literal(self.database.qualified(index))})")
        if taken[0][0] is None and len(wanted.encode()) <= 63:
            self.execute(
                f"ALTER TABLE {self.database.qualified(target)} RENAME CONSTRAINT "
                f"{self.database.quote(old)} TO {self.database.quote(wanted)}"
            )


class PostgreSQLDatabase(SQLDatabase):
    """A PostgreSQL database (driver: psycopg 3; ``postgresql://`` URLs use it too)."""

    session_class = PostgreSQLSession
    identifier_limit = 63  # NAMEDATALEN - 1, in bytes
    identifier_bytes = True
    column_names_compared = "exactly (every name is quoted)"
    interval_type = True
    #: A source's connections: every transaction read-only unless it says otherwise.
    read_only_statements = ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",)
    row_level_security = True

    def column_key(self, name: str) -> str:
        """``name`` itself: tclose quotes every identifier, and PostgreSQL compares quoted
        names exactly (``TCLOSE_ROW`` is another column than ``tclose_row``)."""
        return name

    @property
    def joins_in_snapshot(self) -> bool:
        """True: the run's one transaction is a snapshot (see the module docstring)."""
        return True

    declared = dataclasses.replace(
        SQLDatabase.declared,
        snapshot_reads=True,
        run_lock=True,
        read_hold=True,
        table_dependencies=True,
        in_database_checks=True,
    )

    def adapt_url(self, url: sa.URL) -> sa.URL:
        if url.drivername == "postgresql":
            return url.set(drivername="postgresql+psycopg")
        if url.get_driver_name() != "psycopg":
            raise ConfigError(
                f"The postgresql connector uses the psycopg (3) driver; write the URL as "
                f"postgresql+psycopg://... (got driver {url.get_driver_name()!r})."
            )
        return url

    @property
    def server_version(self) -> int:
        if not hasattr(self, "_server_version"):
            with self.errors("connecting to postgresql"), self.engine.connect() as connection:
                raw = driver_connection(connection)
                self._server_version = int(raw.info.server_version)
        return self._server_version

    def staging_table(
        self, name: TableName, source: sa.Table, *args: Any, **kwargs: Any
    ) -> sa.Table:
        table = super().staging_table(name, source, *args, **kwargs)
        # A random constraint name: a published table keeps its index, and the next staging
        # table of the same target must not collide with it.
        table.primary_key.name = f"tclose_pk_{random_suffix()}"
        return table

    def exists(self, name: TableName, connection: sa.Connection | None = None) -> bool:
        """Whether a relation named ``name`` exists (tables, views, indexes and sequences share
        one name space), as the catalog says now. On a new connection ``to_regclass`` says so.
        Inside a run's ``REPEATABLE READ`` transaction (``connection``) a query of ``pg_class``
        reads the snapshot, which misses a table another session created since, or still sees
        one it dropped, and ``to_regclass`` may answer from the session's cache of the catalog:
        the table is locked instead (``ACCESS SHARE``, in a savepoint), which makes the server
        look the name up afresh, and holds a table found until the publish ends."""
        qualified = self.qualified(name)
        with self.errors(f"looking for table {name}"), _connection(self.engine, connection) as c:
            if connection is None:
                found = c.exec_driver_sql(
                    "SELECT to_regclass(%(name)s) IS NOT NULL", {"name": qualified}
                )
                return bool(found.scalar())
            c.exec_driver_sql("SAVEPOINT tclose_exists")
            try:
                c.exec_driver_sql(
                    f"LOCK TABLE {qualified} IN ACCESS SHARE MODE".replace("%", "%%"), {}
                )
            except sa.exc.DBAPIError as error:
                c.exec_driver_sql("ROLLBACK TO SAVEPOINT tclose_exists")
                # undefined_table: no relation of the name; else one that is not a table
                return getattr(error.orig, "sqlstate", None) != "42P01"
            finally:
                c.exec_driver_sql("RELEASE SAVEPOINT tclose_exists")
            return True

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` in the schema PostgreSQL resolves it to: an existing relation's
        (``to_regclass``, which follows the ``search_path`` for an unqualified name), else,
        with ``create``, the one where a ``CREATE TABLE`` of it lands: the table is created
        inside a transaction that is rolled back, and the catalog says where it went and under
        which name. Refused (:class:`ConfigError`): a temporary relation or a temporary schema,
        however spelled (``pg_temp``, ``pg_temp_3``, a search path that starts with it), as
        ``relpersistence`` and ``pg_is_other_temp_schema`` say; a schema that does not exist;
        a name stored otherwise than configured (the server cuts a long one silently)."""
        with (
            self.errors(f"resolving the table name {name}"),
            self.engine.connect() as connection,
        ):
            transaction = connection.begin()
            try:
                found = self._resolved(connection, name, path, create)
            finally:
                transaction.rollback()
        if found is None:
            return name
        schema, stored, temporary = found
        if temporary:
            raise vanishing_table(name, path, f"in the temporary schema {schema}")
        if stored != name.name:
            raise ConfigError(
                f"==> At {path}\nThe table name {name.name!r} is longer than postgresql keeps: "
                f"the server stores it as {stored!r} (names are cut to 63 bytes, silently). "
                f"Choose a shorter name."
            )
        return TableName(schema, stored)

    def _resolved(
        self, connection: sa.Connection, name: TableName, path: str, create: bool
    ) -> tuple[str, str, bool] | None:
        """``(schema, stored name, temporary)`` of ``name`` (see :meth:`resolve_table`), in
        ``connection``'s transaction (the caller rolls it back)."""
        if name.schema is not None:
            other = connection.exec_driver_sql(
                "SELECT pg_is_other_temp_schema(to_regnamespace(%(s)s))",
                {"s": self.quote(name.schema)},
            ).scalar()
            if other:
                raise vanishing_table(
                    name, path, f"in {name.schema}, another session's temporary schema"
                )
        found = _resolved_row(connection, name, self)
        if found is not None or not create:
            return found
        try:
            # Parameters given (none): the driver then reads %% in a quoted name as %.
            statement = f"CREATE TABLE {self.qualified(name)} ()".replace("%", "%%")
            connection.exec_driver_sql(statement, {})
        except sa.exc.DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != "3F000":  # invalid_schema_name
                raise
            raise ConfigError(
                f"==> At {path}\nThe schema {name.schema} of table {name} does not exist in "
                f"{self.redacted_url}. Create it, or name an existing schema."
            ) from None
        return _resolved_row(connection, name, self)

    def table_identity(self, name: TableName) -> tuple | None:
        """The cluster's ``system_identifier`` (else the postmaster's start time and port), the
        database and the table's OID, as ``to_regclass`` resolves the quoted name (the
        ``search_path`` for an unqualified one)."""
        identities = self._identities("SELECT to_regclass(%(name)s)::oid", name)
        return identities[0] if identities else None

    def release_of(
        self, connection: sa.Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """The table's schema and name from ``pg_class``, and its identity
        (:data:`_IDENTITY`): its OID, which a table keeps for its life and no other table has
        while it lives (a table dropped and made again, or another renamed into its place,
        has another); its comment, the run's mark, which only the table's owner may set; its
        columns, with their declared types and ``NOT NULL``; and its rows (their count and two
        sums of a 64-bit hash of each row's text form, ``hashtextextended`` with two seeds, in
        any row order: a row updated, added or deleted changes them; one read of the table,
        its cost in ``docs/databases.md``). A temporary table has none a release can have."""
        row = connection.exec_driver_sql(_IDENTITY, {"name": self.qualified(name)}).first()
        if row is None:
            return None
        home = TableName(row[0], row[1])
        if row[3] == "t":
            return home, None
        content = connection.exec_driver_sql(
            f"SELECT count(*), coalesce(sum(hashtextextended(t::text, 0)::numeric), 0), "
            f"coalesce(sum(hashtextextended(t::text, 1)::numeric), 0) "
            f"FROM {self.qualified(home)} t".replace("%", "%%"),
            {},
        ).one()
        return home, (
            f"oid {row[2]}, comment {row[4]!r}, columns {row[5]}, "
            f"content {content[0]} rows, hash sums {content[1]} {content[2]}"
        )

    def registry_problem(self, connection: sa.Connection, schema: str | None) -> str | None:
        """Why the registry of releases of ``schema`` is not one tclose may trust
        (:data:`_REGISTRY_TRUST`): it is trusted only if it is a plain table owned by the
        connecting role itself, and no other role (``PUBLIC`` included) may write it, whether by
        a grant or as a member of its owner role, nor change its rows behind a write (a
        trigger or a rule on it). ``None`` when it is trusted, or when there is none."""
        registry = self.qualified(TableName(schema, RELEASES_TABLE))
        row = connection.exec_driver_sql(_REGISTRY_TRUST, {"name": registry}).first()
        if row is None:
            return None
        kind, owner, me, writers, members, hooks = row
        if kind != "r":
            return f"{registry} is not a table"
        if owner != me:
            return (
                f"{registry} belongs to role {owner}, not to the connecting role {me}: a "
                f"registry another role made may record any table"
            )
        others = sorted(set(writers or []) | set(members or []))
        if others:
            return (
                f"other roles may write {registry} ({', '.join(others)}): a registry they may "
                f"write may record any table; REVOKE their INSERT, UPDATE, DELETE, TRUNCATE "
                f"and TRIGGER on it"
            )
        if hooks:
            return (
                f"{registry} has triggers or rules ({', '.join(hooks)}), which tclose never makes"
            )
        return None

    def tables_read(self, name: TableName) -> TablesRead:
        """The identities of ``name`` and of every relation whose rows reading it reads: the
        relations a view's rule reads (``pg_rewrite`` and ``pg_depend``), the partitions and
        inheriting tables (``pg_inherits``) of each, and what the row-level security policies
        of each read (``pg_policy``), transitively. Unknown (:class:`TablesRead`) as soon as
        that closure holds anything but tables, views, materialized views, sequences, types
        other than domains and collations: a function or an operator (whose body may read
        any table), a foreign table (whose rows another server reads, possibly this one), a
        domain (whose checks may call functions)."""
        return self._identities(_READS, name)

    def row_security(self, name: TableName) -> dict[str, Any]:
        """:class:`tclose.connector.RowSecurity`: the tables whose row-level security policies
        filter a read of ``name`` by the connecting role (``current_user``): ``name`` itself,
        and the tables a view reads, transitively, each as the role the database checks them
        for (the view's owner, or the reading role for a ``security_invoker`` view). A table's
        policies filter a role unless the table has none enabled (``relrowsecurity``), the
        role is a superuser or ``BYPASSRLS``, or it has the owner's privileges and the table is
        not ``FORCE ROW LEVEL SECURITY``. A partition or inheriting table read through its
        parent is filtered by the parent's policies only, as PostgreSQL does. Over the closure
        of :meth:`tables_read`: when it is unknown (a function, a foreign table), ``applies``
        is true if a table it lists filters, else ``None`` (unknown), never false, and
        ``unknown`` says why."""
        where = f"looking for row-level security on {name}"
        with self.errors(where), self.engine.connect() as connection:
            role = connection.exec_driver_sql("SELECT current_user").scalar()
            rows = connection.exec_driver_sql(_ROW_SECURITY, {"name": self.qualified(name)}).all()
        tables = [{"table": str(table), "role": str(reader)} for table, reader in rows]
        security: dict[str, Any] = {"applies": bool(tables), "role": str(role), "tables": tables}
        unknown = self.tables_read(name).unknown
        if unknown is not None:
            security.update(applies=True if tables else None, unknown=unknown)
        return security

    def tables_dropped(self, name: TableName) -> list[tuple]:
        """The identities of ``name`` and of the partitions a ``DROP TABLE`` of it drops with
        it (those of a partitioned table, transitively)."""
        return self._identities(_DROPPED_WITH, name)

    def replace_blockers(self, name: TableName) -> list[str]:
        """Everything else in the database that is bound to table ``name``, by PostgreSQL's own
        dependency catalog (:data:`_BLOCKERS`): every object ``pg_depend`` records as depending
        on it, on one of its columns or on its row type — a view, a foreign key, a trigger, an
        index, a policy, a publication, a column or function of its row type, ... — other than
        the primary key tclose gives a release; and every table it inherits from or is a
        partition of, and every table inheriting from it or partition of it (``pg_inherits``).
        Replacing the table would drop those objects with it, detach it from its parent, or
        fail at the publish; a table bound to nothing is replaced."""
        with self.errors(f"looking for what depends on {name}"), self.engine.connect() as c:
            rows = c.exec_driver_sql(_BLOCKERS, {"name": self.qualified(name)}).all()
        return sorted(what for (what,) in rows)

    def _identities(self, query: str, name: TableName) -> TablesRead:
        """:meth:`table_identity` of each OID ``query`` gives for the quoted ``name``, unknown
        with the objects ``query`` describes in its second column, if it has one."""
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            rows = connection.exec_driver_sql(query, {"name": self.qualified(name)}).all()
            oids = [int(row[0]) for row in rows if row[0] is not None]
            unlisted = sorted({str(row[1]) for row in rows if len(row) > 1 and row[1]})
            unknown = _unknown_reads(unlisted)
            if not oids:
                return TablesRead([], unknown)
            try:
                with connection.begin_nested():
                    server = connection.exec_driver_sql(
                        "SELECT system_identifier::text FROM pg_control_system()"
                    ).scalar()
            except sa.exc.DBAPIError:  # not granted: the running postmaster is as unique
                server = connection.exec_driver_sql(
                    "SELECT pg_postmaster_start_time()::text || ':' || current_setting('port')"
                ).scalar()
            database = connection.exec_driver_sql("SELECT current_database()").scalar()
        return TablesRead([("postgresql", server, database, oid) for oid in oids], unknown)

    def declared_types(self, connection: sa.Connection, name: TableName) -> dict[str, str]:
        """``format_type`` of each column (``point``, ``xml``, a composite type qualified when
        its schema is not on the ``search_path``)."""
        rows = connection.exec_driver_sql(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%(name)s) AND attnum > 0 AND NOT attisdropped",
            {"name": self.qualified(name)},
        )
        return {column: declared for column, declared in rows}

    def same_dialect_type(self, column_type: sa.types.TypeEngine) -> sa.types.TypeEngine:
        if isinstance(column_type, postgresql.ENUM):
            column_type.create_type = False  # the type exists: the source uses it
        return column_type


#: The schema, the stored name and whether it is temporary (a temporary relation, or one in a
#: temporary schema) of the relation ``%(name)s`` (quoted) resolves to.
_RESOLVED = """
SELECT n.nspname, c.relname, c.relpersistence = 't' OR n.oid = pg_my_temp_schema()
    OR pg_is_other_temp_schema(n.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%(name)s)
"""


def _resolved_row(
    connection: sa.Connection, name: TableName, database: PostgreSQLDatabase
) -> tuple[str, str, bool] | None:
    """:data:`_RESOLVED` of ``name``: ``(schema, stored name, temporary)``, or ``None``."""
    found = connection.exec_driver_sql(_RESOLVED, {"name": database.qualified(name)}).first()
    return None if found is None else (str(found[0]), str(found[1]), bool(found[2]))


#: The OIDs of a relation (``%(name)s``, quoted) and of every relation it reads, each with the
#: description (``pg_describe_object``) of what the catalog cannot say the reads of, as
#: :meth:`PostgreSQLDatabase.tables_read` says. Built-in functions and types are pinned: no
#: ``pg_depend`` row names them.
_READS = """
WITH RECURSIVE reads(classid, objid) AS (
    SELECT 'pg_class'::regclass::oid, to_regclass(%(name)s)::oid
    UNION
    SELECT next.classid, next.objid FROM reads CROSS JOIN LATERAL (
        SELECT d.refclassid AS classid, d.refobjid AS objid
        FROM pg_class v JOIN pg_rewrite w ON w.ev_class = v.oid JOIN pg_depend d
            ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
        WHERE reads.classid = 'pg_class'::regclass AND v.oid = reads.objid AND v.relkind = 'v'
            AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = reads.objid)
        UNION ALL
        SELECT 'pg_class'::regclass, i.inhrelid FROM pg_inherits i
        WHERE reads.classid = 'pg_class'::regclass AND i.inhparent = reads.objid
        UNION ALL
        SELECT d.refclassid, d.refobjid FROM pg_policy p JOIN pg_depend d
            ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
        WHERE reads.classid = 'pg_class'::regclass AND p.polrelid = reads.objid
            AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = reads.objid)
    ) next
)
SELECT CASE WHEN r.classid = 'pg_class'::regclass THEN r.objid END,
    CASE WHEN c.relkind IN ('r', 'p', 'v', 'm', 'S', 'c')
        OR (r.classid = 'pg_type'::regclass AND t.typtype <> 'd')
        OR r.classid = 'pg_collation'::regclass THEN NULL
        ELSE pg_describe_object(r.classid, r.objid, 0) END
FROM reads r
LEFT JOIN pg_class c ON r.classid = 'pg_class'::regclass AND c.oid = r.objid
LEFT JOIN pg_type t ON r.classid = 'pg_type'::regclass AND t.oid = r.objid
WHERE r.objid IS NOT NULL
"""


def _unknown_reads(unlisted: list[str]) -> str | None:
    """Why a read that reaches the objects ``unlisted`` (described) reads tables the catalog
    cannot list, or ``None`` when it reaches none."""
    if not unlisted:
        return None
    return (
        f"it reads through {', '.join(unlisted)}, whose reads the catalog does not list "
        f"(a function's body, a foreign table's server)"
    )


#: The tables whose row-level security filters a read of a relation (``%(name)s``, quoted) by
#: ``current_user``, with the role each is checked for (:meth:`PostgreSQLDatabase.row_security`):
#: a view's relations are read with its owner's rights unless it is ``security_invoker``.
_ROW_SECURITY = """
WITH RECURSIVE reads(oid, reader) AS (
    SELECT to_regclass(%(name)s)::oid, (SELECT oid FROM pg_roles WHERE rolname = current_user)
    UNION
    SELECT d.refobjid,
        CASE WHEN coalesce((SELECT bool_or(split_part(o, '=', 2)::boolean)
                            FROM unnest(v.reloptions) o
                            WHERE split_part(o, '=', 1) = 'security_invoker'), false)
            THEN reads.reader ELSE v.relowner END
    FROM reads
    JOIN pg_class v ON v.oid = reads.oid AND v.relkind = 'v'
    JOIN pg_rewrite w ON w.ev_class = v.oid
    JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
        AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> v.oid
)
SELECT DISTINCT c.oid::regclass::text, r.rolname
FROM reads JOIN pg_class c ON c.oid = reads.oid JOIN pg_roles r ON r.oid = reads.reader
WHERE c.relkind IN ('r', 'p') AND c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
    AND (c.relforcerowsecurity OR NOT pg_has_role(reads.reader, c.relowner, 'USAGE'))
ORDER BY 1, 2
"""

#: What is bound to a table (``%(name)s``, quoted), in words
#: (:meth:`PostgreSQLDatabase.replace_blockers`).
_BLOCKERS = """
WITH t AS (SELECT c.oid, c.reltype FROM pg_class c WHERE c.oid = to_regclass(%(name)s))
SELECT DISTINCT CASE
    WHEN d.classid = 'pg_rewrite'::regclass THEN
        (SELECT 'view ' || w.ev_class::regclass::text FROM pg_rewrite w WHERE w.oid = d.objid)
    WHEN d.classid = 'pg_constraint'::regclass THEN
        (SELECT CASE WHEN k.contype = 'f' AND k.conrelid <> t.oid
                THEN 'foreign key ' || quote_ident(k.conname) || ' of '
                    || k.conrelid::regclass::text
                ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
         FROM pg_constraint k WHERE k.oid = d.objid)
    ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
FROM pg_depend d CROSS JOIN t
WHERE ((d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid)
        OR (d.refclassid = 'pg_type'::regclass AND d.refobjid = t.reltype))
    AND d.deptype IN ('n', 'a')
    AND NOT (d.classid = 'pg_class'::regclass AND d.objid = t.oid)
    AND NOT (d.classid = 'pg_type'::regclass AND d.objid = t.reltype)
    AND NOT EXISTS (
        SELECT 1 FROM pg_constraint k
        WHERE d.classid = 'pg_constraint'::regclass AND k.oid = d.objid
            AND k.conrelid = t.oid AND k.contype = 'p')
UNION
SELECT 'table ' || i.inhparent::regclass::text
    || CASE WHEN c.relispartition THEN ' (it is a partition of it)'
        ELSE ' (it inherits from it)' END
FROM pg_inherits i CROSS JOIN t JOIN pg_class c ON c.oid = t.oid WHERE i.inhrelid = t.oid
UNION
SELECT 'table ' || i.inhrelid::regclass::text
    || CASE WHEN c.relispartition THEN ' (a partition of it)' ELSE ' (it inherits from it)' END
FROM pg_inherits i CROSS JOIN t JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = t.oid
"""

#: A table's schema, stored name, OID, persistence, comment and columns (name, declared type,
#: ``NOT NULL``), as :meth:`PostgreSQLDatabase.release_of` records them.
_IDENTITY = """
SELECT n.nspname, c.relname, c.oid, c.relpersistence, obj_description(c.oid, 'pg_class'),
    (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
            || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum)
     FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%(name)s)
"""

#: What decides whether a registry of releases (``%(name)s``, quoted) is trusted
#: (:meth:`PostgreSQLDatabase.registry_problem`): its kind, its owner, the connecting role, the
#: other roles granted a write on it (``PUBLIC`` too), the members of its owner role, and its
#: triggers and rules.
_REGISTRY_TRUST = """
SELECT c.relkind, pg_get_userbyid(c.relowner), current_user::text,
    ARRAY(SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END
          FROM aclexplode(c.relacl) a
          WHERE a.grantee <> c.relowner
              AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER')),
    ARRAY(SELECT pg_get_userbyid(m.member) FROM pg_auth_members m WHERE m.roleid = c.relowner),
    ARRAY(SELECT 'trigger ' || tgname FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal
          UNION ALL SELECT 'rule ' || rulename FROM pg_rewrite WHERE ev_class = c.oid)
FROM pg_class c WHERE c.oid = to_regclass(%(name)s)
"""

#: The OIDs of a relation (``%(name)s``, quoted) and of the partitions dropped with it.
_DROPPED_WITH = """
WITH RECURSIVE dropped(oid) AS (
    SELECT to_regclass(%(name)s)::oid
    UNION
    SELECT i.inhrelid FROM dropped JOIN pg_class c ON c.oid = dropped.oid AND c.relkind = 'p'
    JOIN pg_inherits i ON i.inhparent = dropped.oid
)
SELECT oid FROM dropped WHERE oid IS NOT NULL
"""


#: Zero bytes after a chunk's rows: a value gathered at a NULL field's position stays inside
#: the buffer (and is not used).
_PAD = bytes(8)


def _copy_frames(
    copy: Any,
    names: list[str],
    picks: Sequence[tuple[int, str]],
    count: int,
    chunk_size: int,
    sha256: Any = None,
) -> Iterator[pd.DataFrame]:
    """The DataFrames of a binary ``COPY ... TO STDOUT`` (psycopg's ``Copy``: one row per
    message) of rows of ``count`` fields: the fixed-width fields ``picks`` (``(position,
    NumPy format)``) as the columns ``names``, ``chunk_size`` rows a frame. Every byte is
    added to ``sha256`` if given. Each chunk is joined into one buffer and cut by NumPy
    (:func:`_copy_chunk`, :func:`_copy_fields`, :func:`_fields_frame`); a stream that does not
    end with the trailer, or goes on after it, is a :class:`DataError`. A reader that stops
    early drains the ``COPY`` instead of cancelling it (a cancel would abort the session's
    transaction)."""
    messages = iter(copy)
    try:
        rest = _copy_header(next(messages, b""), sha256)
        if rest:
            messages = itertools.chain([rest], messages)
        ended = False
        # Each message copied out of psycopg's buffer at once: ~2x faster than keeping its
        # buffers alive for the chunk.
        while chunk := list(map(bytes, itertools.islice(messages, chunk_size))):
            if ended:
                raise DataError("Unexpected binary COPY data from PostgreSQL (after the end).")
            rows, ended = _copy_chunk(chunk, sha256)
            if rows is not None:
                values = _copy_fields(*rows, count, picks)
                yield _fields_frame(values, names, [f for _, f in picks])
        if not ended:
            raise DataError("Unexpected binary COPY data from PostgreSQL (no trailer).")
    except GeneratorExit:
        with contextlib.suppress(Exception):
            for _ in copy:
                pass
        raise


def _copy_header(message: Any, sha256: Any) -> Any:
    """Check (and add to ``sha256``, unless ``None``) the header of a binary ``COPY ... TO
    STDOUT``, which starts its first message, and return what follows it in that message (the
    first row, the trailer, or nothing)."""
    head = bytes(message)
    if not head.startswith(_COPY_SIGNATURE) or len(head) < len(_COPY_HEADER):
        raise DataError("Unexpected binary COPY header from PostgreSQL.")
    flags, extension = struct.unpack_from(">ii", head, len(_COPY_SIGNATURE))
    size = len(_COPY_HEADER) + extension
    if flags & (1 << 16) or extension < 0 or len(head) < size:
        raise DataError("Unexpected binary COPY header from PostgreSQL (flags).")
    if sha256 is not None:
        sha256.update(head[:size])
    return head[size:]


def _copy_chunk(
    messages: list[Any], sha256: Any
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray] | None, bool]:
    """Hash (unless ``sha256`` is ``None``) a chunk of binary ``COPY`` messages (one row each,
    the last one perhaps the trailer) and join them: ``((buffer, starts, ends), ended)``, ``buffer`` the rows' bytes
    (then :data:`_PAD`) as ``uint8``, row ``i`` at ``starts[i]:ends[i]``; ``None`` for no row;
    ``ended`` if the trailer came."""
    data = b"".join([*messages, _PAD])
    size = len(data) - len(_PAD)
    if sha256 is not None:
        sha256.update(memoryview(data)[:size])
    ends = np.cumsum(np.fromiter(map(len, messages), dtype=np.int64, count=len(messages)))
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    ended = len(messages[-1]) == len(_COPY_TRAILER)  # a row holds at least one field
    if ended:
        if data[size - len(_COPY_TRAILER) : size] != _COPY_TRAILER:
            raise DataError("Unexpected binary COPY trailer from PostgreSQL.")
        starts, ends = starts[:-1], ends[:-1]
    if not len(starts):
        return None, ended
    return (np.frombuffer(data, dtype=np.uint8), starts, ends), ended


def _view(buffer: np.ndarray, fmt: str) -> np.ndarray:
    """``buffer`` read as ``fmt`` at every byte offset: element ``i`` is the value whose bytes
    start at ``buffer[i]`` (overlapping, unaligned; a gather reads any field in one step)."""
    width = np.dtype(fmt).itemsize
    return np.ndarray(
        shape=(len(buffer) - width + 1,), dtype=fmt, buffer=buffer, offset=0, strides=(1,)
    )


def _copy_fields(
    buffer: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    count: int,
    picks: Sequence[tuple[int, str]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The values of fixed-width fields of binary ``COPY`` rows of ``count`` fields (row ``i``
    at ``buffer[starts[i]:ends[i]]``, ``buffer`` padded by :data:`_PAD`): for each ``(field
    position, NumPy format)`` of ``picks``, its values (in that format; meaningless where
    NULL) and where it is NULL. Every row is walked field by field, all rows at once: a
    field is its length (``int32``, ``-1`` for NULL) then that many bytes; a field count,
    length or row size that does not fit is a :class:`DataError`."""
    if (_view(buffer, ">i2")[starts] != count).any():
        raise DataError("Unexpected binary COPY row from PostgreSQL (field count).")
    lengths = _view(buffer, ">i4")
    wanted = dict(picks)
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    position = starts + 2
    lowest = 0
    try:
        for field in range(count):
            length = lengths[position].astype(np.int64)
            fmt = wanted.get(field)
            position += 4
            if fmt is not None:
                null = length == -1
                if not (null | (length == np.dtype(fmt).itemsize)).all():
                    raise DataError("Unexpected binary COPY row from PostgreSQL (field size).")
                found[field] = (_view(buffer, fmt)[position], null)
            else:
                lowest = min(lowest, int(length.min()))
            position += np.maximum(length, 0, out=length)
    except IndexError:  # a length past the end of the buffer
        raise DataError("Unexpected binary COPY row from PostgreSQL (row size).") from None
    if lowest < -1:
        raise DataError("Unexpected binary COPY row from PostgreSQL (field size).")
    if (position != ends).any():  # a field past its row's end (or short of it)
        raise DataError("Unexpected binary COPY row from PostgreSQL (row size).")
    return [found[p] for p, _ in picks]


def _fields_frame(
    fields: list[tuple[np.ndarray, np.ndarray]], names: list[str], formats: list[str]
) -> pd.DataFrame:
    """The DataFrame of the fields of :func:`_copy_fields`: ``int64`` and ``float64`` columns
    when no value is NULL, else built from the tuples of Python values (``int``, ``float``,
    ``None`` for NULL) that psycopg's binary loaders give, as the generic path builds it."""
    import pandas as pd

    columns = [
        values.astype(np.float64 if fmt[1] == "f" else np.int64)
        for (values, _), fmt in zip(fields, formats, strict=True)
    ]
    if not any(null.any() for _, null in fields):
        frame = pd.DataFrame(dict(enumerate(columns)))  # by position: two names may be equal
        frame.columns = pd.Index(names)
        return frame
    python = []
    for column, (_, null) in zip(columns, fields, strict=True):
        values = column.tolist()
        for i in np.flatnonzero(null).tolist():
            values[i] = None
        python.append(values)
    return pd.DataFrame.from_records(list(zip(*python)), columns=names)


def _as_text(cursor: Any) -> None:
    """Make ``cursor`` (psycopg, text format) return ``json``, ``jsonb``, ``interval`` and
    arrays as the text the server sends (``jsonb``: its normalized text), not parsed into
    Python objects.

    An array's text keeps what a Python list cannot hold: its bounds (``[0:1]={1,2}``) and the
    shape of its dimensions; ``COPY ... FROM STDIN`` in text format reads that text back into
    the same value. Arrays of a type psycopg does not know (an enum, a composite type) come as
    text anyway. An interval's text keeps its months, days and time apart, which a ``timedelta``
    does not (``1 year 2 mons`` would be ``425 days``, ``24:00:00`` would be ``1 day``)."""
    from psycopg.types.string import TextLoader

    for name in ("json", "jsonb", "interval"):
        cursor.adapters.register_loader(name, TextLoader)
    for info in cursor.adapters.types:
        if info.array_oid:
            cursor.adapters.register_loader(info.array_oid, TextLoader)


def _nul_error(columns: Sequence[str], rows: Sequence[tuple]) -> DataError:
    """The error for ``rows`` (in ``columns`` order) whose text holds a NUL character."""
    counts = {
        column: sum(1 for row in rows if isinstance(row[i], str) and "\x00" in row[i])
        for i, column in enumerate(columns)
    }
    found = ", ".join(f"Column {c!r} in {n} row(s)" for c, n in counts.items() if n)
    return DataError(
        f"Text holding a NUL character (0x00), which PostgreSQL's text cannot store: {found} "
        f"of a batch of {len(rows)}. Remove the character in a view of the source, or drop "
        f"the column (role: identifier)."
    )


def _literal(text: str) -> str:
    """``text`` as a string literal whatever ``standard_conforming_strings`` says: an escape
    string (``E'...'``, backslashes doubled). A plain ``'...'`` literal of a name with a
    backslash broke out of itself on a server, role or URL that turns the setting off."""
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


class PostgreSQLConnector:
    """Connector for PostgreSQL (``postgresql://`` and ``postgresql+psycopg://`` URLs)."""

    name = "postgresql"
    dialects = ("postgresql",)

    def connect(self, url: str, password_file: str | None = None) -> PostgreSQLDatabase:
        return PostgreSQLDatabase(url, password_file)


@hookimpl
def register_connectors(register):
    register(PostgreSQLConnector())
