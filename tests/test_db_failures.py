"""Runs that fail on each dialect — killed while writing or verifying, or failing verification —
leave the target as it was; the next run cleans up and publishes.

The failures come from a small test plugin, installed the way a third-party plugin is: a module
and a ``.dist-info`` folder with its ``tclose`` entry point, on ``PYTHONPATH`` (for ``python -m
tclose`` in a subprocess) or on ``sys.path`` (in process). It registers

- the connector ``pause``: a URL ``pause+<real URL>`` reaches the real database through the
  built-in connector, but the session stops (writes a marker file, then sleeps) at the moment
  named by ``TCLOSE_TEST_PAUSE``: ``write`` (after the first bulk write, before the commit) or
  ``verify`` (while the staging table is read back: rows, frames, or PostgreSQL's frames read
  with the digest), so the test can SIGKILL the run there;
- the algorithm ``one-row-short``: MDAV, then one row of the first cluster moved into a cluster
  of its own, which the verifier must catch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.connectors.sql import STAGING_MARK

PLUGIN = '''
"""Test-only tclose plugin: a connector that pauses at a named moment; an algorithm breaking k."""

import os
import time
from pathlib import Path

import tclose
from tclose.connectors import duckdb, mysql, postgresql, sqlite
from tclose.connectors.sql import STAGING_MARK
from tclose.interfaces import Partition
from tclose.kernels.mdav import mdav

DATABASES = {"postgresql": postgresql.PostgreSQLDatabase, "mysql": mysql.MySQLDatabase,
             "sqlite": sqlite.SQLiteDatabase, "duckdb": duckdb.DuckDBDatabase}


def pause(moment):
    if os.environ.get("TCLOSE_TEST_PAUSE") == moment:
        Path(os.environ["TCLOSE_TEST_PAUSE_FILE"]).write_text(moment)
        time.sleep(600)


def pausing(session_class):
    class Pausing(session_class):
        def insert_arrays(self, *args, **kwargs):
            super().insert_arrays(*args, **kwargs)
            pause("write")

        def insert_rows(self, *args, **kwargs):
            super().insert_rows(*args, **kwargs)
            pause("write")

        def read_rows(self, name, *args, **kwargs):
            for rows in super().read_rows(name, *args, **kwargs):
                yield rows
                if STAGING_MARK in str(name):
                    pause("verify")

        def read(self, name, *args, **kwargs):  # PostgreSQL's frames do not use read_rows
            for frame in super().read(name, *args, **kwargs):
                yield frame
                if STAGING_MARK in str(name):
                    pause("verify")

        def read_with_digest(self, name, *args, **kwargs):  # PostgreSQL's one-pass verify read
            for frame in super().read_with_digest(name, *args, **kwargs):
                yield frame
                if STAGING_MARK in str(name):
                    pause("verify")

    return Pausing


class PausingConnector:
    name = "pause"
    dialects = ("pause",)

    def connect(self, url, password_file=None):
        real = url.split("+", 1)[1]
        database = DATABASES[real.split("://")[0].split("+")[0]](real, password_file)
        database.session_class = pausing(database.session_class)
        return database


class OneRowShort:
    name = "one-row-short"
    options_schema = {}
    requires_t = False

    def partition(self, x, distances, k, t, options):
        labels = mdav(x, k)
        labels[0] = labels.max() + 1
        return Partition(labels)


@tclose.hookimpl
def register_connectors(register):
    register(PausingConnector())


@tclose.hookimpl
def register_algorithms(register):
    register(OneRowShort())
'''


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the test plugin and its distribution metadata (entry point), opted in
    by name (the suite disables plugin autoload)."""
    monkeypatch.setenv("TCLOSE_PLUGINS", "test")
    folder = tmp_path / "plugin"
    info = folder / "tclose_test_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (folder / "tclose_test_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tclose-test-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[tclose]\ntest = tclose_test_plugin\n", encoding="utf-8"
    )
    return folder


def _with_old_target(db, n: int = 200) -> tuple[str, str, dict, list[tuple]]:
    """The source, the target (a release of tclose, which a run may replace), the
    configuration replacing it, and the target's rows."""
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=n)
    old = db.release(target)
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    return source, target, document, old


@pytest.mark.parametrize("moment", ["write", "verify"])
def test_a_killed_run_leaves_the_target_as_it_was(db, plugin_path, tmp_path, moment):
    source, target, document, old = _with_old_target(db)
    document["source"]["url"] = f"pause+{db.url}"
    marker = tmp_path / "paused"
    env = {
        **os.environ,
        "TCLOSE_TEST_PAUSE": moment,
        "TCLOSE_TEST_PAUSE_FILE": str(marker),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")])
        ),
    }
    command = [sys.executable, "-m", "tclose", "run", str(db.write_config(document)), "-q"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if process.poll() is not None:
                pytest.fail(f"the run ended before pausing: {process.communicate()}")
            assert time.monotonic() < deadline, "the run never reached the pause"
            time.sleep(0.05)
        # Mid-run: the target is untouched; PostgreSQL and SQLite show no staging table at all.
        # (DuckDB cannot be looked at mid-run: the running process holds the file's lock, and
        # DuckDB lets no other process open it, not even to read.)
        if db.dialect != "duckdb":
            assert db.rows(target, order="tclose_row") == old
        if db.dialect not in ("mysql", "duckdb"):
            assert db.tables() == {source, target}
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)

    assert process.returncode == -signal.SIGKILL
    assert db.rows(target, order="tclose_row") == old
    if db.dialect == "mysql":  # its DDL committed: the staging table waits for the next run
        left = db.tables() - {source, target}
        assert len(left) <= 1 and all(STAGING_MARK in name for name in left), left
        # its rows were never committed: no one can read them
        assert all(db.leftover_rows(name) == [] for name in left)
    else:  # rolled back by the server (PostgreSQL), from the hot journal (SQLite), or never in
        # DuckDB's write-ahead log (it logs a transaction when it commits)
        assert db.tables() == {source, target}

    document["source"]["url"] = db.url
    assert main(["run", str(db.write_config(document)), "-q"]) == 0
    assert len(db.rows(target)) == 200
    assert db.tables() == {source, target}


def test_a_failed_verification_publishes_nothing(db, plugin_path, monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(plugin_path))
    source, target, document, old = _with_old_target(db, n=60)
    document["algorithm"] = {"name": "one-row-short"}
    document["privacy"] = {"k": 3}  # it does not enforce t, so t is not asked for
    report = tmp_path / "failed.json"

    assert main(["run", str(db.write_config(document)), "--report", str(report), "-q"]) == 1

    assert "Verification of the written table failed (k_anonymity)" in capsys.readouterr().err
    assert db.rows(target, order="tclose_row") == old
    assert db.tables() == {source, target}
    data = json.loads(report.read_text())
    assert data["verification"]["passed"] is False
    failed = [c for c in data["verification"]["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["k_anonymity"] and failed[0]["actual"] == 1
