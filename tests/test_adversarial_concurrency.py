"""Adversarial: concurrency and timing on real servers and database files.

Each ``tclose`` here is a separate process (forked from the test's) that can be paused at a
phase of the runner — after reading the source (``cluster``), after verifying the staging table
(``publish``), after publishing (``report``) — until the test lets it go. While it waits, the
test starts a second run, changes the source, creates or drops tables, or runs ``tclose verify``.
The test waits for each moment itself (a mark file the run writes, a lock wait the server
shows, the run's exit), never for a guessed time.
What must hold whatever the timing:

- two runs on one target serialize (the second waits for the first's run lock): never a mixed
  table; every run either failed with a clear message (exit 3) or published a table that its
  report describes (``tclose verify --report`` passes while it is the target);
- the source is never written; the release is the source of one moment;
- a table that someone else creates under the target's name during the run is never dropped by
  ``if_exists: fail``;
- a killed run releases its lock, and the run that waited for it publishes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from pathlib import Path

import pytest
import sqlalchemy as sa

from tclose.app.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from waiting import wait_for  # noqa: E402


def _pause_before(phase: str, mark: Path, go: Path) -> None:
    """In a run's process: ``runner.Phases.<phase>`` writes ``mark``, then waits for ``go``."""
    from tclose.core import runner

    original = getattr(runner.Phases, phase)

    def paused(self, *args, **kwargs):
        mark.write_text(phase)
        wait_for(go.exists, 600, f"the test to let {phase} go")  # or it kills this run
        return original(self, *args, **kwargs)

    setattr(runner.Phases, phase, paused)


def _announce_lock_calls(mark: Path) -> None:
    """In a run's process: before each call that may wait for another run's lock on the target
    (the run lock on a server, ``BEGIN IMMEDIATE`` of SQLite's writing session), ``mark`` gets
    the session's connection id on the server (``"file"`` for SQLite); the test then looks for
    the wait itself."""
    from tclose.connectors import mysql, postgresql, sqlite

    def announce(session_class, method: str, connection_id: str | None) -> None:
        original = getattr(session_class, method)

        def announcing(self, *args, **kwargs):
            if method == "lock" or args[0] is not None:  # begin() of a writing session
                ident = str(self.execute(connection_id)[0][0]) if connection_id else "file"
                part = mark.with_suffix(".part")
                part.write_text(ident)
                part.replace(mark)
            return original(self, *args, **kwargs)

        setattr(session_class, method, announcing)

    announce(postgresql.PostgreSQLSession, "lock", "SELECT pg_backend_pid()")
    announce(mysql.MySQLSession, "lock", "SELECT CONNECTION_ID()")
    announce(sqlite.SQLiteSession, "begin", None)


