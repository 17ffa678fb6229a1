"""Rule R1: tclose replaces and drops only what it created and published.

- ``if_exists: replace`` replaces an existing table only when the registry of releases of its
  schema (``tclose_releases``) records it and it is still the table that was published, as the
  database identifies tables (PostgreSQL: its OID; MariaDB: the second of its last DDL, its run
  comment and its checksum; SQLite, DuckDB and Parquet files: its rows). Any other table is
  exit 2 before any work, whatever it is or reads, and is checked again inside the publish.
- The names tclose keeps for itself (its registries, the names a run gives its own tables, its
  staging schema) are refused as source, target and audit table, however spelled.
- The join's helper tables have per-run names that no user table may bear, so none shadows one.

The first tests try known attacks; the rest try the rule with other objects and spellings of
the same classes.
"""

from __future__ import annotations

import json
import secrets

import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.core import runner
from tclose.naming import RELEASES_TABLE, TableName, reserved

#: The fixture of each dialect's :class:`TestDatabase`.
FIXTURES = {"postgresql": "pg", "mysql": "maria", "duckdb": "duckdb_db", "sqlite": "lite"}


def _replace_config(db, source: str, target: str, **overrides) -> str:
    document = db.config(source, target, **overrides)
    document["target"]["if_exists"] = "replace"
    return str(db.write_config(document, f"replace-{secrets.token_hex(3)}.yaml"))


def _refused_before_any_work(monkeypatch, db, path: str, capsys, code: int = 2) -> str:
    """Run ``path``: exit ``code``, no row of the source read; the error text."""

    def no_reading(*_args, **_kwargs):
        raise AssertionError("the source was read: the refusal came after the work began")

    monkeypatch.setattr(runner, "read_inputs", no_reading)
    result = main(["-q", "run", path])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert result == code, err
    return err


def _other_database(maria) -> tuple[str, str]:
    """A MariaDB database of this test's own (name, URL): fixed names can live there."""
    name = f"{maria.prefix}_own"
    maria.execute(f"CREATE DATABASE `{name}`")
    return name, sa.make_url(maria.url).set(database=name).render_as_string(False)


# --- known attacks: a registry name, a merge member, a function's table, a helper's name ----------


@pytest.mark.mysql
def test_mariadb_a_target_named_like_the_registry_is_refused(maria, monkeypatch, capsys):
    """A target named like the registry ``tclose_owned`` is refused: a release in its place would
    make the next run read data rows as the registry and drop a user table named in the data."""
    name, url = _other_database(maria)
    try:
        engine = sa.create_engine(url)
        with engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE victim (x INT)")
        other = type(maria)("mysql", url, maria.tmp_path)
        other.prefix = maria.prefix
        other.create_patients("src", n=40)
        assert main(["-q", "run", str(other.write_config(other.config("src", "first")))]) == 0
        for target in ("tclose_owned", f"{name}.tclose_owned", "TCLOSE_OWNED"):
            err = _refused_before_any_work(
                monkeypatch, other, _replace_config(other, "src", target), capsys
            )
            assert "registry" in err
        with engine.connect() as connection:
            columns = [c["name"] for c in sa.inspect(connection).get_columns("tclose_owned")]
        assert columns == ["name", "run_lock", "created_at"]
        assert main(["-q", "run", _replace_config(other, "src", "first")]) == 0
        assert other.rows("victim") == []  # still there
        engine.dispose()
    finally:
        maria.execute(f"DROP DATABASE `{name}`")


