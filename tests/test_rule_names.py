"""Rule R2: every name is resolved once, by the database, to a qualified identity.

- The plan asks the database where each name lives (or would be created) and every later
  statement uses that qualified name: a session's search path plays no part, even when it
  changes between the plan and the publish.
- Temporary schemas and in-memory databases are refused before any work (exit 2), however they
  are spelled, because the database says so (a relation's persistence, a schema's kind, the file
  behind an attached database), never because of how the URL or the name reads.
- Identifier limits are those of the name as the database stores it (MariaDB's file names,
  PostgreSQL's silent truncation), for the staging and parking names too.
"""

from __future__ import annotations

import json
import secrets

import pytest
import sqlalchemy as sa

import tclose.core.plan
import tclose.core.runner
from tclose.app.cli import main
from tclose.errors import ConfigError
from tclose.naming import CENTROID_MARK, MAP_MARK, RELEASES_TABLE, STAGING_SCHEMA, TableName


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a run reads its source: a refusal must come before any work."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the run read its source: the refusal came after work began")

    monkeypatch.setattr(tclose.core.runner, "read_inputs", refuse)


def _run(db, document: dict, name: str = "run.yaml") -> int:
    return main(["-q", "run", str(db.write_config(document, name))])


def _refused_in(db, document: dict, key: str, schema: str, capsys) -> None:
    """Run ``document`` with its target (``key`` ``"target"``) or its audit table (``"report"``)
    in ``schema``: exit 2, the message at that key, saying why (temporary)."""
    if key == "target":
        document["target"]["table"] = f"{schema}.{db.name('out')}"
    else:
        document["report"] = {"table": f"{schema}.{db.name('audit')}"}
    assert _run(db, document) == 2
    err = capsys.readouterr().err
    assert f"At {key}" in err and "temporary" in err, err


# --- every dialect: the plan holds qualified names ---------------------------------------------


def test_the_plan_resolves_every_name_to_the_schema_the_database_names(db):
    """Unqualified names in the configuration: source, target, staging and audit table each get
    the schema the database resolves them to (or would create them in)."""
    from tclose.base.config import load_config
    from tclose.base.registry import load_registry
    from tclose.core.plan import build_plan

    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=20)
    document = db.config(source, target)
    document["report"] = {"table": db.name("audit")}
    config = load_config(db.write_config(document))
    plan = build_plan(config, load_registry(), dry_run=True)
    try:
        expected = {
            "postgresql": "SELECT current_schema()",
            "mysql": "SELECT DATABASE()",
            "sqlite": "SELECT 'main'",
            "duckdb": "SELECT current_schema()",
        }[db.dialect]
        (schema,) = db.execute(expected)[0]
        assert plan.source == TableName(schema, source)
        assert plan.target == TableName(schema, target)
        staging_schema = STAGING_SCHEMA if db.dialect == "mysql" else schema  # rule R6
        assert plan.staging.schema == staging_schema and plan.staging.name.startswith(target)
        assert plan.audit == TableName(schema, db.name("audit"))
        assert plan.config.report_table == f"{schema}.{db.name('audit')}"
    finally:
        plan.source_db.engine.dispose()
        plan.target_db.engine.dispose()


# --- PostgreSQL: search paths, temporary schemas, truncation -----------------------------------


def _pg_url(pg, search_path: str, user: str | None = None) -> str:
    url = sa.make_url(pg.url).update_query_dict({"options": f"-csearch_path={search_path}"})
    if user is not None:
        url = url.set(username=user)
    return url.render_as_string(False)


def _relations(pg, schema: str) -> dict[str, str]:
    """Relation name → persistence (``p`` permanent, ``t`` temporary) in ``schema``."""
    rows = pg.execute(
        "SELECT c.relname, c.relpersistence FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = :s AND c.relkind IN ('r', 'p')",
        {"s": schema},
    )
    return dict(rows)


def _run_mark(pg, schema: str, table: str) -> str | None:
    qualified = f'"{schema}"."{table}"'
    return pg.execute("SELECT obj_description(to_regclass(:t), 'pg_class')", {"t": qualified})[0][0]