class Child:
    """A forked child process, waited for like a :class:`subprocess.Popen`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float) -> int:
        wait_for(lambda: self.poll() is not None, timeout, "the run's end")
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.returncode = -signal.SIGKILL


class Run:
    """``tclose ARGS`` in a child process (forked: the test's imports and compiled kernels are
    its own), paused before phase ``pause`` (if given) until :meth:`go`."""

    def __init__(self, tmp_path: Path, name: str, args: list[str], pause: str | None = None):
        self.mark, self.go_file = tmp_path / f"{name}.paused", tmp_path / f"{name}.go"
        self.wait_mark = tmp_path / f"{name}.waiting"
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child process
            self._run_in_child(args, pause)
        self.process = Child(pid)

    def _run_in_child(self, args: list[str], pause: str | None) -> None:
        code = 99
        try:
            with open(self.out, "w") as out, open(self.err, "w") as err:
                sys.stdout, sys.stderr = out, err
                try:
                    if pause:
                        _pause_before(pause, self.mark, self.go_file)
                    _announce_lock_calls(self.wait_mark)
                    code = main(args)
                except BaseException:
                    traceback.print_exc()
                    code = 98
                err.flush()
                out.flush()
        finally:
            os._exit(code)

    def output(self) -> tuple[str, str]:
        """The run's stdout and stderr so far."""
        return tuple(p.read_text() if p.exists() else "" for p in (self.out, self.err))

    def wait_paused(self, seconds: float = 60) -> None:
        """Return once the run is paused before its phase."""
        wait_for(lambda: self.reached(self.mark), seconds, "the run's pause")

    def wait_blocking(self, seconds: float = 60) -> str:
        """The connection id (on a server; ``"file"`` for SQLite) of the run's writing session,
        once it is about to take the target's run lock or write lock."""
        return wait_for(lambda: self.reached(self.wait_mark), seconds, "the run's lock call")

    def wait_ended(self, seconds: float = 60) -> int:
        """The exit code of the run, which ends without being let go (e.g. it failed)."""
        return self.process.wait(seconds)

    def reached(self, mark: Path) -> str:
        """``mark``'s text once the run wrote it; the run ending first fails the test."""
        if mark.exists():
            return mark.read_text()
        if self.process.poll() is not None:
            err = self.output()[1]
            pytest.fail(f"the run ended ({self.process.returncode}) before {mark.name}: {err}")
        return ""

    def go(self) -> None:
        self.go_file.write_text("go")

    def finish(self, seconds: float = 90) -> tuple[int, str, str]:
        self.go()
        try:
            code = self.process.wait(seconds)
        except AssertionError:
            self.process.kill()
            pytest.fail(f"the run did not end: {self.output()[1]}")
        return code, *self.output()

    def kill(self) -> None:
        self.process.kill()


@pytest.fixture
def runs():
    """Start :class:`Run` objects; any still running at the end is killed."""
    started: list[Run] = []

    def start(*args, **kwargs) -> Run:
        run = Run(*args, **kwargs)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


def _verify_report(config: str, report: Path, capsys) -> tuple[int, str]:
    code = main(["verify", config, "--report", str(report)])
    return code, capsys.readouterr().out


def _waiting_on_lock(db, run: Run) -> None:
    """Return once ``run`` waits for another run's lock on the target. DuckDB: the file is the
    lock and ``run`` fails at once, so once it ended. SQLite: once it is about to ``BEGIN
    IMMEDIATE`` (the wait is inside the driver). A server: once the server shows its
    connection waiting for the lock."""
    if db.dialect == "duckdb":
        run.wait_ended()
        return
    connection = run.wait_blocking()
    if db.dialect in ("postgresql", "mysql"):
        wait_for(
            lambda: _server_shows_waiting(db, connection),
            60,
            f"the server to show connection {connection} waiting for the run lock",
        )


def _server_shows_waiting(db, connection: str) -> bool:
    """Whether the server shows ``connection`` waiting for a lock (PostgreSQL: any lock not
    granted; MariaDB: a named lock or a table's metadata lock)."""
    if db.dialect == "postgresql":
        query = "SELECT count(*) FROM pg_locks WHERE pid = :id AND NOT granted"
    else:
        query = (
            "SELECT count(*) FROM information_schema.processlist WHERE id = :id "
            "AND (state = 'User lock' OR state LIKE 'Waiting for%metadata lock')"
        )
    return db.execute(query, {"id": int(connection)})[0][0] > 0


def _second_waits_for_first(db, tmp_path, runs, configs, reports):
    """(first, second): the first run of ``configs`` paused before its publish, the second
    started and given time to wait on the run lock; each writes its report of ``reports``."""
    first = runs(
        tmp_path, "first", ["-q", "run", configs[0], "--report", str(reports[0])], "publish"
    )
    first.wait_paused()
    second = runs(tmp_path, "second", ["-q", "run", configs[1], "--report", str(reports[1])])
    _waiting_on_lock(db, second)
    return first, second


