"""Adversarial: pass-through columns of types SQLAlchemy does not know, or that have no equality.

A pass-through column (role ``other``) is copied unchanged. On a target in the source's database
the staging table is filled by ``INSERT ... SELECT``, so any type the database can store must
work: geometric types, ``xml``, composites, ranges, arrays, ``json`` (no equality operator: the
linkage check compares its text), an untyped SQLite column, MariaDB's ``POINT`` and ``INET6``.
Where a type cannot be carried (into another kind of database) the run stops before any work
with a clear error naming the column and the type, never an internal error (exit 4).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from decimal import Decimal

import pytest

from tclose.app.cli import main

#: PostgreSQL type → an expression of the row number ``i`` (values repeat: the linkage check runs).
POSTGRES_TYPES = {
    "point": "point(i % 4, 1)",
    "xml": "xmlparse(content '<a>' || (i % 4) || '</a>')",
    "line": "line(point(0, 0), point(1, i % 4 + 1))",
    "lseg": "lseg(point(0, 0), point(i % 4, 1))",
    "box": "box(point(0, 0), point(i % 4, 1))",
    "path": "path(polygon(box(point(0, 0), point(i % 4 + 1, 1))))",
    "polygon": "polygon(box(point(0, 0), point(i % 4 + 1, 1)))",
    "circle": "circle(point(i % 4, 0), 1)",
    "tsvector": "to_tsvector('simple', 'w' || (i % 4))",
    "json": "json_build_object('a', i % 4)",
    "jsonb": "jsonb_build_object('a', i % 4)",
    "uuid": "md5((i % 4)::text)::uuid",
    "inet": "('10.0.0.' || (i % 4))::inet",
    "cidr": "('10.' || (i % 4) || '.0.0/16')::cidr",
    "macaddr": "('08:00:2b:01:02:0' || (i % 4))::macaddr",
    "money": "((i % 4) * 1.25)::money",
    "interval": "make_interval(secs => i % 4)",
    "bit(3)": "(i % 4)::bit(3)",
    "varbit": "(i % 4)::bit(3)::varbit",
    "int[]": "ARRAY[i % 4, 1]",
    "text[]": "ARRAY['a' || (i % 4), NULL]",
    "bytea": "int4send(i % 4)",
    "int4range": "int4range(i % 4, 5)",
    "{enum}": "(ARRAY['sad', 'ok', 'happy'])[i % 3 + 1]::{enum}",
    "{composite}": "ROW(i % 4, 'p')::{composite}",
    "hstore": "hstore('a', (i % 4)::text)",
}


def _add_column(db, source: str, sql_type: str, value: str) -> None:
    """Add column ``extra`` of ``sql_type`` to a :meth:`create_patients` table, ``value`` (an
    expression of ``i``, the row's key) in every row but every fifth (NULL)."""
    table = db.quote(source)
    db.execute(f"ALTER TABLE {table} ADD COLUMN extra {sql_type}")
    value = re.sub(r"\bi\b", "patient_id", value)
    db.execute(f"UPDATE {table} SET extra = {value} WHERE patient_id % 5 <> 0")


def _run_and_verify(db, source: str, target: str, **extra: object) -> None:
    """``tclose run`` then ``tclose verify --report`` (exit 0 both), and ``extra`` published
    unchanged (compared by its text form)."""
    document = db.config(source, target)
    document["attributes"]["extra"] = {"role": "other", **extra}
    report = db.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    path = str(db.write_config(document))
    assert main(["-q", "run", path]) == 0
    assert main(["-q", "verify", path, "--report", str(report)]) == 0
    assert json.loads(report.read_text())["verification"]["passed"]
    text = "CAST(extra AS text)" if db.dialect == "postgresql" else "extra"
    assert sorted(db.rows(target, text), key=repr) == sorted(db.rows(source, text), key=repr)


def _install_extension(pg, name: str) -> bool:
    """Make the type of extension ``name`` (``hstore``, ``citext``) available; True if this test
    installed it (and must drop it). Skips only where the server has no such extension (a
    PostgreSQL without contrib)."""
    if pg.execute("SELECT 1 FROM pg_extension WHERE extname = :name", {"name": name}):
        return False
    if not pg.execute("SELECT 1 FROM pg_available_extensions WHERE name = :name", {"name": name}):
        pytest.skip(f"this PostgreSQL server has no {name} extension (contrib is not installed)")
    pg.execute(f"CREATE EXTENSION {name}")
    return True


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", list(POSTGRES_TYPES))
def test_postgresql_pass_through_of_any_type(pg, sql_type):
    prefix = pg.prefix
    types = {"enum": f"{prefix}_mood", "composite": f"{prefix}_pair"}
    installed = sql_type == "hstore" and _install_extension(pg, "hstore")
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=40)
    pg.execute(f"CREATE TYPE {types['enum']} AS ENUM ('sad', 'ok', 'happy')")
    pg.execute(f"CREATE TYPE {types['composite']} AS (a int, b text)")
    try:
        _add_column(pg, source, sql_type.format(**types), POSTGRES_TYPES[sql_type].format(**types))
        _run_and_verify(pg, source, target)
    finally:
        pg.drop_all()
        pg.execute(f"DROP TYPE {types['enum']}, {types['composite']}")
        if installed:
            pg.execute("DROP EXTENSION hstore")


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", ["point", "xml", "json", "box"])
def test_postgresql_unique_values_without_equality_are_caught_by_the_linkage_check(
    pg, capsys, sql_type
):
    """A pass-through column unique per row is refused (unless ``allow_unique``), also when its
    type has no equality operator: the linkage check compares the text form."""
    value = POSTGRES_TYPES[sql_type].replace("i % 4", "i")
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=40)
    _add_column(pg, source, sql_type, value.replace("'0'", "i::text"))
    pg.execute(f"UPDATE {pg.quote(source)} SET extra = NULL WHERE patient_id = 1")
    document = pg.config(source, target)
    document["attributes"]["extra"] = {"role": "other"}
    assert main(["-q", "run", str(pg.write_config(document))]) == 1
    assert "extra" in capsys.readouterr().err
    assert pg.tables() == {source}
    _run_and_verify(pg, source, target, allow_unique=True)


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", ["point", "xml", "tsvector"])
def test_postgresql_type_into_another_database_kind_is_a_clear_error(pg, lite, capsys, sql_type):
    source, target = pg.name("src"), lite.name("anon")
    pg.create_patients(source, n=40)
    _add_column(pg, source, sql_type, POSTGRES_TYPES[sql_type])
    lite.execute("SELECT 1")  # creates the file
    document = pg.config(source, target)
    document["target"]["url"] = lite.url
    document["attributes"]["extra"] = {"role": "other"}
    assert main(["-q", "run", str(pg.write_config(document))]) == 3
    err = capsys.readouterr().err
    assert "'extra'" in err and sql_type.upper() in err.upper() and "sqlite" in err
    assert "internal error" not in err
    assert lite.tables() == set()


