"""Parquet and CSV files as sources and targets (connector ``files``, through DuckDB).

A Parquet or CSV file is anonymized into a Parquet file or a DuckDB table; the source file is
never modified; a target file is written whole or not at all; bad combinations are refused.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.core.runner import run
from tclose.errors import ConfigError, DataError, VerificationError

pytestmark = pytest.mark.duckdb

N = 300


def _write_source(duck, path: Path, fmt: str = "parquet") -> None:
    """A patients file with exact types: DOUBLE, DECIMAL, TIMESTAMP(TZ), BIGINT beyond 2**53."""
    copy = "(FORMAT parquet)" if fmt == "parquet" else "(HEADER)"
    duck.connect().execute(
        f"""COPY (SELECT i AS id, 'name ' || i AS name,
                  20 + (i * 7) % 50 AS age, 10000 + (i * 31) % 900 AS zip,
                  (i * 13) % 17 AS los, ((i * 37) % 500)::DOUBLE / 7 AS charge,
                  (i * 1000 + 0.25)::DECIMAL(18, 4) AS amount,
                  TIMESTAMP '2021-05-04 03:02:01.123456' + i * INTERVAL 1 HOUR AS at,
                  TIMESTAMPTZ '2021-05-04 03:02:01+02' + i * INTERVAL 1 DAY AS at_tz,
                  4611686018427387904 + i AS huge,
                  CASE WHEN i % 7 = 0 THEN NULL ELSE i / 3 END AS ratio
              FROM range(1, {N + 1}) t(i)) TO '{path}' {copy}"""
    )


def _document(source_url: str, source_table: str, target_url: str, target_table: str) -> dict:
    passthrough = ("amount", "at", "at_tz", "huge", "ratio")
    return {
        "source": {"url": source_url, "table": source_table, "key": "id"},
        "target": {"url": target_url, "table": target_table, "if_exists": "fail"},
        "attributes": {
            "name": {"role": "identifier"},
            "age": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "zip": {"role": "quasi_identifier", "type": "numeric"},
            "los": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric"},
            **{c: {"role": "other", "allow_unique": True} for c in passthrough},
        },
        "privacy": {"k": 3, "t": 0.3},
        "algorithm": {"name": "t-first", "options": {}},
    }


def _write_config(tmp_path: Path, document: dict) -> Path:
    import yaml

    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_old(duck, path: Path) -> bytes:
    """An older Parquet file at ``path`` (a target replaces only a Parquet file); its bytes."""
    duck.connect().execute(f"COPY (SELECT 1 AS old) TO '{path}' (FORMAT parquet)")
    return path.read_bytes()


def _rows(duck, relation: str, columns: str) -> list[tuple]:
    return duck.connect().execute(f"SELECT {columns} FROM {relation} ORDER BY ALL").fetchall()


def _types(duck, relation: str) -> dict[str, str]:
    return {
        r[0]: r[1] for r in duck.connect().execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
    }


def test_parquet_to_parquet_keeps_types_and_never_touches_the_source(duck, tmp_path):
    source, target = tmp_path / "patients.parquet", tmp_path / "anon.parquet"
    _write_source(duck, source)
    before = _digest(source)
    config = _write_config(
        tmp_path, _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
    )

    assert main(["run", str(config), "-q", "--report", str(tmp_path / "r.json")]) == 0

    assert _digest(source) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "anon.parquet",
        "patients.parquet",
        "r.json",
        "run.yaml",
    ]  # no temporary file left
    src, out = f"'{source}'", f"'{target}'"
    kept = 'charge, amount, "at", at_tz, huge, ratio'
    assert _rows(duck, out, kept) == _rows(duck, src, kept)  # exact, 2**62 + i and NULLs included
    source_types, target_types = _types(duck, src), _types(duck, out)
    for column in ("charge", "amount", "at", "at_tz", "huge", "ratio", "age"):
        assert target_types[column] == source_types[column], column
    assert target_types["amount"] == "DECIMAL(18,4)" and target_types["charge"] == "DOUBLE"
    assert target_types["huge"] == "BIGINT"  # 2**62 + i: exact only as an integer
    assert target_types["zip"] == "DOUBLE"  # a mean
    assert "name" not in target_types and "id" not in target_types
    ((smallest,),) = (
        duck.connect()
        .execute(f"SELECT min(n) FROM (SELECT count(*) n FROM {out} GROUP BY age, zip, los)")
        .fetchall()
    )
    assert smallest >= 3
    physical = [r[0] for r in duck.connect().execute(f"SELECT huge FROM {out}").fetchall()]
    assert physical != sorted(physical)  # stored in the shuffled order of tclose_row
    assert main(["verify", str(config), "--report", str(tmp_path / "r.json")]) == 0


def test_csv_to_a_duckdb_table(duck, duckdb_file, tmp_path):
    source = tmp_path / "patients.csv"
    _write_source(duck, source, "csv")
    before = _digest(source)
    url = duckdb_file(tmp_path / "out.duckdb")
    config = _write_config(tmp_path, _document(f"csv:///{source}", "patients", url, "anon"))

    result = run(load_config(config))

    assert result.published and result.verification.passed
    assert _digest(source) == before
    database = duck.connect(str(tmp_path / "out.duckdb"))
    assert database.execute("SELECT count(*) FROM anon").fetchall() == [(N,)]
    amounts = database.execute("SELECT amount FROM anon ORDER BY amount").fetchall()
    assert [a for (a,) in amounts] == [Decimal(f"{i * 1000}.25") for i in range(1, N + 1)]
    (first,) = database.execute('SELECT min("at") FROM anon').fetchone()
    assert first == dt.datetime(2021, 5, 4, 4, 2, 1, 123456)


def test_duckdb_table_to_parquet(duck, tmp_path):
    database = tmp_path / "in.duckdb"
    connection = duck.connect(str(database))
    _write_source(duck, tmp_path / "p.parquet")
    connection.execute(f"CREATE TABLE patients AS SELECT * FROM '{tmp_path / 'p.parquet'}'")
    connection.close()
    target = tmp_path / "anon.parquet"
    document = _document(f"duckdb:///{database}", "patients", f"parquet:///{target}", "anon")
    assert run(load_config(_write_config(tmp_path, document))).published
    assert _rows(duck, f"'{target}'", "huge") == _rows(duck, f"'{tmp_path / 'p.parquet'}'", "huge")


def test_an_existing_target_file_is_kept_unless_replace(duck, tmp_path):
    source, target = tmp_path / "patients.parquet", tmp_path / "anon.parquet"
    _write_source(duck, source)
    old = _write_old(duck, target)
    document = _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
    with pytest.raises(DataError, match="already exists"):
        run(load_config(_write_config(tmp_path, document)))
    assert target.read_bytes() == old

    document["target"]["if_exists"] = "replace"
    with pytest.raises(ConfigError, match="is not a release tclose published"):  # a user's file
        run(load_config(_write_config(tmp_path, document)))
    assert target.read_bytes() == old
    target.unlink()
    assert run(load_config(_write_config(tmp_path, document))).published
    assert run(load_config(_write_config(tmp_path, document))).published  # its own release
    assert _rows(duck, f"'{target}'", "count(*)") == [(N,)]


def test_a_failed_verification_writes_no_file(duck, tmp_path, singletons_registry):
    source, target = tmp_path / "patients.parquet", tmp_path / "anon.parquet"
    _write_source(duck, source)
    document = _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
    document["algorithm"] = {"name": "singletons"}
    with pytest.raises(VerificationError):
        run(load_config(_write_config(tmp_path, document)), registry=singletons_registry)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["patients.parquet", "run.yaml"]


def test_a_failure_while_writing_the_file_leaves_the_target_as_it_was(duck, tmp_path, monkeypatch):
    from tclose.connectors import files

    source, target = tmp_path / "patients.parquet", tmp_path / "anon.parquet"
    _write_source(duck, source)
    document = _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
    document["target"]["if_exists"] = "replace"
    assert run(load_config(_write_config(tmp_path, document))).published  # a release
    old = target.read_bytes()

    def broken_flush(path):  # the COPY has written the temporary file; the disk then fails
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files, "_flush", broken_flush)
    with pytest.raises(OSError, match="Input/output"):
        run(load_config(_write_config(tmp_path, document)))
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "anon.parquet",
        "patients.parquet",
        "run.yaml",
    ]


@pytest.mark.parametrize(
    ("source", "table", "target", "target_table", "error", "message"),
    [
        (
            "patients.csv",
            "patients",
            "anon.csv",
            "anon",
            ConfigError,
            "CSV file can be a source only",
        ),
        (
            "patients.parquet",
            "patients",
            "anon.parquet",
            "other",
            ConfigError,
            r"named after the file: 'anon'. To publish 'other', name its own file: "
            r"target.url: parquet:///.*/other.parquet and target.table: other",
        ),
        (
            "patients.parquet",
            "people",
            "anon.parquet",
            "anon",
            ConfigError,
            "source.table: patients",
        ),
        ("missing.parquet", "missing", "anon.parquet", "anon", DataError, "does not exist"),
    ],
)
def test_bad_combinations_are_refused(
    duck, tmp_path, source, table, target, target_table, error, message
):
    _write_source(duck, tmp_path / "patients.parquet")
    _write_source(duck, tmp_path / "patients.csv", "csv")
    url = {"parquet": "parquet", "csv": "csv"}
    document = _document(
        f"{url[source.rsplit('.', 1)[1]]}:///{tmp_path / source}",
        table,
        f"{url[target.rsplit('.', 1)[1]]}:///{tmp_path / target}",
        target_table,
    )
    with pytest.raises(error, match=message):
        run(load_config(_write_config(tmp_path, document)))
    assert not (tmp_path / target).exists()


def test_duckdb_native_types_round_trip(duck, duckdb_file, tmp_path):
    """Types without a SQLAlchemy equivalent (HUGEINT, lists, structs) keep their exact DuckDB
    type within a DuckDB file (the in-database join) and into a Parquet file (streamed)."""
    path = tmp_path / "db.duckdb"
    url = duckdb_file(path)
    connection = duck.connect(str(path))
    connection.execute(
        f"""CREATE TABLE patients AS SELECT i AS id, 'n' || i AS name, 20 + i % 50 AS age,
                i % 900 AS zip, i % 17 AS los, (i % 500)::DOUBLE / 7 AS charge,
                12345678901234567890123456789012345678::HUGEINT - i AS amount,
                [i, i + 1] AS "at", {{'a': i, 'b': 'x' || i}} AS at_tz,
                (i / 7)::DECIMAL(38, 10) AS huge, (i % 100)::TINYINT AS ratio
            FROM range(1, {N + 1}) t(i)"""
    )
    connection.execute("ALTER TABLE patients ADD PRIMARY KEY (id)")
    connection.close()
    expected = {
        "amount": "HUGEINT",
        "at": "BIGINT[]",
        "at_tz": "STRUCT(a BIGINT, b VARCHAR)",
        "huge": "DECIMAL(38,10)",
        "ratio": "TINYINT",
    }
    parquet = tmp_path / "anon.parquet"
    for target_url, relation in ((url, "db.anon"), (f"parquet:///{parquet}", f"'{parquet}'")):
        document = _document(url, "patients", target_url, "anon")
        assert run(load_config(_write_config(tmp_path, document))).published
        database = duck.connect()
        database.execute(f"ATTACH '{path}' AS db (READ_ONLY)")
        out = {
            r[0]: r[1] for r in database.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        }
        if relation == f"'{parquet}'":  # Parquet has no 128-bit integer: exact as a decimal
            expected["amount"] = "DECIMAL(38,0)"
        assert {c: out[c] for c in expected} == expected
        kept = 'amount::VARCHAR, "at", at_tz, huge, ratio'
        assert (
            database.execute(f"SELECT {kept} FROM {relation} ORDER BY ALL").fetchall()
            == database.execute(f"SELECT {kept} FROM db.patients ORDER BY ALL").fetchall()
        )
        database.close()


@pytest.mark.parametrize("if_exists", ["fail", "replace"])
def test_a_target_path_that_is_a_folder_or_in_no_folder_is_refused_before_the_run(
    duck, tmp_path, if_exists
):
    """A target path naming a folder, or a file in a folder that does not exist, is a
    configuration error that names the path (not an internal error after the whole run)."""
    source = tmp_path / "patients.parquet"
    _write_source(duck, source)
    folder = tmp_path / "anon.parquet"
    folder.mkdir()
    for target, message in (
        (folder, "is a folder, not a file"),
        (tmp_path / "missing" / "anon.parquet", "folder .* does not exist"),
    ):
        document = _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
        document["target"]["if_exists"] = if_exists
        with pytest.raises(ConfigError, match=message):
            run(load_config(_write_config(tmp_path, document)))
    assert folder.is_dir() and not any(folder.iterdir())
    assert not (tmp_path / "missing").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "anon.parquet",
        "patients.parquet",
        "run.yaml",
    ]


def test_a_report_path_that_is_the_target_file_is_refused(duck, tmp_path, monkeypatch, capsys):
    """A report written over the Parquet file just published would replace the release with
    JSON (or HTML) after a run that says 'verified': the same file, however spelled, is
    refused before the run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    source, target = tmp_path / "patients.parquet", tmp_path / "anon.parquet"
    _write_source(duck, source)
    config = _write_config(
        tmp_path, _document(f"parquet:///{source}", "patients", f"parquet:///{target}", "anon")
    )
    assert main(["run", str(config), "-q", "--report", "./sub/../anon.parquet"]) == 2
    assert "is the target file" in capsys.readouterr().err
    document = _document(f"parquet:///{source}", "patients", "parquet:///anon.parquet", "anon")
    document["report"] = {"html": str(target)}
    assert main(["run", str(_write_config(tmp_path, document)), "-q"]) == 2
    assert "is the target file" in capsys.readouterr().err
    assert not target.exists()


