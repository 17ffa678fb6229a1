"""Work that runs beside a run's main thread and is joined before anything needs its result.

``tclose run`` computes the disclosure-risk and utility measures (:mod:`tclose.measures`) in a
:class:`Background` thread while the staging table is written (see :class:`tclose.core.runner.Phases`):
on PostgreSQL that phase is mostly server time, during which the main thread waits in the driver
with the GIL released.

A :class:`Background` keeps the guarantees of running the work in line:

- its error is the caller's: :meth:`Background.result` raises the exception the work raised (the
  same object: same type, message and traceback);
- it never holds up an exit: the thread is a *daemon* thread (a ``concurrent.futures`` executor
  would join its workers when the interpreter exits, so an interrupted run would wait for them);
  a run that fails or is interrupted before it asks for the result simply leaves it behind;
- waiting for it stays interruptible: :meth:`Background.result` waits in short slices, so that
  SIGINT and SIGTERM (raised as ``KeyboardInterrupt`` in the main thread) take effect at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: Seconds between two looks at the signal handlers while :meth:`Background.result` waits.
WAIT_SLICE = 0.1


class Background(Generic[T]):
    """``function()`` running in a daemon thread, started at construction.

    Attributes:
        seconds: how long ``function`` ran (its own wall time; ``None`` until it has finished).
        waited: how long :meth:`result` waited for it, in total (0 if it had finished already).
    """

    def __init__(self, function: Callable[[], T], name: str) -> None:
        self._function = function
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        self.seconds: float | None = None
        self.waited = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self._value = self._function()
        except BaseException as error:  # handed to the caller by result()
            self._error = error
        finally:
            self.seconds = time.perf_counter() - started
            self._function = None  # type: ignore[assignment]  # free what the call held
            self._done.set()

    @property
    def done(self) -> bool:
        """Whether the work has finished (returned or raised)."""
        return self._done.is_set()

    def result(self) -> T:
        """Wait for the work; return its value or raise its exception."""
        if not self._done.is_set():
            started = time.perf_counter()
            try:
                while not self._done.wait(WAIT_SLICE):
                    pass
            finally:
                self.waited += time.perf_counter() - started
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error
