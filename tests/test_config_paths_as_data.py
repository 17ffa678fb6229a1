"""A configuration error's place is data from where it is raised to where it is shown.

Every ``ConfigError`` of the framework, its connectors and its plugins is given its key path as
data (``ConfigError(problem, path=...)``), never as ``==> At ...`` text: a message is never
parsed for a place, a key holding a dot (a column ``"a.b"``) stays one key, and the Python API's
errors carry the same path as the configuration's. A file that still writes a place as text
would be listed in ``tests/config_places_pending/<package>.txt`` (none is), like
``tests/layers_pending``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tclose.base.config import parse_config
from tclose.base.options import validate_options
from tclose.base.registry import load_registry
from tclose.core.api import anonymize
from tclose.core.plan import resolve_plugins
from tclose.errors import ConfigError
from tclose.interfaces import Option

ROOT = Path(__file__).resolve().parents[1]
PENDING = ROOT / "tests" / "config_places_pending"
MARK = "==> At"

sys.path.insert(0, str(Path(__file__).parent))
from pending_lists import pending  # noqa: E402


def _written_places(path: Path) -> list[int]:
    """The lines of ``path`` holding a string literal (or f-string part) with a place as text;
    docstrings, which show what an error reads like, left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    documented = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and ast.get_docstring(node) is not None
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and MARK in node.value
        and id(node) not in documented
    )


def _code_files() -> list[Path]:
    files = [
        p
        for folder in ("framework", "plugins", "connectors")
        for p in (ROOT / folder).rglob("*.py")
    ]
    return [p for p in files if p != ROOT / "framework" / "errors.py"]


def test_no_module_writes_a_place_as_text_unless_listed():
    listed = pending(PENDING) if PENDING.exists() else {}
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _code_files()
        if (lines := _written_places(path))
    }
    unlisted = {f: lines for f, lines in found.items() if f not in listed}
    assert unlisted == {}, "give these places as data: ConfigError(problem, path=(...))"
    gone = sorted(f for f in listed if f not in found)
    assert gone == [], f"delete these lines from {PENDING.name}/: {gone}"


def test_the_rule_sees_a_place_in_a_literal_and_in_an_f_string(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        'a = "no place"\n'
        'b = f"==> At {x}\\nproblem"\n'
        'c = ("==> At key: k\\n" "problem")\n'
        'd = "docs mention At key: only"\n'
        'def f():\n    """Reads: ==> At a ==> At key: b"""\n',
        encoding="utf-8",
    )
    assert _written_places(module) == [2, 3]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "a.b": rng.normal(40, 10, 60),
            "zip": rng.integers(1000, 1010, 60),
            "c.d": rng.choice(["x", "y", "z"], 60),
            "pay": rng.normal(100, 20, 60),
        }
    )


def _document(confidential: dict, **changes) -> dict:
    document = {
        "source": {"url": "sqlite:///unused.db", "table": "people"},
        "target": {"table": "people_anon"},
        "attributes": {
            "a.b": {"role": "quasi_identifier", "type": "numeric"},
            "zip": {"role": "quasi_identifier", "type": "numeric"},
            **confidential,
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {}},
    }
    document.update(changes)
    return document


CASES = {
    "unknown distance of a column with a dot": (
        {"c.d": {"role": "confidential", "type": "nominal", "distance": "nope"}},
        {},
        ("attributes", "c.d", "distance"),
    ),
    "distance option set from the attribute's key": (
        {"c.d": {"role": "confidential", "type": "nominal", "distance_options": {"hierarchy": {}}}},
        {},
        ("attributes", "c.d", "distance_options"),
    ),
    "unknown distance option": (
        {"pay": {"role": "confidential", "type": "numeric", "distance_options": {"bogus": 1}}},
        {},
        ("attributes", "pay", "distance_options", "bogus"),
    ),
    "unknown algorithm option": (
        {"pay": {"role": "confidential", "type": "numeric"}},
        {"algorithm": {"name": "t-first", "options": {"bogus": 1}}},
        ("algorithm", "options", "bogus"),
    ),
    "t for an algorithm that does not enforce it": (
        {"pay": {"role": "confidential", "type": "numeric"}},
        {"algorithm": {"name": "mdav", "options": {}}},
        ("privacy", "t"),
    ),
    "unknown algorithm": (
        {"pay": {"role": "confidential", "type": "numeric"}},
        {"algorithm": {"name": "nope", "options": {}}},
        ("algorithm", "name"),
    ),
    "hierarchy that is not one tree": (
        {"c.d": {"role": "confidential", "type": "nominal", "hierarchy": {"A": ["x"], "B": ["y"]}}},
        {},
        ("attributes", "c.d", "hierarchy"),
    ),
}