@pytest.mark.parametrize("if_exists", ["fail", "replace"])
def test_two_runs_on_one_target_serialize(db, tmp_path, runs, capsys, if_exists):
    """The second run names the target with its schema: the same table, the same lock."""
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=120)
    before = db.rows(source, order="patient_id")
    schema = {"postgresql": "public", "mysql": sa.make_url(db.url).database}.get(db.dialect, "main")
    configs, reports = [], []
    for i, spelling in ((1, target), (2, f"{schema}.{target}")):
        document = db.config(source, spelling)
        document["target"]["if_exists"] = if_exists
        configs.append(str(db.write_config(document, f"run{i}.yaml")))
        reports.append(tmp_path / f"report{i}.json")
    first, second = _second_waits_for_first(db, tmp_path, runs, configs, reports)
    code1, _, err1 = first.finish()
    code2, _, err2 = second.finish()
    assert code1 == 0, err1
    assert db.rows(source, order="patient_id") == before
    assert db.tables() == {source, target}
    if db.dialect == "duckdb":  # the file is the lock: the second run fails at once
        assert code2 == 3, err2
        assert "another tclose run may be using it" in err2, err2
        assert "Nothing was published" in err2, err2
        winner = 0
    elif if_exists == "fail":
        assert code2 == 3, err2
        assert f"The target table {schema}.{target} already exists" in err2, err2
        assert "Nothing was published" in err2, err2
        winner = 0
    else:
        assert code2 == 0, err2
        winner = 1
    code, out = _verify_report(configs[winner], reports[winner], capsys)
    assert code == 0, out
    assert len(db.rows(target)) == 120
    if winner == 1:  # the first report describes a table that is gone
        code, out = _verify_report(configs[0], reports[0], capsys)
        assert code == 1 and "FAIL  run_id" in out, out


def test_a_run_killed_while_another_waits_lets_the_waiting_one_publish(db, tmp_path, runs, capsys):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=120)
    before = db.rows(source, order="patient_id")
    configs, reports = [], []
    for i in (1, 2):
        document = db.config(source, target)
        configs.append(str(db.write_config(document, f"run{i}.yaml")))
        reports.append(tmp_path / f"report{i}.json")
    first, second = _second_waits_for_first(db, tmp_path, runs, configs, reports)
    first.kill()
    code, _, err = second.finish()
    assert db.rows(source, order="patient_id") == before
    if db.dialect == "duckdb":  # the second run found the file locked and failed at once
        assert code == 3 and "another tclose run may be using it" in err, err
        return
    assert code == 0, err
    assert not reports[0].exists()
    assert db.tables() == {source, target}  # MariaDB: the killed run's staging table dropped
    assert _verify_report(configs[1], reports[1], capsys)[0] == 0