@pytest.mark.parametrize(
    ("database", "sql_type", "value"),
    [
        ("lite", "", "i % 4"),
        ("lite", "BLOBBY", "i % 4"),
        pytest.param("maria", "POINT", "Point(i % 4, 1)", marks=pytest.mark.mysql),
        pytest.param("maria", "GEOMETRY", "Point(i % 4, 1)", marks=pytest.mark.mysql),
        pytest.param("maria", "INET6", "concat('::', i % 4)", marks=pytest.mark.mysql),
    ],
)
def test_types_sqlalchemy_does_not_know_pass_through(request, database, sql_type, value):
    """An untyped SQLite column, MariaDB's geometry and ``INET6``: reflected as SQLAlchemy's
    ``NullType``, they keep the type the database declares."""
    db = request.getfixturevalue(database)
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=40)
    _add_column(db, source, sql_type, value)
    _run_and_verify(db, source, target)
    assert (
        _declared(db, target)
        == _declared(db, source)
        == (sql_type.lower() if db.dialect == "mysql" else sql_type)
    )


def _declared(db, table: str) -> str:
    """Column ``extra``'s type as the SQLite or MariaDB catalog declares it."""
    if db.dialect == "sqlite":
        (declared,) = [
            r[2] for r in db.execute(f"PRAGMA table_info({db.quote(table)})") if r[1] == "extra"
        ]
        return declared
    ((declared,),) = db.execute(
        "SELECT column_type FROM information_schema.columns WHERE table_schema = DATABASE() "
        "AND table_name = :t AND column_name = 'extra'",
        {"t": table},
    )
    return declared


#: JSON texts as written (``i`` is never a word of them): key order, spacing, a duplicate key,
#: the JSON ``null`` (not SQL NULL), escapes, non-ASCII, a newline, and numbers that no float
#: holds. ``json`` keeps each text as it is; ``jsonb`` normalizes it.
JSON_TEXTS = [
    '{"b": 1,  "a": [true, null], "b": 2}',
    '{"z":[1,{"y":0}],"c":"x"}',
    "null",
    r'"caf\u00e9 \"q\" \\ tab\t"',
    "12345678901234567890.123456789012345678901",
    "1e400",
    "-0",
    '[1, 2.50, "x", false]',
    '{\n  "line": "é\\n"\n}',
]


def _set_values(db, table: str, values: list[str], cast: str = "") -> None:
    """Add column ``extra`` of type ``cast`` (else the source's JSON type) and set it to
    ``values[i % len(values)]`` in row ``i`` (``values`` bound as parameters, so exactly as
    written; a repeat in every value), NULL in every fifth row."""
    column = {"postgresql": "json", "mysql": "JSON", "sqlite": "JSON", "duckdb": "JSON"}
    sql_type = cast or column[db.dialect]
    db.execute(f"ALTER TABLE {db.quote(table)} ADD COLUMN extra {sql_type}")
    cases = " ".join(f"WHEN {n} THEN :v{n}" for n in range(len(values)))
    value = f"CASE patient_id % {len(values)} {cases} END"
    if db.dialect == "postgresql":
        value = f"CAST({value} AS {sql_type})"
    db.execute(
        f"UPDATE {db.quote(table)} SET extra = {value} WHERE patient_id % 5 <> 0",
        {f"v{n}": v for n, v in enumerate(values)},
    )


def _run_into(source_db, source: str, target_db, target: str, capsys) -> tuple[int, str]:
    """``tclose run`` of ``source`` (with ``extra`` passing through) into table ``target`` of
    ``target_db``, then, if it published, ``tclose verify --report`` (exit 0, passed); the run's
    exit code and its error output."""
    document = source_db.config(source, target)
    document["target"]["url"] = target_db.url
    document["attributes"]["extra"] = {"role": "other"}
    return source_db.run_and_verify(document, capsys)[:2]


