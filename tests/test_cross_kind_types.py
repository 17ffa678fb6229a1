"""Pass-through columns of DuckDB and MariaDB types into another kind of database.

Each case is a source table of 30 rows (quasi-identifiers ``a`` and ``b``, a confidential ``c``)
with one pass-through column ``extra`` of the type, holding its edge values (0, its minimum and
maximum, the empty string of an enum, ...) and NULLs. A type with an exact equivalent in the
target is published there exactly: ``tclose run`` exits 0, ``tclose verify --report`` exits 0,
and the target's values, read back through its own driver, equal the source's, NULLs included.
A type without one stops the run before any work (exit 3), the message naming the column, the
type and why. docs/databases.md ("Types, precision, NULLs, order") has the table of types.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import sqlalchemy as sa

ROWS = 30

#: Target fixtures for a DuckDB source, and for a MariaDB source.
FROM_DUCKDB = [
    pytest.param("pg", marks=pytest.mark.postgres),
    pytest.param("maria", marks=pytest.mark.mysql),
    "lite",
]
FROM_MARIADB = [
    pytest.param("pg", marks=pytest.mark.postgres),
    "lite",
    pytest.param("duckdb_db", marks=pytest.mark.duckdb),
]

#: DuckDB type → (how values compare, values as DuckDB texts cast to the type).
DUCKDB_EXACT = {
    "UTINYINT": ("int", ["0", "255", "1", "128"]),
    "USMALLINT": ("int", ["0", "65535", "32768"]),
    "UINTEGER": ("int", ["0", "4294967295", "2147483648"]),
    "UBIGINT": ("int", ["0", "18446744073709551615", "9223372036854775808", "1"]),
    "HUGEINT": (
        "int",
        [
            "-170141183460469231731687303715884105728",
            "170141183460469231731687303715884105727",
            "0",
            "-1",
            "18446744073709551616",
        ],
    ),
    "UHUGEINT": (
        "int",
        ["0", "340282366920938463463374607431768211455", "18446744073709551616", "1"],
    ),
    "TIMESTAMP_S": (
        "timestamp",
        [
            "1970-01-01 00:00:00",
            "2024-02-29 23:59:59",
            "0001-01-01 00:00:00",
            "9999-12-31 23:59:59",
        ],
    ),
    "TIMESTAMP_MS": (
        "timestamp",
        [
            "1970-01-01 00:00:00.001",
            "2024-02-29 23:59:59.999",
            "0001-01-01 00:00:00",
            "1969-12-31 23:59:59.5",
        ],
    ),
    "ENUM('', 'a', 'b c', 'é', 'NULL')": ("text", ["", "a", "b c", "é", "NULL"]),
    "BLOB": ("bytes", ["", "\\x00\\xFF", "abc", "\\x00"]),
    "TIME": ("time", ["00:00:00", "23:59:59.999999", "12:00:00.5"]),
    "JSON": (
        "text",
        ['{"b": 1,  "a": [1e400]}', "null", '"x"', "12345678901234567890123", '{"a":1,"a":2}'],
    ),
}

#: MariaDB type → (how values compare, values bound as parameters).
MARIADB_EXACT = {
    "YEAR": ("int", [1901, 2155, 0, 2024]),
    "ENUM('', 'a', 'b c', 'é', 'NULL')": ("text", ["", "a", "b c", "é", "NULL"]),
    "INET6": (
        "text",
        ["::", "::1", "::ffff:1.2.3.4", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::1"],
    ),
    "INET4": ("text", ["0.0.0.0", "255.255.255.255", "10.0.0.1"]),
    "SET('a', 'b', 'c')": ("text", ["", "a", "a,c", "a,b,c"]),
    "BIGINT UNSIGNED": ("int", [0, 18446744073709551615, 9223372036854775808, 1]),
}


def _value(i: int, values: list) -> object:
    """The value of row ``i``: NULL in every 7th row, else the values in turn (all of them)."""
    return None if i % 7 == 0 else values[i % len(values)]


def _create_source(db, table: str, sql_type: str, values: list, cast: bool) -> None:
    """Table ``table`` of ``db``: key ``id``, QIs ``a`` and ``b``, confidential ``c``, and
    ``extra`` of ``sql_type`` (its values cast from text in SQL when ``cast``)."""
    name = db.quote(table)
    double = "DOUBLE" if db.dialect in ("duckdb", "mysql") else "DOUBLE PRECISION"
    db.execute(
        f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c {double}, "
        f"extra {sql_type})"
    )
    value = f"CAST(:v AS {sql_type})" if cast else ":v"
    with db.engine.begin() as connection:
        for i in range(1, ROWS + 1):
            connection.execute(
                sa.text(f"INSERT INTO {name} VALUES (:i, :a, :b, :c, {value})"),
                {
                    "i": i,
                    "a": i % 6,
                    "b": (i * 3) % 5,
                    "c": float((i * 7) % 11),
                    "v": _value(i, values),
                },
            )


def _run(source_db, source: str, target_db, target: str, capsys) -> tuple[int, str]:
    """``tclose run`` of ``source`` into ``target`` of ``target_db``, then, if it published,
    ``tclose verify --report`` (exit 0, passed); the run's exit code and its error output."""
    document = {
        "source": {"url": source_db.url, "table": source, "key": "id"},
        "target": {"url": target_db.url, "table": target, "if_exists": "fail"},
        "attributes": {
            "a": {"role": "quasi_identifier", "type": "numeric"},
            "b": {"role": "quasi_identifier", "type": "numeric"},
            "c": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
            "extra": {"role": "other", "allow_unique": True},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {}},
    }
    return source_db.run_and_verify(document, capsys)[:2]


