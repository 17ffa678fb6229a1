"""MariaDB/MySQL values streamed into another kind of database
(:class:`tclose.connector.StreamAdapter`).

Two kinds of MariaDB/MySQL values have no equivalent elsewhere, and the drivers read them as
what no other database stores: a zero or invalid date (a zero year, month or day, accepted under
a permissive ``sql_mode``) is read as its text, and a ``TIME``, a duration of up to
±838:59:59, as a ``timedelta``. A duration within a day is streamed as that time of day (SQLite
would store its seconds, DuckDB could not cast it); a zero date, or a duration outside a day,
stops the stream, and :meth:`StreamedDurations.refuse` names the columns with their counts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from tclose.connectors.sql import shown
from tclose.errors import DataError, columns_hold

#: The kinds of column checked, by the Python type SQLAlchemy reads the column's type as.
CHECKED_KINDS: dict[type, str] = {dt.date: "date", dt.datetime: "date", dt.time: "time"}

#: By kind: what the refused values are, and what to do about them (``{source}``: the table).
REFUSALS = (
    (
        "date",
        "zero or invalid dates (a zero year, month or day, which MariaDB/MySQL accept under "
        "a permissive sql_mode), which no other kind of database stores",
        "Set them to NULL or to valid dates in {source}",
    ),
    (
        "time",
        "TIME values outside 00:00:00 to 23:59:59.999999 (a MariaDB/MySQL TIME is a "
        "duration of up to ±838:59:59), which a time of day in another kind of database "
        "cannot hold",
        "Set them to NULL or to times of day in {source}, cast them to text in a view",
    ),
)


def times_of_day(values: list[Any]) -> tuple[list[Any], int]:
    """``values`` with each duration (``timedelta``) of at least 0 and less than a day as
    that time of day (``dt.time``), and the number of durations outside that range."""
    day = dt.timedelta(days=1)
    converted, outside = [], 0
    for value in values:
        if isinstance(value, dt.timedelta):
            if dt.timedelta(0) <= value < day:
                value = (dt.datetime.min + value).time()
            else:
                outside += 1
        converted.append(value)
    return converted, outside


class StreamedDurations:
    """The date and time columns of one stream from MariaDB/MySQL into another kind of
    database (:class:`tclose.connector.StreamedValues`).

    Attributes:
        checked: position in a read row (the key first) → the column's name and kind
            (``"date"`` or ``"time"``).
        invalid: column → how many of its values the target cannot store.
    """

    def __init__(self, source: str, checked: dict[int, tuple[str, str]]) -> None:
        self.source = source
        self.checked = checked
        self.invalid = {column: 0 for column, _kind in checked.values()}

    def rows(self, rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]] | None:
        """``rows`` with each duration within a day as that time of day; ``None`` once a zero
        date or a duration outside a day was found."""
        times = {}
        for index, (column, kind) in self.checked.items():
            values = [r[index] for r in rows]
            if kind == "date":
                self.invalid[column] += sum(isinstance(v, str) for v in values)
            else:
                times[index], outside = times_of_day(values)
                self.invalid[column] += outside
        if any(self.invalid.values()):
            return None
        if not times:
            return rows
        return [
            tuple(times[i][n] if i in times else value for i, value in enumerate(row))
            for n, row in enumerate(rows)
        ]

    def refuse(self) -> None:
        """:class:`DataError` naming the columns holding values the target cannot store, with
        their counts, the dates first; nothing when there is none."""
        kinds = dict(self.checked.values())
        for kind, what, remedy in REFUSALS:
            found = [f"{c!r} ({n} rows)" for c, n in self.invalid.items() if n and kinds[c] == kind]
            if found:
                raise DataError(
                    f"{columns_hold(found)} {what}. {remedy.format(source=self.source)}, or "
                    f"drop the columns (role: identifier)."
                )


def streamed_durations(
    source: sa.Table, columns: Sequence[str], source_dialect: str, target_dialect: str
) -> StreamedDurations | None:
    """The :class:`StreamedDurations` of ``columns`` of ``source`` (read after the key, in this
    order) into a database of ``target_dialect``; ``None`` into one of ``source_dialect`` or
    when no column is a date, a date-time or a time."""
    if target_dialect == source_dialect:
        return None
    checked = {}
    for index, column in enumerate(columns, start=1):
        try:
            python_type = source.c[column].type.python_type
        except NotImplementedError:  # a type SQLAlchemy does not know
            continue
        if python_type in CHECKED_KINDS:
            checked[index] = (column, CHECKED_KINDS[python_type])
    return StreamedDurations(shown(source), checked) if checked else None
