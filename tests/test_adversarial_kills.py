"""Adversarial: a seeded kill campaign, a few kills per phase per dialect.

A test plugin (installed like a third-party plugin, as in ``test_db_failures.py``) wraps the
built-in connector of a ``kill+<real URL>`` and stops the run at a chosen moment: while reading
the source (``read``), writing the staging table (``write``), reading it back (``verify``: rows,
frames, or PostgreSQL's frames read with the digest), or
just after the publish committed (``published``). The chunk at which it stops is drawn from a
seeded generator. The test then sends SIGKILL, SIGTERM or SIGINT and checks what each kill point
must leave behind (``docs/databases.md``):

- the source is unchanged, always;
- before the publish the target is exactly as it was; after it, the new table, which verifies
  and names its run in its comment (SQLite: in its definition);
- SIGTERM and SIGINT exit 130 with a truthful message, and leave no table of the run; after the
  publish they take effect once the report is written;
- SIGKILL leaves nothing on SQLite, PostgreSQL and DuckDB (transactional DDL) and at most an empty,
  registered staging table on MariaDB, which the next run drops; never a truncated report;
- the next run publishes and leaves only the source and the target.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from tclose.app.cli import main

PLUGIN = '''
"""Test-only tclose plugin: a connector that stops at a named moment of a run."""

import os
import time
from pathlib import Path

import tclose
from tclose.connectors import duckdb, mysql, postgresql, sqlite
from tclose.connectors.sql import STAGING_MARK

DATABASES = {"postgresql": postgresql.PostgreSQLDatabase, "mysql": mysql.MySQLDatabase,
             "sqlite": sqlite.SQLiteDatabase, "duckdb": duckdb.DuckDBDatabase}
COUNTS = {}


def stop(moment):
    COUNTS[moment] = COUNTS.get(moment, 0) + 1
    if os.environ.get("TCLOSE_TEST_STOP") != moment:
        return
    if COUNTS[moment] != int(os.environ.get("TCLOSE_TEST_STOP_AT", "1")):
        return
    Path(os.environ["TCLOSE_TEST_STOP_FILE"]).write_text(moment)
    # Until the test has sent its signal (a signal tclose defers ends the stop here).
    signalled, deadline = Path(os.environ["TCLOSE_TEST_SIGNALLED_FILE"]), time.monotonic() + 600
    while not signalled.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def stopping(session_class):
    class Stopping(session_class):
        def insert_arrays(self, *args, **kwargs):
            super().insert_arrays(*args, **kwargs)
            stop("write")

        def insert_rows(self, *args, **kwargs):
            super().insert_rows(*args, **kwargs)
            stop("write")

        def read_rows(self, name, *args, **kwargs):
            for rows in super().read_rows(name, *args, **kwargs):
                yield rows
                if not getattr(self, "in_read", False):
                    stop("verify" if STAGING_MARK in str(name) else "read")

        def read(self, name, *args, **kwargs):
            # PostgreSQL reads frames without read_rows (binary COPY); stop between frames
            self.in_read = True
            try:
                for frame in super().read(name, *args, **kwargs):
                    yield frame
                    if not getattr(self, "in_one_pass", False):
                        stop("verify" if STAGING_MARK in str(name) else "read")
            finally:
                self.in_read = False

        def read_with_digest(self, name, *args, **kwargs):
            # PostgreSQL's verification reads its frames with the digest (one COPY; read when
            # it falls back to two passes): stop between frames, once per frame
            self.in_one_pass = True
            try:
                for frame in super().read_with_digest(name, *args, **kwargs):
                    yield frame
                    stop("verify" if STAGING_MARK in str(name) else "read")
            finally:
                self.in_one_pass = False

        def publish(self, *args, **kwargs):
            super().publish(*args, **kwargs)
            stop("published")

    return Stopping


class StoppingConnector:
    name = "kill"
    dialects = ("kill",)

    def connect(self, url, password_file=None):
        real = url.split("+", 1)[1]
        database = DATABASES[real.split("://")[0].split("+")[0]](real, password_file)
        database.session_class = stopping(database.session_class)
        return database


@tclose.hookimpl
def register_connectors(register):
    register(StoppingConnector())
'''

PHASES = ("read", "write", "verify", "published")
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
SEED = 20261126
ROWS, CHUNK = 200, 50


def _campaign() -> list[tuple[str, signal.Signals, int]]:
    """Per phase: one SIGKILL and one SIGTERM or SIGINT, each at a seeded chunk."""
    rng = random.Random(SEED)
    trials = []
    for phase in PHASES:
        chunks = 1 if phase in ("write", "published") else ROWS // CHUNK
        for signum in (signal.SIGKILL, rng.choice(SIGNALS[1:])):
            trials.append((phase, signum, rng.randint(1, chunks)))
    return trials


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kill plugin's folder and distribution metadata, opted in by name (the suite disables
    plugin autoload)."""
    monkeypatch.setenv("TCLOSE_PLUGINS", "kill")
    folder = tmp_path / "plugin"
    info = folder / "tclose_kill_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (folder / "tclose_kill_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tclose-kill-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[tclose]\nkill = tclose_kill_plugin\n", encoding="utf-8"
    )
    return folder


