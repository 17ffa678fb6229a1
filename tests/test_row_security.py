"""A source under row-level security is said, in the summary and the report.

PostgreSQL filters the rows of a table with row-level security for a role that is neither its
owner (without ``FORCE``), a superuser nor ``BYPASSRLS``: tclose then reads, anonymizes and
publishes only the rows that role sees, and the release covers only them. The report's
``source.row_security`` says whether policies filter the read and of which tables (through a
view too, as the role whose rights the view uses), and the run's summary warns.
"""

from __future__ import annotations

import json

import pytest

from tclose.app.cli import main


@pytest.fixture
def reader(pg):
    """A login role (random name) that may read the test tables and create its target."""
    role = f"{pg.prefix}_rls"
    pg.execute(f"CREATE ROLE {role} LOGIN")
    pg.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
    yield role
    pg.drop_all()  # the tables first (some are the role's), then what the role still owns
    pg.execute(f"DROP OWNED BY {role} CASCADE")
    pg.execute(f"DROP ROLE {role}")


def _secured(pg, role: str, *, owner: str | None = None, force: bool = False) -> str:
    """A patients table (60 rows) whose policy shows ``role`` the even patient ids only."""
    table = pg.name("patients")
    pg.create_patients(table, n=60)
    pg.execute(f"GRANT SELECT ON {table} TO {role}")
    pg.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    if force:
        pg.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
    pg.execute(f"CREATE POLICY even ON {table} FOR SELECT USING (patient_id % 2 = 0)")
    if owner is not None:
        pg.execute(f"ALTER TABLE {table} OWNER TO {owner}")
    return table


