"""The layers of tclose, over every executed import (at module level and inside functions).

Folders and what the modules in each may import (besides their own folder), lowest first:

=============  ==============================================================================
contract       framework/{interfaces,errors,hookspecs,connector,naming}.py: nothing else
base           framework/base/: contract
kernels        framework/kernels/: contract, base
blocks         framework/blocks/: contract, base, kernels
measures       framework/measures/: contract, base, kernels
core           framework/core/: contract, base, kernels, blocks, measures
testing        framework/testing/: contract, base, kernels, blocks, measures, core
app            framework/app/ and framework/__main__.py: all of the above
plugins        plugins/*.py: contract, base, kernels; never another plugin module
connectors     connectors/: contract, base, connectors
=============  ==============================================================================

No module of framework/ imports a plugin or a connector, nothing imports the package facade
``tclose`` itself (framework/__init__.py, which may import anything), and no module imports
itself through others (no cycle). Imports under ``if TYPE_CHECKING:`` are not executed and are
left out; ``from tclose.x import y`` counts as an import of ``tclose.x.y`` when that is a module.

An import still to be removed by a work package of issue 30 is listed, one ``source -> target``
pair of modules per line, in ``tests/layers_pending/<package>.txt``: the test fails on a
violation no file lists and on a listed one that no longer occurs (delete its line, and the
file once empty, with the change that removes it).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = {"framework": "tclose", "plugins": "tclose.plugins", "connectors": "tclose.connectors"}
CONTRACT = {"interfaces", "errors", "hookspecs", "connector", "naming"}
RANK = {
    "contract": 0,
    "base": 1,
    "kernels": 2,
    "blocks": 3,
    "measures": 3,
    "core": 4,
    "testing": 5,
    "app": 6,
}
PLUGIN_MAY = {"contract", "base", "kernels"}
CONNECTOR_MAY = {"contract", "base", "connector"}
PENDING = ROOT / "tests" / "layers_pending"

sys.path.insert(0, str(Path(__file__).parent))
from pending_lists import pending  # noqa: E402


def modules() -> dict[str, Path]:
    """Every module of the three code folders, by its import name."""
    found = {}
    for folder, package in ROOTS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def layer(module: str) -> str:
    """The layer of ``module`` (a name of :func:`modules`)."""
    parts = module.split(".")
    if module == "tclose":
        return "facade"
    if parts[1] == "plugins":
        return "plugin"
    if parts[1] == "connectors":
        return "connector"
    if len(parts) == 2 and parts[1] in CONTRACT:
        return "contract"
    if module == "tclose.__main__":
        return "app"
    return parts[1] if parts[1] in RANK else f"no layer ({module})"


def problem(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target``, or ``None``."""
    mine, theirs = layer(source), layer(target)
    if target == "tclose":
        return "imports the package facade (import the module that defines the name)"
    if mine == "facade":
        return None
    if mine == "plugin":
        if theirs == "plugin":
            return "a plugin imports another plugin module"
        return None if theirs in PLUGIN_MAY else f"a plugin imports {theirs}"
    if mine == "connector":
        return None if theirs in CONNECTOR_MAY else f"a connector imports {theirs}"
    if theirs in ("plugin", "connector"):
        return f"{mine} imports a {theirs}"
    if mine not in RANK or theirs not in RANK:
        return "a module outside the layers"
    if RANK[theirs] > RANK[mine] or (RANK[theirs] == RANK[mine] and theirs != mine):
        return f"{mine} imports {theirs}"
    return None


def imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every executed import of a module of ``known``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    not_executed = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in not_executed:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.append((name, node.lineno))
    return found


@cache
def graph() -> tuple[dict[str, frozenset[str]], tuple[tuple[str, str, str], ...]]:
    """The import graph, and every violation as ``(source -> target, why, file:line)``."""
    found = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    violations = []
    for module, path in found.items():
        for target, line in sorted(set(imports(module, path, set(found)))):
            edges[module].add(target)
            why = problem(module, target)
            if why:
                where = f"{path.relative_to(ROOT)}:{line}"
                violations.append((f"{module} -> {target}", why, where))
    return {m: frozenset(t) for m, t in edges.items()}, tuple(violations)


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules():
    assert cycles(graph()[0]) == []


def test_every_import_goes_down_the_layers_or_is_pending():
    listed = pending(PENDING)
    unlisted = [
        f"{pair}  # {why} ({where})" for pair, why, where in graph()[1] if pair not in listed
    ]
    assert unlisted == [], "imports against the layers:\n" + "\n".join(unlisted)


def test_no_pending_violation_is_already_removed():
    present = {pair for pair, _, _ in graph()[1]}
    gone = [f"{pair} ({name})" for pair, name in pending(PENDING).items() if pair not in present]
    assert gone == [], "delete these lines from tests/layers_pending/:\n" + "\n".join(gone)


def test_every_module_is_in_a_layer():
    assert [m for m in modules() if layer(m).startswith("no layer")] == []


def test_the_rules_refuse_what_the_issue_forbids():
    """The rules themselves, on names that need not exist."""
    assert problem("tclose.core.runner", "tclose.app.progress") == "core imports app"
    assert problem("tclose.core.guards", "tclose.plugins.audit_table") == "core imports a plugin"
    assert problem("tclose.blocks.service", "tclose.connectors.sql") == "blocks imports a connector"
    assert problem("tclose.plugins.auto", "tclose.plugins.t_first") is not None
    assert problem("tclose.plugins.mdav", "tclose.connectors.sql") is not None
    assert problem("tclose.plugins.mdav", "tclose.blocks.service") is not None
    assert problem("tclose.connectors.mysql", "tclose.core.published") is not None
    assert problem("tclose.base.registry", "tclose") is not None
    assert problem("tclose.blocks.split", "tclose.measures") is not None  # same rank, apart
    assert problem("tclose.plugins.mdav", "tclose.kernels.merge") is None
    assert problem("tclose.connectors.mysql", "tclose.connectors.sql") is None
    assert problem("tclose.app.cli", "tclose.core.runner") is None
    assert problem("tclose", "tclose.core.api") is None
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}) == [
        ["a", "b", "c"]
    ]
    assert cycles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path):
    path = tmp_path / "runner.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from tclose.app import cli\n"
        "def f():\n    from tclose.app.progress import Progress\n"
        "from . import plan\n"
    )
    known = {"tclose.app", "tclose.app.cli", "tclose.app.progress", "tclose.core.plan"}
    found = imports("tclose.core.runner", path, known)
    assert sorted(found) == [("tclose.app.progress", 5), ("tclose.core.plan", 6)]