def _trial(db, plugin_path, tmp_path, document, phase, signum, at) -> tuple[int, str]:
    """Run ``tclose run`` in a forked child (imports already done: a trial takes about a
    second), stop it at ``phase`` (chunk ``at``), send ``signum``; return its exit code (the
    negative signal number if killed) and its stderr."""
    marker = tmp_path / f"stopped-{phase}-{signum.name}"
    signalled = tmp_path / f"signalled-{phase}-{signum.name}"
    output = tmp_path / f"stderr-{phase}-{signum.name}"
    config = str(db.write_config(document))
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        code = 99
        try:
            os.environ.update(
                TCLOSE_TEST_STOP=phase,
                TCLOSE_TEST_STOP_AT=str(at),
                TCLOSE_TEST_STOP_FILE=str(marker),
                TCLOSE_TEST_SIGNALLED_FILE=str(signalled),
            )
            sys.path.insert(0, str(plugin_path))
            signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.stdout = sys.stderr = open(output, "w", buffering=1)  # noqa: SIM115
            code = main(["run", config])
            sys.stderr.flush()
        finally:
            os._exit(code)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            finished, status = os.waitpid(child, os.WNOHANG)
            if finished:
                pytest.fail(f"the run ended before {phase}: {output.read_text()}")
            assert time.monotonic() < deadline, f"the run never reached {phase}"
            time.sleep(0.02)
        os.kill(child, signum)
        signalled.touch()
        _pid, status = os.waitpid(child, 0)
    except BaseException:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise
    return os.waitstatus_to_exitcode(status), output.read_text()


def test_kill_campaign(db, plugin_path, tmp_path):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=ROWS)
    old = db.release(target)  # a release of tclose: if_exists: replace replaces nothing else
    before = db.rows(source, order="patient_id")
    report, audit = tmp_path / "report.json", db.name("audit")
    for phase, signum, at in _campaign():
        what = f"{db.dialect}: {signum.name} at {phase} (chunk {at})"
        document = db.config(source, target)
        document["source"].update(url=f"kill+{db.url}", chunk_size=CHUNK)
        document["target"]["if_exists"] = "replace"
        document["report"] = {"json": str(report), "table": audit}
        report.unlink(missing_ok=True)
        code, err = _trial(db, plugin_path, tmp_path, document, phase, signum, at)

        assert db.rows(source, order="patient_id") == before, what
        published = phase == "published"
        if published:
            assert len(db.rows(target)) == ROWS, what
        else:
            assert db.rows(target, order="tclose_row") == old, what
        left = db.tables() - {source, target, audit}
        audited = db.rows(audit) if audit in db.tables() else []
        if signum == signal.SIGKILL:
            assert code == -signal.SIGKILL, what
            assert not report.exists(), what  # never a truncated report
            if published and db.dialect != "mysql":  # committed with the release
                assert len(audited) == 1, what
            else:
                assert audited == [], what
            if db.dialect == "mysql" and not published:
                assert len(left) <= 1 and all(db.leftover_rows(t) == [] for t in left), what
            else:
                assert left == set(), what
        else:
            assert code == 130, (what, err)
            assert left == set(), what
            if published:
                assert "interrupted after publishing" in err, (what, err)
                run_id = json.loads(report.read_text())["run"]["id"]
                assert json.loads(report.read_text())["run"]["published"] is True, what
                assert [r[0] for r in audited] == [run_id], what  # the audit row, too
            else:
                assert "interrupted: nothing was published" in err, (what, err)
                assert not report.exists() and audited == [], what
        if audit in db.tables():
            db.execute(f"DELETE FROM {db.quote(audit)}")
        if published:
            _verify_names_the_run(db, document, what)
            db.execute(f"DROP TABLE {db.quote(target)}")
            old = db.release(target)

    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    assert db.tables() - {audit} == {source, target}
    assert len(db.rows(target)) == ROWS


def _verify_names_the_run(db, document, what) -> None:
    document = {**document, "source": {**document["source"], "url": db.url}}
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        assert main(["-q", "verify", str(db.write_config(document, "v.yaml"))]) == 0, what
    assert "published by tclose run " in capture.getvalue(), (what, capture.getvalue())
    # its audit row is missing (killed, or deleted by the campaign): verify rebuilds it, once
    run_id = capture.getvalue().split("published by tclose run ", 1)[1].split()[0]
    assert f"rebuilt the audit record of run {run_id}" in capture.getvalue(), what
    audit = document["report"]["table"]
    rows = db.rows(audit, "run_id, published, verified")
    assert [(r[0], bool(r[1]), bool(r[2])) for r in rows] == [(run_id, True, True)], what
    db.execute(f"DELETE FROM {db.quote(audit)}")
