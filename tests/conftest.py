"""Shared fixtures: small SQLite databases made from the demo generator, and config writers."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import yaml

from tclose.app.demo import create_demo_database
from tclose.base.registry import DISABLE_AUTOLOAD_ENV, PLUGINS_ENV

# The project's tests see only the built-ins, whatever third-party plugins are installed: a test
# that needs an entry point opts in with TCLOSE_PLUGINS (monkeypatch.setenv), subprocesses inherit.
os.environ[DISABLE_AUTOLOAD_ENV] = "1"
os.environ.pop(PLUGINS_ENV, None)


#: The files of the slow tier: the tests of the guarantees, each of which tries to break one end
#: to end on every database (each test a run, its verification and a look at the servers).
SLOW_FILES = ("test_rule_*.py", "test_adversarial_*.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test of a file that :data:`SLOW_FILES` matches, before ``-m`` selects: the
    configuration's ``-m "not slow"`` leaves the slow tier out, ``-m slow`` runs it alone."""
    for item in items:
        if any(item.path.match(pattern) for pattern in SLOW_FILES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    """A SQLite file with 400 synthetic discharges in table ``discharges``."""
    path = tmp_path / "demo.db"
    create_demo_database(path, n_rows=400, seed=1)
    return path


def _base_config(
    db: Path | None = None,
    *,
    url: str | None = None,
    source: str = "discharges",
    target: str = "discharges_anon",
    **overrides,
) -> dict:
    """A valid configuration for a discharge table (``demo_db``'s by default; ``url`` for any
    database); ``overrides`` replace top-level keys."""
    document = {
        "source": {"url": url or f"sqlite:///{db}", "table": source, "key": "patient_id"},
        "target": {"table": target, "if_exists": "fail"},
        "attributes": {
            "name": {"role": "identifier"},
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "zip": {"role": "quasi_identifier", "type": "numeric"},
            "length_of_stay": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
            # every column has a declared fate: the rest pass through. Taken
            # together they single out most rows, which the linkage check refuses (rule R5,
            # tests/test_rule_linkage.py), and so would any column a test adds together with
            # them: the tests that are about something else leave them out of the check.
            **{
                c: {"role": "other", "allow_unique": True}
                for c in ("admission_day", "procedures", "diagnoses", "severity", "ward")
            },
        },
        "privacy": {"k": 3, "t": 0.2},
        "algorithm": {"name": "t-first", "options": {}},
    }
    document.update(overrides)
    return document


class SQLiteHelpers:
    """Config writing and table inspection for end-to-end tests."""

    def __init__(self, tmp_path: Path, db: Path) -> None:
        self.tmp_path = tmp_path
        self.db = db

    def config(self, **overrides) -> dict:
        return _base_config(self.db, **overrides)

    def write(self, document: dict | str, name: str = "run.yaml") -> Path:
        path = self.tmp_path / name
        text = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    def rows(self, table: str) -> list[tuple]:
        with sqlite3.connect(self.db) as connection:
            return connection.execute(f'SELECT * FROM "{table}"').fetchall()

    def columns(self, table: str) -> list[str]:
        with sqlite3.connect(self.db) as connection:
            cursor = connection.execute(f'SELECT * FROM "{table}" LIMIT 0')
            return [d[0] for d in cursor.description]

    def tables(self) -> set[str]:
        """The database's tables but tclose's registry of releases (``tclose_releases``, made
        by the first publish; ``tests/test_rule_owned.py`` checks it)."""
        with sqlite3.connect(self.db) as connection:
            rows = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            return {r[0] for r in rows.fetchall()} - {"tclose_releases"}


@pytest.fixture
def singletons_registry():
    """Built-in plugins plus algorithm ``singletons``, which puts every row in a cluster of its
    own: any run with k > 1 must then fail verification."""
    import numpy as np

    import tclose
    from tclose.base.registry import load_registry
    from tclose.interfaces import Partition

    class Singletons:
        name = "singletons"
        options_schema = {}
        requires_t = True  # it claims to enforce t, so that a config with privacy.t accepts it

        def partition(self, x, distances, k, t, options):
            return Partition(np.arange(len(x)))

    class Plugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(Singletons())

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


@pytest.fixture
def sqlite_run(tmp_path: Path, demo_db: Path) -> SQLiteHelpers:
    """Helpers bound to a fresh ``demo_db``."""
    return SQLiteHelpers(tmp_path, demo_db)


# --- Database servers: one helper for SQLite, PostgreSQL and MariaDB/MySQL ----------
#
# The servers are the ones on this machine (override with TCLOSE_TEST_POSTGRES_URL and
# TCLOSE_TEST_MYSQL_URL). A missing server skips its tests with the reason, except in CI
# (CI=true), where it fails them. Every test gets a unique table-name prefix and its tables are
# dropped afterwards, so the suite can run repeatedly and concurrently.

import secrets  # noqa: E402

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.pool import NullPool  # noqa: E402

SERVER_URLS = {
    "postgresql": os.environ.get(
        "TCLOSE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    ),
    "mysql": os.environ.get("TCLOSE_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test"),
}
_reachable: dict[str, str | None] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


#: The MySQL/MariaDB drivers the ``[test]`` extra does not install: the C drivers build against
#: libmariadb-dev, which a machine may lack. Their tests skip with the reason unless
#: TCLOSE_TEST_C_DRIVERS=1 says they must run (.ci/run sets it when it has installed them).
OPTIONAL_MYSQL_DRIVERS = {"mariadbconnector": "mariadb", "mysqldb": "mysqlclient"}


def c_drivers_must_run() -> bool:
    return os.environ.get("TCLOSE_TEST_C_DRIVERS", "").lower() in ("1", "true", "yes")


def missing_driver(driver: str) -> str | None:
    """Why ``driver`` (a SQLAlchemy MySQL driver name) cannot be tested here, or ``None``."""
    from tclose.connectors.mysql_drivers import DRIVERS, installed

    if driver not in DRIVERS or installed(driver):
        return None
    extra = OPTIONAL_MYSQL_DRIVERS.get(driver, "mysql")
    return f"{DRIVERS[driver][1]} is not installed: pip install 'tclose[{extra}]'"


def require_driver(driver: str) -> None:
    """Skip the test when ``driver`` is not installed: fail it instead where it must run (the
    C drivers under TCLOSE_TEST_C_DRIVERS=1, PyMySQL in CI, which the ``[test]`` extra installs)."""
    message = missing_driver(driver)
    if message is None:
        return
    must_run = c_drivers_must_run() if driver in OPTIONAL_MYSQL_DRIVERS else in_ci()
    if must_run:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def require_example():
    """``require_example(distribution, what)`` skips the test (fails it in CI, where .ci/run
    installs it) unless the example distribution ``examples/<distribution>`` is installed."""
    from importlib.metadata import PackageNotFoundError, distribution

    def require(distribution_name: str, what: str) -> None:
        try:
            distribution(distribution_name)
        except PackageNotFoundError:
            message = (
                f"the example {what} is not installed: "
                f"python3 -m pip install ./examples/{distribution_name}"
            )
            if in_ci():
                pytest.fail(f"CI must install it: {message}")
            pytest.skip(message)

    return require


@pytest.fixture
def maria_login(maria):
    """``(user, password)``: a MariaDB user with a password and every privilege on the test database."""
    user, password = f"{maria.prefix}_login", f"Maria-{secrets.token_hex(8)}"
    maria.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    maria.execute(f"GRANT ALL ON `{maria.engine.url.database}`.* TO '{user}'@'%'")
    maria.execute(f"GRANT ALL ON `tclose_staging`.* TO '{user}'@'%'")  # where runs stage
    yield user, password
    maria.execute(f"DROP USER '{user}'@'%'")


def _trust_the_registry(connection) -> None:
    """Take back any write on a test database's ``public.tclose_releases`` granted to other
    roles: the server is shared with other checkouts of tclose, and a run trusts a registry only
    when no role but its owner may write it."""
    connection.exec_driver_sql(
        "DO $$ BEGIN IF to_regclass('public.tclose_releases') IS NOT NULL THEN "
        "REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON public.tclose_releases FROM PUBLIC; "
        "END IF; END $$"
    )


def server_url(dialect: str) -> str:
    """The server's URL; skips the test (fails it in CI) if the server cannot be reached."""
    url = SERVER_URLS[dialect]
    if dialect not in _reachable:
        engine = sa.create_engine(url, poolclass=NullPool)
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql("SELECT 1")
                if dialect == "postgresql":
                    _trust_the_registry(connection)
            _reachable[dialect] = None
        except Exception as error:  # any failure to connect means: no usable server
            _reachable[dialect] = " ".join(str(error).split())[:300]
        finally:
            engine.dispose()
    problem = _reachable[dialect]
    if problem is not None:
        message = f"no {dialect} server at {sa.make_url(url).render_as_string()}: {problem}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return url


class TestDatabase:
    """A database of one dialect as a test sees it: unique table names, SQL, cleanup."""

    __test__ = False  # not a test class

    def __init__(self, dialect: str, url: str, tmp_path: Path) -> None:
        self.dialect = dialect
        self.url = url
        self.tmp_path = tmp_path
        self.prefix = f"t{secrets.token_hex(4)}"
        if dialect == "duckdb":  # the dialect of tclose's connector (quotes every identifier)
            import tclose.connectors.duckdb as connector

            url = url.replace("duckdb://", connector.DRIVER + "://", 1)
        self.engine = sa.create_engine(url, poolclass=NullPool)
        # MariaDB/MySQL runs keep their staging tables in the database tclose_staging.
        self.schemas: list[str | None] = [None] + (["tclose_staging"] if dialect == "mysql" else [])

    @property
    def url(self) -> str:
        """The URL tclose's configs name; a URL with a MySQL driver needs that driver
        (:func:`require_driver`), so a test that sets one skips or fails as the driver says."""
        return self._url

    @url.setter
    def url(self, url: str) -> None:
        driver = sa.make_url(url).drivername.partition("+")[2]
        if driver:
            require_driver(driver)
        self._url = url

    def name(self, base: str) -> str:
        """A table name unique to this test."""
        return f"{self.prefix}_{base}"

    def execute(self, sql: str, parameters: dict | None = None) -> list[tuple]:
        with self.engine.begin() as connection:
            result = connection.execute(sa.text(sql), parameters or {})
            return [tuple(r) for r in result.fetchall()] if result.returns_rows else []

    def quote(self, name: str) -> str:
        """``name`` quoted for :meth:`execute` (which escapes ``%`` itself)."""
        if self.dialect == "mysql":
            return "`" + name.replace("`", "``") + "`"
        return '"' + name.replace('"', '""') + '"'

    def create(
        self, name: str, columns: list[sa.Column], rows: list[dict], schema: str | None = None
    ) -> sa.Table:
        """Create table ``name`` with ``columns`` and insert ``rows``."""
        table = sa.Table(name, sa.MetaData(), *columns, schema=schema)
        with self.engine.begin() as connection:
            table.create(connection)
            if rows:
                connection.execute(table.insert(), rows)
        return table

    def create_patients(self, name: str, n: int = 400, seed: int = 1) -> sa.Table:
        """The demo discharges (n rows, key ``patient_id``) plus ``note`` (NULL in every 7th
        row) and ``code`` (unique per row, to match output rows with source rows)."""
        from tclose.app.demo import discharge_table

        frame = discharge_table(n, seed=seed)
        rows = []
        for record in frame.to_dict("records"):
            i = int(record["patient_id"])
            record.update(note=None if i % 7 == 0 else f"note {i}", code=f"c{i:06d}")
            rows.append({k: (v.item() if hasattr(v, "item") else v) for k, v in record.items()})
        columns = [
            sa.Column("patient_id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("name", sa.String(60)),
            sa.Column("age", sa.Integer),
            sa.Column("zip", sa.Integer),
            sa.Column("admission_day", sa.Integer),
            sa.Column("length_of_stay", sa.Integer),
            sa.Column("procedures", sa.Integer),
            sa.Column("diagnoses", sa.Integer),
            sa.Column("severity", sa.Double),
            sa.Column("charge", sa.Double),
            sa.Column("ward", sa.String(40)),
            sa.Column("note", sa.Text),
            sa.Column("code", sa.String(16)),
        ]
        return self.create(name, columns, rows)

    def release(self, target: str, n: int = 6) -> list[tuple]:
        """Publish a small release of tclose under ``target`` (``if_exists: replace`` replaces
        only tclose's releases) from a source of ``n`` patients dropped afterwards; return its
        rows in ``tclose_row`` order."""
        from tclose.app.cli import main

        source = self.name(f"r{secrets.token_hex(3)}")
        self.create_patients(source, n=n)
        document = self.config(source, target)
        for column, spec in document["attributes"].items():  # too few rows to pass any through
            if spec["role"] == "other":
                document["attributes"][column] = {"role": "identifier"}
        path = self.write_config(document, f"{source}.yaml")
        assert main(["-q", "run", str(path)]) == 0
        self.execute(f"DROP TABLE {self.quote(source)}")
        return self.rows(target, order="tclose_row")

    def rows(
        self, name: str, columns: str = "*", order: str | None = None, schema: str | None = None
    ) -> list[tuple]:
        head, _, tail = name.partition(".")
        if schema is None and tail and head in self.schemas:  # a name as tables() gives it
            schema, name = head, tail
        table = self.quote(name) if schema is None else f"{self.quote(schema)}.{self.quote(name)}"
        suffix = f" ORDER BY {order}" if order else ""
        return self.execute(f"SELECT {columns} FROM {table}{suffix}")

    def leftover_rows(self, name: str) -> list[tuple]:
        """The rows of ``name`` (as :meth:`tables` gives it), a staging table a killed run left;
        none once it is gone: on MariaDB every run drops the registered tables of runs that are
        over, and a run of another test session on the server may come at any moment."""
        try:
            return self.rows(name)
        except sa.exc.ProgrammingError as error:
            if self.dialect == "mysql" and error.orig.args[0] == 1146:  # no such table
                return []
            raise

    def frame(self, name: str, schema: str | None = None):
        """The table's rows as a DataFrame of the driver's Python values."""
        import pandas as pd

        if self.dialect == "duckdb":
            qualified = (
                self.quote(name) if schema is None else f"{self.quote(schema)}.{self.quote(name)}"
            )
            with self.engine.connect() as connection:
                result = connection.exec_driver_sql(f"SELECT * FROM {qualified}")
                return pd.DataFrame([tuple(r) for r in result], columns=list(result.keys()))
        table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=self.engine)
        # Untyped columns: the driver's values, not SQLAlchemy's (MySQL doubles as Decimal).
        raw = [sa.type_coerce(c, sa.types.NullType()).label(c.name) for c in table.columns]
        with self.engine.connect() as connection:
            result = connection.execute(sa.select(*raw))
            return pd.DataFrame([tuple(r) for r in result], columns=list(result.keys()))

    def column_types(self, name: str, schema: str | None = None) -> dict[str, str]:
        """Column name → its type as the database reports it (compiled for the dialect)."""
        if self.dialect == "duckdb":  # DuckDB's own catalog (duckdb-engine cannot reflect)
            rows = self.execute(
                "SELECT column_name, data_type FROM duckdb_columns() "
                "WHERE table_name = :t AND schema_name = :s",
                {"t": name, "s": schema or "main"},
            )
            return dict(rows)
        columns = sa.inspect(self.engine).get_columns(name, schema=schema)
        return {c["name"]: c["type"].compile(dialect=self.engine.dialect) for c in columns}

    def tables(self) -> set[str]:
        """This test's tables (any name with its prefix, helper tables included)."""
        found = set()
        with self.engine.connect() as connection:
            inspector = sa.inspect(connection)
            for schema in self._existing(inspector):
                for table in inspector.get_table_names(schema=schema):
                    if table.startswith(self.prefix):
                        found.add(table if schema is None else f"{schema}.{table}")
        return found

    def _existing(self, inspector: sa.Inspector) -> list[str | None]:
        """:attr:`schemas` that exist (tclose_staging exists once a MariaDB run made it)."""
        return [s for s in self.schemas if s is None or inspector.has_schema(s)]

    def config(self, source: str, target: str, **overrides) -> dict:
        """A valid configuration for a :meth:`create_patients` table (``note`` and ``code``,
        unique per row, pass through with ``allow_unique``)."""
        document = _base_config(url=self.url, source=source, target=target)
        document["attributes"].update(
            note={"role": "other", "allow_unique": True},
            code={"role": "other", "allow_unique": True},
        )
        document.update(overrides)
        return document

    def write_config(self, document: dict, name: str = "run.yaml") -> Path:
        path = self.tmp_path / name
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return path

    def run_and_verify(self, document: dict, capsys) -> tuple[int, str, str]:
        """``tclose run`` of ``document`` (its JSON report in this test's folder); if it
        published, ``tclose verify --report`` must exit 0 and the report say passed. The run's
        exit code, its error output and the configuration's path."""
        import json

        from tclose.app.cli import main

        report = self.tmp_path / "report.json"
        document["report"] = {"json": str(report)}
        path = str(self.write_config(document))
        code = main(["-q", "run", path])
        err = capsys.readouterr().err
        if code == 0:
            assert main(["-q", "verify", path, "--report", str(report)]) == 0, capsys.readouterr()
            assert json.loads(report.read_text())["verification"]["passed"]
        return code, err, path

    def drop_all(self) -> None:
        """Drop this test's tables from a server database and their records from its registry of
        releases, in one connection; a file database (SQLite, DuckDB) is in the test's own
        folder and stays as the test left it."""
        if self.dialect in SERVER_URLS:
            with self.engine.begin() as connection:
                self._drop_mine(connection)
        self.engine.dispose()

    def _drop_mine(self, connection: sa.Connection) -> None:
        inspector = sa.inspect(connection)
        for schema in self._existing(inspector):
            tables = inspector.get_table_names(schema=schema)
            for table in tables:
                if table.lower().startswith(self.prefix.lower()):  # also T..._SRC look-alikes
                    sa.Table(table, sa.MetaData(), schema=schema).drop(connection)
            if "tclose_releases" in tables:
                # the release records of this test's tables, in a registry the servers share
                registry = sa.table("tclose_releases", sa.column("name"), schema=schema)
                connection.execute(
                    registry.delete().where(
                        sa.func.lower(registry.c.name).like(f"{self.prefix.lower()}%")
                    )
                )


def duckdb_url(path: Path | None) -> str:
    """A new DuckDB file's URL (``path`` None: only the check); skips the test (fails it in CI)
    without the ``[duckdb]`` extra."""
    try:
        import duckdb
        import duckdb_engine  # noqa: F401
    except ImportError as error:
        if in_ci():
            pytest.fail(f"DuckDB is not installed (pip install -e '.[test]'): {error}")
        pytest.skip(f"DuckDB is not installed: {error}")
    if path is None:
        return ""
    duckdb.connect(str(path)).close()
    return f"duckdb:///{path}"


@pytest.fixture
def duck():
    """The ``duckdb`` module; skips the test (fails it in CI) without the ``[duckdb]`` extra."""
    duckdb_url(None)
    import duckdb

    return duckdb


@pytest.fixture
def duckdb_file():
    """A function making a new, empty DuckDB file and returning its URL."""
    return duckdb_url


def make_database(dialect: str, tmp_path: Path) -> TestDatabase:
    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'test.db'}"
    elif dialect == "duckdb":
        url = duckdb_url(tmp_path / "test.duckdb")
    else:
        url = server_url(dialect)
    return TestDatabase(dialect, url, tmp_path)


@pytest.fixture(
    params=[
        pytest.param("sqlite"),
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("duckdb", marks=pytest.mark.duckdb),
    ]
)
def db(request, tmp_path: Path):
    """A :class:`TestDatabase` of each dialect in turn (the same test runs on all four)."""
    database = make_database(request.param, tmp_path)
    yield database
    database.drop_all()


@pytest.fixture
def pg(tmp_path: Path):
    """The PostgreSQL server as a :class:`TestDatabase`."""
    database = make_database("postgresql", tmp_path)
    yield database
    database.drop_all()


@pytest.fixture
def pg_other(tmp_path: Path):
    """Another database of the PostgreSQL server (``postgres``, or the database of
    ``TCLOSE_TEST_POSTGRES_OTHER_URL``) as a :class:`TestDatabase`: a target there is streamed
    through the client, as into another server."""
    default = sa.make_url(server_url("postgresql")).set(database="postgres")
    url = os.environ.get("TCLOSE_TEST_POSTGRES_OTHER_URL", default.render_as_string(False))
    (tmp_path / "other").mkdir()
    database = TestDatabase("postgresql", url, tmp_path / "other")
    with database.engine.begin() as connection:
        _trust_the_registry(connection)
    yield database
    database.drop_all()


@pytest.fixture
def maria(tmp_path: Path):
    """The MariaDB/MySQL server as a :class:`TestDatabase`."""
    database = make_database("mysql", tmp_path)
    yield database
    database.drop_all()


@pytest.fixture
def lite(tmp_path: Path):
    """A SQLite file as a :class:`TestDatabase`."""
    (tmp_path / "lite").mkdir()
    database = make_database("sqlite", tmp_path / "lite")
    yield database
    database.drop_all()


@pytest.fixture
def duckdb_db(tmp_path: Path):
    """A DuckDB file as a :class:`TestDatabase` (skips without the ``[duckdb]`` extra, fails in
    CI)."""
    (tmp_path / "duck").mkdir()
    database = make_database("duckdb", tmp_path / "duck")
    yield database
    database.drop_all()


@pytest.fixture
def psql_sha256():
    """``psql URL -c STATEMENT | sha256sum``, as an auditor recomputes a PostgreSQL content
    digest without tclose; calling it skips the test where psql is not installed."""
    import hashlib
    import shutil
    import subprocess

    def digest(url: str, statement: str) -> str:
        if shutil.which("psql") is None:
            pytest.skip("psql is not installed: the auditor's command cannot be run here")
        parsed = sa.engine.make_url(url)
        conninfo = f"host={parsed.host} port={parsed.port or 5432} user={parsed.username} "
        conninfo += f"dbname={parsed.database}"
        psql = subprocess.run(
            ["psql", conninfo, "-X", "-q", "-c", statement],
            capture_output=True,
            check=True,
            env={"PGCLIENTENCODING": "UTF8", "PATH": "/usr/bin:/bin"},
        )
        return hashlib.sha256(psql.stdout).hexdigest()

    return digest