def test_a_ragged_csv_is_refused_naming_the_file_and_the_line(duck, tmp_path):
    """A CSV line with more fields than the header makes DuckDB read each line as one column;
    the error names the file and the first ragged line, not a missing column."""
    lines = ["id,age,zip,los,charge"]
    lines += [f"{i},{20 + i % 50},{i % 900},{i % 17},{i / 7}" for i in range(1, 40)]
    lines[12] += ",extra"
    source = tmp_path / "patients.csv"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    document = _document(
        f"csv:///{source}", "patients", f"parquet:///{tmp_path / 'a.parquet'}", "a"
    )
    document["attributes"] = {
        k: v for k, v in document["attributes"].items() if k in lines[0].split(",")
    }
    with pytest.raises(DataError, match=r"patients\.csv.*line 13 has 6 fields, the header 5"):
        run(load_config(_write_config(tmp_path, document)))


def _amount_into_parquet(duck, duckdb_file, tmp_path, amount: str) -> tuple[Path, Path, dict]:
    """A DuckDB file of patients whose pass-through ``amount`` is the SQL expression ``amount``
    (of ``i``), the Parquet target path, and the run's configuration: ``(file, target,
    document)``."""
    path = tmp_path / "db.duckdb"
    url = duckdb_file(path)
    connection = duck.connect(str(path))
    connection.execute(
        f"""CREATE TABLE patients AS SELECT i AS id, 'n' || i AS name, 20 + i % 50 AS age,
                i % 900 AS zip, i % 17 AS los, (i % 500)::DOUBLE / 7 AS charge,
                {amount} AS amount FROM range(1, {N + 1}) t(i)"""
    )
    connection.execute("ALTER TABLE patients ADD PRIMARY KEY (id)")
    connection.close()
    parquet = tmp_path / "anon.parquet"
    document = _document(url, "patients", f"parquet:///{parquet}", "anon")
    for absent in ("at", "at_tz", "huge", "ratio"):
        del document["attributes"][absent]
    return path, parquet, document


