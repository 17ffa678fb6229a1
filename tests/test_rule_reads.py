"""Rule: an existing target is replaced only when the database proves the source does not read it.

``tables_read`` of each connector answers "the tables a read of this source reads", walking
views through views, partitions, inheriting tables and (PostgreSQL) row-level security
policies, or "unknown" with the reason: as soon as the walk meets something whose reads the
catalog cannot list (a function, an operator, a domain, a macro, a foreign table, a table whose
engine keeps its rows elsewhere), no list of tables is the whole answer. With ``if_exists:
replace`` and an existing target, an unknown answer is exit 2 before any work, in whatever
database the target is (a foreign table or a function reaches other databases too), and the
message says why and what to do. The same answer decides row-level security
(``tests/test_row_security.py``): unknown is reported unknown, never "not filtered".

The first tests try the attacks as found (issue 28: a view reading the target, a release of
tclose, through a PostgreSQL SQL or plpgsql function, a MariaDB stored function, a DuckDB table
macro, a postgres_fdw foreign table back to the same server); the rest try the rule with objects
of their own, and check that what the catalog does list still runs.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from tclose.app.cli import main
from tclose.core import runner
from tclose.naming import TableName

FIXTURES = {"postgresql": "pg", "mysql": "maria", "duckdb": "duckdb_db"}
SERVERS = [
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
    pytest.param("duckdb", marks=pytest.mark.duckdb),
]
#: The message of the refusal, whatever reached the target.
REFUSED = "the database cannot tell"


def _replace_config(db, source: str, target: str) -> str:
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    return str(db.write_config(document, f"replace-{secrets.token_hex(3)}.yaml"))


def _refused_before_any_work(monkeypatch, path: str, capsys) -> str:
    """Run ``path``: exit 2, no row of the source read; the error text."""

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the source was read: the refusal came after the work began")

    monkeypatch.setattr(runner, "read_inputs", no_reading)
    result = main(["-q", "run", path])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert result == 2, err
    return err


def _snapshot(db, source: str, target: str) -> tuple[list, list]:
    return db.rows(source, order="patient_id"), db.rows(target, order="tclose_row")


class Objects:
    """Objects a test makes in its database, dropped (in reverse order) at its end."""

    def __init__(self, db) -> None:
        self.db, self.drops = db, []

    def make(self, create: str, drop: str) -> None:
        self.db.execute(create)
        self.drops.append(drop)

    def drop(self) -> None:
        for statement in reversed(self.drops):
            self.db.execute(statement)


@pytest.fixture
def objects(request):
    """Start an :class:`Objects` of a database; its objects are dropped before the database's
    own cleanup (a finalizer added later runs earlier)."""

    def start(db) -> Objects:
        made = Objects(db)
        request.node.addfinalizer(made.drop)
        return made

    return start


def _reads_through(db, objects, kind: str, target: str) -> str:
    """A source view over a patients table that also reads the table ``target`` through
    ``kind`` (a function, a macro, ...) in its ``WHERE``; its name."""
    base, source, fn = db.name("base"), db.name("src"), db.name("fn")
    db.create_patients(base, n=40)
    made, q = objects(db), db.quote
    functions = {
        "sql function": (
            f"CREATE FUNCTION {q(fn)}() RETURNS bigint LANGUAGE sql STABLE "
            f"AS 'SELECT count(*) FROM {q(target)}'",
            f"DROP FUNCTION {q(fn)}()",
            f"{q(fn)}() >= 0",
        ),
        "plpgsql setof": (
            f"CREATE FUNCTION {q(fn)}() RETURNS SETOF {q(target)} LANGUAGE plpgsql STABLE "
            f"AS $$ BEGIN RETURN QUERY SELECT * FROM {q(target)}; END $$",
            f"DROP FUNCTION {q(fn)}()",
            f"EXISTS (SELECT 1 FROM {q(fn)}()) OR true",
        ),
        "stored function": (
            f"CREATE FUNCTION {q(fn)}() RETURNS INT READS SQL DATA "
            f"RETURN (SELECT count(*) FROM {q(target)})",
            f"DROP FUNCTION {q(fn)}",
            f"{q(fn)}() >= 0",
        ),
        "table macro": (
            f"CREATE MACRO {q(fn)}() AS TABLE SELECT * FROM {q(target)}",
            f"DROP MACRO TABLE {q(fn)}",
            f"EXISTS (SELECT 1 FROM {q(fn)}()) OR true",
        ),
        "scalar macro": (
            f"CREATE MACRO {q(fn)}() AS (SELECT count(*) FROM {q(target)})",
            f"DROP MACRO {q(fn)}",
            f"{q(fn)}() >= 0",
        ),
        "query_table": (None, None, f"EXISTS (SELECT 1 FROM query_table('{target}')) OR true"),
        "operator": (
            f"CREATE FUNCTION {q(fn)}(integer, integer) RETURNS boolean LANGUAGE sql STABLE "
            f"AS 'SELECT $1 >= $2 - (SELECT count(*) FROM {q(target)})'",
            f"DROP FUNCTION {q(fn)}(integer, integer) CASCADE",
            "patient_id >=~ 0",
        ),
    }
    create, drop, where = functions[kind]
    if create is not None:
        made.make(create, drop)
    if kind == "operator":
        made.make(
            f"CREATE OPERATOR >=~ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = {q(fn)})",
            "DROP OPERATOR IF EXISTS >=~ (integer, integer)",
        )
    made.make(
        f"CREATE VIEW {q(source)} AS SELECT * FROM {q(base)} WHERE {where}",
        f"DROP VIEW IF EXISTS {q(source)}",
    )
    return source


def _loopback(pg, objects) -> str:
    """A postgres_fdw server back to this PostgreSQL database, for the connecting role; its
    name (skips if postgres_fdw is not installed, fails in CI)."""
    try:
        pg.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    except Exception as error:  # the extension is not installed on this server
        message = f"postgres_fdw is not available: {error}"
        pytest.fail(message) if os.environ.get("CI", "").lower() in (
            "1",
            "true",
            "yes",
        ) else pytest.skip(message)
    url = pg.engine.url
    server = pg.name("loop")
    made = objects(pg)
    made.make(
        f"CREATE SERVER {server} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host "
        f"'{url.host or '127.0.0.1'}', port '{url.port or 5432}', dbname '{url.database}')",
        f"DROP SERVER {server} CASCADE",
    )
    pg.execute(
        f"CREATE USER MAPPING FOR CURRENT_USER SERVER {server} OPTIONS (user '{url.username}')"
    )
    return server


def _foreign_reader(pg, objects, target: str) -> str:
    """A source view over a patients table that also reads ``target`` through a foreign
    table back to the same server (postgres_fdw); its name."""
    server = _loopback(pg, objects)
    base, source, foreign = pg.name("base"), pg.name("src"), pg.name("ft")
    pg.create_patients(base, n=40)
    made = objects(pg)
    made.make(
        f"CREATE FOREIGN TABLE {foreign} (tclose_row bigint) SERVER {server} "
        f"OPTIONS (table_name '{target}')",
        f"DROP FOREIGN TABLE IF EXISTS {foreign} CASCADE",
    )
    made.make(
        f"CREATE VIEW {source} AS SELECT * FROM {base} "
        f"WHERE EXISTS (SELECT 1 FROM {foreign}) OR true",
        f"DROP VIEW IF EXISTS {source}",
    )
    return source


# --- the attacks found (issue 28: a source that reads the target indirectly) ----------------


@pytest.mark.parametrize(
    ("dialect", "kind"),
    [
        pytest.param("postgresql", "sql function", marks=pytest.mark.postgres),
        pytest.param("postgresql", "plpgsql setof", marks=pytest.mark.postgres),
        pytest.param("mysql", "stored function", marks=pytest.mark.mysql),
        pytest.param("duckdb", "table macro", marks=pytest.mark.duckdb),
    ],
)
def test_a_release_a_source_view_reads_through_a_function_is_not_replaced(
    dialect, kind, request, objects, monkeypatch, capsys
):
    """A release the source reads through a function, macro or stored function is not
    replaced: exit 2 before any work, the release and the source as they were."""
    db = request.getfixturevalue(FIXTURES[dialect])
    target = db.name("anon")
    db.release(target)
    source = _reads_through(db, objects, kind, target)
    before = _snapshot(db, source, target)
    err = _refused_before_any_work(monkeypatch, _replace_config(db, source, target), capsys)
    # refused for the unknown reads, or first because the catalog binds the release to the
    # function that reads it (a plpgsql function's row type)
    assert f"The target table {target}" in err and "cannot be replaced" in err, err
    assert "Publish under a new name" in err or "bound to nothing else" in err, err
    assert _snapshot(db, source, target) == before


@pytest.mark.postgres
def test_a_release_a_source_reads_through_a_foreign_table_is_refused_not_waited_for(
    pg, objects, tmp_path
):
    """A foreign table whose remote session would wait on the lock of tclose's own publish:
    the replace is refused before any lock is taken, so the run ends (run in a separate process
    given a deadline)."""
    target = pg.name("anon")
    pg.release(target)
    source = _foreign_reader(pg, objects, target)
    before = _snapshot(pg, source, target)
    path = _replace_config(pg, source, target)
    done = subprocess.run(
        [sys.executable, "-m", "tclose", "-q", "run", path],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "foreign table" in done.stderr and REFUSED in done.stderr, done.stderr
    assert _snapshot(pg, source, target) == before


# --- the rule, with cases of its own ---------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "kind"),
    [
        pytest.param("postgresql", "operator", marks=pytest.mark.postgres),
        pytest.param("duckdb", "scalar macro", marks=pytest.mark.duckdb),
        pytest.param("duckdb", "query_table", marks=pytest.mark.duckdb),
    ],
)
def test_every_call_whose_reads_the_catalog_cannot_list_makes_the_reads_unknown(
    dialect, kind, request, objects, monkeypatch, capsys
):
    """Calls the attacks did not use: a user-defined operator (its function reads the
    target), a scalar macro, a table function that reads a table named by text."""
    db = request.getfixturevalue(FIXTURES[dialect])
    target = db.name("anon")
    db.release(target)
    source = _reads_through(db, objects, kind, target)
    before = _snapshot(db, source, target)
    err = _refused_before_any_work(monkeypatch, _replace_config(db, source, target), capsys)
    assert REFUSED in err, err
    assert _snapshot(db, source, target) == before


@pytest.mark.parametrize("dialect", SERVERS)
def test_a_function_deep_in_a_chain_of_views_makes_the_reads_unknown(
    dialect, request, objects, monkeypatch, capsys
):
    """The function is three views down, and reads a table of another name than the
    target: the database cannot say what it reads, so nothing existing is replaced."""
    db = request.getfixturevalue(FIXTURES[dialect])
    target, elsewhere = db.name("anon"), db.name("elsewhere")
    db.release(target)
    db.create_patients(elsewhere, n=10)
    kind = {"postgresql": "sql function", "mysql": "stored function"}.get(dialect, "table macro")
    inner = _reads_through(db, objects, kind, elsewhere)
    made, q, outer = objects(db), db.quote, inner
    for level in range(3):
        view = db.name(f"v{level}")
        made.make(f"CREATE VIEW {q(view)} AS SELECT * FROM {q(outer)}", f"DROP VIEW {q(view)}")
        outer = view
    read = db_of(db).tables_read(TableName(None, outer))
    assert read.unknown is not None and read, read
    err = _refused_before_any_work(monkeypatch, _replace_config(db, outer, target), capsys)
    assert REFUSED in err, err


@pytest.mark.postgres
def test_postgresql_a_policy_that_calls_a_function_makes_the_reads_unknown(pg, objects):
    """A read of a table with row-level security runs its policies: a policy calling a
    function reads what the function reads."""
    target, table, fn = pg.name("anon"), pg.name("guarded"), pg.name("fn")
    pg.release(target)
    pg.create_patients(table, n=20)
    made = objects(pg)
    made.make(
        f"CREATE FUNCTION {fn}() RETURNS boolean LANGUAGE sql STABLE "
        f"AS 'SELECT count(*) >= 0 FROM {target}'",
        f"DROP FUNCTION {fn}() CASCADE",
    )
    pg.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    pg.execute(f"CREATE POLICY p ON {table} USING ({fn}())")
    read = db_of(pg).tables_read(TableName(None, table))
    assert read.unknown is not None and f"function {fn}()" in read.unknown, read.unknown


@pytest.mark.postgres
def test_postgresql_a_domain_a_view_casts_to_makes_the_reads_unknown(pg, objects):
    """A domain's check may call any function: a view casting to one reads what it reads."""
    base, source, domain = pg.name("base"), pg.name("src"), pg.name("dom")
    pg.create_patients(base, n=10)
    made = objects(pg)
    made.make(f"CREATE DOMAIN {domain} AS integer CHECK (VALUE >= 0)", f"DROP DOMAIN {domain}")
    made.make(
        f"CREATE VIEW {source} AS SELECT patient_id::{domain} AS id FROM {base}",
        f"DROP VIEW {source}",
    )
    read = db_of(pg).tables_read(TableName(None, source))
    assert read.unknown is not None and domain in read.unknown, read.unknown