@pytest.mark.mysql
def test_mariadb_a_member_of_a_merge_source_is_not_replaced(maria, monkeypatch, capsys):
    """Target ``m2``, a member of the ``MRG_MyISAM`` source, is not replaced: the source would no
    longer be readable."""
    base, m1, m2, source = (maria.name(n) for n in ("base", "m1", "m2", "src"))
    maria.create_patients(base, n=40)
    for member, rows in ((m1, "patient_id < 20"), (m2, "patient_id >= 20")):
        maria.execute(f"CREATE TABLE `{member}` ENGINE=MyISAM SELECT * FROM `{base}` WHERE {rows}")
    maria.execute(f"CREATE TABLE `{source}` LIKE `{m1}`")
    maria.execute(f"ALTER TABLE `{source}` ENGINE=MERGE UNION=(`{m1}`, `{m2}`)")
    before = maria.rows(source, order="patient_id"), maria.rows(m2, order="patient_id")
    err = _refused_before_any_work(monkeypatch, maria, _replace_config(maria, source, m2), capsys)
    assert f"The target table {m2} exists and is not a release tclose published" in err
    assert (maria.rows(source, order="patient_id"), maria.rows(m2, order="patient_id")) == before


def _through_a_function(db) -> tuple[str, str, list[str]]:
    """(source, target, cleanup statements): a source view that reads the target table
    through a function of the database (the guard on the tables a view reads cannot see it)."""
    source, target, fn = db.name("src"), db.name("inner"), db.name("fn")
    db.create_patients(target, n=40)
    q = db.quote
    if db.dialect == "postgresql":
        db.execute(
            f"CREATE FUNCTION {q(fn)}() RETURNS TABLE (patient_id integer, name varchar(60), "
            "age integer, zip integer, admission_day integer, length_of_stay integer, "
            "procedures integer, diagnoses integer, severity double precision, charge double "
            "precision, ward varchar(40), note text, code varchar(16)) LANGUAGE sql STABLE AS "
            f"'SELECT * FROM {q(target)}'"
        )
        db.execute(f"CREATE VIEW {q(source)} AS SELECT * FROM {q(fn)}()")
        return source, target, [f"DROP FUNCTION {q(fn)}() CASCADE"]
    if db.dialect == "mysql":
        base = db.name("base")
        db.create_patients(base, n=40)
        db.execute(
            f"CREATE FUNCTION {q(fn)}(i INT) RETURNS DOUBLE READS SQL DATA "
            f"RETURN (SELECT charge FROM {q(target)} WHERE patient_id = i)"
        )
        columns = "patient_id, name, age, zip, admission_day, length_of_stay, procedures"
        db.execute(
            f"CREATE VIEW {q(source)} AS SELECT {columns}, diagnoses, severity, "
            f"{q(fn)}(patient_id) AS charge, ward, note, code FROM {q(base)}"
        )
        return source, target, [f"DROP VIEW {q(source)}", f"DROP FUNCTION {q(fn)}"]
    db.execute(f"CREATE MACRO {q(fn)}() AS TABLE SELECT * FROM {q(target)}")
    db.execute(f"CREATE VIEW {q(source)} AS SELECT * FROM {q(fn)}()")
    return source, target, [f"DROP VIEW {q(source)}", f"DROP MACRO TABLE {q(fn)}"]


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("duckdb", marks=pytest.mark.duckdb),
    ],
)
def test_a_table_a_source_view_reads_through_a_function_is_not_replaced(
    dialect, request, monkeypatch, capsys
):
    """A target that the source view reads through a function (a PostgreSQL SQL function, a MariaDB
    stored function, a DuckDB table macro) is not replaced, and the source stays as it is."""
    db = request.getfixturevalue(FIXTURES[dialect])
    source, target, cleanup = _through_a_function(db)
    try:
        before = db.rows(source, order="patient_id"), db.rows(target, order="patient_id")
        path = _replace_config(db, source, target)
        err = _refused_before_any_work(monkeypatch, db, path, capsys)
        assert "is not a release tclose published" in err
        assert (db.rows(source, order="patient_id"), db.rows(target, order="patient_id")) == before
    finally:
        for statement in cleanup:
            db.execute(statement)


def _helper_named_source(db, request) -> tuple[str, callable]:
    """A database (URL) whose default schema is this test's own, so that a source may bear a
    fixed name; and its cleanup."""
    if db.dialect == "postgresql":
        schema = f"{db.prefix}_own"
        db.execute(f"CREATE SCHEMA {schema}")
        url = sa.make_url(db.url).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(False), lambda: db.execute(f"DROP SCHEMA {schema} CASCADE")
    if db.dialect == "mysql":
        name, url = _other_database(db)
        return url, lambda: db.execute(f"DROP DATABASE `{name}`")
    return db.url, lambda: None