def _canonical(kind: str, value: object) -> object:
    """``value`` as read by any driver, in one form per kind: an integer's digits, a
    timestamp's ISO text to the microsecond, text as it is."""
    if value is None:
        return None
    if kind == "int":
        number = Decimal(str(value))
        assert number == number.to_integral_value(), value
        return str(int(number))
    if kind == "timestamp":
        stamp = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
        return stamp.isoformat(sep=" ", timespec="microseconds")
    if kind == "bytes":  # the driver's bytes (memoryview on PostgreSQL), or a DuckDB literal
        if isinstance(value, str):
            value = value.encode("latin-1").decode("unicode_escape").encode("latin-1")
        return bytes(value).hex()
    if kind == "time":  # MariaDB's driver gives a TIME as a timedelta, SQLite as text
        if isinstance(value, dt.timedelta):
            value = (dt.datetime.min + value).time()
        stamp = value if isinstance(value, dt.time) else dt.time.fromisoformat(str(value))
        return stamp.isoformat(timespec="microseconds")
    assert isinstance(value, str), repr(value)
    return value


def _published(db, table: str, kind: str) -> list:
    """Column ``extra`` of ``table``, canonical, sorted (PostgreSQL's and DuckDB's read as
    their text: DuckDB's Python client may give a JSON value parsed)."""
    text = {"postgresql": "CAST(extra AS text)", "duckdb": "CAST(extra AS VARCHAR)"}
    column = "extra" if kind in ("bytes", "time") else text.get(db.dialect, "extra")
    if db.dialect == "mysql" and kind == "int":  # MariaDB Connector/Python fails on YEAR 0000
        column = "extra + 0"
    with db.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"SELECT {column} FROM {db.quote(table)}").fetchall()
    return sorted((_canonical(kind, r[0]) for r in rows), key=repr)


def _expected(kind: str, values: list) -> list:
    return sorted((_canonical(kind, _value(i, values)) for i in range(1, ROWS + 1)), key=repr)


@pytest.mark.duckdb
@pytest.mark.parametrize("target", FROM_DUCKDB)
@pytest.mark.parametrize("sql_type", list(DUCKDB_EXACT))
def test_duckdb_types_publish_exactly_into_another_kind(
    request, duckdb_db, capsys, sql_type, target
):
    db = request.getfixturevalue(target)
    kind, values = DUCKDB_EXACT[sql_type]
    source, published = duckdb_db.name("src"), db.name("anon")
    _create_source(duckdb_db, source, sql_type, values, cast=True)
    assert _published(duckdb_db, source, kind) == _expected(kind, values)  # the source's
    db.execute("SELECT 1")  # creates a SQLite file
    assert _run(duckdb_db, source, db, published, capsys) == (0, "")
    assert _published(db, published, kind) == _expected(kind, values)


@pytest.mark.mysql
@pytest.mark.parametrize("target", FROM_MARIADB)
@pytest.mark.parametrize("sql_type", list(MARIADB_EXACT))
def test_mariadb_types_publish_exactly_into_another_kind(request, maria, capsys, sql_type, target):
    db = request.getfixturevalue(target)
    kind, values = MARIADB_EXACT[sql_type]
    source, published = maria.name("src"), db.name("anon")
    _create_source(maria, source, sql_type, values, cast=False)
    assert _published(maria, source, kind) == _expected(kind, values)
    db.execute("SELECT 1")
    assert _run(maria, source, db, published, capsys) == (0, "")
    assert _published(db, published, kind) == _expected(kind, values)


@pytest.mark.duckdb
@pytest.mark.postgres
def test_duckdb_bit_strings_publish_exactly_into_postgresql(duckdb_db, pg, capsys):
    """A DuckDB ``BIT`` (bits of any length, leading zeros kept) is PostgreSQL's ``bit
    varying``: each value keeps its bits and its length."""
    values = ["0", "1", "0101", "00000000", "1" * 70]
    source, published = duckdb_db.name("src"), pg.name("anon")
    _create_source(duckdb_db, source, "BIT", values, cast=True)
    assert _published(duckdb_db, source, "text") == _expected("text", values)
    assert _run(duckdb_db, source, pg, published, capsys) == (0, "")
    assert _published(pg, published, "text") == _expected("text", values)
    assert pg.column_types(published)["extra"] == "BIT VARYING"


