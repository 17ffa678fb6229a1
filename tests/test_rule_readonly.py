"""Rule R3: the source is opened read-only by the driver, and its files never change.

A source whose database is not the target's is only read, and every connection to it is
read-only by the driver or the server: SQLite's ``mode=ro``, DuckDB's ``read_only``,
PostgreSQL's and MariaDB's read-only transactions. So any statement that would write it (the
run's, or a plugin's) is refused, and the source's files keep their bytes (SHA-256 compared
before and after): a SQLite file and its write-ahead log (a pending log is read, never
checkpointed into the file), a DuckDB file and its log, a Parquet or a CSV file. DuckDB's readers
take a file name as a glob pattern; tclose hands them a name that is that one file, whatever
characters the file's name (or its folder's) holds, and a file target is read back, and its run
mark read, from that one file.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tclose.app.cli import main
from tclose.base.config import load_config

#: Rows of the small sources, and the rows of a pending log's transaction among them.
ROWS, PENDING = 60, 20
#: The SHA-256 of no bytes.
EMPTY = hashlib.sha256(b"").hexdigest()


def _sha(*paths: Path) -> dict[str, str | None]:
    """Each file's SHA-256 (``None``: no such file)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths
    }


def _document(source_url: str, source_table: str, target_url: str, target_table: str) -> dict:
    return {
        "source": {"url": source_url, "table": source_table, "key": "id"},
        "target": {"url": target_url, "table": target_table, "if_exists": "fail"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first"},
    }


def _run(tmp_path: Path, document: dict, name: str = "run.yaml") -> tuple[int, dict | None]:
    """``tclose run`` of ``document``: its exit code and its JSON report (``None`` if none)."""
    report = tmp_path / f"{name}.json"
    report.unlink(missing_ok=True)
    document = {**document, "report": {"json": str(report)}}
    config = tmp_path / name
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    code = main(["-q", "run", str(config)])
    return code, json.loads(report.read_text()) if report.exists() else None


def _in_subprocess(code: str, folder: Path) -> None:
    """Run ``code`` in a Python process of its own, in ``folder`` (it may end with
    ``os._exit``, leaving a write-ahead log or a journal as a killed program does)."""
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True)


def _sqlite_source(path: Path, journal_mode: str, pending: bool) -> None:
    """Table ``p`` (``ROWS`` rows) in a new SQLite file; with ``pending``, the last ``PENDING``
    rows are committed into the write-ahead log by a process that then dies (the log is left
    for the next connection to checkpoint)."""
    _in_subprocess(
        f"""
import os, sqlite3
c = sqlite3.connect({str(path)!r})
c.execute("PRAGMA journal_mode = {journal_mode}")
c.execute("PRAGMA wal_autocheckpoint = 0")
c.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, age INTEGER, charge REAL)")
rows = [(i, 20 + i % 40, (i * 7) % 13) for i in range({ROWS})]
c.executemany("INSERT INTO p VALUES (?, ?, ?)", rows[:{ROWS - PENDING}])
c.commit()
c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
c.executemany("INSERT INTO p VALUES (?, ?, ?)", rows[{ROWS - PENDING}:])
c.commit()
{"os._exit(0)" if pending else "c.close()"}
""",
        path.parent,
    )


def _sqlite_target(tmp_path: Path) -> str:
    target = tmp_path / "target.db"
    sqlite3.connect(target).close()
    return f"sqlite:///{target}"


# --- the bytes of a source's files ---------------------------------------------------------------

#: SQLite source URLs: however a URL opens the file (a path, a URI asking to write or create),
#: the source is opened read-only.
_SQLITE_SPELLINGS = [
    "sqlite:///{db}",
    "sqlite:///file:{db}?uri=true",
    "sqlite:///file:{db}?mode=rw&uri=true",
    "sqlite:///file:{db}?mode=rwc&cache=shared&uri=true",
]