@pytest.mark.parametrize(
    ("column", "message"),
    [
        ("170141183460469231731687303715884105727::HUGEINT - i", "amount"),
        ("interval '1 second' * i + interval '1 microsecond'", "finer than a millisecond"),
    ],
)
def test_a_value_parquet_would_change_is_refused(duck, duckdb_file, tmp_path, column, message):
    """Parquet has no 128-bit integer and counts intervals in milliseconds: a ``HUGEINT`` is staged
    and written as ``DECIMAL(38,0)``; a value of 39 digits (when it is written to the staging
    table), or an interval finer than a millisecond (when the file is written), stops the run (exit
    3) naming the column, and no file is written."""
    path, parquet, document = _amount_into_parquet(duck, duckdb_file, tmp_path, column)
    with pytest.raises(DataError, match=message):
        run(load_config(_write_config(tmp_path, document)))
    assert not parquet.exists()


@pytest.mark.parametrize(
    "amount",
    [
        "12345678901234567890123456789012345678::HUGEINT - i",
        "99999999999999999999999999999999999999::UHUGEINT - i::UHUGEINT",
        "[i, i + 1, i + 2]::INTEGER[3]",
        "[[i, 1], [2, i]]::BIGINT[2][2]",
        "CASE WHEN i % 2 = 0 THEN 'odd' ELSE 'even' END::ENUM('even', 'odd')",
        "'101'::BIT",
        "(i * 12345678901234567890123)::BIGNUM",
        "(TIMESTAMP '2021-05-04 03:02:01' + i * INTERVAL 1 SECOND)::TIMESTAMP_S",
        "(TIMESTAMP '2021-05-04 03:02:01.123' + i * INTERVAL 1 SECOND)::TIMESTAMP_MS",
        "interval '1 month 2 days' + interval '1 millisecond' * (i % 5)",
        "TIMESTAMP_NS '2021-05-04 03:02:01.123456789' + i * INTERVAL 1 SECOND",
        "TIME_NS '10:00:00.123456789'",
    ],
)
def test_an_auditor_verifies_a_parquet_target_whose_types_parquet_changes(
    duck, duckdb_file, tmp_path, amount
):
    """Parquet gives these types back as others (a 128-bit integer as ``DECIMAL(38,0)``, a
    fixed-size array as a list, ``ENUM``/``BIT``/``BIGNUM`` as ``VARCHAR``, ``TIMESTAMP_S``/``_MS``
    as ``TIMESTAMP``) with the same values, and holds intervals of whole milliseconds and nanosecond
    times: ``tclose verify --report`` on the file finds the report's content digest (the run digests
    the file as written, not the staging table, whose 128-bit integers and arrays Python sees as
    ``int`` and ``tuple``), and the file holds the source's values, nanoseconds included."""
    path, parquet, document = _amount_into_parquet(duck, duckdb_file, tmp_path, amount)
    config, report = _write_config(tmp_path, document), str(tmp_path / "r.json")
    assert main(["run", str(config), "-q", "--report", report]) == 0
    assert main(["verify", str(config), "--report", report]) == 0
    database = duck.connect()
    written = database.execute(f"SELECT amount::VARCHAR FROM '{parquet}' ORDER BY 1").fetchall()
    database.execute(f"ATTACH '{path}' AS db (READ_ONLY)")
    source = database.execute("SELECT amount::VARCHAR FROM db.patients ORDER BY 1").fetchall()
    assert written == source
    database.close()


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        ("TIMETZ '12:00:00+05:30'", "TIME WITH TIME ZONE, which a Parquet file holds in UTC"),
        ("union_value(n := i)::UNION(n INTEGER, s VARCHAR)", "holds as a STRUCT with a tag"),
    ],
)
def test_a_type_parquet_cannot_hold_is_refused_before_any_work(
    duck, duckdb_file, tmp_path, monkeypatch, amount, message
):
    """A time with a time zone (Parquet keeps it in UTC: ``12:00:00+05:30`` came back as
    ``06:30:00+00``) and a union (it came back as a ``STRUCT`` with a tag) are refused when the
    run is planned, naming the column: nothing is read, nothing is written."""
    path, parquet, document = _amount_into_parquet(duck, duckdb_file, tmp_path, amount)
    import tclose.core.runner

    def no_read(*_args, **_kwargs):
        raise AssertionError("the source was read")

    monkeypatch.setattr(tclose.core.runner, "read_inputs", no_read)
    with pytest.raises(DataError, match=f"'amount' has type .*{message}"):
        run(load_config(_write_config(tmp_path, document)))
    assert not parquet.exists()