def _run(pg, capsys, tmp_path, source: str, role: str | None) -> tuple[dict, str]:
    target = pg.name("anon")
    document = pg.config(source, target)
    for spec in document["attributes"].values():  # 30 rows: a pass-through may be unique
        if spec["role"] == "other":
            spec["allow_unique"] = True
    url = pg.engine.url if role is None else pg.engine.url.set(username=role)
    document["source"]["url"] = url.render_as_string(hide_password=False)
    report = tmp_path / "report.json"
    path = pg.write_config(document)
    assert main(["run", str(path), "--report", str(report)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    return json.loads(report.read_text()), out


@pytest.mark.postgres
def test_a_policy_that_hides_rows_is_said_in_the_report_and_the_summary(
    pg, reader, tmp_path, capsys
):
    source = _secured(pg, reader)
    report, out = _run(pg, capsys, tmp_path, source, reader)
    assert report["source"]["rows"] == 30  # what the role sees
    security = report["source"]["row_security"]
    assert security["applies"] is True and security["role"] == reader
    assert security["tables"] == [{"table": source, "role": reader}]
    flat = " ".join(out.split())
    assert "row-level security" in flat and f"only the rows role {reader} sees" in flat, out
    assert any("row-level security" in w for w in report["warnings"])


@pytest.mark.postgres
def test_a_superuser_reads_every_row_and_nothing_is_said(pg, reader, tmp_path, capsys):
    source = _secured(pg, reader)
    report, out = _run(pg, capsys, tmp_path, source, None)
    assert report["source"]["rows"] == 60
    assert report["source"]["row_security"]["applies"] is False
    assert "row-level security" not in out


@pytest.mark.postgres
@pytest.mark.parametrize(("force", "applies"), [(False, False), (True, True)])
def test_the_owner_is_filtered_only_under_force(pg, reader, tmp_path, capsys, force, applies):
    source = _secured(pg, reader, owner=reader, force=force)
    report, _out = _run(pg, capsys, tmp_path, source, reader)
    assert report["source"]["row_security"]["applies"] is applies
    assert report["source"]["rows"] == (30 if applies else 60)


@pytest.mark.postgres
@pytest.mark.parametrize(("invoker", "applies"), [(False, False), (True, True)])
def test_a_view_reads_with_its_owners_rights_unless_security_invoker(
    pg, reader, tmp_path, capsys, invoker, applies
):
    """A view owned by a superuser reads the table past its policy; with ``security_invoker``
    (PostgreSQL 15) it reads as the role that queries it, whose rows the policy filters."""
    if invoker and pg.execute("SHOW server_version_num")[0][0] < "150000":
        pytest.skip("security_invoker views need PostgreSQL 15")
    table = _secured(pg, reader)
    view = pg.name("v")
    option = " WITH (security_invoker = on)" if invoker else ""
    pg.execute(f"CREATE VIEW {view}{option} AS SELECT * FROM {table}")
    try:
        pg.execute(f"GRANT SELECT ON {view} TO {reader}")
        report, _out = _run(pg, capsys, tmp_path, view, reader)
    finally:
        pg.execute(f"DROP VIEW {view}")  # before the tables are dropped
    security = report["source"]["row_security"]
    assert security["applies"] is applies
    assert security["tables"] == ([{"table": table, "role": reader}] if applies else [])
    assert report["source"]["rows"] == (30 if applies else 60)


def test_a_database_without_row_level_security_says_so(sqlite_run, tmp_path):
    path = sqlite_run.write(sqlite_run.config())
    report = tmp_path / "r.json"
    assert main(["-q", "run", str(path), "--report", str(report)]) == 0
    assert json.loads(report.read_text())["source"]["row_security"] == {
        "applies": False,
        "tables": [],
    }


# --- reads the catalog cannot list: row-level security is unknown, never "not filtered" ------


def _through_function(pg, table: str, reader: str, language: str) -> str:
    """A view (granted to ``reader``) of every row of ``table`` read through a function of
    ``language`` that runs with the querying role's rights; its name."""
    fn, view = pg.name("fn"), pg.name("v")
    body = f"SELECT * FROM {table}"
    if language == "plpgsql":
        body = f"BEGIN RETURN QUERY {body}; END"
    pg.execute(
        f"CREATE FUNCTION {fn}() RETURNS SETOF {table} LANGUAGE {language} STABLE AS $${body}$$"
    )
    pg.execute(f"CREATE VIEW {view} AS SELECT * FROM {fn}()")
    pg.execute(f"GRANT SELECT ON {view} TO {reader}")
    return view


def _unknown_said(report: dict, out: str, reads: str) -> None:
    security = report["source"]["row_security"]
    assert security["applies"] is None, security
    assert reads in security["unknown"], security
    flat = " ".join(out.split())
    assert "Whether row-level security filtered the source is unknown" in flat, out
    assert any("is unknown" in w for w in report["warnings"])


@pytest.mark.postgres
@pytest.mark.parametrize("language", ["sql", "plpgsql"])
def test_a_policy_read_through_a_function_is_unknown_not_unfiltered(
    pg, reader, tmp_path, capsys, language
):
    """A view reading the secured table through a function, the policy hiding half the rows:
    the report says unknown (``applies: null``), never ``applies: false``."""
    table = _secured(pg, reader)
    view = _through_function(pg, table, reader, language)
    try:
        report, out = _run(pg, capsys, tmp_path, view, reader)
    finally:
        pg.execute(f"DROP FUNCTION {pg.name('fn')}() CASCADE")  # and the view
    assert report["source"]["rows"] == 30  # the policy filtered, through the function
    _unknown_said(report, out, "function")


@pytest.mark.postgres
def test_a_function_over_a_table_without_policies_is_still_unknown(pg, reader, tmp_path, capsys):
    """The catalog cannot list what a function reads, whatever it reads: no policy here, and
    still no "not filtered" (the answer may not depend on what the function happens to do)."""
    table = pg.name("patients")
    pg.create_patients(table, n=60)
    pg.execute(f"GRANT SELECT ON {table} TO {reader}")
    view = _through_function(pg, table, reader, "sql")
    try:
        report, out = _run(pg, capsys, tmp_path, view, reader)
    finally:
        pg.execute(f"DROP FUNCTION {pg.name('fn')}() CASCADE")  # and the view
    assert report["source"]["rows"] == 60
    _unknown_said(report, out, "function")


@pytest.mark.postgres
def test_a_policy_read_through_a_foreign_table_is_unknown(pg, reader, tmp_path, capsys):
    """A superuser reads a foreign table whose server (this one, postgres_fdw) connects as a
    role the policy filters: the local catalog sees no policy, and must not say none."""
    table = _secured(pg, reader)
    schema, server = pg.name("fs"), pg.name("loop")
    try:
        pg.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    except Exception as error:  # the extension is not installed on this server
        pytest.skip(f"postgres_fdw is not available: {error}")
    url = pg.engine.url
    pg.execute(
        f"CREATE SERVER {server} FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host "
        f"'{url.host}', port '{url.port or 5432}', dbname '{url.database}')"
    )
    try:
        pg.execute(
            f"CREATE USER MAPPING FOR CURRENT_USER SERVER {server} OPTIONS (user '{reader}')"
        )
        pg.execute(f"CREATE SCHEMA {schema}")
        pg.execute(
            f"IMPORT FOREIGN SCHEMA public LIMIT TO ({table}) FROM SERVER {server} INTO {schema}"
        )
        report, out = _run(pg, capsys, tmp_path, f"{schema}.{table}", None)
    finally:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg.execute(f"DROP SERVER {server} CASCADE")
    assert report["source"]["rows"] == 30
    _unknown_said(report, out, "foreign table")


@pytest.mark.postgres
def test_a_policy_the_catalog_lists_is_said_even_when_more_is_unknown(pg, reader, tmp_path, capsys):
    """A view reads the secured table directly and a function besides: the policy it knows
    of filters (``applies: true``), and the rest is said unknown."""
    table = _secured(pg, reader)
    fn, view = pg.name("fn"), pg.name("v")
    pg.execute(f"CREATE FUNCTION {fn}() RETURNS boolean LANGUAGE sql STABLE AS 'SELECT true'")
    pg.execute(f"CREATE VIEW {view} AS SELECT * FROM {table} WHERE {fn}()")
    pg.execute(f"GRANT SELECT ON {view} TO {reader}")
    try:
        pg.execute(f"ALTER VIEW {view} OWNER TO {reader}")
        report, out = _run(pg, capsys, tmp_path, view, reader)
    finally:
        pg.execute(f"DROP VIEW {view}")
        pg.execute(f"DROP FUNCTION {fn}()")
    security = report["source"]["row_security"]
    assert security["applies"] is True and f"function {fn}()" in security["unknown"], security
    assert security["tables"] == [{"table": table, "role": reader}]
    assert f"only the rows role {reader} sees" in " ".join(out.split()), out