@pytest.fixture
def pg_schemas(pg):
    """Two new schemas, dropped with everything in them afterwards."""
    names = [f"{pg.prefix}_s1", f"{pg.prefix}_s2"]
    for schema in names:
        pg.execute(f'CREATE SCHEMA "{schema}"')
    yield names
    for schema in names:
        pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _pg_source(pg) -> str:
    """A 40-row patients table, schema-qualified (URLs below change the search path)."""
    source = pg.name("src")
    pg.create_patients(source, n=40)
    (home,) = pg.execute("SELECT current_schema()")[0]
    return f"{home}.{source}"


@pytest.mark.postgres
def test_pg_a_target_found_later_on_the_search_path_is_replaced_where_it_is(pg, pg_schemas):
    """search_path ``s2, s1`` and an unqualified target that exists only in ``s1``: the release
    replaces ``s1``'s table, and nothing is created in ``s2`` (it dropped ``s1.out`` and
    published ``s2.out``)."""
    s1, s2 = pg_schemas
    target = pg.name("out")
    document = pg.config(_pg_source(pg), target)
    document["source"]["url"] = _pg_url(pg, s1)
    document["target"]["if_exists"] = "replace"
    assert _run(pg, document) == 0
    first = _run_mark(pg, s1, target)
    document["source"]["url"] = _pg_url(pg, f"{s2},{s1}")
    assert _run(pg, document) == 0
    assert _relations(pg, s2) == {}
    assert _relations(pg, s1) == {target: "p", RELEASES_TABLE: "p"}
    assert _run_mark(pg, s1, target) not in (None, first)


@pytest.mark.postgres
def test_pg_a_search_path_that_starts_with_pg_temp(pg, pg_schemas, tmp_path, no_work, capsys):
    """``pg_temp`` first on the search path: a new unqualified target (or audit table) would be
    a temporary table, gone at disconnect after a "published" exit 0. Refused, exit 2."""
    s1, _ = pg_schemas
    document = pg.config(_pg_source(pg), pg.name("out"))
    document["source"]["url"] = _pg_url(pg, f"pg_temp,{s1}")
    assert _run(pg, document) == 2
    assert "temporary" in capsys.readouterr().err
    document["target"]["table"] = f"{s1}.{pg.name('out')}"
    document["report"] = {"table": pg.name("audit")}
    assert _run(pg, document) == 2
    err = capsys.readouterr().err
    assert "==> At report ==> At key: table" in err and "temporary" in err
    assert _relations(pg, s1) == {}


@pytest.mark.postgres
def test_pg_an_existing_target_behind_pg_temp_is_replaced_and_stays(pg, pg_schemas, tmp_path):
    """``pg_temp`` first on the search path, the target and audit table existing in ``s1``: the
    release replaces ``s1``'s target and the audit row goes to ``s1``'s table; both outlive
    the run's connection (the staging table was a temporary table, so the user's target was
    dropped and the release and its audit row vanished at disconnect)."""
    s1, _ = pg_schemas
    target, audit = pg.name("out"), pg.name("audit")
    document = pg.config(_pg_source(pg), target)
    document["source"]["url"] = _pg_url(pg, s1)
    document["target"]["if_exists"] = "replace"
    document["report"] = {"table": audit, "json": str(tmp_path / "r.json")}
    assert _run(pg, document) == 0
    document["source"]["url"] = _pg_url(pg, f"pg_temp,{s1}")
    assert _run(pg, document) == 0
    run_id = json.loads((tmp_path / "r.json").read_text())["run"]["id"]
    assert _relations(pg, s1) == {target: "p", audit: "p", RELEASES_TABLE: "p"}
    assert _run_mark(pg, s1, target) == f"tclose run {run_id}"
    assert pg.execute(f'SELECT count(*) FROM "{s1}"."{audit}"') == [(2,)]