@pytest.mark.parametrize("spelling", _SQLITE_SPELLINGS)
@pytest.mark.parametrize(
    ("journal_mode", "pending"),
    [("DELETE", False), ("WAL", True), ("WAL", False), ("TRUNCATE", False)],
)
def test_a_sqlite_source_keeps_its_bytes(tmp_path, spelling, journal_mode, pending):
    """A pending write-ahead log is read (its rows are in the release) and stays a log: the
    database file and the log keep their bytes (SQLite's readers write the log's index, -shm,
    and make an empty log where there is none). In a rollback-journal mode no file appears next
    to the source."""
    folder = tmp_path / "src"
    folder.mkdir()
    db = folder / "source db.sqlite"
    _sqlite_source(db, journal_mode, pending)
    files = [db, Path(f"{db}-wal"), Path(f"{db}-journal")]
    before, listing = _sha(*files), sorted(p.name for p in folder.iterdir())
    if pending:
        assert Path(f"{db}-wal").stat().st_size > 0  # the log holds the last rows
    document = _document(spelling.format(db=db), "p", _sqlite_target(tmp_path), "p_anon")
    code, report = _run(tmp_path, document)
    assert code == 0
    assert report["source"]["rows"] == report["target"]["rows"] == ROWS
    after = _sha(*files)
    if not pending and journal_mode == "WAL":  # SQLite's readers make an empty log if none
        assert after.pop(f"{db.name}-wal") in (None, EMPTY) and before.pop(f"{db.name}-wal") is None
    assert after == before
    if journal_mode != "WAL":
        assert sorted(p.name for p in folder.iterdir()) == listing


def test_a_sqlite_source_that_must_be_written_to_be_read_is_refused(tmp_path, capsys):
    """A writer that died in the middle of a transaction left a hot journal: SQLite reads the
    file only once it has rolled the journal back, which writes the file. The run is refused
    (exit 3) with the remedy, and the file and its journal keep their bytes."""
    db = tmp_path / "source.db"
    _sqlite_source(db, "DELETE", pending=False)
    _in_subprocess(
        f"""
import os, sqlite3
c = sqlite3.connect({str(db)!r})
c.execute("PRAGMA cache_size = 1")
c.execute("BEGIN")
c.executemany("INSERT INTO p VALUES (?, 1, 1)", [(i,) for i in range(1000, 5000)])
os._exit(0)
""",
        tmp_path,
    )
    files = [db, Path(f"{db}-journal")]
    before = _sha(*files)
    assert before["source.db-journal"] is not None
    code, _ = _run(tmp_path, _document(f"sqlite:///{db}", "p", _sqlite_target(tmp_path), "out"))
    assert code == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "tclose opens its source read-only and never writes it" in err
    assert _sha(*files) == before


@pytest.mark.duckdb
@pytest.mark.parametrize("query", ["", "?access_mode=read_write", "?access_mode=automatic"])
def test_a_duckdb_source_keeps_its_bytes_and_its_pending_log(tmp_path, duck, query):
    """A DuckDB file whose last transaction is still in its write-ahead log (``.wal``): read
    with the log's rows, and neither file changes (a read-write connection checkpoints the log
    into the file when it closes)."""
    db = tmp_path / "source.duckdb"
    _in_subprocess(
        f"""
import os, duckdb
c = duckdb.connect({str(db)!r})
c.execute("SET checkpoint_threshold = '1GB'")
c.execute("CREATE TABLE p AS SELECT i AS id, 20 + i % 40 AS age, (i * 7) % 13 AS charge "
          "FROM range({ROWS - PENDING}) t(i)")
c.execute("CHECKPOINT")
c.execute("INSERT INTO p SELECT i, 20 + i % 40, (i * 7) % 13 FROM range({ROWS - PENDING}, {ROWS}) t(i)")
os._exit(0)
""",
        tmp_path,
    )
    files = [db, Path(f"{db}.wal")]
    before = _sha(*files)
    assert before["source.duckdb.wal"] is not None
    document = _document(f"duckdb:///{db}{query}", "p", _sqlite_target(tmp_path), "p_anon")
    code, report = _run(tmp_path, document)
    assert code == 0
    assert report["source"]["rows"] == ROWS
    assert _sha(*files) == before


