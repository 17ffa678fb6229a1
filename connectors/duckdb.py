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
- Reads: results stream from DuckDB in chunks, in key order: the frames of the
  quasi-identifiers and confidential attributes (integers, ``FLOAT``, ``DOUBLE``) as NumPy
  vectors (``fetch_df_chunk``), other columns as Python values (``fetchmany``).
- Bulk writes: rows are handed to DuckDB as a pandas DataFrame it scans in place (``INSERT ...
  SELECT`` from the registered frame), never row by row (``executemany`` is slow in DuckDB).
- Types: read from DuckDB's own catalog (``duckdb_columns()``), so a type is published exactly
  as the source declares it: ``DOUBLE`` stays ``DOUBLE``, ``DECIMAL(p,s)``, ``TIMESTAMP``,
  ``TIMESTAMP WITH TIME ZONE``, ``HUGEINT``, lists and structs included (a type without a
  generic SQLAlchemy equivalent can be published only into DuckDB).

Parquet and CSV files are read and written through the same machinery by
:mod:`tclose.connectors.files`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import decimal
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import registry as dialect_registry
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from tclose.connectors.sql import (
    KEY_LABEL,
    ORDER_IS_IDENTITY,
    NativeType,
    Session,
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    _existing_tables,
    bits_as_text,
    driver_connection,
    random_suffix,
    shown,
    tables_read_through,
    vanishing_table,
)
from tclose.errors import ConfigError, DataError, columns_hold
from tclose.hookspecs import hookimpl

if TYPE_CHECKING:
    import pandas as pd

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


#: DuckDB types whose values Python's ``datetime``/``time`` hold only to the microsecond.
_NANOSECONDS = ("TIMESTAMP_NS", "TIME_NS")
#: DuckDB types read as their text when streamed: the nanosecond ones, and ``JSON``, whose
#: values DuckDB's Python client may give parsed (a number, a list) rather than as written.
_AS_TEXT = (*_NANOSECONDS, "JSON")

#: ``(precision, scale)`` of a decimal of another database that has no precision: DuckDB's widest
#: decimal, with as many digits after the point as before it (a ``bigint`` fits).
WIDEST_DECIMAL = (38, 18)


