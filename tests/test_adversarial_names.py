"""Adversarial: tables that look like tclose's bookkeeping, long names, odd keys.

tclose drops only tables it recorded as its own; a user's table is never dropped because of its
name, whatever the dialect (MariaDB's DDL commits at once, so a wrong drop there is for good).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tclose.app.cli import main


@pytest.mark.parametrize("suffix", ["__tclose_old", "__tclose_staging", "__tclose_s_"])
def test_a_source_named_like_bookkeeping_survives(db, suffix):
    target = db.name("x")
    source = target + suffix
    db.create_patients(source, n=40)
    before = db.rows(source, order="patient_id")
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    path = str(db.write_config(document))
    assert main(["-q", "run", path]) == 0
    assert main(["-q", "run", path]) == 0  # replaces the target: the old one is dropped
    assert db.rows(source, order="patient_id") == before
    assert db.tables() == {source, target}


def test_long_target_names_fit_the_identifier_limits(db):
    source = db.name("src")
    db.create_patients(source, n=40)
    limit = {"postgresql": 63, "mysql": 64, "sqlite": 80, "duckdb": 200}[db.dialect]
    target = db.name("t" * (limit - len(db.name(""))))
    assert len(target) == limit
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    path = str(db.write_config(document))
    assert main(["-q", "run", path]) == 0
    assert main(["-q", "run", path]) == 0
    assert db.tables() == {source, target}
    assert len(db.rows(target)) == 40


def test_a_too_long_target_name_is_a_configuration_error(db, capsys):
    if db.dialect in ("sqlite", "duckdb"):
        pytest.skip(f"{db.dialect} has no identifier limit")
    source = db.name("src")
    db.create_patients(source, n=20)
    target = db.name("t" * 70)
    assert main(["-q", "run", str(db.write_config(db.config(source, target)))]) == 2
    assert "longer than" in capsys.readouterr().err
    assert db.tables() == {source}


def test_a_text_key(db):
    source, target = db.name("src"), db.name("anon")
    rows = [{"k": f"key-{i:04d}-" + "x" * 300, "a": i % 17, "c": float(i % 5)} for i in range(40)]
    db.create(
        source,
        [sa.Column("k", sa.Text), sa.Column("a", sa.Integer), sa.Column("c", sa.Double)],
        rows,
    )
    document = db.config(source, target)
    document["source"]["key"] = "k"
    document["attributes"] = {
        "a": {"role": "quasi_identifier", "type": "numeric"},
        "c": {"role": "confidential", "type": "numeric"},
    }
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    assert len(db.rows(target)) == 40


@pytest.mark.mysql
def test_mariadb_role_without_drop_leaves_an_empty_registered_probe_table(maria, capsys):
    """An account that may create tables in the target's database but not alter or drop them
    is stopped before any work, on the empty probe table the run makes there; the probe is
    registered, so the next run drops it."""
    from tclose.connectors.mysql import PROBE_MARK
    from tclose.naming import STAGING_SCHEMA

    user = f"{maria.prefix}_nodrop"
    database = maria.engine.url.database
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=40)
    document = maria.config(source, target)
    document["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(maria.write_config(document))]) == 0  # a release: replaceable
    published = maria.rows(target, order="tclose_row")
    maria.execute(f"CREATE USER '{user}'@'%'")
    try:
        maria.execute(
            f"GRANT SELECT, INSERT, DELETE, CREATE, CREATE TEMPORARY TABLES ON `{database}`.* "
            f"TO '{user}'@'%'"  # DELETE for the registry tclose_owned, which may not exist yet
        )
        maria.execute(f"GRANT ALL ON `{STAGING_SCHEMA}`.* TO '{user}'@'%'")
        document["source"]["url"] = maria.engine.url.set(username=user).render_as_string(False)
        assert main(["run", str(maria.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert "not alter or drop them" in err
        # The empty probe stays, registered, until a run that may drop tables drops it (on the
        # shared server, another test's run may have done so already).
        left = maria.tables() - {source, target}
        assert all(PROBE_MARK in t and maria.rows(t) == [] for t in left), left
        assert maria.rows(target, order="tclose_row") == published
    finally:
        maria.execute(f"DROP USER '{user}'@'%'")
    # The next run that may drop tables removes it: it is registered as tclose's.
    assert main(["-q", "run", str(maria.write_config(maria.config(source, maria.name("b"))))]) == 0
    assert maria.tables() == {source, target, maria.name("b")}


def test_mariadb_a_session_frees_its_locks_before_its_connection_closes(maria):
    """A closed connection's named locks are freed only once the server has handled the disconnect,
    so the session frees them itself as it ends: the next run, asking ``IS_FREE_LOCK`` at once,
    drops this run's leftover staging table."""
    from tclose.connectors.mysql import MySQLDatabase, run_lock_name

    database = MySQLDatabase(maria.url)
    staging = sa.Table(maria.name("stage"), sa.MetaData(), sa.Column("x", sa.Integer))
    staging.info["run_id"] = maria.prefix
    target_lock = run_lock_name(maria.engine.url.database, staging.name)
    free = "SELECT IS_FREE_LOCK(:lock)"
    try:
        with database.session(staging) as session:
            held = [session.run_lock, target_lock]
            assert [maria.execute(free, {"lock": lock}) for lock in held] == [[(0,)], [(0,)]]
            session.end()
            assert not session.connection.closed
            assert [maria.execute(free, {"lock": lock}) for lock in held] == [[(1,)], [(1,)]]
    finally:
        database.engine.dispose()
    assert maria.tables() == set()