def _pending_log(db: Path) -> None:
    """A transaction (a new table; the others keep their rows) committed into the write-ahead
    log of the SQLite file ``db`` by a process that then dies."""
    _in_subprocess(
        f"""
import os, sqlite3
c = sqlite3.connect({str(db)!r})
c.execute("PRAGMA journal_mode = WAL")
c.execute("PRAGMA wal_autocheckpoint = 0")
c.execute("CREATE TABLE other AS SELECT 1 AS one")
c.commit()
os._exit(0)
""",
        db.parent,
    )
    assert Path(f"{db}-wal").stat().st_size > 0


def test_the_commands_that_only_read_keep_the_files_bytes(tmp_path, capsys):
    """``tclose verify`` (with ``--source``), ``tclose compare`` and ``tclose init`` read a
    source, and a published table, whose write-ahead logs hold a pending transaction: the files
    and the logs keep their bytes."""
    db = tmp_path / "source.db"
    _sqlite_source(db, "WAL", pending=False)
    document = _document(f"sqlite:///{db}", "p", _sqlite_target(tmp_path), "p_anon")
    assert _run(tmp_path, document)[0] == 0
    target = tmp_path / "target.db"
    _pending_log(db)
    _pending_log(target)
    files = [db, Path(f"{db}-wal"), target, Path(f"{target}-wal")]
    before = _sha(*files)
    config = str(tmp_path / "run.yaml")
    assert main(["-q", "verify", config]) == 0
    assert main(["-q", "verify", "--source", config]) == 0
    assert main(["-q", "compare", config, "--k", "3,5"]) == 0
    assert main(["-q", "init", f"sqlite:///{db}", "p", "-o", str(tmp_path / "init.yaml")]) == 0
    capsys.readouterr()
    assert _sha(*files) == before


@pytest.mark.duckdb
def test_a_target_in_the_source_file_by_another_url_is_published(tmp_path, duck, monkeypatch):
    """A target in the source's own DuckDB file, its URL spelled another way: the run writes
    that file anyway, so the source is opened as the target is (DuckDB opens a file one way
    per process: a read-only source beside the read-write target could not connect)."""
    db = tmp_path / "both.duckdb"
    connection = duck.connect(str(db))
    connection.execute(
        f"CREATE TABLE p AS SELECT i AS id, 20 + i % 40 AS age, (i * 7) % 13 AS charge "
        f"FROM range({ROWS}) t(i)"
    )
    connection.close()
    monkeypatch.chdir(tmp_path)
    document = _document("duckdb:///both.duckdb", "p", f"duckdb:///{tmp_path}/./both.duckdb", "o")
    code, report = _run(tmp_path, document)
    assert code == 0 and report["target"]["rows"] == ROWS
    assert main(["-q", "verify", "--source", str(tmp_path / "run.yaml")]) == 0


def _url(fmt: str, path: Path) -> str:
    """The URL of the file ``path`` (``%`` and ``?`` percent-encoded, as in any URL)."""
    return f"{fmt}:///" + str(path).replace("%", "%25").replace("?", "%3F")


def _write_file(duck, path: Path, rows: int = ROWS) -> None:
    """A Parquet or CSV file (by ``path``'s suffix) of ``rows`` rows of ``id, age, charge``."""
    options = "(FORMAT parquet)" if path.suffix == ".parquet" else "(HEADER)"
    literal = str(path).replace("'", "''")
    duck.connect().execute(
        f"COPY (SELECT i AS id, 20 + i % 40 AS age, (i * 7) % 13 AS charge FROM range({rows}) "
        f"t(i)) TO '{literal}' {options}"
    )


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_file_source_keeps_its_bytes(tmp_path, duck, fmt):
    source = tmp_path / f"patients.{fmt}"
    _write_file(duck, source)
    before = _sha(source)
    document = _document(f"{fmt}:///{source}", "patients", _sqlite_target(tmp_path), "out")
    code, report = _run(tmp_path, document)
    assert code == 0 and report["source"]["rows"] == ROWS
    assert _sha(source) == before


# --- file names are names, not patterns ----------------------------------------------------------