def _exact_decimals(
    values: Sequence[Any], column: str, column_type: sa.Numeric
) -> tuple[str | None, ...]:
    """``values`` (decimals, integers, floats) as the decimal texts DuckDB reads into
    ``column_type`` without rounding (a float by its shortest round-trip text).

    Raises:
        DataError: naming ``column`` and counting the values ``column_type`` cannot hold
            exactly (DuckDB would round them to its scale, silently), or at all (NaN and
            infinities: a DuckDB decimal has none).
    """
    precision, scale = column_type.precision or 18, column_type.scale or 0
    exact = decimal.Context(prec=1000)
    texts: list[str | None] = []
    inexact = special = other = 0
    for value in values:
        if value is None:
            texts.append(None)
            continue
        try:
            number = value if isinstance(value, Decimal) else Decimal(repr(value))
        except (decimal.InvalidOperation, TypeError, ValueError):
            other += 1  # text or bytes (SQLite keeps any value in a NUMERIC column)
            texts.append(None)
            continue
        if number.is_finite():
            rounded = number.quantize(Decimal(1).scaleb(-scale), context=exact)
            if rounded != number or rounded.adjusted() >= precision - scale:
                inexact += 1
        else:
            special += 1
        texts.append(str(number))
    if other:
        raise DataError(
            f"Column {column!r} holds values that are not numbers in {other} row(s) of a batch "
            f"of {len(values)}, which DuckDB's DECIMAL({precision},{scale}) cannot hold. Clean "
            f"or cast the column in a view of the source, or drop it (role: identifier)."
        )
    if special:
        raise DataError(
            f"Column {column!r} holds NaN or infinite values in {special} row(s) of a batch of "
            f"{len(values)}, which DuckDB's DECIMAL({precision},{scale}) cannot hold. Cast the "
            f"column to a float in a view of the source, or drop it (role: identifier)."
        )
    if inexact:
        raise DataError(
            f"Column {column!r} holds values that DuckDB's DECIMAL({precision},{scale}) "
            f"cannot hold exactly (more than {scale} decimal places or {precision - scale} "
            f"integer digits) in {inexact} row(s) of a batch of {len(values)}: they would be "
            f"rounded. Cast the column in a view of the source, or drop it (role: identifier)."
        )
    return tuple(texts)


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

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its type as DuckDB's catalog spells it (``duckdb_columns()``'s
        ``data_type``: ``DECIMAL(18,3)``, ``TIMESTAMP WITH TIME ZONE``)."""
        rows = self.connection.execute(
            sa.text(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE lower(schema_name) = "
                "lower(:s) AND lower(table_name) = lower(:t) AND database_name = "
                "current_database()"
            ),
            {"s": table.schema or "main", "t": table.name},
        ).fetchall()
        return {str(name): str(kind) for name, kind in rows}

    def relation_kind(self, table: sa.Table) -> str | None:
        """``"view"`` when DuckDB's catalog has no table of that name but a view, else
        ``None`` (names compared without case, as DuckDB does)."""
        found = self.connection.execute(
            sa.text(
                "SELECT (SELECT count(*) FROM duckdb_tables() WHERE lower(schema_name) = "
                "lower(:s) AND lower(table_name) = lower(:t) AND database_name = "
                "current_database()), (SELECT count(*) FROM duckdb_views() WHERE "
                "lower(schema_name) = lower(:s) AND lower(view_name) = lower(:t) AND NOT internal)"
            ),
            {"s": table.schema or "main", "t": table.name},
        ).first()
        return "view" if found and not found[0] and found[1] else None

    def infinite_counts(self, name: TableName, columns: Sequence[str]) -> dict[str, int]:
        """Date or timestamp column of ``columns`` → its rows holding ``infinity`` or
        ``-infinity`` (other columns are left out; one aggregate query, none without such a
        column)."""
        table = self.table(name)
        dialect = self.database.engine.dialect
        dated = [
            c
            for c in columns
            if table.c[c].type.compile(dialect=dialect).upper().startswith(("DATE", "TIMESTAMP"))
        ]
        if not dated:
            return {}
        counts = ", ".join(
            f"count(*) FILTER (WHERE isinf({self.database.quote(c)}))" for c in dated
        )
        with self.database.errors(f"reading {name}"):
            row = self.connection.exec_driver_sql(
                f"SELECT {counts} FROM {self.database.qualified(name)}"
            ).one()
        return dict(zip(dated, row, strict=True))

    def refuse_unstreamable(
        self, name: TableName, columns: Sequence[str], target_dialect: str
    ) -> None:
        """:class:`DataError` naming each date or timestamp column of ``columns`` holding
        ``infinity`` or ``-infinity``, with its count: DuckDB's Python client reads them as
        the last and first dates Python holds (``9999-12-31``, ``0001-01-01``), so streamed
        into any database (``target_dialect``, DuckDB's own included) they would be published
        as those dates (and verified). The runner calls this before it streams pass-through
        columns into a target."""
        counts = self.infinite_counts(name, columns)
        found = [f"{c!r} ({n} rows)" for c, n in counts.items() if n]
        if found:
            holds = columns_hold(found)
            raise DataError(
                f"{holds} infinite dates or timestamps ('infinity', '-infinity'), which DuckDB "
                f"reads into Python as 9999-12-31 and 0001-01-01: they would be published as "
                f"those dates. Cast the columns to text in a view of the source, or drop them "
                f"(role: identifier)."
            )

    def read_rows(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """As :meth:`Session.read_rows`, with each ``infinity`` or ``-infinity`` of a date or
        timestamp column as an :class:`InfiniteDate` or :class:`InfiniteDatetime`: equal to the
        value DuckDB's client gives (``9999-12-31``, ``0001-01-01``, ...), so every use of the
        value is the same, but with a ``repr`` of its own, which the content digest
        (:data:`tclose.base.digests.ORDERED_DIGEST_ALGORITHM`) hashes: ``infinity`` and
        ``9999-12-31`` hash apart, so a published table changed from one to the other fails
        its digest. A table holding such a value is read with an ``isinf`` flag per date
        column holding one (a ``TIMESTAMP_NS``, read as text, says ``infinity`` itself)."""
        infinite = [c for c, n in self.infinite_counts(name, columns).items() if n]
        if not infinite:
            yield from super().read_rows(name, columns, key, chunk_size, with_key)
            return
        statement, types = self.read_statement(name, columns, key, with_key)
        (table,) = statement.get_final_froms()  # the flags read the same table
        width = len(statement.selected_columns)
        first = width - len(columns)
        positions = [first + list(columns).index(c) for c in infinite]
        flags = [
            sa.func.isinf(table.c[c]).label(f"tclose_isinf_{i}") for i, c in enumerate(infinite)
        ]
        with self.database.errors(f"reading {name}"):
            for rows in self.stream(statement.add_columns(*flags), chunk_size, types):
                yield [_marked(tuple(row), width, positions) for row in rows]

    def read_statement(
        self, name: TableName, columns: Sequence[str], key: str | None, with_key: bool
    ) -> tuple[sa.Select, list[sa.types.TypeEngine]]:
        """As :meth:`Session.read_statement`, with intervals read as their text: DuckDB's Python
        client gives a ``timedelta``, which counts a month as 30 days and folds days into hours
        (``1 year 2 months`` would be ``420 days``, ``24:00:00`` would be ``1 day``). So are
        ``TIMESTAMP_NS`` and ``TIME_NS`` (Python's ``datetime`` and ``time`` drop the
        nanoseconds: streamed into another DuckDB file or a Parquet file, ``.123456789`` would
        be published as ``.123456``), and ``JSON`` (the client
        may give a value parsed, ``12345678901234567890123`` as an ``int``: its text as
        written is what another database's JSON or text column must get)."""
        statement, types = super().read_statement(name, columns, key, with_key)
        selected = list(statement.selected_columns)
        first = len(selected) - len(types)
        for i, column_type in enumerate(types, start=first):
            as_text = isinstance(column_type, NativeType) and column_type.name in _AS_TEXT
            if isinstance(column_type, sa.Interval) or as_text:
                label = selected[i]
                selected[i] = sa.cast(label.element, sa.String).label(label.name)
        return statement.with_only_columns(*selected), types

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """As :meth:`Session.read`, faster when every selected column (the key's included) is
        an integer of at most 32 bits unsigned or 64 bits signed, ``FLOAT`` or ``DOUBLE``:
        DuckDB then hands over each vector of values as NumPy arrays (``fetch_df_chunk``)
        instead of a Python tuple per row, in the same statement and transaction.

        The frames are the very frames of the generic path, which builds each chunk of
        ``chunk_size`` rows with ``pd.DataFrame.from_records`` from the driver's Python values
        (:func:`_records_like`): same chunks, same dtypes, same values (tested against it).
        Any other type (decimals, ``UBIGINT``, ``HUGEINT``, booleans, text, dates) takes the
        generic path."""
        statement, _ = self.read_statement(name, columns, key, with_key)
        names = ([KEY_LABEL] if with_key else []) + list(columns)
        raw = driver_connection(self.connection)
        dialect = self.database.engine.dialect
        with self.database.errors(f"reading {name}"):
            described = raw.execute(f"DESCRIBE {statement.compile(dialect=dialect)}").fetchall()
        types = [str(row[1]) for row in described]
        if any(t not in _VECTOR_TYPES for t in types):
            yield from super().read(name, columns, key, chunk_size, with_key)
            return
        # A float column's NaN and NULL both arrive as NaN: one flag per float column tells
        # them apart (a chunk of NULLs only is a column of None in the generic path).
        selected = list(statement.selected_columns)
        floats = [i for i, t in enumerate(types) if t in ("FLOAT", "DOUBLE")]
        flags = [selected[i].element.is_(None).label(f"tclose_null_{i}") for i in floats]
        query = str(statement.add_columns(*flags).compile(dialect=dialect))
        with self.database.errors(f"reading {name}"):
            result = raw.execute(query)
            pending: list[pd.DataFrame] = []
            held = 0
            while True:
                vectors = result.fetch_df_chunk(_VECTORS_PER_FETCH)
                if len(vectors):
                    pending.append(vectors)
                    held += len(vectors)
                while held >= chunk_size or (held and not len(vectors)):
                    chunk, pending, held = _take(pending, min(held, chunk_size))
                    yield _records_like(chunk, names, floats)
                if not len(vectors):
                    return

    def content_order(self, columns: Sequence[sa.ColumnElement]) -> list[sa.ColumnElement]:
        """Each value in DuckDB's order, NULL first: text by its bytes, whatever
        ``default_collation`` says (``COLLATE binary``); integers, decimals, booleans, dates,
        times, UUIDs and blobs by value; a value of any other type (floats, whose ``-0.0``
        equals ``0.0``; lists, structs, maps) by value, then by its text form byte by byte."""
        keys: list[sa.ColumnElement] = []
        for column in columns:
            kind = column.type
            if isinstance(kind, sa.String):
                keys.append(column.collate("binary").nulls_first())
            elif isinstance(kind, ORDER_IS_IDENTITY) or (
                isinstance(kind, sa.Numeric) and not isinstance(kind, sa.Float)
            ):
                keys.append(column.nulls_first())
            else:
                text = sa.func.encode(sa.cast(column, sa.String()))
                keys += [column.nulls_first(), text.nulls_first()]
        return keys

    def insert_arrays(
        self, table: sa.Table, arrays: Mapping[str, np.ndarray], chunk_size: int = 50_000
    ) -> None:
        """One ``INSERT ... SELECT`` from the arrays, scanned by DuckDB in place."""
        import pandas as pd

        frame = pd.DataFrame({c: np.asarray(a) for c, a in arrays.items()})
        self.insert_frame(table, list(arrays), frame)

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Rows as a DataFrame of Python objects (no pandas conversion: an integer column with
        NULLs stays integers), which DuckDB scans and casts to the column types; ``Decimal``
        values go as text, so that no precision depends on the values DuckDB samples (into a
        decimal column only if exact: :func:`_exact_decimals`), and so do the floats of a
        column holding a NaN (which DuckDB would read as NULL)."""
        import pandas as pd

        if not rows:
            return
        rows = bits_as_text(table, columns, rows)
        data: dict[str, Any] = {}
        for i, values in enumerate(zip(*rows, strict=True)):
            column_type = table.c[columns[i]].type
            if isinstance(column_type, sa.Numeric) and not isinstance(column_type, sa.Float):
                values = _exact_decimals(values, columns[i], column_type)
            elif any(isinstance(v, Decimal) for v in values):
                values = tuple(None if v is None else str(v) for v in values)
            elif any(isinstance(v, float) and v != v for v in values):
                # DuckDB scans a float NaN among Python objects as NULL; its text is a NaN.
                values = tuple(None if v is None else repr(v) for v in values)
            data[columns[i]] = pd.Series(values, dtype=object)
        self.insert_frame(table, columns, pd.DataFrame(data))

    def insert_frame(self, table: sa.Table, columns: Sequence[str], frame: Any) -> None:
        """``INSERT INTO table (columns) SELECT columns FROM`` the registered ``frame``, whose
        columns bear the same names (so that DuckDB's error about a value names its column)."""
        view = f"tclose_frame_{random_suffix()}"
        raw = driver_connection(self.connection)
        selected = [sa.cast(sa.column(c), table.c[c].type) for c in columns]
        statement = table.insert().from_select(
            list(columns), sa.select(*selected).select_from(sa.table(view))
        )
        with self.database.errors(f"writing {shown(table)}"):
            raw.register(view, frame)
            try:
                self.connection.execute(statement)
            except BaseException:
                # The failed insert aborted the transaction: unregistering fails too, and its
                # error ("Current transaction is aborted") must not replace the insert's.
                with contextlib.suppress(Exception):
                    raw.unregister(view)
                raise
            raw.unregister(view)


class InfiniteDate(dt.date):
    """A DuckDB ``DATE`` ``infinity`` (``-infinity``) as :meth:`DuckDBSession.read_rows` gives
    it: the date DuckDB's client reads it as, ``9999-12-31`` (``0001-01-01``), and equal to it,
    but whose ``repr``, which the content digest hashes, is ``InfiniteDate('infinity')``
    (``InfiniteDate('-infinity')``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_infinity_text(self)!r})"


class InfiniteDatetime(dt.datetime):
    """A DuckDB timestamp ``infinity`` (``-infinity``), as :class:`InfiniteDate`: equal to
    ``9999-12-31 23:59:59.999999`` (``0001-01-01 00:00:00``), ``repr``
    ``InfiniteDatetime('infinity')``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_infinity_text(self)!r})"


def _infinity_text(value: dt.date) -> str:
    """``'infinity'`` for the last date Python holds, ``'-infinity'`` for the first."""
    return "-infinity" if value.year == 1 else "infinity"


def _marked(row: tuple, width: int, positions: Sequence[int]) -> tuple:
    """The first ``width`` values of ``row``, the date or timestamp at ``positions[i]`` made an
    :class:`InfiniteDate` or :class:`InfiniteDatetime` where the flag ``row[width + i]`` is
    true (a value read as text already says ``infinity``)."""
    flags = row[width:]
    if not any(flags):
        return row[:width]
    values = list(row[:width])
    for position, flag in zip(positions, flags, strict=True):
        value = values[position]
        if not flag:
            continue
        if isinstance(value, dt.datetime):
            values[position] = InfiniteDatetime(
                *value.timetuple()[:6], value.microsecond, tzinfo=value.tzinfo
            )
        elif isinstance(value, dt.date):
            values[position] = InfiniteDate(value.year, value.month, value.day)
    return tuple(values)


#: DuckDB result types that :meth:`DuckDBSession.read` fetches as NumPy vectors: their values
#: all fit an ``int64`` or a ``float64`` exactly, as the driver's Python values do.
_VECTOR_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}
    | {"FLOAT", "DOUBLE"}
)
#: DuckDB vectors (2,048 rows each) per ``fetch_df_chunk`` call of the fast read.
_VECTORS_PER_FETCH = 8


