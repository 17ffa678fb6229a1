"""The audit row and the release commit together where the database allows it.

On SQLite and PostgreSQL publishing is one transaction (DDL is transactional): the audit row of
``report.table`` is written in it (hook ``run_publishing``), so a release cannot exist without its
audit row, nor the row without the release. MariaDB's ``RENAME TABLE`` commits by itself: there
the row is written after the publish (``run_finished``) and the table carries the run id.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

import tclose
from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.base.registry import load_registry
from tclose.core.runner import run


def _document(db, tmp_path):
    source, target, audit = db.name("patients"), db.name("anon"), db.name("audit")
    db.create_patients(source, n=120)
    db.release(target)  # a release of tclose, which the run replaces
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    document["report"] = {"json": str(tmp_path / "run.json"), "table": audit}
    return source, target, audit, document


def test_the_audit_row_commits_with_the_release(db, tmp_path):
    _source, target, audit, document = _document(db, tmp_path)
    assert main(["-q", "run", str(db.write_config(document))]) == 0
    report = json.loads((tmp_path / "run.json").read_text())
    rows = db.rows(audit)
    assert len(rows) == 1 and rows[0][0] == report["run"]["id"]
    assert len(db.rows(target)) == 120
    in_transaction = db.dialect != "mysql"
    assert bool(report["run"].get("audited_in_publish")) is in_transaction


def test_an_audit_table_of_another_shape_is_refused_before_any_work(db, tmp_path, capsys):
    """An audit table whose row could not be written is refused before any work, on every database:
    never a publish that fails after all the work, nor (MariaDB, whose row is written after the
    publish) a release published without its row."""
    source, target, audit, document = _document(db, tmp_path)
    released = db.rows(target, order="tclose_row")
    db.create(audit, [sa.Column("run_id", sa.String(32))], [])  # not an audit table
    code = main(["run", str(db.write_config(document))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "lacks the column(s)" in err and "partitioning" not in err
    assert db.rows(target, order="tclose_row") == released
    assert db.rows(audit) == []
    assert db.tables() == {source, target, audit}


class _Recorder:
    """A ``run_publishing`` implementation that records what it saw, or fails."""

    def __init__(self, target: str, fail: bool = False) -> None:
        self.target, self.fail, self.seen = target, fail, []

    @tclose.hookimpl
    def run_publishing(self, report, config, connection):
        if self.fail:
            raise RuntimeError("the audit sink is down")
        self.seen.append(
            (report["run"]["published"], sa.inspect(connection).has_table(self.target))
        )


def test_run_publishing_sees_the_release_inside_the_transaction(sqlite_run):
    document = sqlite_run.config()
    recorder = _Recorder("discharges_anon")
    registry = load_registry(extra_plugins=[recorder], entry_points=False)
    result = run(load_config(sqlite_run.write(document)), registry=registry)
    assert result.published
    assert recorder.seen == [(True, True)]  # once, with the target renamed but not committed
    assert "discharges_anon" in sqlite_run.tables()


def test_a_failing_run_publishing_hook_rolls_the_publish_back(sqlite_run):
    document = sqlite_run.config()
    registry = load_registry(
        extra_plugins=[_Recorder("discharges_anon", fail=True)], entry_points=False
    )
    with pytest.raises(RuntimeError, match="audit sink is down"):
        run(load_config(sqlite_run.write(document)), registry=registry)
    assert "discharges_anon" not in sqlite_run.tables()
    assert sqlite_run.tables() == {"discharges"}