def test_mariadb_a_leftover_that_cannot_be_dropped_does_not_stop_a_run(maria, capsys):
    """A registered leftover that ``DROP TABLE`` refuses (here a view under a registered name) is a
    warning, and later runs on the schema go on."""
    from tclose.connectors.mysql import MySQLDatabase
    from tclose.naming import TableName

    source, left = maria.name("src"), maria.name("left__tclose_o_0123456789ab")
    maria.create_patients(source, n=40)
    maria.execute(f"CREATE VIEW {maria.quote(left)} AS SELECT 1 AS a")
    database = MySQLDatabase(maria.url)
    try:
        with database.session() as session:
            session.run_lock = f"tclose_test_{maria.prefix}"  # free once the session ends
            session.register(TableName(None, left))
        document = maria.config(source, maria.name("anon"))
        assert main(["run", str(maria.write_config(document))]) == 0
        schema = maria.engine.url.database
        assert f"could not drop {schema}.{left}" in capsys.readouterr().err
    finally:
        database.engine.dispose()
        maria.execute(f"DROP VIEW {maria.quote(left)}")
        maria.execute("DELETE FROM tclose_owned WHERE name = :n", {"n": left})


def _with_column(db, source: str, column: str) -> None:
    """Add an integer ``column`` (2 distinct values) to a :meth:`create_patients` table."""
    db.execute(f"ALTER TABLE {db.quote(source)} ADD COLUMN {db.quote(column)} INTEGER")
    db.execute(f"UPDATE {db.quote(source)} SET {db.quote(column)} = patient_id % 2")


def _across(source_db, target_db, columns: list[str]) -> tuple[str, str, dict]:
    """(source, target, config): a patients table in ``source_db`` with the integer pass-through
    ``columns`` added, published into ``target_db``."""
    source, target = source_db.name("src"), target_db.name("anon")
    source_db.create_patients(source, n=40)
    for column in columns:
        _with_column(source_db, source, column)
    document = source_db.config(source, target)
    document["target"]["url"] = target_db.url
    document["attributes"].update({c: {"role": "other"} for c in columns})
    return source, target, document