@pytest.mark.postgres
@pytest.mark.parametrize("key", ["target", "report"])
def test_pg_an_explicit_temporary_schema_is_refused(pg, key, no_work, capsys):
    """``pg_temp.x`` (the session's temporary schema, however spelled) as target or audit
    table: refused before any work, exit 2."""
    _refused_in(pg, pg.config(_pg_source(pg), pg.name("out")), key, "pg_temp", capsys)


@pytest.mark.postgres
@pytest.mark.parametrize("existing", [False, True])
def test_pg_another_sessions_temporary_schema_is_refused(pg, existing, no_work, capsys):
    """``pg_temp_<n>.x``, the temporary schema of another session (its own name, not the
    ``pg_temp`` alias), for a new table or for that session's temporary table: exit 2."""
    engine = sa.create_engine(pg.url, poolclass=sa.pool.NullPool)
    with engine.connect() as other:
        temporary = pg.name("tmp")
        other.exec_driver_sql(f'CREATE TEMPORARY TABLE "{temporary}" (a integer)')
        other.commit()  # its lock released: a run that does reach it does not wait
        schema = other.exec_driver_sql("SELECT pg_my_temp_schema()::regnamespace::text").scalar()
        document = pg.config(_pg_source(pg), pg.name("out"))
        document["target"]["table"] = f"{schema}.{temporary if existing else pg.name('new')}"
        document["target"]["if_exists"] = "replace"
        assert _run(pg, document) == 2
        assert "temporary" in capsys.readouterr().err
    engine.dispose()


@pytest.mark.postgres
def test_pg_the_release_goes_where_the_plan_said_when_the_role_search_path_changes(
    pg, monkeypatch, tmp_path
):
    """A role whose search path is ``"$user", public`` (its own schema first): the plan places
    the new target and audit table in the role's schema; the search path is then changed
    (``ALTER ROLE ... SET``) before the run's sessions connect, and the release, its audit row
    and nothing else still land in the role's schema. A schema spelled like a temporary one
    (``PG_TEMP_...``, quoted capitals) is no temporary schema: published there, it stays."""
    role, other, look_alike = pg.name("role"), pg.name("other"), f"PG_TEMP_{pg.prefix}"
    pg.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        for schema in (role, other, look_alike):
            pg.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')
        source = _pg_source(pg)
        pg.execute(f'GRANT SELECT ON {source} TO "{role}"')
        pg.execute(f'ALTER ROLE "{role}" SET search_path = "$user", public')
        target, audit = pg.name("out"), pg.name("audit")
        document = pg.config(source, target)
        document["source"]["url"] = sa.make_url(pg.url).set(username=role).render_as_string(False)
        document["report"] = {"table": audit}
        plan_of = tclose.core.runner.build_plan

        def plan_then_move(*args, **kwargs):
            plan = plan_of(*args, **kwargs)
            pg.execute(f'ALTER ROLE "{role}" SET search_path = "{other}"')
            return plan

        monkeypatch.setattr(tclose.core.runner, "build_plan", plan_then_move)
        assert _run(pg, document) == 0
        assert _relations(pg, role) == {target: "p", audit: "p", RELEASES_TABLE: "p"}
        assert _relations(pg, other) == {}
        monkeypatch.undo()
        document["target"]["table"] = f"{look_alike}.{target}"
        document["report"] = {"table": f"{look_alike}.{audit}"}
        assert _run(pg, document) == 0
        assert _relations(pg, look_alike) == {target: "p", audit: "p", RELEASES_TABLE: "p"}
    finally:
        for schema in (role, other, look_alike):
            pg.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        pg.execute(f'DROP OWNED BY "{role}"')
        pg.execute(f'DROP ROLE "{role}"')


@pytest.mark.postgres
def test_pg_a_name_the_server_would_cut_is_refused_by_the_servers_answer(pg, monkeypatch, capsys):
    """PostgreSQL cuts a long name silently: without tclose's own count of bytes, the stored
    name (the server's) still differs from the configured one, and the run stops there."""
    from tclose.connectors.postgresql import PostgreSQLDatabase

    monkeypatch.setattr(PostgreSQLDatabase, "identifier_limit", None)
    document = pg.config(_pg_source(pg), pg.name("é" * 40))
    assert _run(pg, document) == 2
    assert "longer than" in capsys.readouterr().err
    assert pg.tables() == {pg.name("src")}