#: ``(the source file, relative to the test's folder; files DuckDB's glob of that name reads)``.
#: The other files hold fewer rows: a run that reads any of them reads more than ``ROWS``.
_PATTERNS = [
    ("data[2024]", ["data2", "data0", "data4"]),
    ("data*", ["data0", "datax"]),
    ("data?", ["data0", "dataX"]),
    ("data[!x]", ["data0"]),
    ("data{0,2}", ["data0", "data2"]),
    ("it's[1]", ["it's1"]),
    ("in[1]/data", ["in1/data"]),
    ("**/data", ["a/data", "a/b/data"]),
    ("in?/data*", ["inx/data", "in1/data0"]),
]


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize(("name", "others"), _PATTERNS)
def test_a_file_name_is_read_as_that_one_file(tmp_path, duck, fmt, name, others):
    """Whatever characters a file's name or folder holds, the run reads that file alone, not the
    files DuckDB's glob names by it (their rows would be published, "verified"); those files
    keep their bytes."""
    folder = tmp_path / "files"
    source = folder / f"{name}.{fmt}"
    decoys = [folder / f"{other}.{fmt}" for other in others]
    for path in [source, *decoys]:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_file(duck, path, ROWS if path == source else 7)
    before = _sha(*decoys)
    table = source.name.split(".")[0]
    document = _document(_url(fmt, source), table, _sqlite_target(tmp_path), "out")
    code, report = _run(tmp_path, document)
    assert code == 0
    assert report["source"]["rows"] == report["target"]["rows"] == ROWS
    assert _sha(*decoys) == before


@pytest.mark.duckdb
def test_a_source_pattern_matching_the_target_reads_the_source(tmp_path, duck):
    """The target ``data2.parquet`` is among the files the source's name ``data[2024]`` matches
    as a pattern: the run reads the source alone, not the target's rows as the source's."""
    source, target = tmp_path / "data[2024].parquet", tmp_path / "data2.parquet"
    _write_file(duck, source)
    seven = tmp_path / "seven.parquet"  # the target: a release of tclose (which replace may
    _write_file(duck, seven, 7)  # replace) of other rows than the source's
    first = _document(f"parquet:///{seven}", "seven", f"parquet:///{target}", "data2")
    assert _run(tmp_path, first, "seven.yaml")[0] == 0
    document = _document(f"parquet:///{source}", "data[2024]", f"parquet:///{target}", "data2")
    document["target"]["if_exists"] = "replace"
    code, report = _run(tmp_path, document)
    assert code == 0 and report["source"]["rows"] == ROWS
    rows = duck.connect().execute(f"SELECT count(*) FROM read_parquet('{target}')").fetchone()
    assert rows == (ROWS,) and _sha(source)["data[2024].parquet"]


def _run_mark(duck, path: Path) -> str | None:
    """The ``tclose_run`` key-value metadata of the Parquet file ``path`` (read from a copy
    under a name without pattern characters)."""
    copy = path.with_name("mark-copy.parquet")
    shutil.copyfile(path, copy)
    try:
        row = (
            duck.connect()
            .execute(
                "SELECT decode(value) FROM parquet_kv_metadata(?) WHERE decode(key) = 'tclose_run'",
                [str(copy)],
            )
            .fetchone()
        )
    finally:
        copy.unlink()
    return row[0] if row else None


@pytest.mark.duckdb
@pytest.mark.parametrize("name", ["out[12]", "out*", "out?"])
def test_a_file_target_is_that_one_file(tmp_path, duck, name):
    """A Parquet target whose name DuckDB's glob would read as a pattern: published (the written
    file is read back as itself, not through the pattern, which names none of it), replaced on a
    second run, its run mark read from it alone, and the files its name matches as a pattern (a
    release of tclose among them) keep their bytes."""
    from tclose.connectors.files import FileDatabase
    from tclose.naming import TableName

    source = tmp_path / "source.parquet"
    _write_file(duck, source)
    released = tmp_path / "out1.parquet"  # a release of tclose, matched by the pattern
    code, _ = _run(
        tmp_path,
        _document(f"parquet:///{source}", "source", f"parquet:///{released}", "out1"),
        "first.yaml",
    )
    assert code == 0 and _run_mark(duck, released)
    other = tmp_path / "out2.parquet"
    _write_file(duck, other, 7)
    target = tmp_path / f"{name}.parquet"
    before = _sha(released, other)
    document = _document(_url("parquet", source), "source", _url("parquet", target), name)
    database = FileDatabase(_url("parquet", target))
    assert database.table_comment(TableName(None, name)) is None  # no such file yet
    code, report = _run(tmp_path, document)
    assert code == 0 and report["target"]["rows"] == ROWS
    mark = _run_mark(duck, target)
    assert mark and database.table_comment(TableName(None, name)) == f"tclose run {mark}"
    document["target"]["if_exists"] = "replace"
    code, _ = _run(tmp_path, document)
    assert code == 0 and _run_mark(duck, target) not in (None, mark)
    assert _sha(released, other) == before


