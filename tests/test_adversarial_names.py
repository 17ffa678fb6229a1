"""Adversarial: tables that look like tclose's bookkeeping, long names, odd keys.

tclose drops only tables it recorded as its own; a user's table is never dropped because of its
name, whatever the dialect (MariaDB's DDL commits at once, so a wrong drop there is for good).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tclose.cli import main


@pytest.mark.parametrize("suffix", ["__tclose_old", "__tclose_staging", "__tclose_s_0a1b2c3d4e5f"])
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
def test_mariadb_role_without_drop_leaves_an_empty_registered_staging_table(maria, capsys):
    user = f"{maria.prefix}_nodrop"
    database = maria.engine.url.database
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=40)
    maria.create(target, [sa.Column("old", sa.Integer)], [{"old": 1}])
    maria.execute(f"CREATE USER '{user}'@'%'")
    try:
        maria.execute(
            f"GRANT SELECT, INSERT, CREATE, CREATE TEMPORARY TABLES ON `{database}`.* TO '{user}'@'%'"
        )
        maria.execute(f"GRANT DELETE ON `{database}`.`tclose_owned` TO '{user}'@'%'")
        document = maria.config(source, target)
        document["source"]["url"] = maria.engine.url.set(username=user).render_as_string(False)
        document["target"]["if_exists"] = "replace"
        assert main(["run", str(maria.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert "not alter or drop them" in err
        (left,) = maria.tables() - {source, target}
        assert maria.rows(left) == []  # failed before any row was written
        assert maria.rows(target) == [(1,)]
        assert f"could not drop the staging table {left}" in err
    finally:
        maria.execute(f"DROP USER '{user}'@'%'")
    # The next run that may drop tables removes it: it is registered as tclose's.
    assert main(["-q", "run", str(maria.write_config(maria.config(source, maria.name("b"))))]) == 0
    assert maria.tables() == {source, target, maria.name("b")}