def _texts(db, table: str) -> list[object]:
    """Column ``extra`` of ``table`` as text (PostgreSQL: its text form), sorted."""
    text = {"postgresql": "CAST(extra AS text)", "duckdb": "CAST(extra AS VARCHAR)"}
    return sorted((r[0] for r in db.rows(table, text.get(db.dialect, "extra"))), key=repr)


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", ["json", "jsonb", "json[]"])
def test_postgresql_json_into_another_postgresql_database_keeps_the_text(
    pg, pg_other, capsys, sql_type
):
    """Streamed through the client into another database, ``json`` keeps its text as written
    (key order, spacing, duplicate keys, numbers no float holds, ``null`` apart from SQL NULL),
    ``jsonb`` its value."""
    source, target = pg.name("src"), pg_other.name("anon")
    pg.create_patients(source, n=40)
    values = JSON_TEXTS
    if sql_type == "json[]":
        quoted = ['"' + t.replace("\\", "\\\\").replace('"', '\\"') + '"' for t in JSON_TEXTS]
        values = ["{" + ",".join(quoted[n : n + 3]) + ",NULL}" for n in (0, 3, 6)]
    _set_values(pg, source, values, sql_type)
    assert _run_into(pg, source, pg_other, target, capsys) == (0, "")
    assert _texts(pg_other, target) == _texts(pg, source)
    if sql_type == "json":
        assert set(_texts(pg_other, target)) == {*JSON_TEXTS, None}
    assert pg_other.column_types(target)["extra"] == pg.column_types(source)["extra"]
    assert pg.execute(f"SELECT count(*) FROM {pg.quote(source)} WHERE extra IS NULL") == [(8,)]


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", list(POSTGRES_TYPES))
def test_postgresql_pass_through_of_any_type_into_another_postgresql_database(
    pg, pg_other, capsys, sql_type
):
    """Every type of :data:`POSTGRES_TYPES`, streamed through the client into another database
    (where the enum and the composite type exist too), keeps its text form."""
    installed = [
        db for db in (pg, pg_other) if sql_type == "hstore" and _install_extension(db, "hstore")
    ]
    types = {"enum": f"{pg.prefix}_mood", "composite": f"{pg.prefix}_pair"}
    source, target = pg.name("src"), pg_other.name("anon")
    for db in (pg, pg_other):
        db.execute(f"CREATE TYPE {types['enum']} AS ENUM ('sad', 'ok', 'happy')")
        db.execute(f"CREATE TYPE {types['composite']} AS (a int, b text)")
    try:
        pg.create_patients(source, n=40)
        _add_column(pg, source, sql_type.format(**types), POSTGRES_TYPES[sql_type].format(**types))
        assert _run_into(pg, source, pg_other, target, capsys) == (0, "")
        assert _texts(pg_other, target) == _texts(pg, source)
    finally:
        for db in (pg, pg_other):
            db.drop_all()
            db.execute(f"DROP TYPE {types['enum']}, {types['composite']}")
        for db in installed:
            db.execute("DROP EXTENSION hstore")


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", ["json", "jsonb"])
@pytest.mark.parametrize(
    ("database", "stored"),
    [
        ("lite", "TEXT"),
        pytest.param("maria", "LONGTEXT", marks=pytest.mark.mysql),
        pytest.param("duckdb_db", "JSON", marks=pytest.mark.duckdb),
    ],
)
def test_postgresql_json_into_another_database_kind_keeps_the_text(
    request, pg, capsys, database, stored, sql_type
):
    """Into SQLite (``TEXT``: a column declared ``JSON`` has NUMERIC affinity and would turn
    ``-0``, ``1e400`` or a long number into an SQLite number), MariaDB (``JSON``, which MariaDB
    stores as ``LONGTEXT``) and DuckDB (``JSON``), the published text is PostgreSQL's text of the
    value: ``json``'s as written, ``jsonb``'s normalized."""
    db = request.getfixturevalue(database)
    source, target = pg.name("src"), db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, JSON_TEXTS, sql_type)
    db.execute("SELECT 1")  # creates a SQLite file
    assert _run_into(pg, source, db, target, capsys) == (0, "")
    assert _texts(db, target) == _texts(pg, source)
    assert db.column_types(target)["extra"].startswith(stored)


@pytest.mark.postgres
@pytest.mark.mysql
def test_mariadb_json_into_postgresql_keeps_the_text(maria, pg, capsys):
    """MariaDB's ``JSON`` is ``LONGTEXT`` with a ``json_valid`` check: it arrives as text, as
    written."""
    source, target = maria.name("src"), pg.name("anon")
    maria.create_patients(source, n=40)
    _set_values(maria, source, JSON_TEXTS)
    assert _run_into(maria, source, pg, target, capsys) == (0, "")
    assert _texts(pg, target) == _texts(maria, source)
    assert set(_texts(pg, target)) == {*JSON_TEXTS, None}


#: PostgreSQL arrays by type: lower bounds other than 1 (one and two dimensions), the empty
#: array, NULL elements, and text elements holding quotes, commas, backslashes and braces.
ARRAY_TEXTS = {
    "int[]": ["[0:1]={1,2}", "[2:3][0:1]={{1,2},{3,4}}", "{}", "{5,NULL}", "[-3:-3]={7}"],
    "text[]": [
        '[0:2]={"a,b","q\\"x","back\\\\slash"}',
        '{NULL,"NULL","{br}",""}',
        "[5:6][1:1]={{x},{NULL}}",
        "{}",
    ],
    "json[]": ['[0:1]={"{\\"a\\": 1}",NULL}', '{"[1,  2]"}'],
}


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", list(ARRAY_TEXTS))
def test_postgresql_arrays_into_another_postgresql_database_keep_their_bounds(
    pg, pg_other, capsys, sql_type
):
    """Streamed through the client into another database, an array keeps its value: its
    bounds (``[0:1]={1,2}`` is not ``{1,2}``), its dimensions and its elements."""
    source, target = pg.name("src"), pg_other.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ARRAY_TEXTS[sql_type], sql_type)
    assert _run_into(pg, source, pg_other, target, capsys) == (0, "")
    assert _texts(pg_other, target) == _texts(pg, source)
    assert pg_other.column_types(target)["extra"] == pg.column_types(source)["extra"]


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", list(ARRAY_TEXTS))
@pytest.mark.parametrize(
    "database",
    [
        "lite",
        pytest.param("maria", marks=pytest.mark.mysql),
        pytest.param("duckdb_db", marks=pytest.mark.duckdb),
    ],
)
def test_postgresql_arrays_into_another_database_kind_are_a_clear_error(
    request, pg, capsys, database, sql_type
):
    """No other kind of database holds a PostgreSQL array's bounds (DuckDB's lists neither):
    the run stops before any work, naming the column and its type."""
    db = request.getfixturevalue(database)
    source, target = pg.name("src"), db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ARRAY_TEXTS[sql_type], sql_type)
    db.execute("SELECT 1")  # creates a SQLite file
    code, err = _run_into(pg, source, db, target, capsys)
    assert code == 3
    assert "'extra'" in err and "ARRAY" in err and f"no portable equivalent in {db.dialect}" in err
    assert "internal error" not in err
    assert db.tables() == set()


