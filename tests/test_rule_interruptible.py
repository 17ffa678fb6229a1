"""Rule: every blocking wait tclose makes on a server is interruptible.

A run waits on a server for the run lock of its target while another run writes it
(PostgreSQL ``pg_advisory_lock``, MariaDB/MySQL ``GET_LOCK``), up to ``LOCK_WAIT_SECONDS``. The
wait is made in slices of at most ``LOCK_WAIT_SLICE_SECONDS`` on the server, so that a SIGINT or
SIGTERM is acted on within a slice: the run exits 130 ("interrupted"), nothing is written, and
the lock is left to its holder. Each test holds the run lock itself, as another run would, waits
until the server shows the run waiting for it, and signals the run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from tests.waiting import wait_for

FIXTURES = {"postgresql": "pg", "mysql": "maria"}
#: Seconds within which a signalled run must have ended (a slice, and the process's exit).
PROMPT = 6


def _holding_the_run_lock(db, target: str) -> tuple[sa.Connection, str]:
    """A connection holding the run lock of ``target`` as a run would; and the SQL that counts
    the sessions waiting for it."""
    connection = db.engine.connect()
    if db.dialect == "postgresql":
        from tclose.connectors.postgresql import run_lock_key

        key = run_lock_key(f"public.{target}")
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({key})")
        unsigned = key & 0xFFFFFFFFFFFFFFFF
        waiting = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            f"AND classid = {unsigned >> 32} AND objid = {unsigned & 0xFFFFFFFF}"
        )
    else:
        from tclose.connectors.mysql import run_lock_name

        name = run_lock_name(sa.make_url(db.url).database, target)
        connection.exec_driver_sql(f"SELECT GET_LOCK('{name}', 0)")
        waiting = (
            "SELECT count(*) FROM information_schema.processlist "
            f"WHERE state = 'User lock' AND info LIKE '%%{name}%%'"
        )
    connection.commit()
    return connection, waiting


def _waiting_sessions(db, waiting: str, process: subprocess.Popen) -> int:
    """How many sessions the server shows waiting for the lock; fails the test if the run
    ended before it waited."""
    if process.poll() is not None:
        pytest.fail(f"the run ended before it waited: {process.communicate()}")
    return db.execute(waiting)[0][0]


@pytest.mark.parametrize(
    "dialect",
    [
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_run_waiting_for_the_run_lock_stops_at_once_on_a_signal(
    dialect, signum, request, tmp_path
):
    db = request.getfixturevalue(FIXTURES[dialect])
    source, target = db.name("src"), db.name("anon")
    db.create_patients(source, n=40)
    path = db.write_config(db.config(source, target))
    holder, waiting = _holding_the_run_lock(db, target)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "tclose", "-q", "run", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        try:
            wait_for(
                lambda: _waiting_sessions(db, waiting, process), 60, "the run to wait for the lock"
            )
            signalled = time.monotonic()
            process.send_signal(signum)
            _out, err = process.communicate(timeout=60)
            took = time.monotonic() - signalled
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        assert process.returncode == 130, err
        assert "interrupted: nothing was published" in err, err
        assert took < PROMPT, f"the run took {took:.1f} s to stop"
        assert target not in db.tables()
        # The run's wait on the server ends within a slice, even if the server has not yet
        # noticed the client gone (MariaDB ends GET_LOCK at its timeout).
        wait_for(
            lambda: db.execute(waiting)[0][0] == 0, PROMPT, "the run's session to stop waiting"
        )
    finally:
        holder.close()