# --- MariaDB: names as the server stores them (file names) ------------------------------------


def _maria_tables(maria, like: str) -> list[str]:
    rows = maria.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
        "AND table_name LIKE :p",
        {"p": like},
    )
    return [r[0] for r in rows]


@pytest.mark.mysql
def test_mariadb_a_name_whose_file_name_is_too_long_is_refused(maria, no_work, capsys):
    """64 characters ``€``: within MariaDB's 64-character limit, but the table's file name spells
    each as ``@20ac`` (320 bytes, more than a file name holds). Refused before any work."""
    document = maria.config(maria.name("src"), "€" * 64)
    maria.create_patients(maria.name("src"), n=20)
    assert _run(maria, document) == 2
    assert "longer than" in capsys.readouterr().err
    assert _maria_tables(maria, "€%") == []


@pytest.mark.mysql
@pytest.mark.parametrize("character", ["€", "é", "Ω", "中", "-", "a"])
def test_mariadb_the_name_check_agrees_with_the_server(maria, character):
    """For names of one repeated character after the test's prefix, the longest name the
    server creates passes the check, and one character more does not."""
    from tclose.connectors.mysql import MySQLDatabase

    database = MySQLDatabase(maria.url)

    def created(count: int) -> bool:
        name = maria.quote(maria.name(character * count))
        try:
            maria.execute(f"CREATE TABLE {name} (a integer)")
        except sa.exc.DBAPIError:
            return False
        maria.execute(f"DROP TABLE {name}")
        return True

    low, high = 0, 64 - len(maria.name(""))  # the longest count the server creates, in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if created(middle) else (low, middle - 1)
    try:
        database.check_table_name(TableName(None, maria.name(character * low)))
        with pytest.raises(ConfigError, match="longer than"):
            database.check_table_name(TableName(None, maria.name(character * (low + 1))))
    finally:
        database.engine.dispose()


@pytest.mark.mysql
def test_mariadb_the_longest_stored_name_is_published_and_replaced(maria):
    """A target as long as the server stores (its file name at the limit): the staging table
    and the parking name of the replaced target are shortened to fit as stored, too."""
    from tclose.connectors.mysql import MySQLDatabase

    database = MySQLDatabase(maria.url)
    try:
        target = maria.name("€")
        while database.name_problem(target + "€") is None:
            target += "€"
    finally:
        database.engine.dispose()
    source = maria.name("src")
    maria.create_patients(source, n=40)
    document = maria.config(source, target)
    document["target"]["if_exists"] = "replace"
    assert _run(maria, document) == 0
    assert _run(maria, document) == 0
    assert maria.tables() == {source, target}


@pytest.mark.mysql
def test_mariadb_an_unqualified_name_without_a_database_is_refused(maria, no_work, capsys):
    """A URL that selects no database: an unqualified name has no schema (``DATABASE()`` is
    NULL), so it is refused before any work, naming the key."""
    source = maria.name("src")
    maria.create_patients(source, n=20)
    schema = maria.execute("SELECT DATABASE()")[0][0]
    document = maria.config(f"{schema}.{source}", maria.name("out"))
    url = sa.make_url(maria.url)
    without = sa.URL.create(url.drivername, url.username, url.password, url.host, url.port)
    document["source"]["url"] = without.update_query_dict(url.query).render_as_string(False)
    assert _run(maria, document) == 2
    err = capsys.readouterr().err
    assert "At target" in err and "no database" in err


# --- SQLite: in-memory and temporary databases ---------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///file::memory:?uri=true",
        "sqlite:///file::memory:?cache=shared&uri=true",
        "sqlite:///file:tclose_shared?mode=memory&cache=shared&uri=true",
        "sqlite:///file:/tclose-not-a-file?vfs=memdb&uri=true",
    ],
)
def test_sqlite_an_in_memory_target_is_refused(lite, url, no_work, capsys):
    """A target database that lives in memory (any URL spelling of it): the release would vanish
    with the run's connection after a "published" exit 0."""
    source = lite.name("src")
    lite.create_patients(source, n=20)
    document = lite.config(source, lite.name("out"))
    document["target"]["url"] = url
    assert _run(lite, document) == 2
    err = capsys.readouterr().err
    assert "At target" in err and "memory" in err