@pytest.mark.postgres
@pytest.mark.duckdb
def test_a_value_duckdb_refuses_is_named_not_masked(pg, duckdb_db, capsys):
    """PostgreSQL's ``json`` holds a lone surrogate escape (``"\ud800"``) that DuckDB's JSON
    refuses: the error is DuckDB's and names the column, never the clean-up's "Current transaction
    is aborted"."""
    source, target = pg.name("src"), duckdb_db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ['"\\ud800"', "1"])
    code, err = _run_into(pg, source, duckdb_db, target, capsys)
    assert code == 3
    assert "Malformed JSON" in err and "extra" in err, err
    assert "transaction is aborted" not in err and "internal error" not in err
    assert duckdb_db.tables() == set()


#: PostgreSQL intervals whose months, days and time are apart: psycopg's ``timedelta`` counts a
#: month as 30 days and a year as 365, and folds days into hours (``24:00:00`` is not ``1 day``).
INTERVAL_TEXTS = [
    "1 year 2 mons",
    "-1 days +02:03:00",
    "24:00:00",
    "1 day",
    "1 mon -1 days",
    "-00:00:00.000001",
]


@pytest.mark.postgres
def test_postgresql_intervals_into_another_postgresql_database_keep_their_fields(
    pg, pg_other, capsys
):
    """Streamed into another PostgreSQL database, an interval keeps its months, days and time: ``1
    year 2 mons`` is never published as ``425 days``."""
    source, target = pg.name("src"), pg_other.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, INTERVAL_TEXTS, "interval")
    assert _run_into(pg, source, pg_other, target, capsys) == (0, "")
    assert _texts(pg_other, target) == _texts(pg, source)
    assert set(_texts(pg_other, target)) == {*INTERVAL_TEXTS, None}


@pytest.mark.postgres
@pytest.mark.parametrize("database", ["lite", pytest.param("maria", marks=pytest.mark.mysql)])
def test_postgresql_intervals_into_a_database_without_intervals_are_a_clear_error(
    request, pg, capsys, database
):
    """SQLite and MariaDB have no interval type: SQLAlchemy's stand-in is a date-time after the
    epoch (MariaDB would publish ``1 day`` as ``2024-00-00 00:00:00``, SQLite as ``86400``). The run
    stops before any work, naming the column and its type."""
    db = request.getfixturevalue(database)
    source, target = pg.name("src"), db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ["1 day", "00:00:01"], "interval")
    db.execute("SELECT 1")  # creates a SQLite file
    code, err = _run_into(pg, source, db, target, capsys)
    assert code == 3
    assert "'extra'" in err and "INTERVAL" in err and "no portable equivalent" in err, err
    assert db.tables() == set()


@pytest.mark.postgres
@pytest.mark.duckdb
def test_postgresql_intervals_into_duckdb_keep_their_fields(pg, duckdb_db, capsys):
    """DuckDB's ``INTERVAL`` keeps months, days and time apart, as PostgreSQL's: ``1 year 2 mons``
    stays 14 months (never 425 days), ``24:00:00`` stays apart from ``1 day``."""
    source, target = pg.name("src"), duckdb_db.name("anon")
    pg.create_patients(source, n=40)
    texts = ["1 year 2 mons", "24:00:00", "1 day", "1 mon -1 days", "-00:00:00.000001", "00:01"]
    _set_values(pg, source, texts, "interval")
    assert _run_into(pg, source, duckdb_db, target, capsys) == (0, "")
    months = "SELECT DISTINCT datepart('month', extra), datepart('day', extra) FROM "
    assert set(duckdb_db.execute(months + duckdb_db.quote(target))) == {
        (2, 0),  # and a year: datepart('month') is the months past the years
        (0, 0),
        (0, 1),
        (1, -1),
        (None, None),
    }
    assert set(_texts(duckdb_db, target)) == {
        "1 year 2 months",
        "24:00:00",
        "1 day",
        "1 month -1 day",
        "-00:00:00.000001",
        "00:01:00",
        None,
    }


#: Decimal texts a ``numeric`` without precision holds: more than 3 decimals, 20 integer digits.
DECIMAL_TEXTS = ["1.2345678901", "0.0001", "-12345678901234567890.123456789012345678", "7"]


@pytest.mark.duckdb
@pytest.mark.parametrize(
    ("database", "sql_type"),
    [pytest.param("pg", "numeric", marks=pytest.mark.postgres), ("lite", "NUMERIC")],
)
def test_decimals_without_precision_into_duckdb_are_exact(
    request, duckdb_db, capsys, database, sql_type
):
    """A ``numeric`` (PostgreSQL) or ``NUMERIC`` (SQLite) column without precision arrives in DuckDB
    exactly, never as DuckDB's ``NUMERIC`` (``DECIMAL(18,3)``, which would make ``1.2345678901``
    ``1.235`` and ``0.0001`` ``0.000``)."""
    db = request.getfixturevalue(database)
    source, target = db.name("src"), duckdb_db.name("anon")
    db.create_patients(source, n=40)
    texts = DECIMAL_TEXTS if database == "pg" else DECIMAL_TEXTS[:2] + DECIMAL_TEXTS[3:]
    _set_values(db, source, texts, sql_type)
    assert _run_into(db, source, duckdb_db, target, capsys) == (0, "")
    published = duckdb_db.execute(f"SELECT DISTINCT extra FROM {duckdb_db.quote(target)}")
    assert {None if v is None else Decimal(v) for (v,) in published} == {
        *map(Decimal, texts),
        None,
    }


@pytest.mark.postgres
@pytest.mark.duckdb
def test_a_decimal_duckdb_would_round_is_refused(pg, duckdb_db, capsys):
    """A ``numeric`` value with more decimals (or integer digits) than DuckDB's widest decimal
    holds is refused, naming the column and counting the rows, never rounded."""
    source, target = pg.name("src"), duckdb_db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ["1.5", "0.0000000000000000000001"], "numeric")
    code, err = _run_into(pg, source, duckdb_db, target, capsys)
    assert code == 3
    assert "Column 'extra'" in err and "DECIMAL(38,18)" in err and "in 16 row(s)" in err, err
    assert duckdb_db.tables() == set()


