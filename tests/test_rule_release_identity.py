"""Rule: a registry's record alone never makes a table a release; a release is replaced only
while it is, in every respect, the table tclose published, and bound to nothing else.

- **Trusted registry** (PostgreSQL): the registry of a schema is believed only if it is a plain
  table owned by the connecting role that no other role may write (no grant, no membership in
  its owner role, no trigger or rule on it). tclose makes it so, and records nothing into a
  registry it does not trust.
- **The table carries the mark of the recorded run** (its comment ``tclose run <id>``, on
  SQLite the constraint at the end of its definition), which only who may alter the table can
  set: a row written into the registry for a user's table does not make it a release.
- **Identity covers the table's columns and rows** on every database (PostgreSQL: its OID, its
  comment, its columns with their types and the MD5 sums of its rows; MariaDB: its last DDL's
  time, its comment, its columns and ``CHECKSUM TABLE``; SQLite: its definition and rows;
  DuckDB: its columns, types and rows): a release changed after its publication — a row
  updated, a column added or altered — is refused (exit 2, saying it changed and how to
  proceed), and ``tclose verify`` says FAIL.
- **Nothing else is bound to it**: on PostgreSQL, by ``pg_depend`` and ``pg_inherits``, no
  object depends on the table, its columns or its row type (but the primary key tclose gives
  it), and it is neither a partition or child of another table nor a parent of one.
"""

from __future__ import annotations

import secrets

import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.connectors.releases import releases_table
from tclose.core import runner
from tclose.naming import RELEASES_TABLE, TableName

FIXTURES = {"postgresql": "pg", "mysql": "maria", "duckdb": "duckdb_db", "sqlite": "lite"}


def _replace_config(db, source: str, target: str) -> str:
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    return str(db.write_config(document, f"replace-{secrets.token_hex(3)}.yaml"))


def _refused(monkeypatch, path: str, capsys) -> str:
    """Run ``path``: exit 2 before any row of the source is read; the error text."""

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the source was read: the refusal came after the work began")

    monkeypatch.setattr(runner, "read_inputs", no_reading)
    code = main(["-q", "run", path])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2, err
    return err


@pytest.fixture
def pg_schema(pg):
    """(pg, schema): a schema of this test's own, where its registry is its own; dropped after."""
    schema = f"{pg.prefix}_s"
    pg.execute(f"CREATE SCHEMA {schema}")
    yield pg, schema
    pg.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def pg_role(pg):
    """Another role (no login needed: statements run ``SET ROLE``)."""
    role = f"{pg.prefix}_other"
    pg.execute(f"CREATE ROLE {role}")
    yield role
    pg.execute(f"DROP OWNED BY {role}")
    pg.execute(f"DROP ROLE {role}")


def _forge_record(db, connection, home: TableName) -> None:
    """Write into the registry of ``home``'s schema a row for ``home`` with the identity it
    has now, exactly as tclose computes it: the strongest forgery."""
    from tclose.connectors.releases import record_release

    database = _connector(db)
    _home, identity = database.release_of(connection, home)
    record_release(connection, home, secrets.token_hex(16), identity)


def _connector(db):
    from tclose.base.registry import load_registry

    return load_registry().connector_for(db.dialect).connect(db.url, None)