@pytest.mark.postgres
def test_postgresql_a_foreign_table_source_is_unknown(pg, objects):
    server = _loopback(pg, objects)
    base, foreign = pg.name("base"), pg.name("ft")
    pg.create_patients(base, n=10)
    objects(pg).make(
        f"CREATE FOREIGN TABLE {foreign} (patient_id integer) SERVER {server} "
        f"OPTIONS (table_name '{base}')",
        f"DROP FOREIGN TABLE {foreign}",
    )
    read = db_of(pg).tables_read(TableName(None, foreign))
    assert read.unknown is not None and f"foreign table {foreign}" in read.unknown, read.unknown


@pytest.mark.mysql
def test_mariadb_a_table_of_an_engine_that_reads_other_tables_is_unknown(maria, objects):
    """A MERGE table's rows are its members': the catalog lists its engine, not its reads."""
    member, merged = maria.name("m1"), maria.name("merged")
    maria.execute(f"CREATE TABLE `{member}` (x INT) ENGINE=MyISAM")
    maria.execute(f"CREATE TABLE `{merged}` (x INT) ENGINE=MERGE UNION=(`{member}`)")
    read = db_of(maria).tables_read(TableName(None, merged))
    assert read.unknown is not None and "MRG_MyISAM" in read.unknown, read.unknown