@pytest.mark.postgres
@pytest.mark.duckdb
@pytest.mark.parametrize("special", ["NaN", "Infinity", "-Infinity"])
def test_a_numeric_nan_into_duckdb_is_refused_naming_the_column(pg, duckdb_db, capsys, special):
    """A DuckDB decimal holds no NaN or infinity (PostgreSQL's ``numeric`` does): the write
    stops naming the column and counting the rows, not with DuckDB's "Could not convert
    string" for a cast the user never wrote."""
    source, target = pg.name("src"), duckdb_db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, [special, "1.5"], "numeric")
    code, err = _run_into(pg, source, duckdb_db, target, capsys)
    assert code == 3
    assert "Column 'extra' holds NaN or infinite values in 16 row(s)" in err, err
    assert duckdb_db.tables() == set()


@pytest.mark.postgres
def test_a_nan_sqlite_would_store_as_null_is_refused(pg, lite, capsys):
    """SQLite turns a NaN into NULL, silently: the write stops, naming the column and counting
    the rows."""
    source, target = pg.name("src"), lite.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ["NaN", "1.5"], "double precision")
    lite.execute("SELECT 1")  # creates the file
    code, err = _run_into(pg, source, lite, target, capsys)
    assert code == 3
    assert "Column 'extra'" in err and "NaN" in err and "in 16 row(s)" in err, err
    assert lite.tables() == set()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql_type", "texts"),
    [
        ("numeric", ["1.5", "12345678901234567890.5"]),
        ("numeric", ["12345678901234567.0", "9223372036854775807", "-9223372036854775808", "5.00"]),
        ("numeric(30,20)", ["1.50000000000000000000", "1.23456789012345678901"]),
        ("numeric(30,1)", ["1.5", "12345678901234567.5"]),
    ],
)
def test_wide_decimals_into_sqlite_keep_their_exact_text(pg, lite, capsys, sql_type, texts):
    """SQLite keeps 15 significant digits of a number in a NUMERIC column
    (``12345678901234567890.5`` became ``1.2345678901234567e19``; a whole
    ``12345678901234567.0`` became ``12345678901234568``), silently. A decimal of more than 15
    digits or of no precision is published as a ``TEXT`` column of each value's exact text
    (as PostgreSQL writes it)."""
    source, target = pg.name("src"), lite.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, texts, sql_type)
    lite.execute("SELECT 1")  # creates the file
    assert _run_into(pg, source, lite, target, capsys) == (0, "")
    assert lite.column_types(target)["extra"] == "TEXT"
    published = {v for (v,) in lite.rows(target, "extra")}
    assert published == {*texts, None}


@pytest.mark.postgres
@pytest.mark.duckdb
def test_a_nan_into_duckdb_stays_nan(pg, duckdb_db, capsys):
    """DuckDB reads a float NaN of a scanned frame of Python objects as NULL: a pass-through
    ``double precision`` NaN is still published as NaN."""
    source, target = pg.name("src"), duckdb_db.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, ["NaN", "-0", "Infinity", "0.1"], "double precision")
    assert _run_into(pg, source, duckdb_db, target, capsys) == (0, "")
    assert _texts(duckdb_db, target) == sorted(
        ["nan"] * 8 + ["-0.0"] * 8 + ["inf"] * 8 + ["0.1"] * 8 + [None] * 8, key=repr
    )


@pytest.mark.postgres
@pytest.mark.parametrize("database", ["lite", pytest.param("maria", marks=pytest.mark.mysql)])
def test_text_with_a_nul_into_postgresql_names_the_column(request, pg, capsys, database):
    """PostgreSQL text cannot hold a NUL character, which SQLite and MariaDB text can: the
    error named neither the column nor the rows ("PostgreSQL text fields cannot contain NUL
    (0x00) bytes")."""
    db = request.getfixturevalue(database)
    source, target = db.name("src"), pg.name("anon")
    db.create_patients(source, n=40)
    _set_values(db, source, ["a\x00b", "plain"], "TEXT")
    code, err = _run_into(db, source, pg, target, capsys)
    assert code == 3
    assert "Column 'extra'" in err and "NUL" in err and "in 16 row(s)" in err, err
    assert "a\x00b" not in err and "internal error" not in err
    assert pg.tables() == set()


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql_type", "values"),
    [
        ("date", ["infinity", "2020-01-01", "-infinity"]),
        ("timestamptz", ["2020-01-01 00:00+00", "infinity", "10000-01-01 00:00+00"]),
        ("time", ["00:00", "24:00:00"]),
    ],
)
def test_dates_python_cannot_hold_name_the_column(pg, pg_other, capsys, sql_type, values):
    """PostgreSQL's ``infinity`` dates (a common "valid until" sentinel), years past 9999 and
    ``24:00:00`` have no Python value: streamed into another database, the error named no
    column ("date too large (after year 10K)"). It names the column and counts the rows."""
    source, target = pg.name("src"), pg_other.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, values, sql_type)
    (expected,) = pg.execute(
        f"SELECT count(*) FROM {pg.quote(source)} WHERE CAST(extra AS text) IN "
        "('infinity', '-infinity', '24:00:00') OR CAST(extra AS text) LIKE '10000%'"
    )
    code, err = _run_into(pg, source, pg_other, target, capsys)
    assert code == 3
    assert f"Column 'extra' holds {expected[0]} value(s)" in err, err
    assert pg_other.tables() == set()


@pytest.mark.postgres
@pytest.mark.duckdb
def test_duckdb_intervals_into_postgresql_keep_their_fields(duckdb_db, pg, capsys):
    """DuckDB's Python client gives an interval as a ``timedelta``: ``1 year 2 months`` became
    ``420 days`` and ``24:00:00`` became ``1 day`` in PostgreSQL. Read as text, each keeps its
    months, days and time."""
    source, target = duckdb_db.name("src"), pg.name("anon")
    duckdb_db.create_patients(source, n=40)
    texts = ["1 year 2 months", "24:00:00", "1 day", "1 month -1 day", "-1 day 02:03:00", "00:01"]
    _set_values(duckdb_db, source, texts, "INTERVAL")
    assert _run_into(duckdb_db, source, pg, target, capsys) == (0, "")
    expected = {
        pg.execute("SELECT CAST(CAST(:v AS interval) AS text)", {"v": v})[0][0] for v in texts
    }
    assert set(_texts(pg, target)) == expected | {None}
    assert len(expected) == len(texts)