# --- the attacks: a registry another role writes ---------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["created it first", "granted a write on it"])
def test_postgresql_another_role_records_a_users_table_in_the_registry(
    pg_schema, pg_role, monkeypatch, capsys, how
):
    """Role ``other`` makes the schema's registry before tclose does (or is granted a write on
    tclose's), and records the user's table ``victim`` as a release, with the very identity
    tclose would compute: ``if_exists: replace`` must not drop it."""
    pg, schema = pg_schema
    source, victim = pg.name("src"), pg.name("victim")
    pg.create_patients(source, n=30)
    pg.execute(f"CREATE TABLE {schema}.{victim} (mine integer)")
    pg.execute(f"INSERT INTO {schema}.{victim} VALUES (1), (2)")
    pg.execute(f"GRANT USAGE, CREATE ON SCHEMA {schema} TO {pg_role}")
    pg.execute(f"GRANT SELECT ON {schema}.{victim} TO {pg_role}")
    home = TableName(schema, victim)
    with pg.engine.begin() as connection:
        if how == "created it first":
            connection.exec_driver_sql(f"SET ROLE {pg_role}")
            releases_table(schema).create(connection)
        else:
            releases_table(schema).create(connection)
            connection.exec_driver_sql(
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.{RELEASES_TABLE} TO {pg_role}"
            )
            connection.exec_driver_sql(f"SET ROLE {pg_role}")
        _forge_record(pg, connection, home)
        connection.exec_driver_sql("RESET ROLE")
    err = _refused(monkeypatch, _replace_config(pg, source, f"{schema}.{victim}"), capsys)
    assert f"The target table {schema}.{victim} exists and is not a release" in err
    assert pg_role in err or "mark" in err
    assert pg.execute(f"SELECT mine FROM {schema}.{victim} ORDER BY 1") == [(1,), (2,)]


@pytest.mark.postgres
def test_postgresql_a_registry_earlier_on_the_search_path_is_not_the_targets(
    pg, pg_role, monkeypatch, capsys
):
    """A ``tclose_releases`` in a schema the search path puts first records ``victim``; the
    name resolves to ``victim`` of the second schema, whose registry has no such row."""
    first, second = f"{pg.prefix}_a", f"{pg.prefix}_b"
    for schema in (first, second):
        pg.execute(f"CREATE SCHEMA {schema}")
    try:
        source, victim = pg.name("src"), pg.name("victim")
        pg.create_patients(source, n=30)
        pg.execute(f"CREATE TABLE {second}.{victim} (mine integer)")
        with pg.engine.begin() as connection:
            releases_table(first).create(connection)
            _home, identity = _connector(pg).release_of(connection, TableName(second, victim))
            connection.execute(
                releases_table(first)
                .insert()
                .values(name=victim, run_id="0" * 32, identity=identity, published_at=sa.func.now())
            )
        url = sa.make_url(pg.url).update_query_dict(
            {"options": f"-csearch_path={first},{second},public"}
        )
        document = pg.config(f"public.{source}", victim)
        document["source"]["url"] = document["target"]["url"] = url.render_as_string(False)
        document["target"]["if_exists"] = "replace"
        err = _refused(monkeypatch, str(pg.write_config(document)), capsys)
        assert "not a release" in err and f"{second}.{RELEASES_TABLE}" in err
        assert pg.execute(f"SELECT count(*) FROM {second}.{victim}") == [(0,)]
    finally:
        for schema in (first, second):
            pg.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.postgres
def test_postgresql_the_registry_tclose_makes_is_written_by_its_role_alone(pg_schema, capsys):
    pg, schema = pg_schema
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=30)
    assert main(["-q", "run", _replace_config(pg, source, f"{schema}.{target}")]) == 0
    owner, writers = pg.execute(
        "SELECT pg_get_userbyid(relowner), ARRAY(SELECT DISTINCT privilege_type FROM "
        "aclexplode(relacl) WHERE grantee <> relowner) FROM pg_class WHERE oid = "
        f"'{schema}.{RELEASES_TABLE}'::regclass"
    )[0]
    assert owner == pg.execute("SELECT current_user")[0][0]
    assert set(writers) <= {"SELECT"}
    assert main(["-q", "run", _replace_config(pg, source, f"{schema}.{target}")]) == 0


@pytest.mark.postgres
def test_postgresql_a_trigger_on_the_registry_makes_it_untrusted(pg_schema, monkeypatch, capsys):
    """A trigger could rewrite what tclose records: a registry with one is not believed."""
    pg, schema = pg_schema
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=30)
    path = _replace_config(pg, source, f"{schema}.{target}")
    assert main(["-q", "run", path]) == 0
    pg.execute(
        f"CREATE FUNCTION {schema}.keep() RETURNS trigger LANGUAGE plpgsql AS "
        "'BEGIN RETURN NEW; END'"
    )
    pg.execute(
        f"CREATE TRIGGER keep BEFORE INSERT ON {schema}.{RELEASES_TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION {schema}.keep()"
    )
    err = _refused(monkeypatch, path, capsys)
    assert "registry of releases of its schema is not trusted" in err and "trigger keep" in err