@pytest.mark.duckdb
def test_a_run_mark_is_read_from_its_own_file(tmp_path, duck):
    """The run mark of a Parquet file that is not a release is none, though a release of
    tclose is among the files its name matches as a pattern (whose mark would make the user's
    file pass for a release)."""
    from tclose.connectors.files import FileDatabase
    from tclose.naming import TableName

    source = tmp_path / "source.parquet"
    _write_file(duck, source)
    released = tmp_path / "x1.parquet"
    document = _document(f"parquet:///{source}", "source", f"parquet:///{released}", "x1")
    assert _run(tmp_path, document)[0] == 0
    mine = tmp_path / "x[1].parquet"
    _write_file(duck, mine, 7)
    assert FileDatabase(f"parquet:///{released}").table_comment(TableName(None, "x1"))
    assert FileDatabase(f"parquet:///{mine}").table_comment(TableName(None, "x[1]")) is None


# --- the rule: no statement can write a source through any of its connections ------------------


class _Stopped(Exception):
    """Ends the run once the writes have been tried."""


def _writes(db, source: str) -> list[str]:
    """Statements that would change the source table ``source`` of ``db`` (a TestDatabase), or
    its database, each of them valid and allowed on a connection that may write."""
    table, quote = db.quote(source), db.quote
    return [
        f"INSERT INTO {table} (patient_id, name) VALUES (1000000, 'x')",
        f"UPDATE {table} SET age = age + 1",
        f"DELETE FROM {table}",
        f"CREATE TABLE {quote(db.name('new'))} (i INTEGER)",
        f"ALTER TABLE {table} RENAME TO {quote(db.name('moved'))}",
        f"DROP TABLE {table}",
    ]


def _asking_to_write(db) -> str:
    """``db``'s URL asking its driver or server for connections that may write."""
    if db.dialect == "sqlite":
        return db.url.replace("sqlite:///", "sqlite:///file:", 1) + "?mode=rwc&uri=true"
    return (
        db.url
        + {
            "duckdb": "?access_mode=read_write",
            "postgresql": "?options=-c%20default_transaction_read_only%3Doff",
            "mysql": "?init_command=SET%20SESSION%20TRANSACTION%20READ%20WRITE",
        }[db.dialect]
    )


@pytest.mark.parametrize("asks_to_write", [False, True])
def test_no_write_reaches_a_source_through_any_of_its_connections(
    db, tmp_path, monkeypatch, asks_to_write
):
    """A plugin (here: a wrapped read of the source) that writes through the source's session,
    or through any new connection of the source's database, is refused by the driver or the
    server, on every database, whatever the source's URL asks for; the source keeps its rows and
    no table appears."""
    import tclose.core.runner as runner

    source = db.name("src")
    db.create_patients(source, n=30)
    rows, tables = db.rows(source, order="patient_id"), db.tables()
    attempts: list[tuple[str, BaseException | None]] = []
    statements = _writes(db, source)

    def writing_read(session, *args, **kwargs):
        for statement in statements:
            try:
                with session.database.engine.connect() as connection:
                    connection.exec_driver_sql(statement.replace("%", "%%"))
                    connection.commit()
                attempts.append((statement, None))
            except Exception as error:  # the refusal, as the driver raises it
                attempts.append((statement, error))
        try:
            session.connection.exec_driver_sql(statements[0])
            attempts.append(("the session: " + statements[0], None))
        except Exception as error:
            attempts.append(("the session: " + statements[0], error))
        raise _Stopped

    monkeypatch.setattr(runner, "read_inputs", writing_read)
    document = db.config(source, "out")
    if asks_to_write:
        document["source"]["url"] = _asking_to_write(db)
    document["target"] = {"url": _sqlite_target(tmp_path), "table": "out"}
    path = db.write_config(document)
    with pytest.raises(_Stopped):
        runner.run(load_config(path))
    assert len(attempts) == len(statements) + 1
    for statement, error in attempts:
        assert error is not None, f"{statement!r} was executed on {db.dialect}"
        assert re.search(r"read.?only", str(error), re.IGNORECASE), (statement, str(error))
    assert db.rows(source, order="patient_id") == rows
    assert db.tables() == tables


