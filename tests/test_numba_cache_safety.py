"""Numba's on-disk cache must never run a stale compiled helper.

``cache=True`` keys a cached function on its own source file only. A cached function that calls
a compiled helper defined in another file keeps running the old helper after that file changes
(see ``framework/kernels/_compiled.py``). This test reads every cached compiled function of the
kernel modules and fails if it calls a compiled function of another module.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import sys
import textwrap
from pathlib import Path

import pytest
from numba.core.registry import CPUDispatcher

import tclose.kernels as kernels
from tclose.base.jit import LazyKernel

MODULES = sorted(
    [f"{kernels.__name__}.{info.name}" for info in pkgutil.iter_modules(kernels.__path__)]
    + ["tclose.measures._linkage"]
)


def load_previous():
    """``tests/k_first_previous.py`` (the tests run in importlib mode: no sibling imports)."""
    if "k_first_previous" not in sys.modules:
        path = Path(__file__).with_name("k_first_previous.py")
        spec = importlib.util.spec_from_file_location("k_first_previous", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["k_first_previous"] = module
        spec.loader.exec_module(module)
    return sys.modules["k_first_previous"]


def is_kernel(value) -> bool:
    return isinstance(value, (LazyKernel, CPUDispatcher))


def cached_kernels(module):
    """The module's own cached kernels, lazy or made (nothing is compiled here)."""
    for name, value in vars(module).items():
        if not is_kernel(value) or value.py_func.__module__ != module.__name__:
            continue
        if isinstance(value, LazyKernel):
            cached = bool(value.options.get("cache"))
        else:
            cached = type(value._cache).__name__ != "NullCache"
        if cached:
            yield name, value


def called_kernels(module, function):
    """The compiled functions that ``function``'s source calls, by name or ``module.name``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function.py_func)))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = None
        if isinstance(node.func, ast.Name):
            target = vars(module).get(node.func.id)
        elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            owner = vars(module).get(node.func.value.id)
            target = getattr(owner, node.func.attr, None) if owner is not None else None
        if is_kernel(target):
            yield target


@pytest.mark.parametrize("name", MODULES)
def test_cached_functions_call_only_their_own_module(name):
    module = importlib.import_module(name)
    foreign = [
        f"{function_name} calls {callee.py_func.__module__}.{callee.py_func.__name__}"
        for function_name, function in cached_kernels(module)
        for callee in called_kernels(module, function)
        if callee.py_func.__module__ != module.__name__
    ]
    assert not foreign, foreign


def test_the_check_finds_a_foreign_call():
    """The check itself, on the reference k-first kernel (kept in the tests without the cache): its
    ``_member_emd`` calls the emd module's compiled helpers, which the check reports when such code
    has ``cache=True``."""
    k_first_previous = load_previous()
    callees = {
        f"{c.py_func.__module__}.{c.py_func.__name__}"
        for c in called_kernels(k_first_previous, k_first_previous._member_emd)
    }
    assert callees == {
        "tclose.kernels.emd.numerator_sorted",
        "tclose.kernels.emd.emd_from_numerator",
    }
