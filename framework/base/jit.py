"""``njit`` with one declared signature, and without importing Numba until a kernel is used.

Every compiled kernel declares the one signature it is compiled for::

    @njit("float64(readonly(float64[:, ::1]), int64)", cache=True)
    def kernel(x, k): ...

so that it is compiled once per environment and never again: Numba compiles the declared
signature (or loads it from its on-disk cache) and nothing else. A call whose arguments do not
convert to it (another dtype, a non-contiguous array) is a ``TypeError``, never a new
specialisation that would compile for seconds on some later run; the kernels' Python callers
normalise their inputs (``np.ascontiguousarray(..., dtype=...)``) at that boundary. The
signature is Numba's own string form, evaluated among ``numba.types``, plus ``readonly(T)``:
the array type ``T`` read-only, for an input the kernel only reads (it then accepts read-only and
writable arrays alike). A kernel inlined by Numba into its callers (``inline="always"``) is never
compiled alone and declares no signature.

Importing Numba costs ~0.3 s of CPU and ~50 MB; a small run calls no compiled kernel at all (the
kernels' NumPy twins handle small inputs), so the kernel modules decorate their functions with
this module's :func:`njit` instead of Numba's. It records the function, its signature and Numba's
options and returns a :class:`LazyKernel`. The first use of a kernel imports Numba and makes its
dispatcher (``numba.njit(signature, **options)(function)``), which compiles or loads the
signature at once, after making, first, the dispatchers of the kernels it calls (compiled code
finds its callees among its module's globals when Numba compiles it, so they must be Numba
dispatchers by then); the module's names of these kernels then become their dispatchers. A run
compiles (or loads) only the kernels it uses. The kernel modules only call compiled functions of
their own module (``tests/test_numba_cache_safety.py`` checks it, for the cache's sake).

A :class:`LazyKernel` kept elsewhere (``from module import kernel`` made before its first use)
forwards its calls and attributes to its dispatcher, which has Numba's ``py_func``,
``signatures`` and everything else.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()


class LazyKernel:
    """A function to be compiled by ``numba.njit(signature, **options)`` on its first use.

    Attributes:
        py_func: the Python function, as on a Numba dispatcher.
        signature: the declared signature (Numba's string form, see the module docstring), or
            ``None`` for a kernel that Numba inlines into its callers.
        options: the keyword options for ``numba.njit``.
    """

    def __init__(
        self, function: Callable[..., Any], signature: str | None, options: dict[str, Any]
    ) -> None:
        self.py_func = function
        self.signature = signature
        self.options = options
        self._dispatcher: Any = None
        functools.update_wrapper(self, function)

    def dispatcher(self) -> Any:
        """Numba's dispatcher of this function, made on the first use with those of the kernels
        it calls (its signature compiled, or loaded from the cache, at once)."""
        if self._dispatcher is None:
            with _lock:
                self._make(())
        return self._dispatcher

    def _make(self, making: tuple[LazyKernel, ...]) -> None:
        if self._dispatcher is not None:
            return
        if self in making:
            chain = " -> ".join(k.py_func.__qualname__ for k in (*making, self))
            raise TypeError(f"Compiled kernels cannot call each other in a cycle: {chain}.")
        for callee in _callees(self.py_func):
            callee._make((*making, self))
        numba = _numba()
        if self.signature is None:
            self._dispatcher = numba.njit(**self.options)(self.py_func)
        else:
            signature = _signature(self.signature, numba)
            self._dispatcher = numba.njit(signature, **self.options)(self.py_func)
        namespace = self.py_func.__globals__
        for name, value in list(namespace.items()):
            if value is self:
                namespace[name] = self._dispatcher

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


def njit(signature: str | None, **options: Any) -> Callable[[F], F]:
    """Decorator: like ``numba.njit(signature, **options)``, but Numba is imported and the
    signature compiled (or loaded from the cache) only when the kernel is first used (see the
    module docstring). ``signature`` is ``None`` only for ``inline="always"`` kernels.

    Raises:
        TypeError: a kernel compiled alone without a signature, or an inlined one with one.
    """
    inlined = options.get("inline") == "always"
    if (signature is None) != inlined:
        raise TypeError(
            "A compiled kernel declares its one signature; only a kernel inlined into its "
            "callers (inline='always') declares none."
        )

    def decorate(function: F) -> F:
        return LazyKernel(function, signature, options)  # type: ignore[return-value]

    return decorate


def bind_module(namespace: dict[str, Any]) -> None:
    """Make the dispatcher of every :class:`LazyKernel` of a module's ``namespace`` (its
    globals): each is compiled (or loaded from the cache) and named by its dispatcher."""
    for value in list(namespace.values()):
        if isinstance(value, LazyKernel) and value.py_func.__globals__ is namespace:
            value.dispatcher()


def dispatcher_of(kernel: Any) -> Any:
    """The Numba dispatcher of ``kernel`` (a :class:`LazyKernel` or already a dispatcher)."""
    return kernel.dispatcher() if isinstance(kernel, LazyKernel) else kernel


def _callees(function: Callable[..., Any]) -> Iterator[LazyKernel]:
    """The lazy kernels that ``function`` names among its module's globals."""
    namespace = function.__globals__
    for name in _global_names(function.__code__):
        value = namespace.get(name)
        if isinstance(value, LazyKernel):
            yield value


def _global_names(code: CodeType) -> Iterator[str]:
    yield from code.co_names
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            yield from _global_names(constant)


def _signature(text: str, numba: Any) -> Any:
    """Numba's signature from its string form, with ``readonly(T)`` for a read-only array."""
    names = {**vars(numba.types), "readonly": lambda array: array.copy(readonly=True)}
    return eval(text, {"__builtins__": {}}, names)  # noqa: S307 (the kernels' own literals)


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

    from tclose.base.compile_notice import numba_loaded

    numba_loaded()
    return numba