@pytest.mark.mysql
@pytest.mark.parametrize(
    "target",
    [
        pytest.param("pg", marks=pytest.mark.postgres),
        pytest.param("duckdb_db", marks=pytest.mark.duckdb),
    ],
)
@pytest.mark.parametrize("length", [1, 8, 64])
def test_mariadb_bits_publish_exactly_as_bit_strings(request, maria, capsys, length, target):
    """MariaDB's ``BIT(n)`` is PostgreSQL's ``bit(n)``, DuckDB's ``BIT``: each value keeps its
    ``n`` bits, leading zeros included (tclose reads it as its unsigned integer, which is not
    the text a column of bits reads)."""
    db = request.getfixturevalue(target)
    values = sorted({0, 1, 5 % (1 << length), (1 << length) - 1})
    texts = [format(v, f"0{length}b") for v in values]
    source, published = maria.name("src"), db.name("anon")
    _create_source(maria, source, f"BIT({length})", values, cast=False)
    column = f"LPAD(BIN(extra), {length}, '0')"
    read = sorted((r[0] for r in maria.rows(source, column)), key=repr)
    assert read == _expected("text", texts)  # the source's bits
    db.execute("SELECT 1")
    assert _run(maria, source, db, published, capsys) == (0, "")
    assert _published(db, published, "text") == _expected("text", texts)


#: (source fixture, type, values (texts cast in DuckDB, parameters in MariaDB), target fixture,
#: what the message must say of why).
REFUSED = [
    ("duckdb_db", "TIMESTAMP_NS", ["2024-01-01 00:00:00.123456789"], "pg", "nanoseconds"),
    ("duckdb_db", "TIMESTAMP_NS", ["2024-01-01 00:00:00.123456789"], "maria", "nanoseconds"),
    ("duckdb_db", "TIMESTAMP_NS", ["2024-01-01 00:00:00.123456789"], "lite", "nanoseconds"),
    ("duckdb_db", "TIME_NS", ["12:00:00.123456789"], "pg", "nanoseconds"),
    ("duckdb_db", "BIT", ["0101"], "maria", "string of bits"),
    ("duckdb_db", "BIT", ["0101"], "lite", "string of bits"),
    ("duckdb_db", "INTERVAL", ["1 day"], "maria", "no interval type"),
    ("duckdb_db", "INTERVAL", ["1 day"], "lite", "no interval type"),
    ("maria", "BIT(8)", [5], "lite", "string of 8 bits"),
]


def _marks(*fixtures: str) -> list:
    marks = {
        "pg": pytest.mark.postgres,
        "maria": pytest.mark.mysql,
        "duckdb_db": pytest.mark.duckdb,
    }
    return [marks[f] for f in fixtures if f in marks]


@pytest.mark.parametrize(
    "source_db, sql_type, values, target, why",
    [pytest.param(*case, marks=_marks(case[0], case[3])) for case in REFUSED],
)
def test_types_without_an_exact_equivalent_are_refused_with_the_reason(
    request, capsys, source_db, sql_type, values, target, why
):
    """The run stops before any work (exit 3), naming the column, its type and why; nothing
    is published."""
    origin, db = request.getfixturevalue(source_db), request.getfixturevalue(target)
    source, published = origin.name("src"), db.name("anon")
    _create_source(origin, source, sql_type, values, cast=origin.dialect == "duckdb")
    db.execute("SELECT 1")
    code, err = _run(origin, source, db, published, capsys)
    assert code == 3, err
    assert "'extra'" in err and sql_type.split("(")[0] in err.upper() and why in err, err
    assert "no portable equivalent" in err and "internal error" not in err
    assert db.tables() == set()


@pytest.mark.duckdb
@pytest.mark.parametrize("sql_type", ["TIMESTAMP_S", "TIMESTAMP_MS"])
def test_duckdb_infinite_timestamps_of_seconds_or_milliseconds_are_refused(
    duckdb_db, lite, capsys, sql_type
):
    """DuckDB's client reads ``infinity`` as 9999-12-31 23:59:59.999999 (a value a
    ``TIMESTAMP_S`` cannot even hold): now that these types are carried into another kind,
    the check of infinite dates covers them, and the run stops naming the column."""
    source, published = duckdb_db.name("src"), lite.name("anon")
    _create_source(duckdb_db, source, sql_type, ["infinity", "2024-01-01 00:00:00"], cast=True)
    lite.execute("SELECT 1")
    code, err = _run(duckdb_db, source, lite, published, capsys)
    assert code == 3, err
    assert "'extra'" in err and "infinite" in err, err
    assert lite.tables() == set()