def test_a_source_only_read_publishes_and_keeps_its_rows(db, tmp_path, capsys):
    """The other side of the rule: a source opened read-only is read whole (both passes, the
    checks), and the run publishes into another database (exit 0); the source is unchanged."""
    source = db.name("src")
    db.create_patients(source, n=60)
    rows = db.rows(source, order="patient_id")
    document = db.config(source, "out")
    document["target"] = {"url": _sqlite_target(tmp_path), "table": "out"}
    code, err, _ = db.run_and_verify(document, capsys)
    assert code == 0, err
    assert db.rows(source, order="patient_id") == rows
    with sqlite3.connect(tmp_path / "target.db") as connection:
        assert connection.execute("SELECT count(*) FROM out").fetchone() == (60,)


@pytest.mark.duckdb
@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("d/**/*.parquet", "d/a/b/deep.parquet"),  # DuckDB's ** descends every folder
        ("d/*/x.parquet", "d/.hidden/x.parquet"),  # DuckDB's * also names hidden folders
        ("d/**", "d/.hidden/x.parquet"),
    ],
)
def test_the_files_a_source_view_reads_are_those_duckdb_reads(
    tmp_path, duck, capsys, pattern, target
):
    """A DuckDB source view reads Parquet files through a pattern: the files it reads are the
    ones DuckDB's own ``glob`` names, recursive ``**`` and hidden folders included (Python's
    ``glob`` names neither), so such a file is refused as the target: replacing it would change
    the source."""
    db = tmp_path / "views.duckdb"
    written = tmp_path / target
    written.parent.mkdir(parents=True)
    _write_file(duck, written)
    connection = duck.connect(str(db))
    connection.execute(f"CREATE VIEW v AS SELECT * FROM read_parquet('{tmp_path / pattern}')")
    connection.close()
    before = _sha(written)
    document = _document(f"duckdb:///{db}", "v", _url("parquet", written), written.stem)
    document["target"]["if_exists"] = "replace"
    code, _ = _run(tmp_path, document)
    assert code == 2
    assert "holds rows that the source v reads" in capsys.readouterr().err
    assert _sha(written) == before


@pytest.mark.duckdb
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_no_statement_naming_a_file_source_writes_it(tmp_path, duck, monkeypatch, fmt):
    """A Parquet or CSV source is a view of DuckDB's reader in a database in memory: a statement
    that would change its rows is refused (DDL reaches only that database's catalog), and the
    file keeps its bytes."""
    import tclose.core.runner as runner

    source = tmp_path / f"patients.{fmt}"
    _write_file(duck, source)
    before = _sha(source)
    statements = [
        "INSERT INTO patients VALUES (1000, 1, 1)",
        "UPDATE patients SET age = age + 1",
        "DELETE FROM patients",
        "DROP TABLE patients",
    ]
    refused: list[str] = []

    def writing_read(session, *args, **kwargs):
        for statement in statements:
            with session.database.engine.connect() as connection:
                try:
                    connection.exec_driver_sql(statement)
                    connection.commit()
                except Exception:  # the refusal, as DuckDB raises it
                    refused.append(statement)
        raise _Stopped

    monkeypatch.setattr(runner, "read_inputs", writing_read)
    document = _document(_url(fmt, source), "patients", _sqlite_target(tmp_path), "out")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(_Stopped):
        runner.run(load_config(config))
    assert refused == statements
    assert _sha(source) == before