@pytest.mark.parametrize("name", ["tclose_map", "tclose_centroids", "TCLOSE_MAP"])
def test_a_source_named_like_a_helper_table_of_earlier_versions_is_anonymized(
    db, request, name, capsys
):
    """A source named ``tclose_map`` or ``tclose_centroids`` is anonymized: the join's temporary
    helper tables are named per run, so none hides a table of the source's name."""
    url, cleanup = _helper_named_source(db, request)
    try:
        here = type(db)(db.dialect, url, db.tmp_path)
        here.prefix = db.prefix
        here.create_patients(name, n=60)
        source_codes = sorted(r[0] for r in here.rows(name, "code"))
        code, err, _path = here.run_and_verify(here.config(name, "anon"), capsys)
        assert code == 0, err
        assert sorted(r[0] for r in here.rows("anon", "code")) == source_codes
        here.engine.dispose()
    finally:
        cleanup()


# --- the rule: only a release tclose published, still the same, is replaced --------------------


def _recorded(db, target: str) -> list[tuple]:
    """The registry's row for ``target``: (run_id,)."""
    registry = db.quote(RELEASES_TABLE)
    return db.execute(f"SELECT run_id FROM {registry} WHERE name = :n", {"n": target})


def test_a_release_is_recorded_and_replaced_and_its_record_follows(db, tmp_path, capsys):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    for _ in range(2):
        document = db.config(source, target, report={"json": str(tmp_path / "r.json")})
        document["target"]["if_exists"] = "replace"
        assert main(["-q", "run", str(db.write_config(document))]) == 0, capsys.readouterr()
        run_id = json.loads((tmp_path / "r.json").read_text())["run"]["id"]
        assert _recorded(db, target) == [(run_id,)]
    assert db.tables() == {source, target}