@pytest.mark.parametrize("spelling", ["tclose_row", "TCLOSE_ROW", "Tclose_Row", "tclosE_row"])
def test_a_column_named_like_the_row_column_up_to_case(db, capsys, spelling):
    """SQLite, DuckDB and MariaDB compare column names without case: such a column would be the
    row column ``tclose_row`` of the staging table. A configuration error before any work,
    naming the column; PostgreSQL (quoted names are case-sensitive) publishes it unless the
    name is exactly ``tclose_row``."""
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=40)
    _with_column(db, source, spelling)
    before = db.rows(source, order="patient_id")
    document = db.config(source, target)
    document["attributes"][spelling] = {"role": "other"}
    path = str(db.write_config(document))
    if db.dialect == "postgresql" and spelling != "tclose_row":
        assert main(["-q", "run", path]) == 0
        assert main(["-q", "verify", path]) == 0
        assert sorted(db.rows(target, db.quote(spelling))) == sorted(
            db.rows(source, db.quote(spelling))
        )
        return
    assert main(["-q", "run", path]) == 2
    err = capsys.readouterr().err
    assert f"Column {spelling!r}" in err and "tclose_row" in err and "role: identifier" in err
    if spelling != "tclose_row":
        assert "without regard to case" in err
    assert "internal error" not in err and "Database error" not in err
    assert db.tables() == {source}
    assert db.rows(source, order="patient_id") == before
    document["attributes"][spelling] = {"role": "identifier"}  # the advice works
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    assert spelling not in db.column_types(target) or spelling == "tclose_row"


@pytest.mark.parametrize("spelling", ["tclose_row ", " TCLOSE_ROW", "tclosé_row", "tcloſe_row"])
def test_look_alikes_of_the_row_column_are_published(db, spelling):
    """Names that differ from ``tclose_row`` by more than ASCII case are other columns on every
    database that can hold them (MariaDB refuses names ending with a space)."""
    if db.dialect == "mysql" and spelling.endswith(" "):
        pytest.skip("MariaDB refuses column names that end with a space")
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=40)
    _with_column(db, source, spelling)
    document = db.config(source, target)
    document["attributes"][spelling] = {"role": "other"}
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    assert sorted(db.rows(target, db.quote(spelling))) == sorted(
        db.rows(source, db.quote(spelling))
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("columns", "named"),
    [(["TCLOSE_ROW"], "tclose_row"), (["Ward2", "WARD2"], "'Ward2'")],
)
def test_postgresql_names_equal_up_to_case_in_a_case_insensitive_target(
    pg, lite, capsys, columns, named
):
    """PostgreSQL holds ``TCLOSE_ROW`` (or ``Ward2`` beside ``WARD2``); published into SQLite,
    which compares names without case, they collide: a configuration error naming both."""
    lite.execute("SELECT 1")  # creates the file
    _, _, document = _across(pg, lite, columns)
    assert main(["-q", "run", str(pg.write_config(document))]) == 2
    err = capsys.readouterr().err
    assert f"Column {columns[-1]!r}" in err and named in err and "sqlite" in err
    assert lite.tables() == set()


@pytest.mark.mysql
@pytest.mark.parametrize(
    ("a", "b"),
    [("ward", "WARD"), ("é", "É"), ("σ", "Σ"), ("ǅ", "ǆ"), ("k", "\u212a"), ("i", "İ")]
    + [("straße", "STRASSE"), ("ς", "σ"), ("ı", "I"), ("e", "é"), ("tcloſe_row", "tclose_row")],
)
def test_mariadb_column_key_agrees_with_the_server(maria, a, b):
    """:meth:`MySQLDatabase.column_key` says two names are one column exactly when MariaDB
    refuses them side by side (duplicate column name)."""
    from tclose.connectors.mysql import MySQLDatabase

    database = MySQLDatabase(maria.url)
    table = maria.name("pair")
    try:
        maria.execute(
            f"CREATE TABLE {maria.quote(table)} ({maria.quote(a)} INT, {maria.quote(b)} INT)"
        )
        one_column = False
    except sa.exc.OperationalError as error:
        assert "Duplicate column name" in str(error)
        one_column = True
    finally:
        database.engine.dispose()
    assert (database.column_key(a) == database.column_key(b)) == one_column