@pytest.mark.parametrize("key", ["target", "report"])
@pytest.mark.parametrize("schema", ["temp", "TEMP", "Temp"])
def test_sqlite_the_temporary_schema_is_refused(lite, key, schema, no_work, capsys):
    """``temp.x`` (SQLite compares schema names without case): a temporary table, gone with the
    connection. Refused as target or audit table, before any work."""
    source = lite.name("src")
    lite.create_patients(source, n=20)
    _refused_in(lite, lite.config(source, lite.name("out")), key, schema, capsys)
    assert lite.tables() == {source}


def test_sqlite_attached_databases_are_judged_by_their_files(lite, tmp_path):
    """Databases attached to the connection: one backed by a file (named like a temporary one)
    resolves; one in memory, or a private temporary one (empty file name), is refused."""
    import sqlite3

    from tclose.connectors.sqlite import SQLiteDatabase

    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    lite.create(lite.name("t"), [sa.Column("a", sa.Integer)], [])  # the URL's file
    database = SQLiteDatabase(lite.url)

    @sa.event.listens_for(database.engine, "connect")
    def attach(connection, _record):
        connection.execute(f"ATTACH DATABASE '{other}' AS temp_files")
        connection.execute("ATTACH DATABASE ':memory:' AS aux")
        connection.execute("ATTACH DATABASE '' AS scratch")

    try:
        name = TableName("TEMP_FILES", "x")
        assert database.resolve_table(name, "target.table", create=True) == TableName(
            "temp_files", "x"
        )
        for schema in ("aux", "scratch"):
            with pytest.raises(ConfigError, match="memory"):
                database.resolve_table(TableName(schema, "x"), "target.table", create=True)
    finally:
        database.engine.dispose()


# --- DuckDB: in-memory databases and the temporary catalog ------------------------------------


@pytest.mark.duckdb
@pytest.mark.parametrize("table", ["out", "memory.out", "temp.out", "main.out"])
def test_duckdb_an_in_memory_target_is_refused(lite, duck, table, no_work, capsys):
    """``duckdb:///:memory:`` as the target: whatever the name (the default schema, the
    database's own name ``memory``, the temporary catalog), the release would vanish."""
    source = lite.name("src")
    lite.create_patients(source, n=20)
    document = lite.config(source, table)
    document["target"]["url"] = "duckdb:///:memory:"
    assert _run(lite, document) == 2
    err = capsys.readouterr().err
    assert "At target" in err and ("memory" in err or "temporary" in err)


@pytest.mark.duckdb
@pytest.mark.parametrize("schema", ["temp", "TEMP", "memory", "system"])
def test_duckdb_a_target_outside_the_files_database_is_refused(duckdb_db, schema, no_work, capsys):
    """In a DuckDB file: the temporary catalog (any case), a schema that does not exist, or the
    read-only system catalog; refused before any work with DuckDB's own reason."""
    source = duckdb_db.name("src")
    duckdb_db.create_patients(source, n=20)
    document = duckdb_db.config(source, f"{schema}.{duckdb_db.name('out')}")
    assert _run(duckdb_db, document) == 2
    assert "At target" in capsys.readouterr().err
    assert duckdb_db.tables() == {source}


@pytest.mark.duckdb
def test_duckdb_a_schema_named_memory_in_a_file_is_no_memory(duckdb_db):
    """A schema named ``memory`` in a DuckDB file: the name is DuckDB's in-memory database's,
    the schema is on disk. Published there, and still there from a new connection."""
    source, target = duckdb_db.name("src"), duckdb_db.name("out")
    duckdb_db.create_patients(source, n=40)
    duckdb_db.execute("CREATE SCHEMA memory")
    try:
        document = duckdb_db.config(source, f"memory.{target}")
        assert _run(duckdb_db, document) == 0
        assert len(duckdb_db.rows(target, schema="memory")) == 40
    finally:
        duckdb_db.execute("DROP SCHEMA memory CASCADE")