def _make_foreign(db, kind: str, target: str, source: str) -> None:
    """Put under ``target`` a table tclose did not publish, of ``kind``."""
    q = db.quote
    if kind == "user":
        db.create(target, [sa.Column("mine", sa.Integer)], [{"mine": 1}, {"mine": 2}])
        return
    db.release(target)
    if kind == "renamed into place":  # the release renamed away, a user's table renamed in
        kept, mine = db.name("kept"), db.name("mine")
        db.create(mine, [sa.Column("mine", sa.Integer)], [{"mine": 1}])
        rename = "RENAME TABLE {} TO {}" if db.dialect == "mysql" else "ALTER TABLE {} RENAME TO {}"
        db.execute(rename.format(q(target), q(kept)))
        db.execute(rename.format(q(mine), q(target)))
    elif kind == "copied back, changed":  # dropped, made again from a copy, one value changed
        copy = db.name("copy")
        db.execute(f"CREATE TABLE {q(copy)} AS SELECT * FROM {q(target)}")
        db.execute(f"DROP TABLE {q(target)}")
        db.execute(f"CREATE TABLE {q(target)} AS SELECT * FROM {q(copy)}")
        db.execute(f"UPDATE {q(target)} SET charge = charge + 1 WHERE tclose_row = 1")
        db.execute(f"DROP TABLE {q(copy)}")
    elif kind == "made like it, other rows":  # its definition (and, on MariaDB, its comment)
        copy = db.name("copy")
        like = {
            "postgresql": "CREATE TABLE {} (LIKE {} INCLUDING ALL)",
            "mysql": "CREATE TABLE {} LIKE {}",
        }.get(db.dialect, "CREATE TABLE {} AS SELECT * FROM {} WHERE 0 = 1")
        db.execute(like.format(q(copy), q(target)))
        db.execute(f"INSERT INTO {q(copy)} SELECT * FROM {q(target)} WHERE tclose_row > 1")
        db.execute(f"DROP TABLE {q(target)}")
        rename = "RENAME TABLE {} TO {}" if db.dialect == "mysql" else "ALTER TABLE {} RENAME TO {}"
        db.execute(rename.format(q(copy), q(target)))
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["user", "renamed into place", "copied back, changed", "made like it, other rows"]
)
def test_replace_refuses_every_table_tclose_did_not_publish(db, monkeypatch, capsys, kind):
    """Any existing table that is not, still, the release the registry records: exit 2 before
    any work (a dry run too), the table as it was."""
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    _make_foreign(db, kind, target, source)
    before = db.rows(target)
    path = _replace_config(db, source, target)
    err = _refused_before_any_work(monkeypatch, db, path, capsys)
    assert f"The target table {target} exists and is not a release tclose published" in err
    assert f"DROP TABLE {target}" in err  # how to proceed
    assert main(["-q", "run", path, "--dry-run"]) == 2
    assert db.rows(target) == before


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["public", "own schema"])
def test_postgresql_a_release_found_through_the_search_path_is_the_one_recorded(pg, capsys, where):
    """The registry is the one of the schema where the table is, however the name reaches it."""
    schema = f"{pg.prefix}_s"
    pg.execute(f"CREATE SCHEMA {schema}")
    try:
        source, target = pg.name("src"), pg.name("anon")
        pg.create_patients(source, n=60)
        qualified = f"{schema}.{target}" if where == "own schema" else target
        assert main(["-q", "run", _replace_config(pg, source, qualified)]) == 0
        assert main(["-q", "run", _replace_config(pg, source, qualified)]) == 0
        # the same name in another schema is another table: never the release
        other = f"public.{target}" if where == "own schema" else f"{schema}.{target}"
        pg.execute(f"CREATE TABLE {other} (mine integer)")
        assert main(["-q", "run", _replace_config(pg, source, other)]) == 2
        assert pg.execute(f"SELECT count(*) FROM {other}") == [(0,)]
        pg.execute(f"DROP TABLE {other}")
    finally:
        pg.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def test_a_release_swapped_for_a_user_table_during_the_run_is_not_replaced(
    dialect, request, monkeypatch, capsys
):
    """The plan found a release; while the run verified its rows someone dropped it and made
    a table of their own under its name: the publish checks again and stops (exit 3)."""
    db = request.getfixturevalue(FIXTURES[dialect])
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    db.release(target)
    verify = runner._verify_staging

    def swapped(*args, **kwargs):
        db.execute(f"DROP TABLE {db.quote(target)}")
        db.create(target, [sa.Column("mine", sa.Integer)], [{"mine": 7}])
        return verify(*args, **kwargs)

    monkeypatch.setattr(runner, "_verify_staging", swapped)
    assert main(["-q", "run", _replace_config(db, source, target)]) == 3
    err = capsys.readouterr().err
    assert "is not a release tclose published" in err and "Nothing was published" in err
    assert db.rows(target) == [(7,)]
    assert db.tables() == {source, target}


@pytest.mark.duckdb
def test_a_parquet_target_is_replaced_only_while_it_holds_the_rows_tclose_wrote(
    sqlite_run, duck, monkeypatch, capsys
):
    """A file's mark is its metadata (run and content): a user's Parquet file, and a release
    rewritten with one value changed but its metadata copied, are refused; the release itself
    is replaced."""
    target = sqlite_run.tmp_path / "anon.parquet"
    document = sqlite_run.config()
    document["target"] = {"url": f"parquet:///{target}", "table": "anon", "if_exists": "replace"}
    path = str(sqlite_run.write(document))
    assert main(["-q", "run", path]) == 0
    assert main(["-q", "run", path]) == 0  # its own release
    connection = duck.connect()
    metadata = connection.execute(
        f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{target}')"
    ).fetchall()
    kv = ", ".join(f"{k}: '{v}'" for k, v in metadata if k.startswith("tclose_"))
    changed = sqlite_run.tmp_path / "changed.parquet"
    connection.execute(
        f"COPY (SELECT * REPLACE (CASE WHEN tclose_row = 1 THEN charge + 1 ELSE charge END AS "
        f"charge) FROM '{target}' ORDER BY tclose_row) TO '{changed}' "
        f"(FORMAT parquet, KV_METADATA {{{kv}}})"
    )
    mine = sqlite_run.tmp_path / "mine.parquet"
    connection.execute(f"COPY (SELECT 1 AS x) TO '{mine}' (FORMAT parquet)")
    connection.close()
    for foreign in (changed, mine):
        target.write_bytes(foreign.read_bytes())
        err = _refused_before_any_work(monkeypatch, sqlite_run, path, capsys)
        assert f"The target file {target} exists and is not a release" in err
        assert target.read_bytes() == foreign.read_bytes()


