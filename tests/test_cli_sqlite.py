"""End-to-end runs of the ``tclose`` command on SQLite, including the contract's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tclose.app.cli import main
from tclose.app.demo import discharge_table


def _published_frame(helpers, table="discharges_anon") -> pd.DataFrame:
    return pd.DataFrame(helpers.rows(table), columns=helpers.columns(table))


def test_run_publishes_a_verified_k_anonymous_t_close_table(sqlite_run, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    config = sqlite_run.write(sqlite_run.config())

    assert main(["run", str(config), "--report", str(report_path)]) == 0

    out = _published_frame(sqlite_run)
    source = discharge_table(400, seed=1)
    assert len(out) == 400
    assert "name" not in out.columns and "patient_id" not in out.columns
    assert set(out.columns) >= {"tclose_row", "age", "zip", "charge", "ward", "severity"}
    # Independent check: classes from the written QI values.
    sizes = out.groupby(["age", "zip", "length_of_stay"]).size()
    assert sizes.min() >= 3
    assert sorted(out["charge"]) == sorted(source["charge"])
    assert sorted(out["ward"]) == sorted(source["ward"])
    # Pass-through columns not listed travel unchanged, row by row, with their charge.
    pairs = sorted(zip(out["charge"], out["severity"]))
    assert pairs == sorted(zip(source["charge"], source["severity"]))
    # Rows are shuffled: the published order is not the source order.
    assert not np.array_equal(
        out.sort_values("tclose_row")["charge"].to_numpy(), source["charge"].to_numpy()
    )

    report = json.loads(report_path.read_text())
    for key in ("config_sha256", "timings", "plugins"):
        assert key in report
    assert report["tool"]["version"]
    assert report["source"]["rows"] == 400 and report["target"]["rows"] == 400
    assert report["target"]["table"] == "discharges_anon"
    assert report["algorithm"]["name"] == "t-first"
    assert report["privacy"]["k"] == 3 and report["privacy"]["t"] == 0.2
    assert report["privacy"]["k_achieved"] >= 3
    assert report["privacy"]["t_achieved"]["charge"] <= 0.2 + 1e-9
    assert report["privacy"]["distance"] == {"charge": "emd-ordered"}
    assert report["clusters"]["min"] >= 3
    assert report["clusters"]["count"] * report["clusters"]["mean"] == pytest.approx(400)
    assert report["utility"]["sse"] > 0
    assert report["verification"]["passed"] is True
    assert {c["name"] for c in report["verification"]["checks"]} >= {
        "row_count",
        "k_anonymity",
        "t_closeness:charge",
        "confidential_multiset:charge",
    }
    assert "algorithm:t-first" in report["plugins"]
    assert "rows:" in capsys.readouterr().out


def test_a_table_named_like_a_staging_table_is_kept_and_source_untouched(sqlite_run):
    before = sqlite_run.rows("discharges")
    import sqlite3

    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("CREATE TABLE discharges_anon__tclose_staging (x INTEGER)")
    assert main(["run", str(sqlite_run.write(sqlite_run.config()))]) == 0
    assert "discharges_anon__tclose_staging" in sqlite_run.tables()  # not tclose's: kept
    assert sqlite_run.rows("discharges") == before


def test_existing_target_with_if_exists_fail_exits_3_and_keeps_it(sqlite_run, capsys):
    config = sqlite_run.write(sqlite_run.config())
    assert main(["run", str(config)]) == 0
    first = sqlite_run.rows("discharges_anon")
    assert main(["run", str(config)]) == 3
    assert "already exists" in capsys.readouterr().err
    assert sqlite_run.rows("discharges_anon") == first


def test_if_exists_replace_replaces(sqlite_run):
    document = sqlite_run.config()
    assert main(["run", str(sqlite_run.write(document))]) == 0
    document["target"]["if_exists"] = "replace"
    document["privacy"] = {"k": 10, "t": 0.2}
    assert main(["run", str(sqlite_run.write(document))]) == 0
    out = _published_frame(sqlite_run)
    assert out.groupby(["age", "zip", "length_of_stay"]).size().min() >= 10


def test_dry_run_publishes_nothing(sqlite_run, tmp_path):
    report = tmp_path / "dry.json"
    assert (
        main(
            [
                "run",
                str(sqlite_run.write(sqlite_run.config())),
                "--dry-run",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    assert sqlite_run.tables() == {"discharges"}
    data = json.loads(report.read_text())
    assert data["run"]["dry_run"] is True and data["verification"]["passed"] is True


def test_missing_table_exits_3(sqlite_run, capsys):
    document = sqlite_run.config()
    document["source"]["table"] = "no_such_table"
    assert main(["run", str(sqlite_run.write(document))]) == 3
    assert "no_such_table" in capsys.readouterr().err


def test_unknown_column_exits_3_naming_it(sqlite_run, capsys):
    document = sqlite_run.config()
    document["attributes"]["weight"] = {"role": "quasi_identifier", "type": "numeric"}
    assert main(["run", str(sqlite_run.write(document))]) == 3
    assert "'weight'" in capsys.readouterr().err
    assert sqlite_run.tables() == {"discharges"}


def test_fewer_rows_than_k_exits_3_and_creates_nothing(sqlite_run, capsys):
    document = sqlite_run.config()
    document["privacy"] = {"k": 401, "t": 0.2}
    assert main(["run", str(sqlite_run.write(document))]) == 3
    err = capsys.readouterr().err
    assert "400 rows" in err and "k = 401" in err
    assert sqlite_run.tables() == {"discharges"}


def test_null_in_quasi_identifier_exits_3_with_count(sqlite_run, capsys):
    import sqlite3

    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("UPDATE discharges SET age = NULL WHERE patient_id IN (3, 5)")
    assert main(["run", str(sqlite_run.write(sqlite_run.config()))]) == 3
    err = capsys.readouterr().err
    assert "'age'" in err and "2 missing" in err
    assert sqlite_run.tables() == {"discharges"}


def test_text_in_numeric_quasi_identifier_exits_3(sqlite_run, capsys):
    import sqlite3

    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("UPDATE discharges SET zip = 'unknown' WHERE patient_id = 9")
    assert main(["run", str(sqlite_run.write(sqlite_run.config()))]) == 3
    err = capsys.readouterr().err
    assert "'zip'" in err and "non-numeric" in err and "1 row(s)" in err
    assert "unknown" not in err  # the offending value itself may be personal data


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["privacy"].update(t=1.5), "privacy ==> At key: t"),
        (lambda d: d["privacy"].update(k=0), "At key: k"),
        (lambda d: d.update(extra=1), "At key: extra"),
        (lambda d: d["attributes"]["age"].update(type="numerc"), "attributes.age ==> At key: type"),
        (lambda d: d["attributes"]["age"].update(role="qi"), "attributes.age ==> At key: role"),
        (lambda d: d["algorithm"].update(name="no-such"), "algorithm ==> At key: name"),
        (lambda d: d["algorithm"].update(options={"bogus": 1}), "At key: bogus"),
        (lambda d: d["algorithm"].update(options={"partner": "best"}), "At key: partner"),
        (lambda d: d["target"].update(if_exists="maybe"), "target ==> At key: if_exists"),
        (lambda d: d["source"].pop("table"), "source ==> At key: table"),
        (lambda d: d["privacy"].pop("t"), "At key: t"),
    ],
)
def test_bad_configs_exit_2_naming_the_key(sqlite_run, capsys, mutate, expected):
    document = sqlite_run.config()
    mutate(document)
    assert main(["run", str(sqlite_run.write(document))]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert sqlite_run.tables() == {"discharges"}


def test_config_errors_give_the_file_line(sqlite_run, capsys):
    text = (
        f"source: {{url: 'sqlite:///{sqlite_run.db}', table: discharges}}\n"
        "target: {table: out}\n"
        "attributes:\n"
        "  age: {role: quasi_identifier, type: numeric}\n"
        "  charge: {role: confidential, typo: numeric}\n"
        "privacy: {k: 2, t: 0.3}\n"
    )
    assert main(["run", str(sqlite_run.write(text))]) == 2
    err = capsys.readouterr().err
    assert "attributes.charge ==> At key: typo (line 5)" in err


def test_invalid_yaml_and_missing_file_exit_2(sqlite_run, tmp_path, capsys):
    assert main(["run", str(sqlite_run.write("source: [unclosed\n"))]) == 2
    assert "line" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "absent.yaml")]) == 2


def test_env_var_expansion_in_url(sqlite_run, monkeypatch):
    monkeypatch.setenv("TCLOSE_TEST_DB", str(sqlite_run.db))
    document = sqlite_run.config()
    document["source"]["url"] = "sqlite:///${TCLOSE_TEST_DB}"
    assert main(["run", str(sqlite_run.write(document))]) == 0


def test_missing_env_var_is_a_config_error(sqlite_run, capsys):
    document = sqlite_run.config()
    document["source"]["url"] = "sqlite:///${TCLOSE_SURELY_UNSET_VARIABLE}"
    assert main(["run", str(sqlite_run.write(document))]) == 2
    assert "TCLOSE_SURELY_UNSET_VARIABLE" in capsys.readouterr().err


def test_verify_command_passes_on_published_and_fails_on_tampered(sqlite_run, capsys):
    import sqlite3

    config = sqlite_run.write(sqlite_run.config())
    assert main(["run", str(config)]) == 0
    assert main(["verify", str(config)]) == 0
    assert "verdict: verified" in capsys.readouterr().out
    with sqlite3.connect(sqlite_run.db) as connection:  # break one class apart
        connection.execute("UPDATE discharges_anon SET age = age + 0.5 WHERE tclose_row = 1")
    assert main(["verify", str(config)]) == 1
    assert "FAIL  k_anonymity" in capsys.readouterr().out


def test_mdav_reports_t_without_enforcing_it(sqlite_run, tmp_path):
    # t asked for is t enforced: privacy.t with mdav is a configuration error, so t is
    # measured only when it is not asked for.
    document = sqlite_run.config()
    document["algorithm"] = {"name": "mdav"}
    document["privacy"] = {"k": 3}
    report = tmp_path / "mdav.json"
    assert main(["run", str(sqlite_run.write(document)), "--report", str(report)]) == 0
    data = json.loads(report.read_text())
    assert data["privacy"]["t_enforced"] is False
    assert data["clusters"]["min"] == 3 and data["clusters"]["max"] <= 5
    assert "t_closeness:charge" not in {c["name"] for c in data["verification"]["checks"]}


def test_plugins_lists_builtins(capsys):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    for name in (
        "t-first",
        "mdav",
        "merge",
        "k-first",
        "emd-ordered",
        "sqlite",
        "postgresql",
        "mysql",
    ):
        assert name in out
    assert "tclose" in out


def test_usage_error_exits_2(capsys):
    assert main(["frobnicate"]) == 2


def test_python_m_tclose_and_demo(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tclose", "demo", "--rows", "600", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "verified:  yes" in result.stdout
    assert (tmp_path / "d" / "report.json").exists()
    report = json.loads((tmp_path / "d" / "report.json").read_text())
    assert report["source"]["rows"] == 600 and report["privacy"]["k_achieved"] >= 5


# --- progress display, noise levels, dry-run summary, error locations ----------------


def test_progress_on_a_terminal_redraws_one_line_and_keeps_finished_phases():
    import io

    from tclose.app.progress import Progress

    stream = io.StringIO()
    with Progress(stream, live=True, interval=0.01) as progress:
        progress("reading t")
        progress("reading t", 50, 200)
        progress._draw()
        progress("partitioning")
    text = stream.getvalue()
    assert "\r\x1b[K" in text
    assert "[######..................]  25%" in text
    assert "done  reading t (" in text and "done  partitioning (" in text


def test_progress_elsewhere_prints_plain_lines_only():
    import io

    from tclose.app.progress import Progress

    stream = io.StringIO()
    with Progress(stream, live=False) as progress:
        progress("reading t")
        progress("reading t", 10, 20)
        progress("writing")
        progress.write("WARNING something")
    lines = stream.getvalue().splitlines()
    assert [line.split("] ", 1)[-1] for line in lines] == [
        "reading t",
        "writing",
        "WARNING something",
    ]
    assert "\r" not in stream.getvalue()


def test_log_lines_never_show_url_passwords():
    import io
    import logging

    from tclose.app.progress import ConsoleHandler, Progress

    stream = io.StringIO()
    logger = logging.getLogger("tclose.test-redaction")
    handler = ConsoleHandler(Progress(stream, live=False))
    logger.addHandler(handler)
    try:
        logger.warning("cannot reach %s", "postgresql://ann:s3cret@db/x")
    finally:
        logger.removeHandler(handler)
    assert "s3cret" not in stream.getvalue() and "ann:***@db" in stream.getvalue()


def test_quiet_prints_nothing_and_verbose_logs_phases(sqlite_run, capsys):
    config = str(sqlite_run.write(sqlite_run.config()))
    assert main(["run", config, "--dry-run", "-q"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["-v", "run", config, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "INFO kernel done in" in err and "] reading discharges" in err


def test_dry_run_says_what_would_be_written(sqlite_run, capsys):
    assert main(["run", str(sqlite_run.write(sqlite_run.config())), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (
        "dry run, nothing published; would write table discharges_anon: 400 rows, 10 columns"
        " (tclose_row, age, zip, admission_day, length_of_stay, procedures, diagnoses, severity,"
        " charge, ward)" in out
    )


def test_plugin_option_errors_name_the_file_and_line(sqlite_run, capsys):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "t-first", "options": {"bogus": 1}}
    path = sqlite_run.write(document)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    line = path.read_text().splitlines().index("    bogus: 1") + 1
    assert f"error: {path}: ==> At algorithm.options ==> At key: bogus (line {line})" in err
    assert "Allowed options:" in err


def test_data_errors_of_run_say_nothing_was_published(sqlite_run, capsys):
    document = sqlite_run.config()
    document["source"]["table"] = "no_such_table"
    assert main(["run", str(sqlite_run.write(document))]) == 3
    assert "Nothing was published" in capsys.readouterr().err


def test_run_reports_rows_read_and_verified_to_the_progress_callback(sqlite_run):
    from tclose.base.config import load_config
    from tclose.core.runner import run

    calls = []
    run(
        load_config(sqlite_run.write(sqlite_run.config())),
        progress=lambda line, done=None, total=None: calls.append((line, done, total)),
    )
    reads = [c for c in calls if c[0].startswith("reading") and c[1] is not None]
    verifies = [c for c in calls if c[0].startswith("verifying") and c[1] is not None]
    assert reads and reads[-1][1] == 400 and reads[-1][2] is None
    assert verifies and verifies[-1][1:] == (400, 400)


def test_progress_draws_a_bar_or_a_row_count():
    import io

    from tclose.app.progress import Progress

    stream = io.StringIO()
    progress = Progress(stream, live=True, interval=60)
    progress("reading t", done=1500, total=None)
    progress._draw()
    assert "1,500 rows" in stream.getvalue()
    progress("reading t", done=50, total=100)
    progress._draw()
    assert "[############............]  50%" in stream.getvalue()
    progress.close()
