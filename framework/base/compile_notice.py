"""Tell the user when Numba compiles kernels (a cache miss), once, with how long it took, and
count that time apart from the phase it happened in.

Each built-in kernel is compiled by Numba for its one declared signature (:mod:`tclose.base.jit`) the
first time a run uses it in an environment, and cached on disk (``cache=True``, next to the
modules or in ``NUMBA_CACHE_DIR``); later runs load it in a fraction of a second. A first run can
therefore spend seconds compiling: :func:`compile_notice` says so on stderr (through
:func:`tclose.base.notices.notice`) instead of leaving an unexplained wait, and adds the seconds to
the :func:`compile_account` open in its thread, from which the runner's timer reports them as
``timings.compile`` and leaves them out of the phase's own figure.

Only compilations in the thread that opened the notice are seen (not those of another thread,
nor of the worker processes of a blocked run). The phases that call kernels (partitioning, the
disclosure-risk measures, verification) each watch their own compilations; the "compiling" line
is printed once per display (one command), the time once per phase that compiled something.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from tclose.base.notices import current_display, notice

_lock = threading.Lock()
#: The displays (:class:`~tclose.base.notices.Display`) already told that kernels are compiling.
_announced: weakref.WeakSet = weakref.WeakSet()


class CompileAccount:
    """Seconds that the :func:`compile_notice` blocks closed within a :func:`compile_account`
    block (in its thread) spent compiling.

    Attributes:
        seconds: wall seconds of Numba's compilations seen so far.
    """

    def __init__(self) -> None:
        self.seconds = 0.0


_account: ContextVar[CompileAccount | None] = ContextVar("tclose_compile_account", default=None)


@contextmanager
def compile_account() -> Iterator[CompileAccount]:
    """Within the block, the compile notices of this thread add their seconds to the account
    yielded (and only to it: an enclosing account does not see them)."""
    account = CompileAccount()
    token = _account.set(account)
    try:
        yield account
    finally:
        _account.reset(token)


class _CompileWatch:
    """A Numba event listener timing the outermost ``numba:compile`` events of one thread
    (nested compilations of called kernels are part of their caller's).

    It listens from :meth:`attach`, which imports ``numba.core.event``: at once when Numba is
    already imported, otherwise when :mod:`tclose.base.jit` first imports it (a run that calls no
    compiled kernel never imports Numba for this watch)."""

    def __init__(self) -> None:
        self.listener: Any = None
        self.thread = threading.get_ident()
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
                if threading.get_ident() == self.thread:
                    self.start()

            def on_end(inner, ev: Any) -> None:  # noqa: N805
                if threading.get_ident() == self.thread:
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
            display = current_display()
            if self.kernels == 0 and (display is None or display not in _announced):
                if display is not None:
                    _announced.add(display)
                notice(
                    "compiling Numba kernels for this machine (once: later runs load them "
                    "from the cache)..."
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
    """Called by :mod:`tclose.base.jit` once Numba is imported: the open watches start listening."""
    with _lock:
        for watch in _open:
            watch.attach()


@contextmanager
def compile_notice() -> Iterator[_CompileWatch]:
    """Within the block, announce the first Numba compilation of this thread and, at the end,
    how many kernels were compiled and in how many seconds (nothing at all when every kernel came
    from the cache); the seconds go to the thread's :func:`compile_account`, if one is open.

    The block does not import Numba: it listens once Numba is imported, already or by a kernel of
    :mod:`tclose.base.jit` called in the block. (Code that imports Numba itself, outside
    :mod:`tclose.base.jit`, inside the block, is not watched.)
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
        account = _account.get()
        if account is not None:
            account.seconds += watch.seconds
        if watch.kernels:
            notice(
                f"compiled {watch.kernels} Numba kernel(s) in {watch.seconds:.1f} s "
                "(cached for the next runs)"
            )
