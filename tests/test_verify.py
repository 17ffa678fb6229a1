"""`tclose verify`: an auditor re-checks a published table from its rows, with or without the
source, and against the run's audit report."""

from __future__ import annotations

import sqlite3

import pytest

from tclose.app.cli import main


@pytest.fixture
def published(sqlite_run, tmp_path):
    """Run the shared config with a JSON report; returns (config path, report path)."""
    document = sqlite_run.config()
    document["report"] = {"json": str(tmp_path / "run.json")}
    config = sqlite_run.write(document)
    assert main(["run", str(config)]) == 0
    return config, tmp_path / "run.json"


def _sql(helpers, statement):
    with sqlite3.connect(helpers.db) as connection:
        connection.execute(statement)


def test_verify_reads_only_the_target_by_default(sqlite_run, published, capsys):
    config, _ = published
    capsys.readouterr()
    _sql(sqlite_run, "ALTER TABLE discharges RENAME TO discharges_elsewhere")
    assert main(["verify", str(config)]) == 0
    out = capsys.readouterr().out
    assert "PASS  k_anonymity: expected >= 3" in out and "PASS  t_closeness:charge" in out
    assert "row_count" not in out and "use --source" in out
    assert main(["verify", "--source", str(config)]) == 3
    assert "discharges" in capsys.readouterr().err


def test_verify_with_source_compares_rows_and_confidential_values(sqlite_run, published, capsys):
    config, _ = published
    assert main(["verify", "--source", str(config)]) == 0
    assert "PASS  confidential_multiset:charge" in capsys.readouterr().out
    _sql(sqlite_run, "UPDATE discharges_anon SET charge = charge + 1 WHERE tclose_row = 1")
    assert main(["verify", "--source", str(config)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  confidential_multiset:charge" in out and "verdict: NOT verified" in out


def test_verify_against_the_report_checks_digest_and_row_count(sqlite_run, published, capsys):
    config, report = published
    assert main(["verify", str(config), "--report", str(report)]) == 0
    assert "PASS  config_sha256" in capsys.readouterr().out
    _sql(sqlite_run, "DELETE FROM discharges_anon WHERE tclose_row = 1")
    assert main(["verify", str(config), "--report", str(report)]) == 1
    assert "FAIL  row_count: expected 400, got 399" in capsys.readouterr().out
    other = sqlite_run.config()
    other["privacy"]["k"] = 2
    assert (
        main(["verify", str(sqlite_run.write(other, "other.yaml")), "--report", str(report)]) == 1
    )
    assert "FAIL  config_sha256" in capsys.readouterr().out


def test_verify_detects_a_class_pushed_above_t(sqlite_run, published, capsys):
    config, _ = published
    # Give every row of one class the same (largest) charge: its EMD jumps.
    _sql(
        sqlite_run,
        """UPDATE discharges_anon SET charge = (SELECT MAX(charge) FROM discharges_anon)
        WHERE (age, zip, length_of_stay) =
              (SELECT age, zip, length_of_stay FROM discharges_anon WHERE tclose_row = 1)""",
    )
    assert main(["verify", str(config)]) == 1
    assert "FAIL  t_closeness:charge: expected <= 0.2" in capsys.readouterr().out


def test_verify_measures_t_of_an_algorithm_that_does_not_enforce_it(sqlite_run, capsys):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "mdav"}
    document["privacy"] = {"k": 3}  # t with mdav is a configuration error
    config = sqlite_run.write(document)
    assert main(["run", str(config)]) == 0
    capsys.readouterr()
    assert main(["verify", str(config)]) == 0
    out = capsys.readouterr().out
    assert "info  t of charge (measured, not enforced by mdav)" in out
    assert "t_closeness" not in out


def test_verify_needs_no_algorithm_plugin_and_then_checks_t(sqlite_run, published, capsys):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "an-uninstalled-algorithm"}
    assert main(["verify", str(sqlite_run.write(document, "auditor.yaml"))]) == 0
    assert "PASS  t_closeness:charge" in capsys.readouterr().out


def test_verify_of_a_missing_target_exits_3(sqlite_run, capsys):
    assert main(["verify", str(sqlite_run.write(sqlite_run.config()))]) == 3
    assert "discharges_anon does not exist" in capsys.readouterr().err


def test_verify_with_an_unreadable_report_exits_2(sqlite_run, published, tmp_path, capsys):
    config, _ = published
    assert main(["verify", str(config), "--report", str(tmp_path / "absent.json")]) == 2
    assert "Cannot read the report" in capsys.readouterr().err