@pytest.mark.duckdb
def test_duckdb_intervals_are_digested_as_their_text(duckdb_db, capsys):
    """The content digest hashes a DuckDB interval as the text the run publishes, not as the
    driver's ``timedelta`` (which counts a month as 30 days): the run's report verifies, and a
    published ``1 month`` changed into ``30 days`` fails ``tclose verify --report``."""
    source, target = duckdb_db.name("src"), duckdb_db.name("anon")
    duckdb_db.create_patients(source, n=40)
    _set_values(duckdb_db, source, ["1 month", "24:00:00", "1 day"], "INTERVAL")
    assert _run_into(duckdb_db, source, duckdb_db, target, capsys) == (0, "")
    path = str(duckdb_db.tmp_path / "run.yaml")
    report = str(duckdb_db.tmp_path / "report.json")
    capsys.readouterr()
    # DuckDB compares 1 month equal to 30 days and skips such an update: go through 31 days.
    for old, new in (("1 month", "31 days"), ("31 days", "30 days")):
        duckdb_db.execute(
            f"UPDATE {duckdb_db.quote(target)} SET extra = INTERVAL '{new}' "
            f"WHERE CAST(extra AS VARCHAR) = '{old}'"
        )
    assert "30 days" in _texts(duckdb_db, target) and "1 month" not in _texts(duckdb_db, target)
    assert main(["-q", "verify", path, "--report", report]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out


#: PostgreSQL key type → an expression of the row number ``i``, unique per row. psycopg has no
#: binary loader of its own for these (``money``, ``bit``, an enum, a domain's own OID, an
#: extension's type), so a key of such a type must not be read in binary format.
POSTGRES_KEY_TYPES = {
    "text": "'k' || i",
    "money": "(i * 1.25)::money",
    "bit(16)": "i::bit(16)",
    "varbit": "i::bit(16)::varbit",
    "{enum}": "('v' || i)::{enum}",
    "{domain}": "('k' || i)::{domain}",
    "citext": "('K' || i)::citext",
}


@pytest.mark.postgres
@pytest.mark.parametrize("into", ["postgresql", "sqlite"])
@pytest.mark.parametrize("sql_type", list(POSTGRES_KEY_TYPES))
def test_postgresql_source_key_of_any_type(pg, lite, sql_type, into):
    """``source.key`` naming a unique column of a type psycopg does not decode from binary: the run
    publishes every row and verifies, joined in the source's database and streamed into another one
    (the second pass finds each row by its key, which is never read as raw bytes)."""
    prefix = pg.prefix
    types = {"enum": f"{prefix}_label", "domain": f"{prefix}_code"}
    installed = sql_type == "citext" and _install_extension(pg, "citext")
    source = pg.name("src")
    target_db = pg if into == "postgresql" else lite
    target = target_db.name("anon")
    pg.create_patients(source, n=40)
    labels = ", ".join(f"'v{i}'" for i in range(1, 41))
    pg.execute(f"CREATE TYPE {types['enum']} AS ENUM ({labels})")
    pg.execute(f"CREATE DOMAIN {types['domain']} AS text CHECK (VALUE <> '')")
    try:
        table = pg.quote(source)
        value = re.sub(r"\bi\b", "patient_id", POSTGRES_KEY_TYPES[sql_type].format(**types))
        pg.execute(f"ALTER TABLE {table} ADD COLUMN k {sql_type.format(**types)}")
        pg.execute(f"UPDATE {table} SET k = {value}")
        document = pg.config(source, target)
        document["source"]["key"] = "k"
        document["attributes"]["patient_id"] = {"role": "identifier"}
        if into != "postgresql":
            lite.execute("SELECT 1")  # creates the file
            document["target"]["url"] = lite.url
        report = pg.tmp_path / "report.json"
        document["report"] = {"json": str(report)}
        path = str(pg.write_config(document))
        assert main(["-q", "run", path]) == 0
        assert main(["-q", "verify", path, "--report", str(report)]) == 0
        published = target_db.rows(target, "code")
        assert sorted(published) == sorted(pg.rows(source, "code"))
    finally:
        pg.drop_all()
        pg.execute(f"DROP TYPE {types['enum']}")
        pg.execute(f"DROP DOMAIN {types['domain']}")
        if installed:
            pg.execute("DROP EXTENSION citext")


@pytest.mark.postgres
def test_postgresql_key_distinct_in_python_but_equal_in_the_database(pg, capsys):
    """A ``citext`` key holding ``'K1'`` and ``'k1'``: distinct values as read, one value under
    the database's equality, so the join finds those rows twice. The run stops at the write
    with an error naming the key and the cause (the join's row count was not checked on
    PostgreSQL, where SQLAlchemy reported it as unknown: the run failed its verification
    instead, naming no cause)."""
    installed = _install_extension(pg, "citext")
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=40)
    try:
        table = pg.quote(source)
        pg.execute(f"ALTER TABLE {table} ADD COLUMN k citext")
        pg.execute(f"UPDATE {table} SET k = 'K' || patient_id")
        pg.execute(f"UPDATE {table} SET k = 'k1' WHERE patient_id = 2")
        document = pg.config(source, target)
        document["source"]["key"] = "k"
        document["attributes"]["patient_id"] = {"role": "identifier"}
        assert main(["-q", "run", str(pg.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert "'k'" in err and "42" in err and "40" in err and "not distinct" in err
        assert pg.tables() == {source}
    finally:
        pg.drop_all()
        if installed:
            pg.execute("DROP EXTENSION citext")


@pytest.mark.mysql
@pytest.mark.parametrize("twin", ["k1", "K1 "])
def test_mariadb_key_distinct_in_python_but_equal_in_the_database(maria, capsys, twin):
    """A ``VARCHAR`` key in MariaDB's default (case-insensitive, PAD SPACE) collation holding
    ``'K1'`` and ``'k1'`` or ``'K1 '``: one value for the database, so the run stops at the
    write, naming the key, the cause and the value (it stopped with the helper table's
    "Duplicate entry ... for key 'PRIMARY'", naming neither the key nor the cause)."""
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=40)
    table = maria.quote(source)
    maria.execute(f"ALTER TABLE {table} ADD COLUMN k VARCHAR(10)")
    maria.execute(f"UPDATE {table} SET k = CONCAT('K', patient_id)")
    maria.execute(f"UPDATE {table} SET k = :twin WHERE patient_id = 2", {"twin": twin})
    document = maria.config(source, target)
    document["source"]["key"] = "k"
    document["attributes"]["patient_id"] = {"role": "identifier"}
    assert main(["-q", "run", str(maria.write_config(document))]) == 3
    err = capsys.readouterr().err
    assert "'k'" in err and "not distinct" in err and repr(twin) in err
    assert maria.tables() == {source}


@pytest.mark.parametrize("into", ["pg", "maria", "duckdb_db"])
def test_sqlite_dates_stored_as_text_into_another_database(lite, request, into):
    """SQLite stores ``DATE`` and ``DATETIME`` values as text, valid ones included: streamed
    into another kind of database they are published as dates (the check for MariaDB's zero
    dates, which also come as text, refused every one of them)."""
    target_db = request.getfixturevalue(into)
    source, target = lite.name("src"), target_db.name("anon")
    lite.create_patients(source, n=40)
    table = lite.quote(source)
    lite.execute(f"ALTER TABLE {table} ADD COLUMN day DATE")
    lite.execute(f"ALTER TABLE {table} ADD COLUMN at DATETIME")
    lite.execute(
        f"UPDATE {table} SET day = printf('2020-01-%02d', patient_id % 28 + 1), "
        f"at = printf('2020-01-01 10:00:%02d.250000', patient_id % 7) WHERE patient_id % 5 <> 0"
    )
    document = lite.config(source, target)
    document["target"]["url"] = target_db.url
    # together they single out rows; the linkage check is not what this test is about
    document["attributes"]["day"] = {"role": "other", "allow_unique": True}
    document["attributes"]["at"] = {"role": "other", "allow_unique": True}
    assert main(["-q", "run", str(lite.write_config(document))]) == 0
    published = target_db.frame(target)
    days = sorted(str(d) for d in published["day"] if d is not None and d == d)
    expected = sorted(str(d) for (d,) in lite.rows(source, "day") if d is not None)
    assert days == expected and len(days) == 32
    times = {str(t) for t in published["at"] if t is not None and t == t}
    assert times == {f"2020-01-01 10:00:0{s}.250000" for s in range(7)}


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize(
    ("sql_type", "special"),
    [("double precision", "NaN"), ("real", "-Infinity"), ("numeric", "NaN")],
)
def test_a_number_mariadb_cannot_store_names_the_column(pg, maria, capsys, sql_type, special):
    """MariaDB stores no NaN and no infinity: streamed into it, such a pass-through value stops
    the write (exit 3) naming the column and counting the rows (the drivers said "nan can not
    be used with MySQL" or "Out of range value for column 'extra' at row 3")."""
    source, target = pg.name("src"), maria.name("anon")
    pg.create_patients(source, n=40)
    _set_values(pg, source, [special, "1.5", "2.5"], sql_type)
    code, err = _run_into(pg, source, maria, target, capsys)
    assert code == 3
    assert "Column 'extra'" in err and "NaN or infinity" in err and "row(s)" in err, err
    assert maria.tables() == set()


@pytest.mark.mysql
@pytest.mark.parametrize("target", ["pg", "lite", "duckdb_db"])
def test_mariadb_times_into_another_database_stay_times_of_day(request, maria, capsys, target):
    """A MariaDB ``TIME`` is read as a duration (``timedelta``); a time within a day is written into
    SQLite, DuckDB and Parquet as that time of day, never as its seconds (``10:00:00.5`` as the
    number ``36000.5``) nor refused as an unimplemented cast."""
    target_db = request.getfixturevalue(target)
    if target == "lite":
        target_db.execute("SELECT 1")  # creates the file
    source, anon = maria.name("src"), target_db.name("anon")
    maria.create_patients(source, n=40)
    _set_values(maria, source, ["10:00:00.5", "00:00:00", "23:59:59.999999"], "TIME(6)")
    assert _run_into(maria, source, target_db, anon, capsys) == (0, "")
    published = target_db.rows(anon, "extra")
    times = sorted(
        {None if v is None else dt.time.fromisoformat(str(v)) for (v,) in published}, key=repr
    )
    assert times == sorted(
        {None, dt.time(10, 0, 0, 500000), dt.time(0), dt.time(23, 59, 59, 999999)}, key=repr
    )


@pytest.mark.mysql
@pytest.mark.parametrize("target", ["pg", "lite", "duckdb_db"])
@pytest.mark.parametrize("duration", ["24:00:00", "-00:00:00.000001", "838:59:59"])
def test_a_mariadb_duration_into_another_database_is_refused(
    request, maria, capsys, target, duration
):
    """A MariaDB ``TIME`` outside a day (a duration: up to ±838:59:59) has no time of day in
    another kind of database: PostgreSQL said "time zone displacement out of range: -35 days
    1:00:00.999999", SQLite stored seconds. The write stops naming the column and counting
    the rows; nothing is published."""
    target_db = request.getfixturevalue(target)
    if target == "lite":
        target_db.execute("SELECT 1")
    source, anon = maria.name("src"), target_db.name("anon")
    maria.create_patients(source, n=40)
    _set_values(maria, source, [duration, "10:00:00"], "TIME(6)")
    code, err = _run_into(maria, source, target_db, anon, capsys)
    assert code == 3
    assert "Column 'extra' (16 rows) holds TIME values outside 00:00:00" in err, err
    assert anon not in target_db.tables()


@pytest.mark.mysql
@pytest.mark.duckdb
def test_a_mariadb_decimal_wider_than_duckdb_s_is_published_exactly(maria, duckdb_db, capsys):
    """A ``DECIMAL(65,30)`` (wider than DuckDB's 38 digits) stopped the run with DuckDB's
    "DECIMAL type width must be between 1 and 38"; it becomes ``DECIMAL(38,30)``: the values
    that fit arrive exactly, and one with more than 8 integer digits stops the write, naming
    the column."""
    source, target = maria.name("src"), duckdb_db.name("anon")
    maria.create_patients(source, n=40)
    texts = ["0.123456789012345678901234567891", "-12345678.5", "7"]
    _set_values(maria, source, texts, "DECIMAL(65,30)")
    assert _run_into(maria, source, duckdb_db, target, capsys) == (0, "")
    published = duckdb_db.execute(f"SELECT DISTINCT extra FROM {duckdb_db.quote(target)}")
    assert {None if v is None else Decimal(v) for (v,) in published} == {
        *map(Decimal, texts),
        None,
    }
    maria.execute(f"UPDATE {source} SET extra = 123456789.5 WHERE patient_id = 3")
    code, err = _run_into(maria, source, duckdb_db, duckdb_db.name("anon2"), capsys)
    assert code == 3
    assert "Column 'extra'" in err and "DECIMAL(38,30)" in err and "in 1 row(s)" in err, err


@pytest.mark.postgres
def test_a_value_the_target_refuses_ends_without_a_stray_traceback(lite, pg, capsys, caplog):
    """SQLite keeps ``abcdef`` in a ``VARCHAR(3)`` column; PostgreSQL refuses it, and the run stops
    (exit 3) with PostgreSQL's reason alone: the stream's cursor on the SQLite source is closed
    before the source's session ends, so no "Error closing cursor" traceback follows."""
    source, target = lite.name("src"), pg.name("anon")
    lite.create_patients(source, n=40)
    _set_values(lite, source, ["abcdef", "a"], "VARCHAR(3)")
    code, err = _run_into(lite, source, pg, target, capsys)
    assert code == 3
    assert "value too long for type character varying(3)" in err, err
    assert "Traceback" not in err and "Error closing cursor" not in err, err
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in logged if "closing cursor" in m], logged
    assert target not in pg.tables()


#: SQLite values stored as another type than declared, bound for another kind of database:
#: ``(declared type, values, what the error says)``.
SQLITE_STORED_OTHERWISE = [
    ("TEXT", [b"\x00\xff", "t"], "(declared TEXT) holds values that are not text"),
    ("BOOLEAN", [2, 1], "(declared BOOLEAN) holds values other than 0 and 1"),
    ("INTEGER", ["abc", 1], "(declared INTEGER) holds values that are not integers"),
    ("REAL", ["x", 1.5], "(declared REAL) holds values that are not numbers"),
    ("BLOB", ["text", b"b"], "(declared BLOB) holds values that are not blobs"),
    *(
        (
            "DATETIME",
            [offset, "2020-01-02 03:04:05.123456"],
            "(declared DATETIME) holds values that are not text, or date-times with a time zone",
        )
        for offset in ("2020-01-02T03:04:05Z", "2020-01-02 03:04:05-0130")
    ),
    (
        "DATETIME",
        ["2020-01-02 03:04:05+02:00", "2020-01-02 03:04:05"],
        "(declared DATETIME) holds values that are not text, or date-times with a time zone",
    ),
]


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.duckdb
@pytest.mark.parametrize("target", ["pg", "maria", "duckdb_db"])
@pytest.mark.parametrize(("sql_type", "values", "message"), SQLITE_STORED_OTHERWISE)
def test_sqlite_values_of_another_type_than_declared_are_refused_into_another_database(
    request, lite, capsys, target, sql_type, values, message
):
    """SQLite keeps any value in any column; streamed into another kind of database such values
    would be converted or dropped without a word (a blob in a ``TEXT`` column published as its hex
    text, a ``BOOLEAN`` 2 as true, a date-time's offset dropped). The run stops before the write,
    naming the column, what its values are, and the rows; into another SQLite database they go as
    they are."""
    target_db = request.getfixturevalue(target)
    source, anon = lite.name("src"), target_db.name("anon")
    lite.create_patients(source, n=40)
    table = lite.quote(source)
    lite.execute(f"ALTER TABLE {table} ADD COLUMN extra {sql_type}")
    for i, value in enumerate(values):
        lite.execute(
            f"UPDATE {table} SET extra = :v WHERE patient_id % {len(values)} = {i}", {"v": value}
        )
    code, err = _run_into(lite, source, target_db, anon, capsys)
    assert code == 3
    assert f"Column 'extra' {message}" in err and "in 20 row(s)" in err, err
    assert anon not in target_db.tables()
    other = lite.name("copy")
    assert _run_into(lite, source, lite, other, capsys) == (0, "")
    assert lite.rows(other, "typeof(extra)", order="1") == lite.rows(
        source, "typeof(extra)", order="1"
    )


@pytest.mark.postgres
def test_sqlite_integers_of_64_bits_into_postgresql_are_bigint(lite, pg, capsys):
    """SQLite stores any integer in 64 bits, whatever the declared type: an ``INTEGER`` (or
    ``SMALLINT``) column becomes PostgreSQL's ``bigint``, and 9223372036854775807 arrives."""
    source, target = lite.name("src"), pg.name("anon")
    lite.create_patients(source, n=40)
    _set_values(lite, source, [str(2**63 - 1), str(-(2**63)), "5"], "SMALLINT")
    assert _run_into(lite, source, pg, target, capsys) == (0, "")
    assert pg.column_types(target)["extra"] == "BIGINT"
    published = {v for (v,) in pg.rows(target, "extra")}
    assert published == {2**63 - 1, -(2**63), 5, None}
