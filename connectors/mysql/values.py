"""MariaDB/MySQL values read alike by every driver: floats as doubles, dates and date-times from
their text (a zero date stays text), wide unsigned integers as decimals, and the columns whose
values may be longer than a limit.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import re
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles

from tclose.connectors.mysql_drivers import (
    PREFERENCE,  # noqa: F401 (re-exported)
)


class _AsDouble(sa.sql.expression.FunctionElement):
    """``CAST(x AS DOUBLE)`` (SQLAlchemy's ``cast`` leaves out a cast to ``DOUBLE`` on MySQL)."""

    type = sa.Double()
    inherit_cache = True


@compiles(_AsDouble)
def _compile_as_double(element: _AsDouble, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS DOUBLE)"


def _is_float(column_type: sa.types.TypeEngine) -> bool:
    """A single-precision ``FLOAT`` column (MySQL's ``DOUBLE`` and ``REAL`` are not)."""
    return isinstance(column_type, sa.FLOAT)


def _non_finite(columns: Sequence[str], rows: Sequence[tuple]) -> tuple[str, int] | None:
    """The first of ``columns`` whose values in ``rows`` include a NaN or an infinity (a
    ``float`` or a ``Decimal``, which MySQL and MariaDB cannot store), and how many rows hold
    one; ``None`` if none does."""
    for i, column in enumerate(columns):
        count = sum(
            1
            for row in rows
            if (isinstance(row[i], float) and not math.isfinite(row[i]))
            or (isinstance(row[i], decimal.Decimal) and not row[i].is_finite())
        )
        if count:
            return column, count
    return None


def _is_temporal(column_type: sa.types.TypeEngine) -> bool:
    """A ``DATE``, ``DATETIME`` or ``TIMESTAMP`` column (which may hold zero dates)."""
    return isinstance(column_type, (sa.Date, sa.DateTime))


def _datetime_or_text(text: str | None) -> dt.datetime | str | None:
    """The server's text of a ``DATETIME``/``TIMESTAMP`` value as a ``datetime``; a zero or
    invalid date (``0000-00-00 00:00:00``, ``2024-00-15 00:00:00``, year 0) stays its text,
    as PyMySQL returns it."""
    if text is None:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        head, dot, fraction = text.partition(".")
        if dot:  # Python 3.10's fromisoformat takes 3 or 6 fractional digits only
            with contextlib.suppress(ValueError):
                return dt.datetime.fromisoformat(f"{head}.{fraction.ljust(6, '0')}")
        return text


def _date_or_text(text: str | None) -> dt.date | str | None:
    """The server's text of a ``DATE`` value as a ``date``; a zero or invalid date stays its
    text."""
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return text


def _date_text(value: Any) -> Any:
    """A ``datetime`` or ``date`` as the text MariaDB parses back exactly; others as they are."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return value.isoformat() if isinstance(value, dt.date) else value


def _may_be_longer(column_type: sa.types.TypeEngine, limit: int) -> bool:
    """Whether values of a text or binary type may be longer than ``limit`` bytes (a
    character takes up to 4 bytes; a text or binary type without a length may be long)."""
    if not isinstance(column_type, (sa.String, sa.LargeBinary, sa.JSON)):
        return False
    length = getattr(column_type, "length", None)
    return length is None or 4 * length > limit


def _may_hold_wide_integers(column_type: sa.types.TypeEngine) -> bool:
    """Whether a column of ``column_type`` may receive integers beyond 64 bits: a decimal of
    more than 20 digits (DuckDB's ``HUGEINT`` becomes ``DECIMAL(39,0)``)."""
    if not isinstance(column_type, sa.Numeric) or isinstance(column_type, sa.Float):
        return False
    return column_type.precision is None or column_type.precision > 20


def _wide_integers_as_decimals(rows: Sequence[tuple], columns: Sequence[int]) -> Sequence[tuple]:
    """``rows`` with the integers of each of ``columns`` (indexes) that holds one beyond 64 bits
    as ``Decimal`` (the same number): MariaDB Connector/Python failed to bind such an ``int``
    (an internal error), and it takes one Python type per column, so the column's other
    integers go as ``Decimal`` too."""
    wide = {
        i for i in columns if any(type(r[i]) is int and not -(2**63) <= r[i] < 2**64 for r in rows)
    }
    if not wide:
        return rows
    return [
        tuple(decimal.Decimal(v) if i in wide and type(v) is int else v for i, v in enumerate(r))
        for r in rows
    ]


#: An integer type's display width (``int(11)``), which :meth:`MySQLSession.column_types` drops.
_DISPLAY_WIDTH = re.compile(r"\b(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)", re.I)