# --- the rule: the record must be matched by the table's own mark --------------------------


def test_a_record_copied_to_a_users_table_does_not_make_it_a_release(db, monkeypatch, capsys):
    """The user (the same role) copies a release's registry row under the name of a table of
    their own, even with that table's identity: the table carries no mark of the run."""
    source, target, mine = db.name("src"), db.name("anon"), db.name("mine")
    db.create_patients(source, n=30)
    db.release(target)
    db.create(mine, [sa.Column("x", sa.Integer)], [{"x": 1}])
    with db.engine.begin() as connection:
        database = _connector(db)
        home, _identity = database.release_of(connection, TableName(None, target))
        mine_home, identity = database.release_of(connection, TableName(None, mine))
        table = releases_table(home.schema)
        run_id = connection.execute(
            sa.select(table.c.run_id).where(table.c.name == home.name)
        ).scalar()
        from tclose.connectors.releases import record_release

        record_release(connection, mine_home, run_id, identity)
    err = _refused(monkeypatch, _replace_config(db, source, mine), capsys)
    assert "carries no mark of a run" in err
    assert db.rows(mine) == [(1,)]


# --- the rule: a release changed after its publication ---------------------------------------


def _change(db, target: str, how: str) -> None:
    q = db.quote(target)
    if how == "a row updated":
        db.execute(f"UPDATE {q} SET charge = charge + 1 WHERE tclose_row = 1")
    elif how == "a column rescaled":
        db.execute(f"UPDATE {q} SET severity = severity * 2")
    elif how == "a column added":
        db.execute(f"ALTER TABLE {q} ADD COLUMN extra integer")
    elif how == "a column's type changed":
        alter = {
            "postgresql": "ALTER TABLE {} ALTER COLUMN age TYPE numeric(20, 4)",
            "mysql": "ALTER TABLE {} MODIFY age DECIMAL(20, 4)",
            "duckdb": "ALTER TABLE {} ALTER age TYPE DECIMAL(20, 4)",
        }
        if db.dialect not in alter:
            pytest.skip("SQLite changes no column's type")
        db.execute(alter[db.dialect].format(q))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    ["a row updated", "a column rescaled", "a column added", "a column's type changed"],
)
def test_a_release_changed_after_its_publication_is_not_replaced(
    db, tmp_path, monkeypatch, capsys, how
):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=30)
    path = _replace_config(db, source, target)
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    assert main(["-q", "verify", path]) == 0, capsys.readouterr()
    capsys.readouterr()
    _change(db, target, how)
    before = db.rows(target, order="tclose_row")
    err = _refused(monkeypatch, path, capsys)
    assert "changed since" in err and f"DROP TABLE {target}" in err
    assert db.rows(target, order="tclose_row") == before
    assert main(["-q", "verify", path]) != 0
    out = capsys.readouterr().out
    assert "FAIL  release:" in out and "changed since" in out


def test_an_unchanged_release_verifies_and_is_replaced(db, capsys):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=30)
    path = _replace_config(db, source, target)
    for _ in range(2):
        assert main(["-q", "run", path]) == 0, capsys.readouterr().err
        assert main(["-q", "verify", path]) == 0
        assert "PASS  release:" in capsys.readouterr().out


# --- the rule: a release bound to anything else in the database is not replaced -------------