@pytest.mark.parametrize(
    ("source_kind", "target_kind", "columns", "said"),
    [
        pytest.param("lite", "pg", ["a" * 70], "at most 63 bytes", marks=pytest.mark.postgres),
        pytest.param("lite", "pg", ["é" * 32], "at most 63 bytes", marks=pytest.mark.postgres),
        pytest.param(
            "lite", "pg", ["x" * 64 + "1", "x" * 64 + "2"], "at most 63", marks=pytest.mark.postgres
        ),
        pytest.param("lite", "maria", ["b" * 65], "at most 64 characters", marks=pytest.mark.mysql),
        pytest.param("pg", "maria", ["ward "], "ends with ' '", marks=pytest.mark.mysql),
        pytest.param("pg", "maria", ["ward\t"], "ends with '\\t'", marks=pytest.mark.mysql),
        pytest.param(
            "pg", "maria", ["w😀"], "outside the Basic Multilingual", marks=pytest.mark.mysql
        ),
        pytest.param("lite", "maria", ["𝐱" * 3], "U+1D431", marks=pytest.mark.mysql),
    ],
)
def test_a_column_name_the_target_would_cut_or_refuse(
    request, capsys, source_kind, target_kind, columns, said
):
    """A pass-through column whose name the target cannot keep as it is (PostgreSQL cuts a name to
    63 bytes, so two long names may share them; MariaDB refuses names longer than 64 characters,
    ending with a space, or holding a character beyond U+FFFF) is a configuration error before any
    work, naming the column and the rule; ``role: identifier`` gets past it."""
    source_db, target_db = (
        request.getfixturevalue(source_kind),
        request.getfixturevalue(target_kind),
    )
    _, target, document = _across(source_db, target_db, columns)
    assert main(["-q", "run", str(source_db.write_config(document))]) == 2
    err = capsys.readouterr().err
    assert f"Column {columns[0]!r}" in err and said in err and "role: identifier" in err
    assert target not in target_db.tables()
    document["attributes"].update({c: {"role": "identifier"} for c in columns})
    assert main(["-q", "run", str(source_db.write_config(document))]) == 0
    assert not set(columns) & set(target_db.column_types(target))


def test_a_source_column_with_an_empty_name_is_a_clear_error(lite, capsys):
    """SQLite accepts a column named ``""``, which SQLAlchemy cannot reflect: a data error naming
    the table and the remedy, before any work, whether or not the config names the column."""
    source, target, document = _across(lite, lite, [""])
    before = lite.rows(source, order="patient_id")
    for attributes in (document["attributes"], {**document["attributes"], "": None}):
        document["attributes"] = {c: spec for c, spec in attributes.items() if spec is not None}
        assert main(["-q", "run", str(lite.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert f"Table {source}" in err and "a column with an empty name" in err, err
        assert "internal error" not in err
        assert lite.tables() == {source}
        assert lite.rows(source, order="patient_id") == before


@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_a_column_named_like_the_key_label(db, capsys, role):
    """The read labels the row key ``__key__``; a QI or confidential column of that name made
    the key column ambiguous (internal error, exit 4). It is one column like any other."""
    source, target, document = _across(db, db, ["__key__"])
    db.execute(f"UPDATE {db.quote(source)} SET {db.quote('__key__')} = patient_id % 3 + 100")
    document["attributes"]["__key__"] = {"role": role, "type": "numeric"}
    assert main(["-q", "run", str(db.write_config(document))]) == 0, capsys.readouterr().err
    published = sorted(v for (v,) in db.rows(target, db.quote("__key__")))
    if role == "confidential":
        assert published == sorted(v for (v,) in db.rows(source, db.quote("__key__")))
    else:
        assert len(published) == 40 and 100 <= min(published) <= max(published) <= 102
