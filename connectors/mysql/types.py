"""MariaDB/MySQL column types in another kind of database.

:func:`portable` is registered for sources of the dialects ``mysql`` and ``mariadb``
(:func:`tclose.connectors.sql.register_source_types`): an unsigned integer takes the signed
type that holds its top half, ``SET``, ``ENUM`` and ``YEAR`` text or a small integer, ``BIT(n)``
a string of bits where the target has one, ``INET4``/``INET6`` text.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from tclose.connectors.sql import BitString, NativeType, register_source_types

#: MariaDB types that SQLAlchemy does not know (:class:`NativeType`, by the name
#: ``information_schema`` gives in lower case), with the generic type that holds their values.
NATIVE_PORTABLE = {"inet6": lambda: sa.String(45), "inet4": lambda: sa.String(15)}


def signed_for_unsigned(column_type: sa.types.TypeEngine) -> sa.types.TypeEngine:
    """A signed type that holds every value of a MySQL unsigned integer type (its top half is
    beyond the signed type of the same width): ``TINYINT`` ``SMALLINT``, ``SMALLINT`` and
    ``MEDIUMINT`` ``INTEGER``, ``INT`` ``BIGINT``, ``BIGINT`` ``NUMERIC(20, 0)``."""
    if isinstance(column_type, mysql.TINYINT):
        return sa.SmallInteger()
    if isinstance(column_type, (mysql.SMALLINT, mysql.MEDIUMINT)):
        return sa.Integer()
    if isinstance(column_type, mysql.BIGINT):
        return sa.Numeric(20, 0)
    return sa.BigInteger()


def set_as_text(
    column_type: sa.types.TypeEngine, generic: sa.types.TypeEngine | None
) -> sa.types.TypeEngine | None:
    """For MySQL's ``SET``, text long enough for every combination of its members (a value
    joins them with commas, ``a,b,c``: SQLAlchemy's generic type fits the longest member only);
    for its ``ENUM``, text as long as its longest member (SQLAlchemy's generic ``Enum`` would
    be a type to create on PostgreSQL, and is refused by DuckDB); for its ``YEAR``
    (1901-2155, or 0) a ``SMALLINT``; ``generic`` for any other type."""
    if isinstance(column_type, mysql.YEAR):
        return sa.SmallInteger()
    if isinstance(column_type, mysql.ENUM):
        return sa.String(max(map(len, column_type.enums), default=0) or None)
    if not isinstance(column_type, mysql.SET):
        return generic
    members = list(column_type.values)
    return sa.String(sum(map(len, members)) + max(len(members) - 1, 0) or None)


def native_portable(
    column_type: sa.types.TypeEngine, dialect: str
) -> tuple[sa.types.TypeEngine | None, str]:
    """For a type without a generic one, the type holding its values exactly in ``dialect``
    (or ``None``) and, when there is none, why (for the message)."""
    if isinstance(column_type, mysql.BIT):
        length = column_type.length or 1
        if dialect in ("postgresql", "duckdb"):
            return BitString(length, f"BIT({length})" if dialect == "postgresql" else "BIT"), ""
        return None, (
            f": a BIT({length}) value is a string of {length} bits, which {dialect} has no "
            f"type for (as a number, a value would lose its length, and read as another type)"
        )
    if not isinstance(column_type, NativeType):
        return None, ""
    factory = NATIVE_PORTABLE.get(column_type.name.lower())
    return (factory(), "") if factory is not None else (None, "")


def portable(
    column_type: sa.types.TypeEngine, generic: sa.types.TypeEngine | None, dialect: str
) -> tuple[sa.types.TypeEngine | None, str]:
    """The generic type that holds every value of the MariaDB/MySQL ``column_type`` in a
    database of ``dialect`` (``generic``: SQLAlchemy's), and why there is none."""
    if getattr(column_type, "unsigned", False) and isinstance(generic, sa.Integer):
        generic = signed_for_unsigned(column_type)
    generic = set_as_text(column_type, generic)
    return (generic, "") if generic is not None else native_portable(column_type, dialect)


register_source_types(("mysql", "mariadb"), portable)
