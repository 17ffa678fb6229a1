"""Adversarial: a NUL character in a text of the configuration.

YAML's ``"\\0"`` escape writes a NUL into a text. PostgreSQL's ``text`` and ``jsonb`` cannot hold
one, and the audit row (which records the configuration) is written in the publishing
transaction: such a configuration would fail on PostgreSQL only at the publish, after all the
work (on SQLite, a NUL in the audit table's name too). The loader refuses a NUL in any key or
text of the configuration, naming where, before anything connects.
"""

from __future__ import annotations

import pytest

from tclose.app.cli import main
from tclose.base.config import load_config, parse_config
from tclose.errors import ConfigError


def _with(document: dict, where: tuple, value) -> dict:
    node = document
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    return document


PLACES = [
    # (where the text goes, the text, the path the message names)
    (("report", "table"), "audit\0", "At report ==> At key: table"),
    (("report", "json"), "r\0.json", "At report ==> At key: json"),
    (("target", "table"), "anon\0", "At target ==> At key: table"),
    (("source", "url"), "sqlite:///x\0.db", "At source ==> At key: url"),
    (("algorithm", "options", "note"), "a\0b", "At algorithm.options ==> At key: note"),
    (
        ("attributes", "severity", "categories"),
        ["1", "2\0"],
        "At attributes.severity ==> At key: categories",
    ),
]


@pytest.mark.parametrize(("where", "value", "named"), PLACES)
def test_a_nul_in_a_text_is_refused_naming_its_path(sqlite_run, where, value, named):
    document = _with(sqlite_run.config(), where, value)
    with pytest.raises(ConfigError) as caught:
        parse_config(document)
    message = str(caught.value)
    assert named in message, message
    assert "NUL" in message and "PostgreSQL" in message
    assert "\0" not in message  # shown escaped, never printed raw
    assert "\\x00" in message


def test_a_list_item_is_named_by_its_position(sqlite_run):
    document = _with(sqlite_run.config(), ("attributes", "severity", "categories"), ["1", "2\0"])
    with pytest.raises(ConfigError, match=r"item 2 of the list"):
        parse_config(document)


def test_a_nul_in_a_key_is_refused_naming_the_key(sqlite_run):
    """A column name is a key of ``attributes``; a key of a plugin's options too."""
    document = sqlite_run.config()
    document["attributes"]["wa\0rd"] = document["attributes"].pop("ward")
    with pytest.raises(ConfigError) as caught:
        parse_config(document)
    message = str(caught.value)
    assert "At attributes ==> At key: wa\\x00rd" in message and "the key" in message
    assert "\0" not in message
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance_options"] = {"sc\0ale": 1}
    with pytest.raises(ConfigError, match=r"At attributes.charge.distance_options ==> At key"):
        parse_config(document)


def test_the_loader_refuses_the_yaml_escape_with_the_line(sqlite_run):
    """The YAML way to write it: ``"\\0"`` in a double-quoted text."""
    text = sqlite_run.write(sqlite_run.config()).read_text()
    path = sqlite_run.write(text + 'report:\n  table: "audit\\0"\n', "nul.yaml")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "At report ==> At key: table (line" in message, message
    assert "'audit\\x00'" in message and "NUL" in message


def test_text_without_nul_is_accepted(sqlite_run):
    """Guard: other control characters and any Unicode stay allowed."""
    document = _with(sqlite_run.config(), ("report", "table"), "audit_é\t✓")
    assert parse_config(document).report_table == "audit_é\t✓"


def test_a_run_with_a_nul_stops_before_connecting(sqlite_run, capsys):
    """A run whose configuration holds a NUL stops before connecting (exit 2), never at the publish
    after all the work."""
    document = sqlite_run.config()
    document["report"] = {"table": "audit\0", "json": str(sqlite_run.tmp_path / "r.json")}
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "At report ==> At key: table" in err and "NUL" in err and "PostgreSQL" in err
    assert sqlite_run.tables() == {"discharges"}
    assert not (sqlite_run.tmp_path / "r.json").exists()