def _bind(pg, target: str, how: str) -> list[str]:
    """Bind the release ``target`` to a structure of the user's; the statements to undo it."""
    other = pg.name("other")
    if how == "attached as a partition":
        pg.execute(f"CREATE TABLE {other} (LIKE {target}) PARTITION BY RANGE (tclose_row)")
        pg.execute(f"ALTER TABLE {other} ATTACH PARTITION {target} FOR VALUES FROM (0) TO (1000)")
        return [f"ALTER TABLE {other} DETACH PARTITION {target}", f"DROP TABLE {other}"]
    if how == "inheriting from a table":
        pg.execute(f"CREATE TABLE {other} (LIKE {target})")
        pg.execute(f"ALTER TABLE {target} INHERIT {other}")
        return [f"ALTER TABLE {target} NO INHERIT {other}", f"DROP TABLE {other}"]
    if how == "referenced by a foreign key":
        pg.execute(f"CREATE TABLE {other} (r bigint REFERENCES {target} (tclose_row))")
        return [f"DROP TABLE {other}"]
    if how == "read by a view":
        pg.execute(f"CREATE VIEW {other} AS SELECT count(*) AS n FROM {target}")
        return [f"DROP VIEW {other}"]
    if how == "a trigger of the user on it":
        pg.execute(
            f"CREATE FUNCTION {other}() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'"
        )
        pg.execute(
            f"CREATE TRIGGER keep BEFORE UPDATE ON {target} FOR EACH ROW EXECUTE FUNCTION {other}()"
        )
        return [f"DROP TRIGGER keep ON {target}", f"DROP FUNCTION {other}()"]
    if how == "its row type used by a table":
        pg.execute(f"CREATE TABLE {other} (kept {target})")
        return [f"DROP TABLE {other}"]
    if how == "in a publication":
        pg.execute(f"CREATE PUBLICATION {other} FOR TABLE {target}")
        return [f"DROP PUBLICATION {other}"]
    raise AssertionError(how)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "how",
    [
        "attached as a partition",
        "inheriting from a table",
        "referenced by a foreign key",
        "read by a view",
        "a trigger of the user on it",
        "its row type used by a table",
        "in a publication",
    ],
)
def test_postgresql_a_release_bound_to_a_users_structure_is_not_replaced(
    pg, monkeypatch, capsys, how
):
    """The release is made part of the user's structure: replacing it would drop, detach or
    fail on that structure. Refused before any work, naming what is bound; nothing changes."""
    source, target = pg.name("src"), pg.name("anon")
    pg.create_patients(source, n=30)
    path = _replace_config(pg, source, target)
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    undo = _bind(pg, target, how)
    try:
        before = pg.rows(target, order="tclose_row")
        err = _refused(monkeypatch, path, capsys)
        assert f"The target table {target} cannot be replaced" in err
        assert pg.name("other") in err or "trigger keep" in err, err
        assert pg.rows(target, order="tclose_row") == before
    finally:
        for statement in undo:
            pg.execute(statement)
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err  # bound to nothing again


@pytest.mark.mysql
@pytest.mark.parametrize(
    "how", ["referenced by a foreign key", "a trigger of the user on it", "read by a view"]
)
def test_mariadb_a_release_bound_to_a_users_structure_is_not_replaced(
    maria, monkeypatch, capsys, how
):
    """The server's catalog binds something of the user's to the release: a ``DROP TABLE``
    would drop a trigger with it, fail on a foreign key, or leave a view reading the next
    release in its place. Refused before any work; nothing changes."""
    source, target, other = maria.name("src"), maria.name("anon"), maria.name("other")
    maria.create_patients(source, n=30)
    path = _replace_config(maria, source, target)
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    q = maria.quote
    if how == "referenced by a foreign key":
        maria.execute(
            f"CREATE TABLE {q(other)} (r BIGINT, FOREIGN KEY (r) REFERENCES {q(target)} "
            f"(tclose_row)) ENGINE=InnoDB"
        )
        undo = [f"DROP TABLE {q(other)}"]
    elif how == "a trigger of the user on it":
        maria.execute(
            f"CREATE TRIGGER {q(other)} BEFORE UPDATE ON {q(target)} FOR EACH ROW SET @x = 1"
        )
        undo = [f"DROP TRIGGER {q(other)}"]
    else:
        maria.execute(f"CREATE VIEW {q(other)} AS SELECT count(*) AS n FROM {q(target)}")
        undo = [f"DROP VIEW {q(other)}"]
    try:
        before = maria.rows(target, order="tclose_row")
        err = _refused(monkeypatch, path, capsys)
        assert f"The target table {target} cannot be replaced" in err and other in err, err
        assert maria.rows(target, order="tclose_row") == before
    finally:
        for statement in undo:
            maria.execute(statement)
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
