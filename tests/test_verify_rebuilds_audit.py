"""``tclose verify`` rebuilds the audit row of a run killed between its publish and its report:
the published table carries its run id, the audit table lacks that run's row."""

from __future__ import annotations

import contextlib
import io
import json

from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.core.runner import published_run_id


def _verify(config, *extra: str) -> tuple[int, str]:
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        code = main(["-q", "verify", str(config), *extra])
    return code, capture.getvalue()


def _audit(db, audit: str) -> list[dict]:
    rows = db.rows(audit, "run_id, verified, published, dry_run, k, k_achieved, rows_out, report")
    out = []
    for run_id, verified, published, dry_run, k, k_achieved, rows_out, report in rows:
        report = report if isinstance(report, dict) else json.loads(report)
        out.append(
            dict(
                run_id=run_id,
                verified=bool(verified),
                published=bool(published),
                dry_run=bool(dry_run),
                k=k,
                k_achieved=k_achieved,
                rows_out=rows_out,
                report=report,
            )
        )
    return out


def _published_without_audit_row(db, tmp_path, rows: int = 200):
    """A table published with ``report.table`` whose audit row was then lost (the kill window)."""
    source, target, audit = db.name("patients"), db.name("anon"), db.name("audit")
    db.create_patients(source, n=rows)
    document = db.config(source, target)
    document["report"] = {"table": audit, "json": str(tmp_path / "report.json")}
    config = db.write_config(document)
    assert main(["-q", "run", str(config)]) == 0
    run_id = published_run_id(load_config(config))
    assert run_id is not None and [r["run_id"] for r in _audit(db, audit)] == [run_id]
    db.execute(f"DELETE FROM {db.quote(audit)}")
    return config, target, audit, run_id


def test_verify_rebuilds_a_missing_audit_row_once(db, tmp_path):
    config, target, audit, run_id = _published_without_audit_row(db, tmp_path)
    recorded = json.loads((tmp_path / "report.json").read_text())

    code, out = _verify(config)
    assert code == 0, out
    assert f"rebuilt the audit record of run {run_id}" in out
    (row,) = _audit(db, audit)
    assert row["run_id"] == run_id
    assert row["verified"] and row["published"] and not row["dry_run"]
    assert (row["k"], row["k_achieved"], row["rows_out"]) == (
        3,
        recorded["privacy"]["k_achieved"],
        200,
    )
    assert row["report"]["run"]["rebuilt_by"] == "tclose verify"
    assert row["report"]["run"]["id"] == run_id
    assert row["report"]["config_sha256"] == recorded["config_sha256"]
    assert row["report"]["target"]["table"] == target
    privacy = row["report"]["privacy"]
    assert privacy["k_achieved"] == row["k_achieved"] and isinstance(privacy["k_achieved"], int)
    assert privacy["t_achieved"]["charge"] == recorded["privacy"]["t_achieved"]["charge"]

    code, out = _verify(config)  # the row exists now: verify changes nothing
    assert code == 0 and "rebuilt the audit record" not in out, out
    assert _audit(db, audit) == [row]


def test_an_existing_audit_row_is_left_alone(lite, tmp_path):
    source, target, audit = lite.name("patients"), lite.name("anon"), lite.name("audit")
    lite.create_patients(source, n=120)
    document = lite.config(source, target)
    document["report"] = {"table": audit}
    config = lite.write_config(document)
    assert main(["-q", "run", str(config)]) == 0
    before = _audit(lite, audit)
    code, out = _verify(config)
    assert code == 0 and "rebuilt the audit record" not in out, out
    assert _audit(lite, audit) == before and "rebuilt_by" not in before[0]["report"]["run"]


def test_a_failed_verification_is_rebuilt_as_not_verified(lite, tmp_path):
    config, target, audit, run_id = _published_without_audit_row(lite, tmp_path, rows=120)
    lite.execute(f"UPDATE {lite.quote(target)} SET age = 999 WHERE code = 'c000005'")  # a singleton
    code, out = _verify(config)
    assert code == 1 and f"rebuilt the audit record of run {run_id}" in out, out
    (row,) = _audit(lite, audit)
    assert row["run_id"] == run_id and row["published"] and not row["verified"]
    assert row["k_achieved"] == 1 and row["report"]["verification"]["passed"] is False


def test_the_runs_own_report_is_used_when_given(lite, tmp_path):
    config, _target, audit, run_id = _published_without_audit_row(lite, tmp_path, rows=120)
    recorded = json.loads((tmp_path / "report.json").read_text())
    code, out = _verify(config, "--report", str(tmp_path / "report.json"))
    assert code == 0 and f"rebuilt the audit record of run {run_id}" in out, out
    (row,) = _audit(lite, audit)
    assert row["verified"] and row["published"]
    stored = row["report"]
    assert stored["run"]["rebuilt_by"] == "tclose verify"
    assert stored["run"]["started"] == recorded["run"]["started"]  # the run's own times
    assert stored["source"]["rows"] == recorded["source"]["rows"]


def test_no_report_table_no_rebuild(lite, tmp_path):
    source, target = lite.name("patients"), lite.name("anon")
    lite.create_patients(source, n=120)
    config = lite.write_config(lite.config(source, target))
    assert main(["-q", "run", str(config)]) == 0
    code, out = _verify(config)
    assert code == 0 and "rebuilt the audit record" not in out, out
    assert lite.tables() == {source, target}


def test_a_record_that_cannot_be_written_is_a_warning_not_the_verdict(lite, tmp_path, capsys):
    source, target, audit = lite.name("patients"), lite.name("anon"), lite.name("audit")
    lite.create_patients(source, n=120)
    document = lite.config(source, target)
    # Published without an audit table (a row that cannot be written in the publishing
    # transaction would stop the release: tests/test_audit_in_publish.py); then one of the
    # wrong shape is configured.
    assert main(["-q", "run", str(lite.write_config(document))]) == 0
    lite.execute(f"CREATE TABLE {lite.quote(audit)} (run_id TEXT PRIMARY KEY, note TEXT)")
    document["report"] = {"table": audit}
    config = lite.write_config(document)
    capsys.readouterr()
    assert main(["-q", "verify", str(config)]) == 0
    captured = capsys.readouterr()
    assert "verdict: verified" in captured.out and "rebuilt the audit record" not in captured.out
    assert "could not rebuild the audit record of run" in captured.err
    assert "lacks the column(s) started_at" in captured.err
    assert lite.rows(audit) == []
