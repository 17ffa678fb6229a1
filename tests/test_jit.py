"""``tclose.base.jit.njit``: Numba is imported only when a compiled kernel is first used (a small
run calls no compiled kernel and should not pay Numba's import), the kernel is then Numba's own
dispatcher, and it is compiled for its one declared signature only, with the kernels it calls and
nothing else (no surprise compilation)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from tclose.base.jit import LazyKernel, bind_module, dispatcher_of

# A kernel module as the built-in ones are written: lazy kernels calling each other by name.
MODULE = """
import numpy as np
from tclose.base.jit import njit


@njit("float64(float64)", cache={cache})
def square(v):
    return v * v


@njit("float64(readonly(float64[::1]))", cache={cache})
def sum_of_squares(values):
    total = 0.0
    for v in values:
        total += square(v)
    return total


@njit("float64(float64[::1])", cache={cache})
def unrelated(values):
    return values[0]


def plain(values):
    return float(np.sum(values))
"""


@pytest.fixture
def kernel_module(tmp_path, monkeypatch):
    """A fresh importable module of lazy kernels (uncached), removed from sys.modules after."""
    name = f"lazy_kernels_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(cache=False), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    yield module
    sys.modules.pop(name, None)


def test_the_module_holds_lazy_kernels_until_one_is_called(kernel_module):
    assert isinstance(kernel_module.square, LazyKernel)
    assert isinstance(kernel_module.sum_of_squares, LazyKernel)
    kept = kernel_module.sum_of_squares  # as `from module import sum_of_squares` would keep it
    assert kept(np.arange(4.0)) == 14.0  # 0 + 1 + 4 + 9, the compiled callee found by name
    # The kernel and the one it calls are then Numba's dispatchers, under their own names; the
    # module's other kernel is not made (nor compiled).
    assert isinstance(kernel_module.square, CPUDispatcher)
    assert isinstance(kernel_module.sum_of_squares, CPUDispatcher)
    assert isinstance(kernel_module.unrelated, LazyKernel)
    assert "not made yet" in repr(kernel_module.unrelated)
    assert kernel_module.plain is not None and not isinstance(kernel_module.plain, LazyKernel)
    # The kept reference forwards calls and attributes to the same dispatcher.
    assert dispatcher_of(kept) is kernel_module.sum_of_squares
    assert kept.py_func is kernel_module.sum_of_squares.py_func
    assert len(kept.signatures) == 1
    assert kept(np.arange(3.0)) == 5.0


def test_a_lazy_kernel_keeps_the_function_s_identity(kernel_module):
    kernel = kernel_module.square
    assert kernel.__name__ == "square"
    assert kernel.__module__ == kernel_module.__name__
    assert kernel.py_func(3.0) == 9.0  # the Python function, not compiled
    assert "not made yet" in repr(kernel)
    with pytest.raises(AttributeError):
        kernel.__no_such_dunder__  # noqa: B018


def test_a_lazy_kernel_pickles_as_the_module_s_object(kernel_module):
    kernel = kernel_module.square
    assert pickle.loads(pickle.dumps(kernel)) is kernel
    bind_module(vars(kernel_module))
    # After binding, the name means the dispatcher: unpickling gives what the module holds.
    assert pickle.loads(pickle.dumps(kernel)) is kernel_module.square


def test_threads_calling_first_at_once_share_one_dispatcher(kernel_module):
    kernel = kernel_module.sum_of_squares
    start = threading.Barrier(8)
    results: list[float] = []
    dispatchers: list[object] = []

    def call() -> None:
        start.wait()
        results.append(kernel(np.arange(5.0)))
        dispatchers.append(dispatcher_of(kernel))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [30.0] * 8
    assert all(d is kernel_module.sum_of_squares for d in dispatchers)


def _run(script: str, tmp_path, **env: str) -> dict:
    (tmp_path / "kernels_in_child.py").write_text(MODULE.format(cache=True), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=tmp_path,
        env={**_environment(), "PYTHONPATH": str(tmp_path), **env},
    )
    return json.loads(out.stdout.splitlines()[-1])


def _environment() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_importing_kernels_and_opening_a_compile_notice_do_not_import_numba(tmp_path):
    """Numba arrives with the first call, and the notice opened before it still sees the compilation
    (the cache is empty), which it announces."""
    result = _run(
        """
        import json, sys, numpy as np
        import kernels_in_child as k
        import tclose.kernels.emd, tclose.kernels.merge
        import tclose.kernels.t_first, tclose.kernels.k_first
        import tclose.kernels.refine, tclose.measures._linkage
        from tclose.base.compile_notice import compile_notice
        before = "numba" in sys.modules
        with compile_notice() as watch:
            inside = "numba" in sys.modules
            value = k.sum_of_squares(np.arange(3.0))
        print(json.dumps({"before": before, "inside": inside, "value": value,
                          "kernels": watch.kernels, "seconds": watch.seconds}))
        """,
        tmp_path,
        NUMBA_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert result["before"] is False and result["inside"] is False
    assert result["value"] == 5.0
    assert result["kernels"] >= 1 and result["seconds"] > 0


def test_a_kernel_is_compiled_for_its_declared_signature_only(kernel_module):
    """Arguments of another type are converted where Numba converts them safely (read-only or
    writable arrays for a read-only parameter, an int for a float) and refused otherwise: never
    compiled for a new signature."""
    kernel = kernel_module.sum_of_squares
    assert kernel(np.arange(3.0)) == 5.0
    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    assert kernel(read_only) == 5.0
    assert kernel_module.square(3) == 9.0
    for wrong in (np.arange(3, dtype=np.int32), np.arange(6.0)[::2], np.arange(3.0, dtype="f4")):
        with pytest.raises(TypeError, match="No matching definition"):
            kernel(wrong)
    writable_only = kernel_module.unrelated
    with pytest.raises(TypeError, match="No matching definition"):
        writable_only(read_only)
    for made in (kernel_module.sum_of_squares, kernel_module.square, kernel_module.unrelated):
        assert len(made.signatures) == 1
        assert not dispatcher_of(made)._can_compile


def test_a_kernel_declares_its_signature_unless_numba_inlines_it():
    from tclose.base.jit import njit

    with pytest.raises(TypeError, match="declares its one signature"):
        njit(None, cache=True)
    with pytest.raises(TypeError, match="declares its one signature"):
        njit("float64(float64)", inline="always")
    assert isinstance(njit(None, inline="always")(lambda v: v), LazyKernel)


def test_kernels_calling_each_other_in_a_cycle_are_refused(tmp_path, monkeypatch):
    name = f"cyclic_kernels_{tmp_path.name.replace('-', '_')}"
    source = """
from tclose.base.jit import njit


@njit("int64(int64)")
def ping(v):
    return pong(v - 1) if v > 0 else 0


@njit("int64(int64)")
def pong(v):
    return ping(v - 1) if v > 0 else 0
"""
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    try:
        with pytest.raises(TypeError, match="cycle: ping -> pong -> ping"):
            module.ping(3)
    finally:
        sys.modules.pop(name, None)