def _refused_by_sqlite(db, statement: str) -> None:
    """``statement`` on another connection to the SQLite file fails: "database is locked"."""
    import sqlite3

    connection = sqlite3.connect(sa.make_url(db.url).database, timeout=0.2, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            connection.execute(statement)
    finally:
        connection.close()


def _refused_by_duckdb(db) -> None:
    """Another process's DuckDB file cannot be opened while a run has it."""
    import duckdb

    with pytest.raises(duckdb.IOException, match="lock"):
        duckdb.connect(sa.make_url(db.url).database).close()


def _user_table(db, name: str) -> None:
    db.create(name, [sa.Column("mine", sa.Integer)], [{"mine": 1}, {"mine": 2}])


def test_a_target_created_by_someone_else_during_the_run_is_kept(db, tmp_path, runs):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    config = str(db.write_config(db.config(source, target)))
    report = tmp_path / "report.json"
    run = runs(tmp_path, "run", ["-q", "run", config, "--report", str(report)], "publish")
    run.wait_paused()
    if db.dialect == "duckdb":  # nobody else can open the file while a run has it
        _refused_by_duckdb(db)
        assert run.finish()[0] == 0
        return
    if db.dialect == "sqlite":  # the run holds the write lock: the other session waits
        _refused_by_sqlite(db, f"CREATE TABLE {db.quote(target)} (mine INTEGER)")
        assert run.finish()[0] == 0
        return
    _user_table(db, target)
    code, _, err = run.finish()
    assert code == 3, err
    assert f"The target table {target} already exists" in err, err
    assert "Nothing was published" in err, err
    assert db.rows(target) == [(1,), (2,)]
    assert db.tables() == {source, target}


def test_a_target_dropped_by_someone_else_during_a_replace_run_is_published(
    db, tmp_path, runs, capsys
):
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    config = str(db.write_config(document))
    assert main(["-q", "run", config]) == 0  # a release, which if_exists: replace replaces
    report = tmp_path / "report.json"
    run = runs(tmp_path, "run", ["-q", "run", config, "--report", str(report)], "publish")
    run.wait_paused()
    if db.dialect == "duckdb":  # nobody else can open the file while a run has it
        _refused_by_duckdb(db)
        assert run.finish()[0] == 0
        return
    if db.dialect == "sqlite":
        _refused_by_sqlite(db, f"DROP TABLE {db.quote(target)}")
    else:
        db.execute(f"DROP TABLE {db.quote(target)}")
    code, _, err = run.finish()
    assert code == 0, err
    assert db.tables() == {source, target}
    assert _verify_report(config, report, capsys)[0] == 0


def test_verify_while_a_run_publishes_reads_one_table_whole(
    db, tmp_path, runs, capsys, monkeypatch
):
    """``tclose verify`` starts, the run publishes: verify reads the old table or the new one,
    whole, never an empty or missing table (its snapshot must not predate the publish)."""
    from tclose.core import published

    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=60)
    configs, reports = [], []
    for i in (1, 2):
        document = db.config(source, target)
        document["target"]["if_exists"] = "replace"
        document["privacy"]["k"] = 2 + i  # another release: the same config gives the same one
        configs.append(str(db.write_config(document, f"run{i}.yaml")))
        reports.append(tmp_path / f"report{i}.json")
    assert main(["-q", "run", configs[0], "--report", str(reports[0])]) == 0
    run = runs(tmp_path, "run", ["-q", "run", configs[1], "--report", str(reports[1])], "publish")
    run.wait_paused()
    if db.dialect == "duckdb":  # nobody else can open the file while a run has it
        _refused_by_duckdb(db)
        assert run.finish()[0] == 0
        return
    connection = run.wait_blocking()  # the run's writing session, which publishes
    scan = published._scan_session

    def published_or_waiting_for_this_read() -> bool:
        if run.process.poll() is not None:
            return True
        return db.dialect in ("postgresql", "mysql") and _server_shows_waiting(db, connection)

    def publish_during_scan(session, *args, **kwargs):
        session.execute("SELECT 1")  # any first query: PostgreSQL's snapshot begins here
        run.go()
        wait_for(published_or_waiting_for_this_read, 60, "the run to publish or wait")
        return scan(session, *args, **kwargs)

    monkeypatch.setattr(published, "_scan_session", publish_during_scan)
    code = main(["verify", configs[0], "--report", str(reports[0])])
    out, err = capsys.readouterr()
    assert code in (0, 1), (out, err)
    assert f"table {target}: 60 rows" in out, out
    digest = "PASS  content_digest" in out
    assert ("PASS  run_id" in out) == digest, out  # both tables' or neither
    monkeypatch.undo()
    code, _, err = run.finish()
    assert code == 0, err
    assert _verify_report(configs[1], reports[1], capsys)[0] == 0


def _change_source(db, source: str) -> None:
    """Another session changes QI and confidential values, deletes and inserts rows."""
    table = db.quote(source)
    db.execute(
        f"UPDATE {table} SET charge = charge + 1000000, age = age + 50 WHERE patient_id <= 10"
    )
    db.execute(f"DELETE FROM {table} WHERE patient_id BETWEEN 11 AND 20")
    db.execute(
        f"INSERT INTO {table} (patient_id, age, zip, length_of_stay, charge, code) "
        f"SELECT patient_id + 10000, age, zip, length_of_stay, charge + 7, code "
        f"FROM {table} WHERE patient_id BETWEEN 21 AND 40"
    )


