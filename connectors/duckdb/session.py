"""DuckDB sessions: one transaction on one connection, reads fetched in vectors, bulk writes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from tclose.connectors.duckdb.types import _AS_TEXT, _exact_decimals, _marked
from tclose.connectors.sql import (
    KEY_LABEL,
    ORDER_IS_IDENTITY,
    NativeType,
    Session,
    TableName,
    bits_as_text,
    driver_connection,
    random_suffix,
    shown,
)
from tclose.errors import DataError, columns_hold

if TYPE_CHECKING:
    import pandas as pd

    from tclose.connectors.duckdb.database import DuckDBDatabase


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
