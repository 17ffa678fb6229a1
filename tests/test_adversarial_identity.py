"""Adversarial: the target (or the audit table) is the source under another spelling.

Every spelling must be refused with exit 2 before anything is written, on each database, and the
source must be byte-for-byte what it was. A table that only looks similar (another case on a
case-sensitive database) is a different table and must be accepted.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa

from tclose.app.cli import main


def _spellings(db, source: str) -> list[tuple[str, str]]:
    """(target URL, target table) pairs that all name ``source``."""
    url = sa.make_url(db.url)
    if db.dialect == "sqlite":
        path = url.database
        folder, name = os.path.split(path)
        link, hard = os.path.join(folder, "link.db"), os.path.join(folder, "hard.db")
        os.symlink(path, link)
        os.link(path, hard)
        return [
            (db.url, source.upper()),
            (db.url, f"main.{source}"),
            (db.url, f"MAIN.{source.upper()}"),
            (f"sqlite:///{folder}/./{name}", source),
            (f"sqlite:///{folder}/../{os.path.basename(folder)}/{name}", source),
            (f"sqlite:///{link}", source),
            (f"sqlite:///{hard}", source.upper()),
        ]
    if db.dialect == "duckdb":  # names without case, as SQLite; the file by any path
        path = url.database
        folder, name = os.path.split(path)
        link, hard = os.path.join(folder, "link.duckdb"), os.path.join(folder, "hard.duckdb")
        os.symlink(path, link)
        os.link(path, hard)
        return [
            (db.url, source.upper()),
            (db.url, f"main.{source}"),
            (db.url, f"MAIN.{source.upper()}"),
            (f"duckdb:///{folder}/./{name}", source),
            (f"duckdb:///{link}", source),
            (f"duckdb:///{hard}", source.upper()),
        ]
    if db.dialect == "postgresql":
        plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
        return [
            (db.url, f"public.{source}"),
            (plain, source),
            (url.set(host="localhost").render_as_string(hide_password=False), source),
            (url.set(port=None).render_as_string(hide_password=False), f"public.{source}"),
        ]
    database = url.database
    return [
        (db.url, f"{database}.{source}"),
        (url.set(drivername="mariadb+pymysql").render_as_string(hide_password=False), source),
        (url.set(host="localhost").render_as_string(hide_password=False), source),
        (
            url.update_query_dict({"charset": "utf8mb4"}).render_as_string(hide_password=False),
            f"{database}.{source}",
        ),
    ]


def test_every_spelling_of_the_source_is_refused(db, capsys):
    source = db.name("src")
    db.create_patients(source, n=30)
    before = db.rows(source, order="patient_id")
    for url, table in _spellings(db, source):
        document = db.config(source, table)
        document["target"].update(url=url, if_exists="replace")
        code = main(["-q", "run", str(db.write_config(document))])
        err = capsys.readouterr().err
        assert code == 2, (url, table, err)
        assert "is the source table" in err, err
        assert db.rows(source, order="patient_id") == before, (url, table)
        assert db.tables() == {source}, (url, table)


def test_the_audit_table_may_not_be_the_source(db, capsys):
    source = db.name("src")
    db.create_patients(source, n=30)
    document = db.config(source, db.name("anon"))
    document["report"] = {"table": source.upper() if db.dialect == "sqlite" else source}
    assert main(["-q", "run", str(db.write_config(document))]) == 2
    assert "The audit table" in capsys.readouterr().err
    assert db.tables() == {source}


def test_a_look_alike_that_is_another_table_is_accepted(db):
    source = db.name("src")
    db.create_patients(source, n=30)
    before = db.rows(source, order="patient_id")
    # SQLite and DuckDB fold case, so their look-alike differs by more than case.
    target = source + "_" if db.dialect in ("sqlite", "duckdb") else source.upper()
    document = db.config(source, target)
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    assert db.rows(source, order="patient_id") == before
    assert len(db.rows(target)) == 30


@pytest.mark.parametrize("key", ["json", "html"])
def test_a_report_path_that_is_the_database_file_is_refused(sqlite_run, key, capsys):
    document = sqlite_run.config(report={key: str(sqlite_run.db)})
    size = sqlite_run.db.stat().st_size
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "is a SQLite database file" in capsys.readouterr().err
    assert sqlite_run.db.stat().st_size == size
    assert "discharges_anon" not in sqlite_run.tables()
    assert len(sqlite_run.rows("discharges")) == 400


def test_a_report_path_holding_another_file_is_refused_but_a_report_is_replaced(
    sqlite_run, tmp_path, capsys
):
    notes = tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}')
    config = str(sqlite_run.write(sqlite_run.config()))
    assert main(["-q", "run", config, "--report", str(notes)]) == 2
    assert notes.read_text() == '{"my": "notes"}'
    capsys.readouterr()
    report = tmp_path / "report.json"
    assert main(["-q", "run", config, "--report", str(report)]) == 0
    document = sqlite_run.config()
    document["target"]["if_exists"] = "replace"
    config = str(sqlite_run.write(document))
    html = str(tmp_path / "r.html")
    for _ in range(2):  # a report and an HTML page of tclose are replaced
        assert main(["-q", "run", config, "--report", str(report), "--html", html]) == 0


def test_a_missing_sqlite_file_is_never_created(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "missing.db"
    config = tmp_path / "run.yaml"
    config.write_text(
        f"source: {{url: 'sqlite:///{missing}', table: t, key: id}}\n"
        "target: {table: t2}\nattributes: {a: {role: quasi_identifier}}\n"
        "privacy: {k: 2}\nalgorithm: {name: mdav}\n"
    )
    assert main(["run", str(config)]) == 3
    err = capsys.readouterr().err
    assert f"The SQLite database file {missing} does not exist" in err
    assert main(["init", f"sqlite:///{missing}", "t"]) == 3
    assert not missing.exists() and not missing.parent.exists()
    relative = "relative-missing.db"
    assert main(["init", f"sqlite:///{relative}", "t"]) == 3
    assert str(os.path.abspath(relative)) in capsys.readouterr().err
    assert not os.path.exists(relative)


def test_a_missing_table_lists_the_existing_ones(sqlite_run, capsys):
    document = sqlite_run.config()
    document["source"]["table"] = "dischargez"
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 3
    assert "It has the tables: discharges." in capsys.readouterr().err


def test_init_never_overwrites_a_database_file(sqlite_run, capsys):
    size = sqlite_run.db.stat().st_size
    url = f"sqlite:///{sqlite_run.db}"
    assert main(["init", url, "discharges", "-o", str(sqlite_run.db), "--force"]) == 2
    assert "is a SQLite database file" in capsys.readouterr().err
    assert sqlite_run.db.stat().st_size == size and len(sqlite_run.rows("discharges")) == 400


def test_a_target_that_is_a_view_is_refused_before_any_work(db, capsys):
    """A target that is a view is refused before any work: publishing swaps a table for another,
    which PostgreSQL, SQLite and DuckDB refuse for a view (after all the work), and MariaDB would
    do, replacing the user's view with the release."""
    source, view = db.name("src"), db.name("v")
    db.create_patients(source, n=30)
    db.execute(f"CREATE VIEW {db.quote(view)} AS SELECT patient_id FROM {db.quote(source)}")
    try:
        document = db.config(source, view)
        document["target"]["if_exists"] = "replace"
        for dry_run in (["--dry-run"], []):
            assert main(["-q", "run", str(db.write_config(document)), *dry_run]) == 2
            err = capsys.readouterr().err
            assert f"The target {view} is a view, not a table" in err
        assert len(db.rows(view)) == 30
    finally:
        db.execute(f"DROP VIEW {db.quote(view)}")
    assert db.tables() == {source}


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("create", "kind"),
    [
        ("CREATE MATERIALIZED VIEW {name} AS SELECT 1 AS a", "materialized view"),
        ("CREATE SEQUENCE {name}", "sequence"),
        ("CREATE INDEX {name} ON {source} (age)", "index"),
    ],
)
def test_postgresql_a_target_that_is_not_a_table_is_refused(pg, capsys, create, kind):
    source, name = pg.name("src"), pg.name("other")
    pg.create_patients(source, n=30)
    pg.execute(create.format(name=name, source=source))
    try:
        document = pg.config(source, name)
        document["target"]["if_exists"] = "replace"
        assert main(["-q", "run", str(pg.write_config(document))]) == 2
        assert f"The target {name} is a {kind}, not a table" in capsys.readouterr().err
    finally:
        pg.execute(f"DROP {kind.upper()} IF EXISTS {name}")


