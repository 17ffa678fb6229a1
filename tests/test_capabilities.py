"""Connector capabilities are declared, never probed.

- Every optional capability of a database is a flag of one frozen
  :class:`tclose.connector.Capabilities`, read through :func:`tclose.connector.capabilities_of`:
  no module of framework/ asks a database or a session for a member by name (``getattr`` or
  ``hasattr`` with a capability's, an optional Protocol member's or a built-in connector class's
  attribute name), outside the numeric kernels and the block infrastructure.
- A built-in connector declares a flag exactly when it implements the Protocol the flag
  promises (:data:`tclose.connector.PROMISED`), so that declaring replaced probing without
  losing a capability.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from tclose.connector import (
    NO_CAPABILITIES,
    OPTIONAL,
    PROMISED,
    REQUIRED,
    Capabilities,
    capabilities_of,
    protocol_members,
    unkept_promises,
)
from tclose.connectors.duckdb import DuckDBDatabase
from tclose.connectors.files import FileDatabase
from tclose.connectors.mysql import MySQLDatabase
from tclose.connectors.postgresql import PostgreSQLDatabase
from tclose.connectors.sql import Session, SQLDatabase
from tclose.connectors.sqlite import SQLiteDatabase

ROOT = Path(__file__).resolve().parents[1]
#: Folders of framework/ whose duck typing is not about connectors (issue 30, WP4's plugins).
NOT_CONNECTOR_CODE = ("blocks", "kernels")
BUILT_INS = (SQLDatabase, SQLiteDatabase, PostgreSQLDatabase, MySQLDatabase, DuckDBDatabase)
BUILT_INS += (FileDatabase,)


def _members(cls: type) -> set[str]:
    """The public names ``cls`` has: attributes, methods and annotated instance attributes."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    for klass in cls.__mro__:
        names |= set(vars(klass).get("__annotations__", {}))
    return names


def _assigned_attributes() -> set[str]:
    """The names the connectors' code assigns on ``self`` (instance attributes)."""
    names = set()
    for path in (ROOT / "connectors").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            stored = isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
            if stored and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    return {n for n in names if not n.startswith("_")}


def capability_names() -> set[str]:
    """Every name a probe of a capability would ask for: the flags, the optional Protocols'
    members, and the attributes of the built-in databases and sessions (their classes' and
    those their code assigns), but the required members (which every connector has, so that
    nobody probes them)."""
    names = {f.name for f in dataclasses.fields(Capabilities)} | _assigned_attributes()
    for protocol in OPTIONAL.values():
        names |= set(protocol_members(protocol))
    for database in BUILT_INS:
        names |= _members(database) | _members(database.session_class)
    required = set().union(*(protocol_members(p) for p in REQUIRED.values()))
    return names - required


def probes(source: str, names: set[str]) -> list[str]:
    """The ``getattr``/``hasattr`` calls in ``source`` whose attribute is a literal of
    ``names``, as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "hasattr") or len(node.args) < 2:
            continue
        name = node.args[1]
        if isinstance(name, ast.Constant) and name.value in names:
            found.append(f"{node.lineno}: {name.value}")
    return found


def test_no_module_of_framework_probes_a_capability():
    names = capability_names()
    found = []
    for path in sorted((ROOT / "framework").rglob("*.py")):
        if path.relative_to(ROOT / "framework").parts[0] in NOT_CONNECTOR_CODE:
            continue
        found += [f"{path.relative_to(ROOT)}:{p}" for p in probes(path.read_text(), names)]
    assert found == [], "read capabilities_of(database) instead of probing: " + ", ".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("getattr(db, 'release_problem', None)", ["1: release_problem"]),
        ("x = hasattr(session, 'hold')", ["1: hold"]),
        ("getattr(db, 'engine', None).dialect", ["1: engine"]),
        ("getattr(session, 'connection', None)", ["1: connection"]),
        ("getattr(connector, 'notes', None)", ["1: notes"]),
        ("getattr(db, 'times_as_durations', False)", []),  # no connector has it any more
        ("getattr(spec, 'round', False)", []),  # not a connector's name
        ("getattr(db, name, None)", []),  # not a literal: the rule cannot tell
        ("db.table('x')", []),
        ("getattr(session, 'read_rows')", []),  # a required member
    ],
)
def test_the_probe_rule_finds_probes_by_name(source, expected):
    assert probes(source, capability_names()) == expected


@pytest.mark.parametrize("database", BUILT_INS, ids=lambda d: d.__name__)
def test_a_built_in_declares_exactly_the_protocols_it_implements(database):
    declared = dataclasses.asdict(database.declared)
    members = _members(database) | _members(database.session_class)
    for flag, protocol in PROMISED.items():
        if flag == "joins_in_snapshot":  # its sessions join; the database says when it may
            continue
        implemented = all(m in members for m in protocol_members(protocol))
        assert declared[flag] == implemented, (database.__name__, flag)


def test_capabilities_are_declared_or_nothing():
    assert capabilities_of(object()) == NO_CAPABILITIES == Capabilities()
    declared = Capabilities(releases=True)
    assert capabilities_of(SimpleNamespace(capabilities=declared)) is declared
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.releases = False  # type: ignore[misc]


def test_a_session_declares_its_databases_capabilities():
    database = SQLiteDatabase.__new__(SQLiteDatabase)
    session = Session.__new__(Session)
    session.database = database
    assert capabilities_of(session) == capabilities_of(database)
    assert capabilities_of(database).snapshot_reads and capabilities_of(database).stream_check


def test_unkept_promises_name_each_missing_member():
    class Half:
        def release_problem(self, name):
            return None

    assert unkept_promises(Capabilities(releases=True), Half(), None) == []
    assert unkept_promises(Capabilities(table_identity=True), Half(), None) == [
        "table_identity: table_comment",
        "table_identity: table_identity",
    ]
    session = SimpleNamespace(hold=lambda name: None)
    assert unkept_promises(Capabilities(read_hold=True), Half(), session) == []
