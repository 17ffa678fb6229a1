"""PostgreSQL sessions: the run's ``REPEATABLE READ`` transaction, its advisory run lock, reads
through binary ``COPY`` and server-side cursors, bulk writes through ``COPY ... FROM STDIN``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tclose.base.digests import COPY_DIGEST_ALGORITHM
from tclose.connectors.postgresql.binary_copy import (
    _COPY_HEADER,
    _COPY_TRAILER,
    _FIXED_WIDTH,
    _copy_frames,
)
from tclose.connectors.sql import (
    KEY_LABEL,
    ORDER_IS_IDENTITY,
    ROW_COLUMN,
    DriverSession,
    TableName,
    bits_as_text,
    driver_connection,
    random_suffix,
    wait_in_slices,
)
from tclose.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from tclose.connectors.postgresql.database import PostgreSQLDatabase


#: Seconds a run waits for another run on the same target to finish before giving up.
LOCK_WAIT_SECONDS = 30


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