def _take(pending: list[pd.DataFrame], rows: int) -> tuple[pd.DataFrame, list[pd.DataFrame], int]:
    """The first ``rows`` rows of the frames ``pending`` as one frame, the frames left, and
    their rows."""
    import pandas as pd

    joined = pd.concat(pending, ignore_index=True) if len(pending) > 1 else pending[0]
    rest = joined.iloc[rows:]
    left = [rest] if len(rest) else []
    return joined.iloc[:rows], left, len(rest)


def _records_like(chunk: pd.DataFrame, names: Sequence[str], floats: Sequence[int]) -> pd.DataFrame:
    """The frame ``pd.DataFrame.from_records`` builds from the Python values of ``chunk`` (as
    DuckDB's ``fetch_df_chunk`` gives them: nullable integers, ``float32`` for ``FLOAT``, and
    after the ``names`` columns one ``IS NULL`` flag per float column, at positions ``floats``):
    per column, no NULL → ``int64`` (integers) or ``float64`` (NaN kept); some NULLs →
    ``float64`` with NaN; only NULLs → ``object`` holding ``None``."""
    import pandas as pd

    flags = dict(zip(floats, range(len(names), len(names) + len(floats)), strict=True))
    data: dict[int, np.ndarray] = {}  # by position: a column may be named like the key label
    for i in range(len(names)):
        values = chunk.iloc[:, i]
        flag = flags.get(i)
        null = values.isna().to_numpy() if flag is None else chunk.iloc[:, flag].to_numpy(bool)
        if null.all():
            data[i] = np.full(len(values), None, dtype=object)
        elif flag is None and not null.any():
            data[i] = values.to_numpy(dtype=np.int64)
        else:
            data[i] = values.to_numpy(dtype=np.float64, na_value=np.nan)
    frame = pd.DataFrame(data)
    frame.columns = pd.Index(list(names), dtype=object)
    return frame


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
                f"==> At {path.split('.')[0]}.url\nThe file {Path(database).absolute()} is not "
                f"a DuckDB database (DuckDB opens a Parquet, CSV or SQLite file as another kind "
                f"of database, where a published table is not kept, or is not checked). Name "
                f"a DuckDB file; a Parquet file is written through a parquet:/// URL."
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
                f"==> At {path}\nDuckDB places {name} in the database {database!r}, not in the "
                f"URL's ({current!r}); tclose reads and writes the URL's database only."
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
                f"==> At {path}\nDuckDB does not place {name} in a table kept in the database "
                f"file ({plan.get('error_message')}); a temporary or in-memory table would "
                f"vanish with the run. Name a table of one of the file's schemas (schema.table)."
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


