"""``njit`` without importing Numba until a compiled kernel is first called.

Importing Numba costs ~0.3 s of CPU and ~50 MB; a small run calls no compiled kernel at all (the
kernels' NumPy twins handle small inputs), so the kernel modules decorate their functions with
this module's :func:`njit` instead of Numba's. It records the function and Numba's options and
returns a :class:`LazyKernel`; the first call of any kernel imports Numba and makes the real
dispatchers (``numba.njit(**options)(function)``) of **every** lazy kernel of that function's
module, replacing the module's names with them. Compiled code finds its callees among its
module's globals when Numba compiles it, so they must be Numba dispatchers by then; the kernel
modules only call compiled functions of their own module (``tests/test_numba_cache_safety.py``
checks it, for the cache's sake), so binding the module is enough.

After the first call the module's names are Numba's own dispatchers, with ``py_func``, caching
and everything else; a :class:`LazyKernel` kept elsewhere (``from module import kernel`` made
before that call) forwards its calls and attributes to its dispatcher. Dispatchers are made, not
compiled: compilation (or the load from Numba's on-disk cache) still happens on the first call
with each type signature, as with ``numba.njit``.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()


class LazyKernel:
    """A function to be compiled by ``numba.njit(**options)`` when it is first called.

    Attributes:
        py_func: the Python function, as on a Numba dispatcher.
        options: the keyword options for ``numba.njit``.
    """

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = function
        self.options = options
        self._dispatcher: Any = None
        functools.update_wrapper(self, function)

    def dispatcher(self) -> Any:
        """Numba's dispatcher of this function, made (with every lazy kernel of its module, whose
        names in the module become their dispatchers) on the first use."""
        if self._dispatcher is None:
            bind_module(self.py_func.__globals__)
        return self._dispatcher

    def _make(self) -> Any:
        with _lock:
            if self._dispatcher is None:
                self._dispatcher = _numba().njit(**self.options)(self.py_func)
            return self._dispatcher

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.dispatcher()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper does not have (signatures, stats, ...).
        if name.startswith("__") or name == "_dispatcher":
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _kernel_named, (self.py_func.__module__, self.py_func.__qualname__)

    def __repr__(self) -> str:
        state = "made" if self._dispatcher is not None else "not made yet"
        return f"<lazy Numba kernel {self.py_func.__module__}.{self.py_func.__qualname__}: {state}>"


def njit(**options: Any) -> Callable[[F], F]:
    """Decorator: like ``numba.njit(**options)``, but Numba is imported and the dispatcher made
    only when a kernel of the function's module is first called (see the module docstring)."""

    def decorate(function: F) -> F:
        return LazyKernel(function, options)  # type: ignore[return-value]

    return decorate


def bind_module(namespace: dict[str, Any]) -> None:
    """Replace every :class:`LazyKernel` of a module's ``namespace`` (its globals) by its Numba
    dispatcher, so that compiled code of that module finds dispatchers among its globals."""
    with _lock:
        for name, value in list(namespace.items()):
            if isinstance(value, LazyKernel) and value.py_func.__globals__ is namespace:
                namespace[name] = value._make()


def dispatcher_of(kernel: Any) -> Any:
    """The Numba dispatcher of ``kernel`` (a :class:`LazyKernel` or already a dispatcher)."""
    return kernel.dispatcher() if isinstance(kernel, LazyKernel) else kernel


def _kernel_named(module: str, qualname: str) -> Any:
    """The object a kernel module holds under ``qualname`` (unpickling a :class:`LazyKernel`)."""
    __import__(module)
    value: Any = sys.modules[module]
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _numba() -> Any:
    """Import Numba, and let the compile notices watching this process listen to it."""
    import numba

    from .kernel_notice import numba_loaded

    numba_loaded()
    return numba