@pytest.mark.parametrize("pause", ["cluster", "publish"])
def test_a_writer_during_a_cross_database_run_never_mixes_two_states(
    db, tmp_path, runs, capsys, pause
):
    """The source is read twice (pass 1 and the streamed pass 2) from one snapshot, into a
    target in another database (a SQLite file): the writer's commits are not in the release."""
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=120)
    before = db.frame(source)
    other = tmp_path / "target.db"
    import sqlite3

    sqlite3.connect(other).close()
    document = db.config(source, target)
    document["target"]["url"] = f"sqlite:///{other}"
    document["source"]["chunk_size"] = 30
    config = str(db.write_config(document))
    report = tmp_path / "report.json"
    run = runs(tmp_path, "run", ["-q", "run", config, "--report", str(report)], pause)
    run.wait_paused()
    if db.dialect == "duckdb" and pause == "cluster":  # the run has the file
        _refused_by_duckdb(db)
    elif db.dialect == "sqlite" and pause == "cluster":  # its read lock: writers wait
        _refused_by_sqlite(db, f"DELETE FROM {db.quote(source)} WHERE patient_id <= 10")
    else:  # a server, or a file after the source's session ended: the writer gets through
        _change_source(db, source)
    code, _, err = run.finish()
    assert code == 0, err
    with sqlite3.connect(other) as connection:
        rows = connection.execute(f'SELECT charge, code FROM "{target}"').fetchall()
    assert len(rows) == len(before) == 120
    assert sorted(r[0] for r in rows) == sorted(before["charge"])
    assert sorted(r[1] for r in rows) == sorted(before["code"])
    assert _verify_report(config, report, capsys)[0] == 0


@pytest.mark.mysql
def test_rows_written_into_mariadbs_staging_table_by_another_session_are_never_published(
    maria, tmp_path, runs, capsys
):
    """MariaDB's staging table is a committed table (its DDL commits) that others can see: a
    row another session inserts into it after the run wrote its rows must stop the publish, not
    be published unverified (the verification read the run's snapshot, without it)."""
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=60)
    config = str(maria.write_config(maria.config(source, target)))
    report = tmp_path / "report.json"
    run = runs(tmp_path, "run", ["-q", "run", config, "--report", str(report)], "publish")
    run.wait_paused()
    (staging,) = [t for t in maria.tables() if "__tclose_s_" in t]
    schema, name = staging.split(".")  # tclose_staging: root may write there
    maria.execute(
        f"INSERT INTO `{schema}`.`{name}` (tclose_row, age, zip, length_of_stay, charge, code) "
        "VALUES (999999, 1, 2, 3, 4, 'intruder')"
    )
    code, _, err = run.finish()
    assert code == 3, err
    assert f"Another session wrote into the staging table {staging}" in err, err
    assert "Nothing was published" in err, err
    assert maria.tables() == {source}
    assert not report.exists()


def test_verify_between_a_publish_and_its_audit_row_never_loses_the_runs_record(
    maria, tmp_path, runs, capsys
):
    """MariaDB's ``RENAME TABLE`` commits by itself: the run appends its audit row after it.
    A ``tclose verify`` in between finds no row and rebuilds one; the run's own record must then
    replace it, not fail on the duplicate run id."""
    source, target, audit = maria.name("src"), maria.name("anon"), maria.name("audit")
    maria.create_patients(source, n=60)
    config = str(maria.write_config(maria.config(source, target, report={"table": audit})))
    report = tmp_path / "report.json"
    run = runs(tmp_path, "run", ["run", config, "--report", str(report)], "report")
    run.wait_paused()
    assert main(["-q", "verify", config]) == 0
    assert "audit rebuilt the audit record" in capsys.readouterr().out
    code, _, err = run.finish()
    assert code == 0, err
    assert "hook failed" not in err, err
    run_id = json.loads(report.read_text())["run"]["id"]
    ((row_id, recorded),) = maria.rows(audit, "run_id, report")
    assert row_id == run_id
    assert "rebuilt_by" not in json.loads(recorded)["run"]
    assert json.loads(recorded)["timings"] == json.loads(report.read_text())["timings"]


