"""DuckDB's types and values: the SQLAlchemy type of each DuckDB type name, exact decimals, and
the infinite dates and date-times read as marked values.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tclose.connectors.sql import (
    NativeType,
    register_source_types,
)
from tclose.errors import DataError

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


#: DuckDB types that SQLAlchemy does not know (:class:`NativeType`, by the name DuckDB's catalog
#: gives), with the generic type that holds each of their values exactly.
NATIVE_PORTABLE: dict[str, Any] = {
    "UTINYINT": sa.SmallInteger,  # as MariaDB's unsigned integers
    "USMALLINT": sa.Integer,
    "UINTEGER": sa.BigInteger,
    "UBIGINT": lambda: sa.Numeric(20, 0),
    "HUGEINT": lambda: sa.Numeric(39, 0),  # -170141183460469231731687303715884105728
    "UHUGEINT": lambda: sa.Numeric(39, 0),  # 340282366920938463463374607431768211455
    "TIMESTAMP_S": sa.DateTime,  # read as Python datetimes: no finer part to lose
    "TIMESTAMP_MS": sa.DateTime,
    "JSON": sa.JSON,  # read as its text (DuckDBSession.read_statement)
}


def portable(
    column_type: sa.types.TypeEngine, generic: sa.types.TypeEngine | None, dialect: str
) -> tuple[sa.types.TypeEngine | None, str]:
    """The generic type that holds every value of the DuckDB ``column_type`` in a database of
    ``dialect`` (``generic``: SQLAlchemy's), and why there is none: an enum's values are text,
    a ``BIT`` of any length a PostgreSQL ``BIT VARYING``, nanoseconds are kept nowhere else."""
    if generic is not None or not isinstance(column_type, NativeType):
        return generic, ""
    name = column_type.name
    if name.startswith("ENUM("):
        return sa.Text(), ""  # a DuckDB enum's values are text
    if name == "BIT":
        if dialect == "postgresql":
            return postgresql.BIT(varying=True), ""  # read as its text: '0101'
        return None, (
            f": a DuckDB BIT is a string of bits of any length, leading zeros included, which "
            f"no {dialect} type holds (MariaDB's BIT(n) has one length of at most 64 bits)"
        )
    if name in _NANOSECONDS:
        return None, (
            f": its values have nanoseconds, which {dialect} does not keep (its times stop at "
            f"the microsecond), so they would be published changed"
        )
    factory = NATIVE_PORTABLE.get(name)
    return (factory(), "") if factory is not None else (None, "")


register_source_types(("duckdb",), portable)