@pytest.mark.duckdb
def test_duckdb_an_attached_in_memory_database_is_refused(duckdb_db):
    """A database attached in memory (``ATTACH ':memory:'``): the binder places a table there;
    DuckDB's list of databases says it has no file. Refused."""
    from tclose.connectors.duckdb import DuckDBDatabase

    database = DuckDBDatabase(duckdb_db.url)

    @sa.event.listens_for(database.engine, "connect")
    def attach(connection, _record):
        connection.execute("ATTACH ':memory:' AS scratch")

    try:
        with pytest.raises(ConfigError, match="memory"):
            database.resolve_table(TableName("scratch", "x"), "target.table", create=True)
        assert database.resolve_table(TableName("MAIN", "x"), "target.table", create=True) == (
            TableName("main", "x")
        )
    finally:
        database.engine.dispose()


@pytest.mark.postgres
def test_pg_the_runs_temporary_tables_are_its_own_whatever_the_search_path(
    pg, pg_schemas, monkeypatch
):
    """``pg_temp`` last on the search path: an unqualified helper table of the run (the
    in-database join's key map and centroids) resolved to a table of the same name in the first
    schema, which the run filled and then dropped (made with the columns the run uses, by
    someone who knows the run's id, the run published, exit 0, and those tables were gone).
    The helpers are named in the session's temporary schema, so such tables stay as they
    were."""
    import uuid

    s1, _ = pg_schemas
    run = uuid.UUID(int=secrets.randbits(128))
    monkeypatch.setattr(tclose.core.plan.uuid, "uuid4", lambda: run)
    columns = {
        MAP_MARK: 'src_key bigint, "cluster" bigint',
        CENTROID_MARK: '"cluster" bigint, v0 double precision, v1 double precision, '
        "v2 double precision",
    }
    helpers = {mark + run.hex[:12]: definition for mark, definition in columns.items()}
    for helper, definition in helpers.items():
        pg.execute(f'CREATE TABLE "{s1}"."{helper}" ({definition})')
    document = pg.config(_pg_source(pg), f"{s1}.{pg.name('out')}")
    document["source"]["url"] = _pg_url(pg, f"{s1},pg_temp")
    assert _run(pg, document) == 0
    found = _relations(pg, s1)
    assert set(helpers) | {pg.name("out")} <= set(found)
    for helper in helpers:
        assert pg.execute(f'SELECT count(*) FROM "{s1}"."{helper}"') == [(0,)]


@pytest.mark.duckdb
def test_a_parquet_target_keeps_no_audit_table(lite, duck, tmp_path, no_work, capsys):
    """A Parquet target is one file, the release: an audit table "in" it would be a table of the
    in-memory DuckDB database the file is read with, gone after the run, so it is refused."""
    source = lite.name("src")
    lite.create_patients(source, n=20)
    document = lite.config(source, "out")
    document["target"]["url"] = f"parquet:///{tmp_path / 'out.parquet'}"
    document["report"] = {"table": lite.name("audit")}
    assert _run(lite, document) == 2
    assert "At report" in capsys.readouterr().err
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.mysql
def test_mariadb_tables_created_in_memory_are_refused(maria, no_work, capsys):
    """A URL whose ``init_command`` (or a server whose ``default_storage_engine``) makes new
    tables ``MEMORY`` tables: the staging table, hence the release, and the audit table would
    keep their rows in memory only, gone at the server's next restart."""
    source = maria.name("src")
    maria.create_patients(source, n=20)
    document = maria.config(source, maria.name("out"))
    url = sa.make_url(maria.url).update_query_dict(
        {"init_command": "SET default_storage_engine=MEMORY"}
    )
    document["source"]["url"] = url.render_as_string(False)
    assert _run(maria, document) == 2
    err = capsys.readouterr().err
    assert "==> At target ==> At key: url" in err and "MEMORY" in err and "in memory" in err
