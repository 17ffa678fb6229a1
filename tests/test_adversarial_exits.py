"""Adversarial: exit codes and messages tell the truth.

- An interrupt right after the publish commit must not claim "nothing was published": the run
  finishes recording its outcome (report, audit row), then exits 130 saying it published.
- SIGTERM is handled like SIGINT (exit 130, truthful message).
- A bug is exit 4 with one line (traceback only under ``-v``), never exit 1 (which means
  "verification failed").
- A closed stdout (``tclose plugins | head -1``) is silent, exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tclose.app.cli import main
from tclose.connectors.sql import Session


def test_ctrl_c_just_after_the_publish_commit_says_published(
    sqlite_run, tmp_path, monkeypatch, capsys
):
    publish = Session.publish

    def publish_then_interrupt(self, *args, **kwargs):
        publish(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C lands right after the commit

    monkeypatch.setattr(Session, "publish", publish_then_interrupt)
    report = tmp_path / "report.json"
    code = main(["run", str(sqlite_run.write(sqlite_run.config())), "--report", str(report)])
    err = capsys.readouterr().err
    assert code == 130
    assert "nothing was published" not in err
    assert "interrupted after publishing: discharges_anon holds the new verified table" in err
    assert len(sqlite_run.rows("discharges_anon")) == 400
    assert json.loads(report.read_text())["run"]["published"] is True


def test_ctrl_c_before_the_publish_says_nothing_was_published(sqlite_run, monkeypatch, capsys):
    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "publish", interrupt)
    assert main(["run", str(sqlite_run.write(sqlite_run.config()))]) == 130
    assert "interrupted: nothing was published" in capsys.readouterr().err
    assert "discharges_anon" not in sqlite_run.tables()


def test_sigterm_is_an_interrupt(sqlite_run, tmp_path):
    script = (
        "import os, signal, sys\n"
        "from tclose.app.cli import main\n"
        "from tclose.connectors.sql import Session\n"
        "def stop(self, *a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    raise AssertionError('SIGTERM was ignored')\n"
        "Session.publish = stop\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    config = sqlite_run.write(sqlite_run.config())
    done = subprocess.run(
        [sys.executable, "-c", script, "run", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted: nothing was published" in done.stderr
    assert "discharges_anon" not in sqlite_run.tables()


def test_an_internal_error_is_exit_4_with_one_line(sqlite_run, monkeypatch, capsys):
    import tclose.core.pipeline

    def broken(*_args, **_kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(tclose.core.pipeline, "cluster_rows", broken)
    config = str(sqlite_run.write(sqlite_run.config()))
    assert main(["-q", "run", config]) == 4
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("internal error: ZeroDivisionError: a bug")
    assert main(["-v", "run", config]) == 4
    assert "Traceback" in capsys.readouterr().err


def test_a_qi_of_1e308_is_not_an_uncaught_traceback(tmp_path, capsys):
    import sqlite3

    database = tmp_path / "big.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, a REAL, c REAL)")
        connection.executemany(
            "INSERT INTO p VALUES (?, ?, ?)",
            [(i, 1e308 if i % 2 else -1e308, float(i % 5)) for i in range(1, 21)],
        )
    config = tmp_path / "run.yaml"
    config.write_text(
        f"source: {{url: 'sqlite:///{database}', table: p, key: id}}\n"
        "target: {table: q}\nattributes: {a: {role: quasi_identifier}, c: {role: confidential}}\n"
        "privacy: {k: 2, t: 0.5}\nalgorithm: {name: t-first}\n"
    )
    code = main(["run", str(config)])
    err = capsys.readouterr().err
    assert code in (0, 3, 4), err  # never 1 ("verification failed") from a crash
    assert "Traceback" not in err


@pytest.mark.parametrize("module", ["tclose", None])
def test_a_closed_stdout_is_silent(module):
    command = [sys.executable, "-m", "tclose", "plugins"]
    if module is None:
        command = [os.path.join(os.path.dirname(sys.executable), "tclose"), "plugins"]
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.readline()
    reader.stdout.close()  # like `| head -1`
    reader.wait(timeout=60)
    err = reader.stderr.read().decode()
    assert reader.returncode == 0, err
    assert err == ""


@pytest.mark.parametrize(("port", "code"), [("99999", 3), ("54x2", 2), ("", 2)])
def test_a_bad_port_is_a_clear_error(tmp_path, capsys, port, code):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"source: {{url: 'postgresql://u@127.0.0.1:{port}/db', table: t, key: id}}\n"
        "target: {table: t2}\nattributes: {a: {role: quasi_identifier}}\n"
        "privacy: {k: 2}\nalgorithm: {name: mdav}\n"
    )
    assert main(["run", str(config)]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