@pytest.mark.parametrize(
    "dialect", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_target_that_a_view_reads_is_refused_where_the_publish_would_fail(
    dialect, tmp_path, capsys
):
    """PostgreSQL does not drop a table a view reads, and SQLite's rename checks every view: such a
    target is exit 2 before any work, naming the view."""
    from tests.conftest import make_database

    db = make_database(dialect, tmp_path)
    source, target, view = db.name("src"), db.name("anon"), db.name("v")
    db.create_patients(source, n=30)
    db.create(target, [sa.Column("old", sa.Integer)], [{"old": 1}])
    db.execute(f"CREATE VIEW {db.quote(view)} AS SELECT old FROM {db.quote(target)}")
    try:
        document = db.config(source, target)
        document["target"]["if_exists"] = "replace"
        assert main(["-q", "run", str(db.write_config(document))]) == 2
        err = capsys.readouterr().err
        assert f"The target table {target} cannot be replaced: view" in err and view in err
        assert db.rows(target) == [(1,)]
    finally:
        db.execute(f"DROP VIEW {db.quote(view)}")
        db.drop_all()


@pytest.mark.postgres
def test_postgresql_a_target_referenced_or_inherited_is_refused(pg, capsys):
    source, target, child, referrer = (pg.name(n) for n in ("src", "anon", "child", "ref"))
    pg.create_patients(source, n=30)
    pg.execute(f"CREATE TABLE {target} (id INTEGER PRIMARY KEY)")
    pg.execute(f"CREATE TABLE {child} () INHERITS ({target})")
    pg.execute(f"CREATE TABLE {referrer} (id INTEGER REFERENCES {target} (id))")
    document = pg.config(source, target)
    document["target"]["if_exists"] = "replace"
    try:
        assert main(["-q", "run", str(pg.write_config(document))]) == 2
        err = capsys.readouterr().err
        assert f"foreign key {referrer}_id_fkey of {referrer}" in err
        assert f"table {child} (it inherits from it)" in err
    finally:
        pg.execute(f"DROP TABLE {referrer}, {child}")
