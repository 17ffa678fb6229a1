"""Rule: every configured name is checked against the database's own rules for names, before any
work.

One function per dialect (``name_problem`` of the connector, through
``check_configured_name``) says why the database cannot store a name as written: empty, white
space only or holding a NUL on every database (tclose's own rule: nobody can see such a name in
a message, and C strings end at NUL); too long as the database measures it (PostgreSQL's
bytes, MariaDB's file names); MariaDB's trailing white space and characters beyond U+FFFF;
SQLite's reserved ``sqlite_`` prefix. Each part (schema and table) of the source, the target
and the audit table is checked: exit 2 naming the key (``target.table``), the value and the
problem, and the source is never read.

The first test tries the names the red team used (issue 28: ``""``, spaces only, a trailing
space on MariaDB, NUL, a name over the stored limit: exit 3 after the work, or a SQLite table
named ``""`` published). The others hold the rule against each database with generated names
(hypothesis): a name the check accepts is created and found under exactly that name, and a
name the database stores exactly is accepted, unless it is blank or holds a NUL (refused by
tclose's own rule).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose.core.runner
from tclose.app.cli import main
from tclose.base.registry import dialect_of, load_registry

FIXTURES = {"postgresql": "pg", "mysql": "maria", "duckdb": "duckdb_db", "sqlite": "lite"}
ALL = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("sqlite"),
]


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a run reads its source: a refusal must come before any work."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the run read its source: the refusal came after work began")

    monkeypatch.setattr(tclose.core.runner, "read_inputs", refuse)


def _connector(db):
    return load_registry(entry_points=False).connector_for(dialect_of(db.url)).connect(db.url)


# --- the attack found (issue 28: names the database cannot store, or empty) ------------------

BAD = {
    "postgresql": ["", "   ", "a\x00b", "x" * 64, "é" * 32],
    "mysql": ["", "   ", "out ", "out\t", "a\x00b", "x" * 65, "€" * 64, "a\U0001f600"],
    "sqlite": ["", "   ", "\t", "a\x00b", "sqlite_out", "SQLite_Out"],
    "duckdb": ["", "   ", "\u3000", "a\x00b"],
}


@pytest.mark.parametrize("dialect", ALL)
@pytest.mark.parametrize("key", ["target.table", "source.table", "report.table"])
def test_a_name_the_database_cannot_store_is_refused_before_any_work(
    dialect, key, request, no_work, capsys
):
    db = request.getfixturevalue(FIXTURES[dialect])
    source = db.name("src")
    db.create_patients(source, n=20)
    for bad in BAD[dialect]:
        document = db.config(source, db.name("anon"))
        part, _, leaf = key.partition(".")
        if part == "report":
            document["report"] = {"table": bad}
        else:
            document[part][leaf] = bad
        assert main(["-q", "run", str(db.write_config(document))]) == 2, bad
        err = capsys.readouterr().err
        # the configuration's own check (an empty text) or the database's rule for names
        assert f"At {key}" in err or f"At {part} ==> At key: {leaf}" in err, err
        assert repr(bad) in err or "non-empty" in err, err
    assert db.tables() == {source}


@pytest.mark.postgres
def test_a_schema_part_is_checked_as_well(pg, no_work, capsys):
    source = pg.name("src")
    pg.create_patients(source, n=20)
    for schema in ("   ", "s" * 64):
        document = pg.config(source, f"{schema}.out")
        assert main(["-q", "run", str(pg.write_config(document))]) == 2
        err = capsys.readouterr().err
        assert f"The schema name {schema!r} of target.table is" in err, err


# --- the rule, against each database's own answer (generated names) -------------------------

#: Characters around the databases' rules: white space of several kinds, NUL, quotes, a dot, a
#: percent sign, letters that take 2 to 5 bytes in a file name, one beyond U+FFFF.
EDGES = [" ", "\t", "\n", "\x00", "\xa0", "\u3000", '"', "`", "'", ".", "%", "é", "€", "😀"]
NAMES = st.text(
    alphabet=st.one_of(st.sampled_from(EDGES + list("sqlite_AZ09")), st.characters(codec="utf-8")),
    max_size=70,
)


def _stored(db, name: str) -> bool:
    """Whether the database creates a table named ``name`` and finds it under exactly that name
    (the table is dropped again)."""
    quoted = db.quote(name)
    engine = db.engine
    try:
        with engine.connect() as connection:
            if db.dialect == "postgresql":
                with connection.begin():
                    connection.exec_driver_sql(f"CREATE TABLE {quoted} (x int)".replace("%", "%%"))
                    found = connection.exec_driver_sql(
                        "SELECT relname FROM pg_class WHERE oid = to_regclass(%(q)s)", {"q": quoted}
                    ).scalar()
                    connection.rollback()
                    return found == name
            statement = f"CREATE TABLE {quoted} (x int)"
            if db.dialect == "mysql":
                statement = statement.replace("%", "%%")
            connection.exec_driver_sql(statement)
            try:
                names = sa.inspect(connection).get_table_names()
            finally:
                drop = f"DROP TABLE {quoted}"
                connection.exec_driver_sql(
                    drop.replace("%", "%%") if db.dialect == "mysql" else drop
                )
                connection.commit()
            return name in names
    except (sa.exc.DBAPIError, ValueError):  # refused by the database or its driver
        return False


@pytest.mark.parametrize("dialect", ALL)
def test_the_name_check_agrees_with_the_database(dialect, request):
    db = request.getfixturevalue(FIXTURES[dialect])
    db.create_patients(db.name("made"), n=1)  # a SQLite file exists once it has a table
    database = _connector(db)
    # On a shared server, a prefix of the test's own keeps other sessions' tables apart.
    prefix = db.prefix + "_" if dialect in ("postgresql", "mysql") else ""

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(NAMES)
    def agrees(suffix: str) -> None:
        name = prefix + suffix
        problem = database.name_problem(name)
        stored = _stored(db, name)
        if problem is None:
            assert stored, f"{name!r}: accepted by tclose, not stored as written"
        elif stored:
            assert blank(name), f"{name!r}: stored as written, refused: {problem}"

    agrees()


def blank(name: str) -> bool:
    """Whether tclose's own rule refuses ``name`` on every database, whatever it stores."""
    return not name or name.isspace() or "\x00" in name