def _view_select(definition: str) -> str:
    """The ``SELECT`` of a view's ``CREATE VIEW name [(columns)] AS SELECT ...;``: what follows
    the first ``AS`` keyword (DuckDB's tokenizer, so that a quoted name holding `` AS `` is
    passed over)."""
    import duckdb

    for offset, kind in duckdb.tokenize(definition):
        if kind == duckdb.token_type.keyword and definition[offset : offset + 2].upper() == "AS":
            return definition[offset + 2 :].strip().rstrip(";")
    return definition


def _base_tables(tree: Any) -> list[TableName]:
    """Every ``BASE_TABLE`` of a parsed statement (``json_serialize_sql``), as a name."""
    if isinstance(tree, list):
        return [name for item in tree for name in _base_tables(item)]
    if not isinstance(tree, dict):
        return []
    if tree.get("type") == "BASE_TABLE" and tree.get("table_name"):
        return [TableName(tree.get("schema_name") or None, tree["table_name"])]
    return [name for value in tree.values() for name in _base_tables(value)]


#: The built-in table functions whose reads a view's definition shows: the file readers (their
#: files are walked as names, :func:`_names_read`) and those that read nothing.
KNOWN_TABLE_FUNCTIONS = frozenset(
    {"read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json", "read_json_auto"}
    | {"read_ndjson", "read_ndjson_auto", "read_text", "read_blob", "range", "generate_series"}
    | {"unnest"}
)