@pytest.mark.mysql
def test_a_table_under_the_parking_name_of_the_replaced_target_is_never_dropped(
    maria, tmp_path, runs
):
    """On MariaDB the replaced target is parked as ``<target>__tclose_o_<run>`` (registered as
    the run's) until dropped; the run id shows in the staging table's name. A table someone
    creates under that name during the run is not the run's: the publish stops, and neither
    this run nor a later one drops it."""
    from tclose.connectors.sql import OLD_MARK, STAGING_MARK

    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=60)
    document = maria.config(source, target)
    document["target"]["if_exists"] = "replace"
    config = str(maria.write_config(document))
    assert main(["-q", "run", config]) == 0  # a release, which the next run replaces
    published = maria.rows(target, order="tclose_row")
    run = runs(tmp_path, "run", ["-q", "run", config], "publish")
    run.wait_paused()
    (staging,) = [t for t in maria.tables() if STAGING_MARK in t]
    parking = staging.split(".")[-1].replace(STAGING_MARK, OLD_MARK)  # in the target's schema
    _user_table(maria, parking)
    code, _, err = run.finish()
    assert code == 3, err
    assert "Nothing was published" in err, err
    assert maria.rows(target, order="tclose_row") == published
    assert maria.rows(parking) == [(1,), (2,)]
    assert maria.tables() == {source, target, parking}
    other = maria.config(source, maria.name("other"))  # a later run on the schema
    assert main(["-q", "run", str(maria.write_config(other, "other.yaml"))]) == 0
    assert maria.rows(parking) == [(1,), (2,)]


@pytest.mark.mysql
def test_a_parking_name_taken_between_the_check_and_the_rename_is_unregistered(
    maria, monkeypatch, capsys
):
    """The same, when the table appears after the run looked for it: the ``RENAME`` fails, and
    the registration it committed is taken back (a later run would drop the table)."""
    from tclose.connectors.mysql import REGISTRY_TABLE, MySQLDatabase, MySQLSession
    from tclose.connectors.sql import OLD_MARK, STAGING_MARK

    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=30)
    document = maria.config(source, target)
    document["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(maria.write_config(document))]) == 0  # a release
    published = maria.rows(target, order="tclose_row")
    publish, exists, taken = MySQLSession.publish, MySQLDatabase.exists, []

    def publish_after_someone_took_the_name(self, staging, *args, **kwargs):
        taken.append(staging.name.replace(STAGING_MARK, OLD_MARK))
        _user_table(maria, taken[0])
        return publish(self, staging, *args, **kwargs)

    def not_seen(self, name, connection=None):
        return False if taken and name.name == taken[0] else exists(self, name, connection)

    monkeypatch.setattr(MySQLSession, "publish", publish_after_someone_took_the_name)
    monkeypatch.setattr(MySQLDatabase, "exists", not_seen)
    assert main(["-q", "run", str(maria.write_config(document))]) == 3
    assert "Nothing was published" in capsys.readouterr().err
    registered = maria.execute(f"SELECT name FROM {REGISTRY_TABLE}")
    assert (taken[0],) not in registered
    assert maria.rows(taken[0]) == [(1,), (2,)]
    assert maria.rows(target, order="tclose_row") == published


@pytest.mark.mysql
def test_a_staging_name_taken_before_the_create_is_unregistered(maria, monkeypatch, capsys):
    """A table someone creates under the staging table's name between the run's check and its
    ``CREATE TABLE``: the create fails, and the name's registration (committed) is taken back,
    so that no later run drops that table."""
    from tclose.connectors.mysql import REGISTRY_TABLE, MySQLDatabase, MySQLSession
    from tclose.connectors.sql import STAGING_MARK
    from tclose.naming import STAGING_SCHEMA

    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=30)
    register, exists, taken = MySQLSession.register, MySQLDatabase.exists, []

    def register_then_someone_creates(self, name, *args, **kwargs):
        register(self, name, *args, **kwargs)
        if STAGING_MARK in name.name and not taken:
            taken.append(name.name)
            maria.create(name.name, [sa.Column("mine", sa.Integer)], [{"mine": 1}], name.schema)

    def not_seen(self, name, connection=None):
        return False if taken and name.name == taken[0] else exists(self, name, connection)

    monkeypatch.setattr(MySQLSession, "register", register_then_someone_creates)
    monkeypatch.setattr(MySQLDatabase, "exists", not_seen)
    assert main(["-q", "run", str(maria.write_config(maria.config(source, target)))]) == 3
    assert "creating the staging table" in capsys.readouterr().err
    monkeypatch.undo()
    registry = f"{STAGING_SCHEMA}.{REGISTRY_TABLE}"
    assert (taken[0],) not in maria.execute(f"SELECT name FROM {registry}")
    other = maria.config(source, maria.name("other"))  # a later run on the schema
    assert main(["-q", "run", str(maria.write_config(other, "other.yaml"))]) == 0
    assert maria.rows(taken[0], schema=STAGING_SCHEMA) == [(1,)]