@pytest.mark.parametrize("dialect", SERVERS)
def test_views_of_tables_and_built_in_functions_are_known_and_replace_runs(
    dialect, request, objects, capsys
):
    """What the catalog does list still runs: a view of views of tables, with built-in
    functions and operators, replaces an existing release it does not read."""
    db = request.getfixturevalue(FIXTURES[dialect])
    target, base, inner, source = (db.name(n) for n in ("anon", "base", "inner", "src"))
    db.release(target)
    db.create_patients(base, n=60)
    made, q = objects(db), db.quote
    made.make(
        f"CREATE VIEW {q(inner)} AS SELECT * FROM {q(base)} "
        f"WHERE lower(ward) <> 'x' AND abs(age) + 1 > 0",
        f"DROP VIEW IF EXISTS {q(inner)}",
    )
    made.make(
        f"CREATE VIEW {q(source)} AS SELECT * FROM {q(inner)} WHERE coalesce(zip, 0) >= 0",
        f"DROP VIEW IF EXISTS {q(source)}",
    )
    read = db_of(db).tables_read(TableName(None, source))
    assert read.unknown is None, read.unknown
    assert len(read) == 3  # the view, the inner view, the table
    assert main(["-q", "run", _replace_config(db, source, target)]) == 0, capsys.readouterr()
    assert len(db.rows(target)) == 60


