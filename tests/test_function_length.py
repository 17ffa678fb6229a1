"""No function of framework/, plugins/ or connectors/ is longer than :data:`LIMIT` lines.

A function's length is the span from its ``def`` line to its last line, without its docstring
(reference documentation is not held against it) and without its decorators; a nested
function counts in the one that holds it. Numba kernels are exempt: a function decorated with
``njit``/``jit`` (tclose's or Numba's), and any function defined inside one, is compiled as a
whole and cannot call helpers that are not kernels themselves.

A function still to be shortened by a work package of issue 30 is listed, one
``path::qualified.name`` per line, in ``tests/long_functions_pending/<package>.txt``: the test
fails on a long function no file lists and on a listed one that is no longer long (delete its
line, and the file once empty, with the change that shortens it).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("framework", "plugins", "connectors")
LIMIT = 60
PENDING = ROOT / "tests" / "long_functions_pending"

sys.path.insert(0, str(Path(__file__).parent))
from pending_lists import pending  # noqa: E402

Function = ast.FunctionDef | ast.AsyncFunctionDef


def is_kernel(function: Function) -> bool:
    """Whether ``function`` is decorated as a Numba kernel (``njit``, ``jit``, with or without
    arguments, by any module's name)."""
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def length(function: Function) -> int:
    """Lines from the ``def`` to the function's last line, its docstring left out."""
    span = function.end_lineno - function.lineno + 1
    if ast.get_docstring(function) is not None:
        docstring = function.body[0]
        span -= docstring.end_lineno - docstring.lineno + 1
    return span


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """``(qualified name, function)`` of every function outside Numba kernels, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if is_kernel(node):
                continue
            yield prefix + node.name, node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def long_functions(root: Path = ROOT) -> dict[str, int]:
    """``path::qualified.name`` → length, of every function longer than :data:`LIMIT`."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, function in functions(tree):
                if length(function) > LIMIT:
                    found[f"{path.relative_to(root).as_posix()}::{name}"] = length(function)
    return found


def test_no_function_is_longer_than_the_limit_unless_pending():
    listed = pending(PENDING)
    unlisted = [f"{name}: {n} lines" for name, n in long_functions().items() if name not in listed]
    assert unlisted == [], f"functions longer than {LIMIT} lines:\n" + "\n".join(unlisted)


def test_no_pending_function_is_already_short():
    found = long_functions()
    short = [f"{name} ({file})" for name, file in pending(PENDING).items() if name not in found]
    assert short == [], "delete these lines from tests/long_functions_pending/:\n" + "\n".join(
        short
    )


def test_the_measure_counts_code_not_docstrings_and_exempts_kernels(tmp_path):
    def body(indent: int, lines: int) -> str:
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(lines))

    docstring = '    """' + "\n" * 30 + '    """\n'
    source = (
        f"def fits():\n{docstring}{body(4, LIMIT - 1)}"  # the def and LIMIT - 1 lines
        f"def too_long():\n{body(4, LIMIT)}"
        f"@njit(cache=True)\ndef kernel():\n{body(4, LIMIT)}"
        f"class C:\n    @numba.jit\n    def method():\n{body(8, LIMIT)}"
        f"    def fits(self):\n{body(8, LIMIT - 1)}"
        f"def outer():\n    def inner():\n{body(8, LIMIT)}"
    )
    (tmp_path / "framework").mkdir()
    (tmp_path / "framework" / "m.py").write_text(source)
    assert long_functions(tmp_path) == {
        "framework/m.py::too_long": LIMIT + 1,
        "framework/m.py::outer": LIMIT + 2,
        "framework/m.py::outer.inner": LIMIT + 1,
    }
