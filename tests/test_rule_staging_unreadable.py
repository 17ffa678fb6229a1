"""Rule R6: what a run writes is unreadable to every other session until it is published.

The run is held after it wrote and verified its staging table, just before the publish; a
reader in another session then looks at every table it can see, in the weakest isolation it can
ask for (``READ UNCOMMITTED`` on MariaDB and PostgreSQL; a shared-cache SQLite connection with
``read_uncommitted``), and must find exactly what it found before the run: no table the run
made, no row it wrote. On MariaDB the staging table lives in the database ``tclose_staging``,
which an account granted the target's database (the usual reader of releases) cannot read; an
account with privileges on every database can, as ``docs/databases.md`` says (checked below, so
the docs stay true).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.core import runner
from tclose.naming import STAGING_SCHEMA


def _held_at_publish(monkeypatch, look: Callable[[object], None]) -> list:
    """Call ``look(staging)`` once the run has verified its staging table, before it publishes
    (in the run's own thread: the run waits for it)."""
    seen: list = []
    verify = runner._verify_staging

    def verified_then_look(database, staging, *args, **kwargs):
        verification = verify(database, staging, *args, **kwargs)
        seen.append(look(staging))
        return verification

    monkeypatch.setattr(runner, "_verify_staging", verified_then_look)
    return seen


def _ours(db, name: str) -> bool:
    """Whether ``name`` is this test's: its prefix, which the run's tables keep too (they are
    named after the target); the shared servers hold other tests' tables."""
    return name.lower().startswith(db.prefix.lower())


def _sqlite_view(db, connection: sqlite3.Connection) -> dict:
    connection.execute("PRAGMA read_uncommitted = 1")
    names = [r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {
        n: connection.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]
        for n in names
        if _ours(db, n)
    }


def _server_view(db, connection: sa.Connection, schemas: str) -> dict:
    """Every table of this test that ``connection`` may see, with its row count."""
    rows = connection.exec_driver_sql(
        "SELECT table_schema, table_name FROM information_schema.tables "
        f"WHERE table_schema {schemas}"
    ).all()
    quote = db.quote
    return {
        f"{s}.{n}": connection.exec_driver_sql(
            f"SELECT count(*) FROM {quote(s)}.{quote(n)}"
        ).scalar()
        for s, n in rows
        if _ours(db, n)
    }


def _source_and_config(db, path: str, tmp_path) -> str:
    """A source of 60 patients, in this database (``join``: the staging table is built inside
    it) or in a SQLite file (``stream``: its rows are streamed into this one); the run's
    configuration."""
    source, target = db.name("src"), db.name("anon")
    document = db.config(source, target)
    if path == "join":
        db.create_patients(source, n=60)
    else:
        lite = tmp_path / "source.db"
        sqlite3.connect(lite).close()
        other = type(db)("sqlite", f"sqlite:///{lite}", tmp_path)
        other.prefix = db.prefix
        other.create_patients(source, n=60)
        other.engine.dispose()
        document["source"]["url"] = f"sqlite:///{lite}"
        document["target"]["url"] = db.url
    return str(db.write_config(document, f"{path}-{secrets.token_hex(3)}.yaml"))


def _published_unseen(monkeypatch, db, engine, schemas: str, path: str, tmp_path, look) -> None:
    """A run (``path``: join or stream) publishes, and ``look`` saw, while it was held before
    its publish, what the reader on ``engine`` saw before it began."""
    config = _source_and_config(db, path, tmp_path)
    with engine.connect() as connection:
        before = _server_view(db, connection, schemas)
    seen = _held_at_publish(monkeypatch, look)
    assert main(["-q", "run", config]) == 0
    assert seen == [before]


@pytest.mark.parametrize("path", ["join", "stream"])
def test_postgresql_a_read_uncommitted_reader_sees_nothing_of_a_run(
    pg, monkeypatch, tmp_path, path
):
    """PostgreSQL reads no uncommitted row in any isolation level (``READ UNCOMMITTED`` is
    ``READ COMMITTED``), and the staging table is made inside the run's transaction."""
    engine = sa.create_engine(pg.url)
    schemas = "NOT IN ('pg_catalog', 'information_schema')"

    def look(staging) -> dict:
        with engine.connect() as connection:
            connection.exec_driver_sql("BEGIN ISOLATION LEVEL READ UNCOMMITTED")
            found = connection.exec_driver_sql(
                "SELECT to_regclass(%(n)s)", {"n": pg.quote(staging.name)}
            ).scalar()
            assert found is None, staging
            return _server_view(pg, connection, schemas)

    _published_unseen(monkeypatch, pg, engine, schemas, path, tmp_path, look)
    engine.dispose()


@pytest.fixture
def analyst(maria):
    """A MariaDB account that may read the target's database, as readers of releases are
    granted: ``(user, URL)``."""
    user = f"{maria.prefix}_analyst"
    maria.execute(f"CREATE USER '{user}'@'%'")
    maria.execute(f"GRANT SELECT ON `{maria.engine.url.database}`.* TO '{user}'@'%'")
    yield user, sa.make_url(maria.url).set(username=user).render_as_string(False)
    maria.execute(f"DROP USER '{user}'@'%'")


@pytest.mark.parametrize("path", ["join", "stream"])
def test_mariadb_a_read_uncommitted_reader_sees_nothing_of_a_run(
    maria, analyst, monkeypatch, tmp_path, path
):
    """A ``READ UNCOMMITTED`` session of an analyst granted the target's database reads no
    unverified row while the run verifies them: the staging table is in ``tclose_staging``, which
    the analyst cannot read."""
    user, url = analyst
    engine = sa.create_engine(url)
    root = sa.create_engine(maria.url)
    schemas = "NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"

    def look(staging) -> dict:
        assert staging.schema == STAGING_SCHEMA
        qualified = f"`{staging.schema}`.`{staging.name}`"
        with engine.connect() as connection:
            connection.exec_driver_sql("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
            with pytest.raises(sa.exc.DBAPIError, match="denied"):
                connection.exec_driver_sql(f"SELECT count(*) FROM {qualified}")
            seen = _server_view(maria, connection, schemas)
        with root.connect() as connection:  # an account with privileges on every database
            connection.exec_driver_sql("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
            assert connection.exec_driver_sql(f"SELECT count(*) FROM {qualified}").scalar() == 60
        return seen

    _published_unseen(monkeypatch, maria, engine, schemas, path, tmp_path, look)
    assert maria.tables() == {maria.name("anon")} | (
        {maria.name("src")} if path == "join" else set()
    )
    engine.dispose()
    root.dispose()


@pytest.mark.parametrize("cache", ["private", "shared"])
def test_sqlite_another_connection_sees_nothing_of_a_run(lite, monkeypatch, tmp_path, cache):
    """Another connection, in a cache of its own or (``cache=shared``, the run's URL too)
    sharing the run's and asking for uncommitted rows: the run's one transaction holds the
    staging table; the shared cache's schema lock keeps the reader out entirely."""
    file = sa.make_url(lite.url).database
    config = _source_and_config(lite, "join", tmp_path)
    if cache == "shared":
        import yaml

        document = yaml.safe_load(Path(config).read_text())
        document["source"]["url"] = f"sqlite:///file:{file}?cache=shared&uri=true"
        config = str(lite.write_config(document, "shared.yaml"))

    def connect() -> sqlite3.Connection:
        if cache == "shared":
            return sqlite3.connect(f"file:{file}?cache=shared", uri=True, timeout=0.1)
        return sqlite3.connect(file, timeout=0.1)

    def look(_staging) -> dict | str:
        connection = connect()
        try:
            return _sqlite_view(lite, connection)
        except sqlite3.OperationalError as error:  # locked: unreadable, which is the rule
            assert "locked" in str(error), error
            return "locked"
        finally:
            connection.close()

    connection = connect()
    before = _sqlite_view(lite, connection)
    connection.close()
    seen = _held_at_publish(monkeypatch, look)
    assert main(["-q", "run", config]) == 0
    assert seen in ([before], ["locked"])


@pytest.mark.duckdb
def test_duckdb_another_connection_sees_nothing_of_a_run(duckdb_db, monkeypatch, tmp_path):
    """DuckDB lets another process open the file not even to read while the run has it; a
    connection of the same process reads the last committed state (its MVCC has no uncommitted
    reads)."""

    def view(connection) -> dict:
        names = [
            n
            for (n,) in connection.exec_driver_sql(
                "SELECT table_name FROM duckdb_tables() UNION ALL "
                "SELECT table_name FROM duckdb_tables() WHERE temporary"
            )
        ]
        return {
            n: connection.exec_driver_sql(f"SELECT count(*) FROM {duckdb_db.quote(n)}").scalar()
            for n in names
            if _ours(duckdb_db, n)
        }

    config = _source_and_config(duckdb_db, "join", tmp_path)
    with duckdb_db.engine.connect() as connection:
        before = view(connection)
    engines: list = []

    def look(_staging) -> dict:
        from tclose.connectors.duckdb import DuckDBDatabase

        database = DuckDBDatabase(duckdb_db.url)  # the run's connector: the same instance
        engines.append(database.engine)
        with database.engine.connect() as connection:
            return view(connection)

    seen = _held_at_publish(monkeypatch, look)
    assert main(["-q", "run", config]) == 0
    assert seen == [before]
    for engine in engines:
        engine.dispose()


@pytest.mark.mysql
def test_mariadb_an_account_without_the_staging_database_stops_before_any_work(maria, capsys):
    """An account granted only the target's database cannot stage there: the run stops before
    reading a row (exit 3), saying what an administrator runs, and writes nothing."""
    user = f"{maria.prefix}_nostage"
    maria.execute(f"CREATE USER '{user}'@'%'")
    try:
        maria.execute(f"GRANT ALL ON `{maria.engine.url.database}`.* TO '{user}'@'%'")
        source, target = maria.name("src"), maria.name("anon")
        maria.create_patients(source, n=30)
        document = maria.config(source, target)
        document["source"]["url"] = maria.engine.url.set(username=user).render_as_string(False)
        assert main(["-q", "run", str(maria.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert f"GRANT ALL ON {STAGING_SCHEMA}.* TO this account" in err, err
        assert "partitioning" not in err and maria.tables() == {source}
    finally:
        maria.execute(f"DROP USER '{user}'@'%'")


# --- MariaDB: the accounts whose grants reach the staging database are named -----------------


def _grant_reaching_staging(maria, grant: str, account: str) -> list[str]:
    """Statements granting ``account`` a read of ``tclose_staging`` the way ``grant`` says,
    and those undoing them (the account itself is dropped by the caller)."""
    role = f"{maria.prefix}_role"
    if grant == "every database":
        return [f"GRANT SELECT ON *.* TO {account}"]
    if grant == "any database pattern":
        return [f"GRANT SELECT ON `%`.* TO {account}"]
    if grant == "a tclose_ pattern":
        return [f"GRANT SELECT ON `tclose\\_%`.* TO {account}"]
    if grant == "an unescaped pattern":
        return [f"GRANT SELECT ON `tclose_stagin_`.* TO {account}"]
    if grant == "a role":
        return [
            f"CREATE ROLE {role}",
            f"GRANT SELECT ON `tclose%`.* TO {role}",
            f"GRANT {role} TO {account}",
        ]
    raise AssertionError(grant)


@pytest.mark.mysql
@pytest.mark.parametrize(
    "grant",
    [
        "any database pattern",
        "a tclose_ pattern",
        "an unescaped pattern",
        "a role",
        "every database",
    ],
)
def test_mariadb_an_account_whose_grant_reaches_the_staging_database_is_named(
    maria, monkeypatch, tmp_path, capsys, grant
):
    """The attacker's account is granted a wildcard that matches ``tclose_staging`` and reads
    the unverified rows with ``READ UNCOMMITTED`` while the run checks them. The run cannot
    take the grant back; it names the account in its summary and its report (an account that
    reads every database may read the source itself: listed in the report, not warned of)."""
    user = f"{maria.prefix}_spy"
    account = f"'{user}'@'%'"
    maria.execute(f"CREATE USER {account}")
    statements = _grant_reaching_staging(maria, grant, account)
    try:
        for statement in statements:
            maria.execute(statement)
        if grant == "a role":
            maria.execute(f"SET DEFAULT ROLE {maria.prefix}_role FOR {account}")
        spy = sa.create_engine(sa.make_url(maria.url).set(username=user, database=STAGING_SCHEMA))
        read: list[int] = []

        def look(staging) -> None:
            with spy.connect() as connection:
                connection.exec_driver_sql(
                    "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"
                )
                read.append(
                    connection.exec_driver_sql(
                        f"SELECT count(*) FROM `{staging.schema}`.`{staging.name}`"
                    ).scalar()
                )

        config = _source_and_config(maria, "join", tmp_path)
        report = tmp_path / "r.json"
        import yaml

        document = yaml.safe_load(Path(config).read_text())
        document["report"] = {"json": str(report)}
        config = str(maria.write_config(document, "spied.yaml"))
        _held_at_publish(monkeypatch, look)
        assert main(["run", config]) == 0
        captured = capsys.readouterr()
        err = captured.out + captured.err  # the summary, with its warnings
        spy.dispose()
        assert read == [60]  # the attack works: the grant is the server's, not tclose's
        import json

        readers = json.loads(report.read_text())["target"]["staging_readers"]
        assert readers["checked"] is True
        named = [a for a in readers["accounts"] if a["account"].startswith(f"'{user}'@'%'")]
        assert named, readers
        if grant == "every database":
            assert named[0]["every_database"] is True
            assert user not in err
        else:
            assert named[0]["every_database"] is False
            assert "could read the unverified staging rows" in err and f"'{user}'@'%'" in err
    finally:
        maria.execute(f"DROP USER {account}")
        if grant == "a role":
            maria.execute(f"DROP ROLE {maria.prefix}_role")


@pytest.mark.mysql
def test_mariadb_an_account_granted_only_the_target_database_is_not_named(maria, analyst):
    from tclose.connectors.mysql import MySQLDatabase

    user, _url = analyst
    readers = MySQLDatabase(maria.url).staging_readers()
    assert readers["checked"] is True
    assert not [a for a in readers["accounts"] if user in a["account"]]


@pytest.mark.mysql
def test_mariadb_an_account_that_cannot_read_the_grant_tables_is_told_nobody_checked(
    maria, maria_login
):
    from tclose.connectors.mysql import MySQLDatabase

    user, password = maria_login
    url = sa.make_url(maria.url).set(username=user, password=password)
    readers = MySQLDatabase(url.render_as_string(False)).staging_readers()
    assert readers == {"checked": False, "accounts": []}