def test_a_run_on_another_target_in_the_schema_leaves_a_running_run_alone(db, tmp_path, runs):
    """The second run (MariaDB: it drops the registered tables of runs that are over) must not
    touch the first run's staging table while the first waits between verify and publish."""
    source = db.name("src")
    db.create_patients(source, n=60)
    first_config = str(db.write_config(db.config(source, db.name("one")), "one.yaml"))
    first = runs(tmp_path, "first", ["-q", "run", first_config], "publish")
    first.wait_paused()
    second = runs(
        tmp_path,
        "second",
        ["-q", "run", str(db.write_config(db.config(source, db.name("two")), "two.yaml"))],
    )
    if db.dialect == "sqlite":  # one writer per file: the second waits for the first
        _waiting_on_lock(db, second)
        code1, _, err1 = first.finish()
        code2, _, err2 = second.finish()
    else:  # it ends while the first still waits
        code2, _, err2 = second.finish()
        code1, _, err1 = first.finish()
    assert code1 == 0, err1
    if db.dialect == "duckdb":  # one process at a time
        assert code2 == 3 and "another tclose run may be using it" in err2, err2
        assert db.tables() == {source, db.name("one")}
        return
    assert code2 == 0, err2
    assert db.tables() == {source, db.name("one"), db.name("two")}


def test_a_reader_polling_the_target_sees_one_whole_table_at_every_publish(db):
    """A reader in autocommit polls the target while runs replace it: every read sees all the
    rows of one table, the old or the new, never an empty, missing or half-written one."""
    import threading

    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=90)
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    config = str(db.write_config(document))
    assert main(["-q", "run", config]) == 0
    seen, problems, stop = [], [], threading.Event()
    query = f"SELECT COUNT(*), COUNT(DISTINCT code) FROM {db.quote(target)}"

    def poll() -> None:
        args = {"timeout": 30} if db.dialect == "sqlite" else {}
        engine = sa.create_engine(db.engine.url, poolclass=sa.pool.NullPool, connect_args=args)
        try:
            while not stop.is_set():
                with engine.connect() as connection:
                    seen.append(tuple(connection.exec_driver_sql(query).one()))
        except Exception as error:  # noqa: BLE001 - any error is what the test reports
            problems.append(error)
        finally:
            engine.dispose()

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        for again in (2, 3):
            assert main(["-q", "run", str(db.write_config(document, f"run{again}.yaml"))]) == 0
    finally:
        stop.set()
        reader.join(30)
    assert problems == []
    assert seen and set(seen) == {(90, 90)}


def test_verify_of_a_missing_target_still_lists_the_tables(db, capsys):
    """Reading the run id before the rows (for a publish during the read) does not replace the
    missing table's message by a shorter one."""
    source = db.name("src")
    db.create_patients(source, n=30)
    assert main(["verify", str(db.write_config(db.config(source, db.name("missing"))))]) == 3
    err = capsys.readouterr().err
    assert f"{db.name('missing')} does not exist" in err, err
    assert "It has the tables" in err or db.dialect in ("sqlite", "duckdb"), err
