"""Tell the user when Numba compiles kernels (a cache miss), once, with how long it took.

The built-in kernels are compiled by Numba on their first use on a machine and cached on disk
(``cache=True``, next to the modules or in ``NUMBA_CACHE_DIR``); later runs load them in a fraction
of a second. A first run can therefore spend seconds compiling: :func:`compile_notice` says so on
stderr (through :func:`tclose.progress.notice`) instead of leaving an unexplained wait.

Only compilations in this process are seen (not those in the worker processes of a blocked run).
The phases that call kernels (partitioning, the disclosure-risk measures, verification) each watch
their own compilations; the "compiling" line is printed once per display (one command), the time
once per phase that compiled something.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import progress
from .progress import notice

_lock = threading.Lock()
#: The displays (:class:`tclose.progress.Progress`) already told that kernels are compiling.
_announced: weakref.WeakSet = weakref.WeakSet()


class _CompileWatch:
    """A Numba event listener timing the outermost ``numba:compile`` events (nested compilations
    of called kernels are part of their caller's).

    It listens from :meth:`attach`, which imports ``numba.core.event``: at once when Numba is
    already imported, otherwise when :mod:`tclose.jit` first imports it (a run that calls no
    compiled kernel never imports Numba for this watch)."""

    def __init__(self) -> None:
        self.listener: Any = None
        self.depth = 0
        self.started = 0.0
        self.seconds = 0.0
        self.kernels = 0

    def attach(self) -> None:
        """Start listening to Numba's compile events (once)."""
        if self.listener is not None:
            return
        from numba.core import event

        class Listener(event.Listener):
            def on_start(inner, ev: Any) -> None:  # noqa: N805
                self.start()

            def on_end(inner, ev: Any) -> None:  # noqa: N805
                self.end()

        self.listener = Listener()
        event.register("numba:compile", self.listener)

    def detach(self) -> None:
        """Stop listening (if it ever did)."""
        if self.listener is not None:
            from numba.core import event

            event.unregister("numba:compile", self.listener)
            self.listener = None

    def start(self) -> None:
        with _lock:
            self.depth += 1
            if self.depth > 1:
                return
            self.started = time.perf_counter()
            display = progress._current
            if self.kernels == 0 and (display is None or display not in _announced):
                if display is not None:
                    _announced.add(display)
                notice(
                    "compiling Numba kernels for this machine (first run only: later runs "
                    "load them from the cache)..."
                )

    def end(self) -> None:
        with _lock:
            self.depth -= 1
            if self.depth == 0:
                self.seconds += time.perf_counter() - self.started
                self.kernels += 1


#: The watches of the :func:`compile_notice` blocks open in this process.
_open: list[_CompileWatch] = []


def numba_loaded() -> None:
    """Called by :mod:`tclose.jit` once Numba is imported: the open watches start listening."""
    with _lock:
        for watch in _open:
            watch.attach()


@contextmanager
def compile_notice() -> Iterator[_CompileWatch]:
    """Within the block, announce the first Numba compilation and, at the end, how many kernels
    were compiled and in how many seconds (nothing at all when every kernel came from the cache).

    The block does not import Numba: it listens once Numba is imported, already or by a kernel of
    :mod:`tclose.jit` called in the block. (Code that imports Numba itself, outside
    :mod:`tclose.jit`, inside the block, is not watched.)
    """
    watch = _CompileWatch()
    with _lock:
        _open.append(watch)
        if "numba" in sys.modules:
            watch.attach()
    try:
        yield watch
    finally:
        with _lock:
            _open.remove(watch)
            watch.detach()
        if watch.kernels:
            notice(
                f"compiled {watch.kernels} Numba kernel(s) in {watch.seconds:.1f} s "
                "(cached for the next runs)"
            )
