"""Adversarial: UUIDs of any version or variant published into another kind of database.

PostgreSQL's ``uuid`` holds any 128 bits, not only RFC 4122 (RFC 9562) UUIDs: the nil and max
UUIDs, version 0, the NCS, Microsoft and future variants. MariaDB's ``UUID`` (10.7+) and
DuckDB's ``UUID`` hold them too; SQLite has no UUID type. Every such value must be published
exactly (``tclose verify --report`` verified), whichever way it goes, or the run refused before
the write naming the column, the problem and the rows; never a driver's raw error or an internal
one.

A SQLite column *declared* ``UUID`` has NUMERIC affinity, and SQLAlchemy reflects ``NUMERIC``:
its UUID texts are published as text, never into a decimal column of the target.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from tclose.app.cli import main

#: Values PostgreSQL's uuid holds that are not RFC 4122 variant-1 UUIDs of versions 1-8, and
#: ordinary ones (versions 1 and 4), so that both kinds are in one column.
ODD = [
    "00000000-0000-0000-c000-000000000000",  # Microsoft variant
    "ffffffff-ffff-ffff-ffff-ffffffffffff",  # max (future variant)
    "00000000-0000-0000-0000-000000000000",  # nil (NCS variant, version 0)
    "12345678-9abc-0def-8123-456789abcdef",  # version 0, RFC variant
    "12345678-9abc-fdef-e123-456789abcdef",  # version 15, future variant
    "6ba7b810-9dad-01d1-00b4-00c04fd430c8",  # NCS variant
]
ORDINARY = [
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",  # version 1 (the DNS namespace)
    "16fd2706-8baf-433b-82eb-8c7f7a0a2ad5",  # version 4
]
MARIA_DRIVERS = ["pymysql", "mysqldb", "mariadbconnector"]


def _add_uuids(db, table: str, values: list[str | None], sql_type: str = "uuid") -> None:
    """Column ``extra`` of ``sql_type``: ``values[i % len(values)]`` in row ``i`` (bound as
    text), NULL in every fifth row."""
    db.execute(f"ALTER TABLE {db.quote(table)} ADD COLUMN extra {sql_type}")
    cases = " ".join(f"WHEN {n} THEN :v{n}" for n in range(len(values)))
    value = f"CASE patient_id % {len(values)} {cases} END"
    if db.dialect == "postgresql":
        value = f"CAST({value} AS uuid)"
    db.execute(
        f"UPDATE {db.quote(table)} SET extra = {value} WHERE patient_id % 5 <> 0",
        {f"v{n}": v for n, v in enumerate(values)},
    )


def _run_into(source_db, source: str, target_db, target: str, capsys) -> tuple[int, str, str]:
    """``tclose run`` with ``extra`` passing through into ``target_db``; if it published,
    ``tclose verify --report`` must say verified. The exit code, the error output and the
    configuration's path."""
    target_db.execute("SELECT 1")  # a SQLite target file must exist
    document = source_db.config(source, target)
    document["target"]["url"] = target_db.url
    document["attributes"]["extra"] = {"role": "other"}
    return source_db.run_and_verify(document, capsys)


def _uuids(db, table: str) -> list[str | None]:
    """Column ``extra`` as canonical UUID text (``None`` for NULL), sorted."""
    text = {"postgresql": "CAST(extra AS text)", "duckdb": "CAST(extra AS VARCHAR)"}
    found = []
    for (value,) in db.rows(table, text.get(db.dialect, "extra")):
        found.append(None if value is None else str(uuid.UUID(str(value))))
    return sorted(found, key=repr)


def _texts(db, table: str) -> list[str | None]:
    """Column ``extra`` exactly as stored (its text), sorted."""
    text = {"postgresql": "CAST(extra AS text)", "duckdb": "CAST(extra AS VARCHAR)"}
    return sorted((r[0] for r in db.rows(table, text.get(db.dialect, "extra"))), key=repr)


