"""Bad input on each dialect: a clear error, the contract's exit code, and nothing written."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tclose.app.cli import main


@pytest.fixture
def patients(db):
    """``db`` with a 60-row patients table; returns (db, source, target)."""
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    return db, source, target


def _run(db, document, capsys) -> tuple[int, str]:
    code = main(["run", str(db.write_config(document)), "-q"])
    return code, " ".join(capsys.readouterr().err.split())


def test_null_in_a_quasi_identifier(patients, capsys):
    db, source, target = patients
    db.execute(f"UPDATE {db.quote(source)} SET age = NULL WHERE patient_id IN (3, 5)")
    code, err = _run(db, db.config(source, target), capsys)
    assert code == 3
    assert "'age'" in err and "2 missing (NULL) value(s) in 60 rows" in err
    assert db.tables() == {source}


def test_text_in_a_numeric_quasi_identifier(db, capsys):
    source, target = db.name("texty"), db.name("anon")
    rows = [
        {"id": i, "age": 20 + i, "zip": "unknown" if i == 9 else str(10000 + i), "charge": float(i)}
        for i in range(1, 31)
    ]
    db.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("age", sa.Integer),
            sa.Column("zip", sa.String(12)),
            sa.Column("charge", sa.Double),
        ],
        rows,
    )
    document = db.config(source, target)
    document["source"]["key"] = "id"
    document["attributes"] = {
        "age": {"role": "quasi_identifier"},
        "zip": {"role": "quasi_identifier", "type": "numeric"},
        "charge": {"role": "confidential"},
    }
    code, err = _run(db, document, capsys)
    assert code == 3
    assert "'zip'" in err and "1 row(s) hold non-numeric values" in err
    assert db.tables() == {source}


def test_unknown_column(patients, capsys):
    db, source, target = patients
    document = db.config(source, target)
    document["attributes"]["weight"] = {"role": "quasi_identifier", "type": "numeric"}
    code, err = _run(db, document, capsys)
    assert code == 3
    assert "Column 'weight' (attributes.weight) does not exist" in err and "'age'" not in err
    assert db.tables() == {source}


def test_missing_table(db, capsys):
    missing = db.name("no_such_table")
    other = db.name("other")
    db.create(other, [sa.Column("x", sa.Integer)], [])  # (and the SQLite file exists)
    code, err = _run(db, db.config(missing, db.name("anon")), capsys)
    assert code == 3
    assert f"Table {missing} does not exist" in err
    # The tables that do exist are named (the first 20 in name order: the servers' test
    # databases are shared, so others may come first).
    assert other in err or "in all)" in err
    assert "has the tables:" in err
    assert db.tables() == {other}


def test_existing_target_with_if_exists_fail(patients, capsys):
    db, source, target = patients
    db.create(target, [sa.Column("old", sa.Integer)], [{"old": 1}, {"old": 2}])
    code, err = _run(db, db.config(source, target), capsys)
    assert code == 3
    assert f"The target table {target} already exists" in err and "if_exists" in err
    assert db.rows(target) == [(1,), (2,)]
    assert db.tables() == {source, target}


@pytest.fixture
def reader_url(patients):
    """A URL of the database for a login that may read the source but not create tables."""
    db, source, _target = patients
    user = f"{db.prefix}_reader"
    if db.dialect == "postgresql":
        db.execute(f"CREATE ROLE {user} LOGIN")
        db.execute(f"GRANT SELECT ON {db.quote(source)} TO {user}")
        db.execute(f"REVOKE CREATE ON SCHEMA public FROM PUBLIC, {user}")
        yield db.engine.url.set(username=user, password=None).render_as_string(False)
        db.execute(f"REVOKE ALL ON {db.quote(source)} FROM {user}")
        db.execute(f"DROP ROLE {user}")
    elif db.dialect == "mysql":
        db.execute(f"CREATE USER '{user}'@'%'")
        database = db.engine.url.database
        db.execute(f"GRANT SELECT ON `{database}`.`{source}` TO '{user}'@'%'")
        yield db.engine.url.set(username=user, password=None).render_as_string(False)
        db.execute(f"DROP USER '{user}'@'%'")
    elif db.dialect == "duckdb":  # DuckDB has no logins: the file opened read-only
        yield f"duckdb:///{db.engine.url.database}?access_mode=read_only"
    else:
        yield f"sqlite:///file:{db.engine.url.database}?mode=ro&uri=true"


def test_no_permission_to_create_tables(patients, reader_url, capsys):
    db, source, target = patients
    document = db.config(source, target)
    document["source"]["url"] = reader_url
    code, err = _run(db, document, capsys)
    assert code == 3
    # SQLite and DuckDB refuse the staging table; PostgreSQL already refuses the trial CREATE
    # TABLE that says where the target would be created, MariaDB to say whether it exists.
    assert (
        f"creating the staging table {target}__tclose_s_" in err
        or f"resolving the table name {target} " in err
        or f"looking for table {target}" in err
    )
    words = ("permission denied", "command denied", "readonly", "read-only")
    assert any(word in err for word in words)
    assert db.tables() == {source}
