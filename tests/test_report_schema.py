"""The report's and the configuration's models, their generated JSON Schemas, and the validator.

- The schemas committed under ``docs/schema/`` are the ones the models generate now, and ``tclose
  schema report|config`` prints them.
- The generator follows one rule per kind of type hint, and the validator accepts what conforms
  and names the JSON path of the first problem, never a value.
- A report tclose builds conforms to its schema, and every member it writes is one the model
  declares (no field written that the schema does not describe), in the model's order.
- The configuration's schema and parser agree: the shipped configuration and the tests' base
  configuration conform; a document without a key the schema requires, or with a key it does not
  declare, is refused by the parser too.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import pytest
import yaml

import tclose
from tclose.app.cli import SCHEMAS, main, schema_text
from tclose.base.config import parse_config
from tclose.base.config_document import config_schema
from tclose.base.registry import DISABLE_AUTOLOAD_ENV, PLUGINS_ENV
from tclose.base.schema import (
    ABSENT,
    Absent,
    Described,
    Fragment,
    Judged,
    json_data,
    json_schema,
    schema_problem,
)
from tclose.core.report_model import REPORT_VERSION, Report, report_schema
from tclose.errors import ConfigError, PluginError
from tclose.interfaces import Option

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("document", SCHEMAS)
def test_the_committed_schemas_are_current(document, capsys, monkeypatch):
    """``docs/schema/<document>.json`` is what ``tclose schema <document>`` prints now with the
    plugins tclose ships (rewrite it with ``TCLOSE_DISABLE_PLUGIN_AUTOLOAD=1
    TCLOSE_PLUGINS=diversity tclose schema <document> > docs/schema/<document>.json`` after
    changing a model)."""
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    monkeypatch.setenv(PLUGINS_ENV, "diversity")
    assert main(["schema", document]) == 0
    printed = capsys.readouterr().out
    assert printed == schema_text(document)
    committed = (ROOT / "docs" / "schema" / f"{document}.json").read_text(encoding="utf-8")
    assert committed == printed, f"docs/schema/{document}.json is not current"


def test_an_unknown_document_is_a_usage_error(capsys):
    assert main(["schema", "plugins"]) == 2
    assert "invalid choice" in capsys.readouterr().err


# --- the generator -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Leaf:
    """A leaf model.

    Its second paragraph is not part of the description."""

    size: Annotated[int, Fragment(minimum=0, maximum=9)]
    note: str | Absent = ABSENT


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tree:
    """A model of every kind of hint."""

    name: str
    flag: bool | None
    ratio: float
    anything: Any
    kind: Literal["a", "b"]
    leaves: Sequence[Leaf]
    by_name: Mapping[Annotated[str, Fragment(pattern="^[a-z]+$", description="a word")], Leaf]
    either: Leaf | int
    free: Annotated[Mapping[str, Any], Described(Leaf)] | Absent = ABSENT
    judged: Annotated[str, Judged("any value; a check judges it")] | Absent = ABSENT


def test_the_generator_has_one_rule_per_kind_of_hint():
    schema = json_schema(Tree, title="t")
    assert schema["title"] == "t" and schema["description"] == "A model of every kind of hint."
    properties = schema["properties"]
    assert properties["name"] == {"type": "string"}
    assert properties["flag"] == {"type": ["boolean", "null"]}
    assert properties["ratio"] == {"type": "number"}
    assert properties["anything"] == {}
    assert properties["kind"] == {"enum": ["a", "b"]}
    assert properties["leaves"] == {"type": "array", "items": {"$ref": "#/$defs/Leaf"}}
    assert properties["by_name"] == {
        "type": "object",
        "additionalProperties": {"$ref": "#/$defs/Leaf"},
        "propertyNames": {"type": "string", "pattern": "^[a-z]+$", "description": "a word"},
    }
    assert properties["either"] == {"anyOf": [{"$ref": "#/$defs/Leaf"}, {"type": "integer"}]}
    assert properties["free"] == {"$ref": "#/$defs/Leaf"}
    assert properties["judged"] == {"description": "any value; a check judges it"}
    assert schema["required"] == ["name", "flag", "ratio", "anything", "kind", "leaves"] + [
        "by_name",
        "either",
    ]
    leaf = schema["$defs"]["Leaf"]
    assert leaf["description"] == "A leaf model."
    assert leaf["properties"]["size"] == {"type": "integer", "minimum": 0, "maximum": 9}
    assert leaf["required"] == ["size"] and "additionalProperties" not in leaf


def test_a_hint_without_a_rule_is_an_error_not_a_silent_any():
    @dataclasses.dataclass
    class Odd:
        when: complex

    with pytest.raises(TypeError, match="no JSON Schema"):
        json_schema(Odd)


def test_json_data_keeps_the_field_order_and_leaves_absent_fields_out():
    leaf = Leaf(size=3)
    assert json_data(leaf) == {"size": 3}
    assert list(json_data(Leaf(size=1, note="n"))) == ["size", "note"]
    tree = Tree(
        name="x",
        flag=None,
        ratio=0.5,
        anything=(1, 2),
        kind="a",
        leaves=[leaf],
        by_name={"w": leaf},
        either=4,
    )
    data = json_data(tree)
    assert list(data) == [f.name for f in dataclasses.fields(Tree)][:8]
    assert data["leaves"] == [{"size": 3}] and data["anything"] == [1, 2] and data["flag"] is None


# --- the validator -------------------------------------------------------------------------------

TREE = {
    "name": "x",
    "flag": True,
    "ratio": 1,
    "anything": {"deep": [None]},
    "kind": "b",
    "leaves": [{"size": 0}, {"size": 9, "note": "n", "more": "allowed"}],
    "by_name": {"w": {"size": 1}},
    "either": 2,
    "free": {"size": 2, "extra": [1]},
    "judged": ["not", "a", "string"],
}


def _edited(steps: tuple, value: Any) -> dict:
    document = copy.deepcopy(TREE)
    node = document
    for step in steps[:-1]:
        node = node[step]
    if value is ABSENT:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value
    return document


@pytest.mark.parametrize(
    ("steps", "value", "said"),
    [
        (("name",), 3, "name is a number, not a string"),
        (("flag",), "yes", "flag is a string, not true, false or null"),
        (("ratio",), 10**400, "ratio is a number too large for a float, not a number"),
        (("ratio",), False, "ratio is a boolean, not a number"),
        (("kind",), "c", "kind is a string, not one of 'a', 'b'"),
        (("leaves", 1, "size"), 10, "leaves[1].size is a number, not a whole number from 0 to 9"),
        (("leaves", 1, "size"), 1.5, "leaves[1].size is a number, not a whole number from 0 to 9"),
        (("leaves", 0, "size"), ABSENT, "leaves[0].size is missing"),
        (("leaves",), {"size": 1}, "leaves is an object, not a list"),
        (("by_name", "W1"), {"size": 1}, "by_name has the key 'W1', not a word"),
        (("either",), {"note": "n"}, "either is an object, not a whole number"),
        (("either",), {"size": "1"}, "either.size is a string, not a whole number from 0 to 9"),
        (("free", "size"), None, "free.size is null, not a whole number from 0 to 9"),
        (("name",), ABSENT, "it has no name section"),
    ],
)
def test_the_validator_names_the_path_of_the_first_problem(steps, value, said):
    schema = json_schema(Tree)
    assert schema_problem(TREE, schema) is None
    assert schema_problem(_edited(steps, value), schema) == said


def test_a_closed_model_refuses_a_member_it_does_not_declare():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Closed:
        CLOSED = True
        a: int

    schema = json_schema(Closed)
    assert schema["additionalProperties"] is False
    assert schema_problem({"a": 1}, schema) is None
    assert (
        schema_problem({"a": 1, "b": 2}, schema) == "it has the member 'b', which it does not take"
    )


def test_the_problem_never_shows_a_value():
    secret = "s-secret-value"
    problem = schema_problem(_edited(("leaves", 0), secret), json_schema(Tree))
    assert problem == "leaves[0] is a string, not an object" and secret not in problem


# --- the report ----------------------------------------------------------------------------------


def _report() -> dict[str, Any]:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 80, 90),
            "ward": rng.choice(["a", "b", "c"], 90),
            "charge": rng.normal(size=90),
        }
    )
    result = tclose.anonymize(frame, {"age": "numeric", "ward": "nominal"}, ["charge"], k=3, t=0.5)
    return json.loads(json.dumps(result.report))


#: The models of mappings a plugin fills, which hold more members than they declare.
OPEN = {"CheckRecord", "ContentDigest"}


def _undeclared(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any], at=()) -> list:
    """Every member of ``value`` that an object schema with ``properties`` does not declare
    (but those of :data:`OPEN`), asserting that the declared ones are in the model's order."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in OPEN:
            return []
        schema = defs[name]
    found = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        if properties is not None and "additionalProperties" not in schema:  # a model's object
            names = list(properties)
            found += [(*at, k) for k in value if k not in properties]
            written = [k for k in value if k in properties]
            assert written == sorted(written, key=names.index), f"{at}: not in the model's order"
        for key, item in value.items():
            inner = (properties or {}).get(key, schema.get("additionalProperties", {}))
            found += _undeclared(item, inner if isinstance(inner, dict) else {}, defs, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _undeclared(item, schema.get("items", {}), defs, (*at, index))
    return found


def test_a_built_report_conforms_and_writes_only_declared_fields_in_order():
    report = _report()
    schema = report_schema()
    assert report["tool"]["report_version"] == REPORT_VERSION
    assert schema_problem(report, schema) is None
    assert _undeclared(report, schema, schema["$defs"]) == []
    assert list(report) == [f.name for f in dataclasses.fields(Report) if f.name in report]


def test_every_field_of_the_report_model_is_documented():
    """docs/reports.md names every section and every field of the typed sections."""
    text = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    schema = report_schema()
    missing = [name for name in schema["properties"] if f"`{name}" not in text]
    assert missing == []
    assert "tclose schema report" in text and "tool.report_version" in text


# --- the configuration ---------------------------------------------------------------------------


def _base_document() -> dict[str, Any]:
    return {
        "source": {"url": "sqlite:///a.db", "table": "people", "key": "id"},
        "target": {"table": "people_anon"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric", "weight": 2},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 3, "t": 0.2},
        "algorithm": {"name": "t-first", "options": {}},
        "report": {"json": "r.json", "interval_p": 0.1},
        "output": {"keep_key": False},
    }


def test_the_shipped_and_the_base_configurations_conform():
    schema = config_schema()
    shipped = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text(encoding="utf-8"))
    assert schema_problem(shipped, schema) is None
    assert schema_problem(_base_document(), schema) is None
    parse_config(_base_document())


def _required_paths(schema: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Every required key of the configuration's sections that the base document has."""
    defs = schema["$defs"]
    paths = [(name,) for name in schema["required"]]
    for section, model in (
        ("source", "SourceDocument"),
        ("target", "TargetDocument"),
        ("privacy", "PrivacyDocument"),
        ("algorithm", "AlgorithmDocument"),
    ):
        paths += [(section, name) for name in defs[model]["required"]]
    paths += [("attributes", "age", name) for name in defs["AttributeDocument"]["required"]]
    return paths


@pytest.mark.parametrize("path", _required_paths(config_schema()), ids=".".join)
def test_the_parser_refuses_a_document_without_a_key_the_schema_requires(path):
    document = _base_document()
    node = document
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    assert schema_problem(document, config_schema()) is not None
    with pytest.raises(ConfigError):
        parse_config(document)


@pytest.mark.parametrize(
    "section", [(), ("source",), ("target",), ("privacy",), ("report",), ("attributes", "age")]
)
def test_the_parser_refuses_a_key_the_schema_does_not_declare(section):
    document = _base_document()
    node = document
    for step in section:
        node = node[step]
    node["s30_unknown"] = 1
    assert "s30_unknown" in str(schema_problem(document, config_schema()))
    with pytest.raises(ConfigError, match="s30_unknown"):
        parse_config(document)


_CRITERION_KEYS = {
    "source.entity": Option(str, None, "The entity column."),
    "privacy.l": Option(int, None, "l-diversity.", min=1),
    "privacy.l_kind": Option(str, "distinct", "The kind.", choices=("distinct", "entropy")),
    "report.s30_note": None,
}


@pytest.mark.parametrize(
    ("key", "value", "conforms"),
    [
        ("source.entity", "person", True),
        ("source.entity", 7, False),
        ("privacy.l", 2, True),
        ("privacy.l", 0, False),
        ("privacy.l_kind", "entropy", True),
        ("privacy.l_kind", "most", False),
        ("report.s30_note", {"any": ["value"]}, True),
    ],
)
def test_criterion_keys_are_in_the_schema_as_the_parser_takes_them(key, value, conforms):
    """A key a criterion declares is a property of its section in the schema built with it,
    checked as its option checks it; the parser agrees, and without the key both refuse it."""
    document = _base_document()
    section, _, name = key.partition(".")
    document[section][name] = value
    if key == "privacy.l_kind":
        document["privacy"]["l"] = 2
    assert (schema_problem(document, config_schema(_CRITERION_KEYS)) is None) == conforms
    if conforms:
        parse_config(document, keys=_CRITERION_KEYS)
    else:
        with pytest.raises(ConfigError):
            parse_config(document, keys=_CRITERION_KEYS)
    assert schema_problem(document, config_schema()) is not None
    with pytest.raises(ConfigError, match=name):
        parse_config(document, keys={})


def test_a_criterion_key_of_no_section_has_no_schema():
    with pytest.raises(ValueError, match="nowhere.x"):
        config_schema({"nowhere.x": None})


# --- the report writers --------------------------------------------------------------------------


class _TwoHtmlWriters:
    """Registers a second ``html`` writer beside the built-in one."""

    @tclose.hookimpl
    def register_report_writers(self, register):
        register("html", lambda report: "<html></html>")


def test_a_format_written_by_two_plugins_is_an_error_naming_it():
    from tclose.base.registry import load_registry
    from tclose.core.report import report_writers

    writers = report_writers(load_registry(entry_points=False))
    assert set(writers) == {"json", "html"}
    assert json.loads(writers["json"](_report()))["tool"]["name"] == "tclose"
    with pytest.raises(PluginError, match="'html'"):
        report_writers(load_registry([_TwoHtmlWriters()], entry_points=False))


def test_a_page_no_plugin_writes_is_a_write_error_naming_the_file(tmp_path):
    """A registry without the html writer (built by hand, without the built-in plugins): the
    configured page is not written, and the error names it, as an unwritable path would be."""
    from types import SimpleNamespace

    from tclose.base.registry import Registry
    from tclose.core.report import finish_report
    from tclose.errors import DataError

    report = _report()
    page, data = tmp_path / "page.html", tmp_path / "report.json"
    config = SimpleNamespace(report_json=str(data), report_html=str(page))
    with pytest.raises(DataError, match=f"Cannot write the report {page}: no plugin writes"):
        finish_report(report, Registry(), config, None)  # type: ignore[arg-type]
    assert json.loads(data.read_text(encoding="utf-8")) == report and not page.exists()