# --- reserved names ---------------------------------------------------------------------------

RESERVED = [
    "tclose_owned",
    "TCLOSE_OWNED",
    "Tclose_Releases",
    "main.tclose_releases",
    "x__tclose_s_0123456789ab",
    "X__TCLOSE_O_0123456789AB",
    "__tclose_m_abcdef012345",
    "tclose_staging.anon",
]


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("key", ["source", "target", "audit"])
def test_a_name_tclose_keeps_for_itself_is_refused_everywhere(sqlite_run, capsys, key, name):
    assert reserved(TableName.parse(name)) is not None
    document = sqlite_run.config()
    if key == "source":
        document["source"]["table"] = name
    elif key == "target":
        document["target"] = {"table": name, "if_exists": "replace"}
    else:
        document["report"] = {"table": name}
    tables = sqlite_run.tables()
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    err = capsys.readouterr().err
    assert f"==> At {'report' if key == 'audit' else key} ==> At key: table" in err
    assert "cannot be used" in err
    assert sqlite_run.tables() == tables


def test_reserved_names_on_every_database(db, capsys):
    source = db.name("src")
    db.create_patients(source, n=20)
    schema = {"postgresql": "public", "mysql": sa.make_url(db.url).database}.get(db.dialect, "main")
    for target in (RELEASES_TABLE, f"{schema}.{RELEASES_TABLE.upper()}", f"{source}__tclose_c_0a"):
        assert main(["-q", "run", _replace_config(db, source, target)]) == 2
        assert "cannot be used" in capsys.readouterr().err
    assert db.tables() == {source}


def test_a_name_a_user_may_give_is_not_reserved():
    for name in ("tclose_map", "x__tclose_old", "x__tclose_staging", "tclose_audit", "releases"):
        assert reserved(TableName.parse(name)) is None, name


def test_the_join_helpers_are_named_per_run_and_reserved(db, monkeypatch, capsys):
    """Every table a run creates has a name no user table may bear (so no temporary helper
    hides a table of the user), with the run's id in it; and a source bearing the very name
    of a run's helper is refused."""
    created: list[str] = []

    def record(table, _connection, **_kw):
        created.append(str(table.name))

    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    path = str(db.write_config(db.config(source, target, report={"json": "r.json"})))
    monkeypatch.chdir(db.tmp_path)
    sa.event.listen(sa.Table, "before_create", record)
    try:
        assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    finally:
        sa.event.remove(sa.Table, "before_create", record)
    run_id = json.loads((db.tmp_path / "r.json").read_text())["run"]["id"]
    helpers = [n for n in created if n not in (RELEASES_TABLE,)]
    assert helpers, created
    if db.dialect != "mysql":  # MariaDB's staging table is made by SQL, not SQLAlchemy
        assert any("__tclose_m_" in n for n in helpers), helpers
    for name in helpers:
        assert reserved(TableName(None, name)) is not None, name
        assert run_id[:12] in name, name
    helper = next(n for n in helpers if "__tclose_m_" in n or "__tclose_s_" in n)
    db.create_patients(helper, n=20)
    assert main(["-q", "run", str(db.write_config(db.config(helper, db.name("b"))))]) == 2
    assert "cannot be used" in capsys.readouterr().err