def _unlisted_calls(tree: Any, built_in: set[str]) -> list[str]:
    """The calls of a parsed statement (``json_serialize_sql``) whose reads it does not show:
    a function that is not one of DuckDB's own (``built_in``: a macro, a table macro, a
    function registered by a client), and a table function outside
    :data:`KNOWN_TABLE_FUNCTIONS` (``query_table('t')`` and ``query('...')`` read tables named
    by text, a scanner reads another database)."""
    found: set[str] = set()

    def visit(node: Any, table_function: bool = False) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if node.get("class") == "FUNCTION" and isinstance(node.get("function_name"), str):
                name = node["function_name"].lower()
                unknown = table_function and name not in KNOWN_TABLE_FUNCTIONS
                if unknown or name not in built_in:
                    found.add(f"{'table function' if table_function else 'function'} {name}()")
            for key, item in node.items():
                visit(item, key == "function" and node.get("type") == "TABLE_FUNCTION")

    visit(tree)
    return sorted(found)


def _names_read(tree: Any) -> list[str]:
    """The file names (or patterns) a parsed statement (``json_serialize_sql``) may read: each
    text constant in a table function's arguments (``read_parquet(['a.parquet',
    'b/*.parquet'])``) and each table name that may be a file's (``FROM 'x.csv'``)."""
    paths: list[str] = []

    def strings(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                strings(item)
        elif isinstance(node, dict):
            literal = node.get("literal")
            if isinstance(literal, dict) and isinstance(literal.get("text"), str):
                paths.append(literal["text"])
            value = node.get("value")  # DuckDB before 1.2: {"value": {"value": "x.parquet"}}
            if isinstance(value, dict) and isinstance(value.get("value"), str):
                paths.append(value["value"])
            for item in node.values():
                strings(item)

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION":
                strings(node.get("function"))
            elif node.get("type") == "BASE_TABLE" and node.get("table_name"):
                paths.append(node["table_name"])
            for item in node.values():
                visit(item)

    visit(tree)
    return paths


def _files_globbed(connection: Connection, names: Sequence[str]) -> list[tuple]:
    """The ``("file", device, inode)`` identity of every existing file of this machine that
    ``names`` name as DuckDB reads them: each expanded by DuckDB's own ``glob`` on
    ``connection`` (its ``**``, hidden files, ``~`` and ``file_search_path``, which Python's
    ``glob`` does not share). A remote name (``s3://``, ``https://``) names no file here."""
    found = []
    for name in names:
        if "://" in name:
            continue
        try:
            files = connection.execute(sa.text("SELECT file FROM glob(:p)"), {"p": name}).all()
        except sa.exc.DBAPIError:  # not a name DuckDB can expand
            connection.rollback()
            continue
        for (file,) in files:
            if os.path.isfile(file):
                stat = os.stat(file)
                found.append(("file", stat.st_dev, stat.st_ino))
    return found


class DuckDBConnector:
    """Connector for DuckDB files (``duckdb:///path/to/file.duckdb`` URLs)."""

    name = "duckdb"
    dialects = ("duckdb",)

    def connect(self, url: str, password_file: str | None = None) -> DuckDBDatabase:
        return DuckDBDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(DuckDBConnector())