def _with_driver(maria, driver: str) -> None:
    maria.url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}").render_as_string(False)


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize("driver", MARIA_DRIVERS)
def test_postgresql_uuids_of_any_variant_into_mariadb_are_published_exactly(
    pg, maria, capsys, driver
):
    source, target = pg.name("src"), maria.name("anon")
    pg.create_patients(source, n=80)
    _add_uuids(pg, source, ODD + ORDINARY)
    _with_driver(maria, driver)
    code, err, path = _run_into(pg, source, maria, target, capsys)
    assert code == 0, err
    assert maria.column_types(target)["extra"] == "UUID"
    assert _uuids(maria, target) == _uuids(pg, source)
    assert _uuids(maria, target).count(None) == 16

    # The content digest covers the column: one UUID changed after publication fails it.
    maria.execute(
        f"UPDATE {maria.quote(target)} SET extra = 'ffffffff-ffff-ffff-ffff-fffffffffffe' "
        "WHERE extra = 'ffffffff-ffff-ffff-ffff-ffffffffffff' ORDER BY tclose_row LIMIT 1"
    )
    report = str(pg.tmp_path / "report.json")
    assert main(["-q", "verify", path, "--report", report]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out


@pytest.mark.postgres
@pytest.mark.mysql
def test_a_uuid_column_of_nulls_only_into_mariadb(pg, maria, capsys):
    source, target = pg.name("src"), maria.name("anon")
    pg.create_patients(source, n=40)
    pg.execute(f"ALTER TABLE {pg.quote(source)} ADD COLUMN extra uuid")
    code, err, _ = _run_into(pg, source, maria, target, capsys)
    assert code == 0, err
    assert _uuids(maria, target) == [None] * 40


@pytest.mark.postgres
@pytest.mark.parametrize(
    "database", ["lite", "pg_other", pytest.param("duckdb_db", marks=pytest.mark.duckdb)]
)
def test_postgresql_uuids_of_any_variant_into_another_database(request, pg, capsys, database):
    db = request.getfixturevalue(database)
    source, target = pg.name("src"), db.name("anon")
    pg.create_patients(source, n=80)
    _add_uuids(pg, source, ODD + ORDINARY)
    code, err, _ = _run_into(pg, source, db, target, capsys)
    assert code == 0, err
    assert _uuids(db, target) == _uuids(pg, source)
    expected = {"sqlite": "CHAR(32)", "postgresql": "UUID", "duckdb": "UUID"}[db.dialect]
    assert db.column_types(target)["extra"] == expected


@pytest.mark.mysql
@pytest.mark.parametrize(
    "database",
    [
        "lite",
        pytest.param("pg", marks=pytest.mark.postgres),
        pytest.param("duckdb_db", marks=pytest.mark.duckdb),
    ],
)
@pytest.mark.parametrize("driver", MARIA_DRIVERS)
def test_mariadb_uuids_of_any_variant_into_another_database(
    request, maria, capsys, database, driver
):
    db = request.getfixturevalue(database)
    source, target = maria.name("src"), db.name("anon")
    maria.create_patients(source, n=80)
    _add_uuids(maria, source, ODD + ORDINARY, "UUID")
    _with_driver(maria, driver)
    code, err, _ = _run_into(maria, source, db, target, capsys)
    assert code == 0, err
    assert _uuids(db, target) == _uuids(maria, source)


@pytest.mark.duckdb
@pytest.mark.parametrize(
    "database",
    [
        pytest.param("maria", marks=pytest.mark.mysql),
        pytest.param("pg", marks=pytest.mark.postgres),
        "lite",
    ],
)
def test_duckdb_uuids_of_any_variant_into_another_database(request, duckdb_db, capsys, database):
    db = request.getfixturevalue(database)
    source, target = duckdb_db.name("src"), db.name("anon")
    duckdb_db.create_patients(source, n=80)
    _add_uuids(duckdb_db, source, ODD + ORDINARY, "UUID")
    code, err, _ = _run_into(duckdb_db, source, db, target, capsys)
    assert code == 0, err
    assert _uuids(db, target) == _uuids(duckdb_db, source)


#: What a SQLite column declared UUID may hold: any spelling (SQLite checks nothing).
SPELLINGS = [
    *ODD,
    "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
    "6BA7B810-9DAD-11D1-80B4-00C04FD430C8",
    "6ba7b8109dad11d180b400c04fd430c8",
    "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "not a uuid",
    "",
]
TARGETS = [
    pytest.param("maria", marks=pytest.mark.mysql),
    pytest.param("pg", marks=pytest.mark.postgres),
    pytest.param("duckdb_db", marks=pytest.mark.duckdb),
]


@pytest.mark.parametrize("database", TARGETS)
@pytest.mark.parametrize("declared", ["UUID", "guid", "UNIQUEIDENTIFIER", "Uuid(36)"])
def test_a_sqlite_column_declared_uuid_is_published_as_its_text(
    request, lite, capsys, database, declared
):
    """A SQLite column declared ``UUID`` (NUMERIC affinity, reflected as ``NUMERIC``) is published
    as its text into every other kind of database, never as a decimal column."""
    db = request.getfixturevalue(database)
    source, target = lite.name("src"), db.name("anon")
    lite.create_patients(source, n=len(SPELLINGS) * 5)
    _add_uuids(lite, source, SPELLINGS, declared)
    code, err, _ = _run_into(lite, source, db, target, capsys)
    assert code == 0, err
    assert _texts(db, target) == _texts(lite, source)
    assert "" in _texts(db, target) and None in _texts(db, target)


@pytest.mark.parametrize("database", TARGETS)
def test_a_uuid_sqlite_stored_as_a_number_is_refused_naming_the_column(
    request, lite, capsys, database
):
    """32 decimal digits in a column declared UUID: SQLite stored them as an integer (0) or a
    real (rounded), which is not the UUID any more."""
    db = request.getfixturevalue(database)
    source, target = lite.name("src"), db.name("anon")
    lite.create_patients(source, n=40)
    digits = ["00000000000000000000000000000000", "12345678901234567890123456789012"]
    _add_uuids(lite, source, [*digits, ODD[0]], "UUID")
    code, err, _ = _run_into(lite, source, db, target, capsys)
    assert code == 3, err
    assert "Column 'extra' (declared UUID) holds values that are not text" in err, err
    assert "in 22 row(s)" in err, err  # rows 1..40 with i % 3 in (0, 1), less every fifth
    assert db.tables() == set()


@pytest.mark.parametrize("database", TARGETS)
def test_uuids_stored_as_blobs_in_a_sqlite_uuid_column_are_refused(request, lite, capsys, database):
    """16-byte blobs (``uuid.bytes``) in a column declared UUID: not text, named."""
    db = request.getfixturevalue(database)
    source, target = lite.name("src"), db.name("anon")
    lite.create_patients(source, n=40)
    _add_uuids(lite, source, [ODD[0]], "UUID")
    lite.execute(
        f"UPDATE {lite.quote(source)} SET extra = :b WHERE patient_id <= 3",
        {"b": uuid.UUID(ODD[1]).bytes},
    )
    code, err, _ = _run_into(lite, source, db, target, capsys)
    assert code == 3, err
    assert "Column 'extra' (declared UUID) holds values that are not text (blobs" in err, err
    assert "in 3 row(s)" in err, err
    assert db.tables() == set()


@pytest.mark.parametrize("database", TARGETS)
def test_text_in_a_sqlite_decimal_column_is_refused_naming_the_column(
    request, lite, capsys, database
):
    """Text in a SQLite decimal column stops the run before the write (exit 3), naming the column
    and counting the rows, on every target kind: never the target's error or an internal one."""
    db = request.getfixturevalue(database)
    source, target = lite.name("src"), db.name("anon")
    lite.create_patients(source, n=40)
    _add_uuids(lite, source, ["n/a", "12.5", "NaN"], "DECIMAL(10, 2)")
    code, err, _ = _run_into(lite, source, db, target, capsys)
    assert code == 3, err
    assert "Column 'extra' (declared DECIMAL(10, 2)) holds values that are not numbers" in err
    assert "in 11 row(s)" in err, err  # i % 3 == 0 in 1..40, less every fifth
    assert db.tables() == set()


def test_a_sqlite_column_declared_uuid_into_sqlite_keeps_its_type(lite, tmp_path, capsys):
    """Into the same database the column is copied as it is, declared UUID."""
    source, target = lite.name("src"), lite.name("anon")
    lite.create_patients(source, n=len(SPELLINGS) * 5)
    _add_uuids(lite, source, [*SPELLINGS, "00000000000000000000000000000000"], "UUID")
    document = lite.config(source, target)
    document["attributes"]["extra"] = {"role": "other"}
    path = str(lite.write_config(document))
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    declared = f"SELECT type FROM pragma_table_info('{target}') WHERE name = 'extra'"
    assert lite.execute(declared) == [("UUID",)]
    assert _texts(lite, target) == _texts(lite, source)


def test_duckdb_names_a_value_that_is_not_a_number_for_a_decimal_column():
    """The guard behind the SQLite check: any source whose decimal column carries a text gets an
    error naming the column, never an internal error."""
    pytest.importorskip("duckdb")
    from tclose.connectors.duckdb.types import _exact_decimals
    from tclose.errors import DataError

    with pytest.raises(DataError, match=r"Column 'amount' holds values that are not numbers in 2 "):
        _exact_decimals(["1.5", b"\x00", None, 2], "amount", sa.Numeric(10, 2))
