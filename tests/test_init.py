"""`tclose init`: from a table name to a commented YAML skeleton that loads once roles are set."""

from __future__ import annotations

import re
import sqlite3

import pytest
import yaml

from tclose.app.cli import main
from tclose.app.init_config import skeleton, url_for_file
from tclose.base.config import load_config, parse_config
from tclose.errors import ConfigError

DEMO_COLUMNS = [
    "patient_id",
    "name",
    "age",
    "zip",
    "admission_day",
    "length_of_stay",
    "procedures",
    "diagnoses",
    "severity",
    "charge",
    "ward",
]


def _set_role(text: str, column: str, role: str) -> str:
    """Edit the file as a user would: the role on the column's own line."""
    pattern = re.compile(rf"^(  {re.escape(column)}:\s*\{{role: )other", re.MULTILINE)
    edited, count = pattern.subn(rf"\g<1>{role}", text)
    assert count == 1, f"no line for {column}"
    return edited


@pytest.fixture
def skeleton_file(demo_db, tmp_path, capsys):
    path = tmp_path / "discharges.yaml"
    assert main(["init", f"sqlite:///{demo_db}", "discharges", "-o", str(path)]) == 0
    assert "set their roles" in capsys.readouterr().out
    return path


def test_skeleton_lists_every_column_with_type_and_role_other(skeleton_file):
    text = skeleton_file.read_text()
    document = yaml.safe_load(text)
    assert list(document["attributes"]) == DEMO_COLUMNS
    # the row key is written with role identifier (never published), and so is a
    # column whose name looks like a direct identifier; the rest other
    roles = {c: a["role"] for c, a in document["attributes"].items()}
    assert roles.pop("patient_id") == "identifier" and roles.pop("name") == "identifier"
    assert set(roles.values()) == {"other"}
    assert document["attributes"]["age"]["type"] == "numeric"
    assert document["attributes"]["ward"]["type"] == "nominal"
    assert document["source"]["key"] == "patient_id"
    assert document["target"] == {"table": "discharges_anon", "if_exists": "fail"}
    line = next(x for x in text.splitlines() if x.startswith("  name:"))
    assert "TEXT" in line and "direct identifier" in line
    assert "quasi_identifier" in text and "confidential" in text  # the comments explain roles


def test_skeleton_needs_roles_then_loads_and_runs(skeleton_file, tmp_path, monkeypatch, capsys):
    with pytest.raises(ConfigError, match="No attribute has role quasi_identifier"):
        load_config(skeleton_file)
    text = skeleton_file.read_text()
    # Left as `other`, the columns that describe a stay would single out every row together
    # (the linkage check): they are quasi-identifiers, as in configs/quickstart.yaml.
    stay = ("admission_day", "length_of_stay", "procedures", "diagnoses", "severity")
    for column in ("age", "zip", *stay):
        text = _set_role(text, column, "quasi_identifier")
    text = _set_role(text, "charge", "confidential")
    skeleton_file.write_text(text)

    config = load_config(skeleton_file)
    assert config.quasi_identifiers == ["age", "zip", *stay]
    assert config.confidential == ["charge"] and config.identifiers == ["patient_id", "name"]
    assert (
        config.line_of("attributes", "charge")
        == text.splitlines().index(next(x for x in text.splitlines() if x.startswith("  charge")))
        + 1
    )
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(skeleton_file)]) == 0
    assert (tmp_path / "reports" / "discharges.json").exists()
    assert (tmp_path / "reports" / "discharges.html").exists()


def test_password_in_the_url_is_never_written(monkeypatch):
    assert url_for_file("postgresql+psycopg://ann:s3cret@db:5432/x") == (
        "postgresql+psycopg://ann:${TCLOSE_DB_PASSWORD}@db:5432/x"
    )
    text = skeleton("postgresql://ann:s3cret@db/x", "public.people", [])
    assert "s3cret" not in text
    monkeypatch.setenv("TCLOSE_DB_PASSWORD", "from-env")
    document = yaml.safe_load(text)
    document["attributes"] = {"age": {"role": "quasi_identifier"}}
    document["privacy"] = {"k": 2}
    assert parse_config(document).source.url == "postgresql://ann:from-env@db/x"
    assert document["target"]["table"] == "public.people_anon"  # the source's schema


def test_odd_column_names_are_quoted(tmp_path):
    database = tmp_path / "odd.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            'CREATE TABLE t ("first name" TEXT, "yes" INTEGER, "select" REAL, '
            '"a: b" INTEGER, "123" DATE)'
        )
    output = tmp_path / "odd.yaml"
    assert main(["init", f"sqlite:///{database}", "t", "-o", str(output)]) == 0
    document = yaml.safe_load(output.read_text())
    assert list(document["attributes"]) == ["first name", "yes", "select", "a: b", "123"]
    assert document["attributes"]["123"]["type"] == "date"
    assert "key" not in document["source"]  # no primary key: SQLite's rowid identifies rows
    assert "# key: COLUMN  # name a unique, non-null column, or leave it out" in output.read_text()


def test_a_view_column_without_a_type_gets_a_clean_comment(tmp_path, capsys):
    """A view's computed column has no declared type: its comment was "# ; looks like ..."."""
    database = tmp_path / "view.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (id INTEGER, age INTEGER)")
        connection.execute("CREATE VIEW v AS SELECT id + 0 AS id, age FROM t")
    assert main(["init", f"sqlite:///{database}", "v"]) == 0
    text = capsys.readouterr().out
    assert "# looks like a direct identifier: not published" in text
    assert "# ;" not in text


def test_init_to_stdout_and_refusing_to_overwrite(demo_db, tmp_path, capsys):
    assert main(["init", f"sqlite:///{demo_db}", "discharges"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["source"]["table"] == "discharges"
    existing = tmp_path / "exists.yaml"
    existing.write_text("keep me")
    assert main(["init", f"sqlite:///{demo_db}", "discharges", "-o", str(existing)]) == 2
    assert "--force" in capsys.readouterr().err and existing.read_text() == "keep me"
    assert main(["init", f"sqlite:///{demo_db}", "discharges", "-o", str(existing), "--force"]) == 0
    assert "discharges_anon" in existing.read_text()


def test_init_on_a_missing_table_exits_3(demo_db, capsys):
    assert main(["init", f"sqlite:///{demo_db}", "nope"]) == 3
    assert "nope does not exist" in capsys.readouterr().err