@pytest.mark.parametrize(
    ("amount", "message"),
    [
        (
            "{'a': 12345678901234567890123456789012345678::HUGEINT - i}",
            r"type of column\(s\) 'amount' \(STRUCT\(a HUGEINT\) written as STRUCT\(a DOUBLE\)\)",
        ),
        ("[TIMETZ '12:00:00+05:30']", r"values of column\(s\) 'amount' in 300 row\(s\)"),
    ],
)
def test_a_parquet_file_that_differs_from_the_verified_rows_is_not_published(
    duck, duckdb_file, tmp_path, amount, message
):
    """The file written is read back and compared with the verified staging table: column types, and
    every row's values. A 128-bit integer inside a ``STRUCT`` (written as a ``DOUBLE``, merging
    distinct values) and a list of times with time zones (offsets lost) stop the publish, naming the
    column, and neither the target nor the temporary file is left."""
    path, parquet, document = _amount_into_parquet(duck, duckdb_file, tmp_path, amount)
    with pytest.raises(DataError, match=message):
        run(load_config(_write_config(tmp_path, document)))
    assert not parquet.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".anon")]


@pytest.mark.parametrize(
    "amount",
    [
        "CASE WHEN i % 3 = 0 THEN 'infinity'::DATE ELSE DATE '2020-01-01' + i::INTEGER END",
        "CASE WHEN i % 3 = 0 THEN '-infinity'::TIMESTAMP ELSE TIMESTAMP '2020-01-01' END",
        "CASE WHEN i % 3 = 0 THEN 'infinity'::TIMESTAMPTZ ELSE TIMESTAMPTZ '2020-01-01 00:00:00+00' END",
    ],
)
def test_infinite_dates_are_refused_when_streamed_and_kept_when_joined(
    duck, duckdb_file, tmp_path, amount
):
    """DuckDB's Python client reads ``infinity`` as 9999-12-31 (``-infinity`` as 0001-01-01), so
    streamed into a Parquet file (or any other database) such dates would be published as those
    dates: the run stops before the write, naming the column and counting the rows. Into a table of
    the same DuckDB file (SQL copies the values) they stay."""
    path, parquet, document = _amount_into_parquet(duck, duckdb_file, tmp_path, amount)
    with pytest.raises(DataError, match=r"Column 'amount' \(100 rows\) holds infinite dates"):
        run(load_config(_write_config(tmp_path, document)))
    assert not parquet.exists()
    document["target"] = {"url": document["source"]["url"], "table": "anon", "if_exists": "fail"}
    assert run(load_config(_write_config(tmp_path, document))).published
    database = duck.connect(str(path), read_only=True)
    infinite = "SELECT count(*) FROM {} WHERE isinf(amount)"
    assert database.execute(infinite.format("anon")).fetchall() == [(100,)]
    assert database.execute(infinite.format("patients")).fetchall() == [(100,)]
    database.close()