def _config_error(document: dict) -> ConfigError:
    """The error of ``document`` as ``tclose run`` finds it: parsing, then the plugins."""
    with pytest.raises(ConfigError) as caught:
        resolve_plugins(parse_config(document), load_registry(entry_points=False))
    return caught.value


def _api_error(confidential: dict, changes: dict) -> ConfigError:
    """The error of the same settings given to :func:`tclose.anonymize`."""
    frame = _frame()
    algorithm = changes.get("algorithm", {"name": "t-first", "options": {}})
    with pytest.raises(ConfigError) as caught:
        anonymize(
            frame[["a.b", "zip", *confidential]],
            {"a.b": "numeric", "zip": "numeric"},
            confidential,
            k=3,
            t=0.5,
            algorithm=algorithm["name"],
            registry=load_registry(entry_points=False),
            **algorithm["options"],
        )
    return caught.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_api_and_the_configuration_give_one_error_the_same_path(case):
    confidential, changes, path = CASES[case]
    from_config = _config_error(_document(confidential, **changes))
    from_api = _api_error(confidential, changes)
    assert from_config.path == from_api.path == path
    assert from_config.problem == from_api.problem


def test_a_key_with_a_dot_is_one_key_of_the_path():
    error = _config_error(
        _document({"c.d": {"role": "confidential", "type": "nominal", "distance": "nope"}})
    )
    assert error.path == ("attributes", "c.d", "distance")
    assert str(error).startswith("==> At attributes.c.d ==> At key: distance\n")


@pytest.mark.parametrize(
    ("path", "given", "expected"),
    [
        (("algorithm", "options"), {"n": "x"}, ("algorithm", "options", "n")),
        (
            ("attributes", "a.b", "distance_options"),
            {"n": 0},
            ("attributes", "a.b", "distance_options", "n"),
        ),
        ((), {"other": 1}, ("other",)),
    ],
)
def test_an_option_error_is_placed_below_its_mapping(path, given, expected):
    schema = {"n": Option(int, 1, "a count", min=1)}
    with pytest.raises(ConfigError) as caught:
        validate_options("plugin", schema, given, path)
    assert caught.value.path == expected


@pytest.mark.parametrize(
    ("where", "path", "text"),
    [
        (("report", "json"), ("report", "json"), "==> At report ==> At key: json\nbad"),
        ("--html: ", None, "--html: bad"),
        ("", None, "bad"),
    ],
)
def test_what_is_not_in_the_configuration_has_no_place(where, path, text):
    error = ConfigError.given_at(where, "bad")
    assert (error.path, str(error)) == (path, text)


@pytest.mark.parametrize(
    ("error", "line", "text"),
    [
        (
            ConfigError("bad", path=("privacy", "k")),
            4,
            "==> At privacy ==> At key: k (line 4)\nbad",
        ),
        (
            ConfigError("bad", path=("privacy", "k"), line=3),
            4,
            "==> At privacy ==> At key: k (line 3)\nbad",
        ),
        (ConfigError("bad", path=("privacy", "k")), None, "==> At privacy ==> At key: k\nbad"),
        (
            ConfigError("bad", path=("target", "url")),
            2,
            "==> At target ==> At key: url (line 2)\nbad",
        ),
        (ConfigError("no place"), 9, "no place"),
    ],
)
def test_the_located_text_adds_the_line_the_error_lacks(error, line, text):
    assert error.located_text(line) == text
