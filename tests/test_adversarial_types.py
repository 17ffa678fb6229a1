"""Adversarial: pass-through columns of types SQLAlchemy does not know, or that have no equality.

A pass-through column (role ``other``) is copied unchanged. On a target in the source's database
the staging table is filled by ``INSERT ... SELECT``, so any type the database can store must
work: geometric types, ``xml``, composites, ranges, arrays, ``json`` (no equality operator: the
linkage check compares its text), an untyped SQLite column, MariaDB's ``POINT`` and ``INET6``.
Where a type cannot be carried (into another kind of database) the run stops before any work
with a clear error naming the column and the type, never an internal error (exit 4).
"""

from __future__ import annotations

import json
import re

import pytest

from tclose.cli import main

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


def _install_hstore(pg) -> bool:
    """Make the ``hstore`` type available; True if this test installed it (and must drop it).
    Skips only where the server has no such extension (a PostgreSQL without contrib)."""
    if pg.execute("SELECT 1 FROM pg_extension WHERE extname = 'hstore'"):
        return False
    if not pg.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'hstore'"):
        pytest.skip("this PostgreSQL server has no hstore extension (contrib is not installed)")
    pg.execute("CREATE EXTENSION hstore")
    return True


@pytest.mark.postgres
@pytest.mark.parametrize("sql_type", list(POSTGRES_TYPES))
def test_postgresql_pass_through_of_any_type(pg, sql_type):
    prefix = pg.prefix
    types = {"enum": f"{prefix}_mood", "composite": f"{prefix}_pair"}
    installed = sql_type == "hstore" and _install_hstore(pg)
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