@pytest.mark.parametrize("dialect", SERVERS)
def test_a_source_that_calls_a_function_publishes_to_a_new_table(dialect, request, objects, capsys):
    """Unknown reads refuse only the replacement of an existing table: a new target is made
    in the run, and no read of the source could have depended on it."""
    db = request.getfixturevalue(FIXTURES[dialect])
    elsewhere, target = db.name("elsewhere"), db.name("fresh")
    db.create_patients(elsewhere, n=5)
    kind = {"postgresql": "sql function", "mysql": "stored function"}.get(dialect, "table macro")
    source = _reads_through(db, objects, kind, elsewhere)
    assert main(["-q", "run", _replace_config(db, source, target)]) == 0, capsys.readouterr()
    assert len(db.rows(target)) == 40


def db_of(db):
    """tclose's connector for a test database."""
    from tclose.base.registry import dialect_of, load_registry

    return load_registry(entry_points=False).connector_for(dialect_of(db.url)).connect(db.url)


@pytest.mark.mysql
def test_mariadb_a_view_whose_definition_the_account_may_not_see_is_unknown(maria, objects):
    """Granted ``SELECT`` on a view but not ``SHOW VIEW``, an account reads it without seeing
    what it reads: the catalog lists nothing, which is no proof that it reads nothing."""
    import sqlalchemy as sa

    base, view, user = maria.name("base"), maria.name("v"), maria.name("peek")
    password = f"Peek-{secrets.token_hex(8)}"
    maria.create_patients(base, n=5)
    made = objects(maria)
    made.make(f"CREATE VIEW `{view}` AS SELECT * FROM `{base}`", f"DROP VIEW `{view}`")
    made.make(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'", f"DROP USER '{user}'@'%'")
    database = sa.make_url(maria.url).database
    maria.execute(f"GRANT SELECT ON `{database}`.`{view}` TO '{user}'@'%'")
    url = sa.make_url(maria.url).set(username=user, password=password)
    peeking = type(maria)("mysql", url.render_as_string(hide_password=False), maria.tmp_path)
    read = db_of(peeking).tables_read(TableName(None, view))
    assert read.unknown is not None and "SHOW VIEW" in read.unknown, read.unknown
    assert db_of(maria).tables_read(TableName(None, view)).unknown is None
