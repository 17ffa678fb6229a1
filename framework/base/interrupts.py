"""SIGINT and SIGTERM: both interrupt a run, except while its outcome is being recorded.

The CLI turns SIGTERM into :class:`KeyboardInterrupt`, like Ctrl-C (:func:`terminate_as_interrupt`).
A run defers both signals from the moment it starts to publish until its report and audit row
are written (:class:`Deferral`): an interrupt there takes effect right after, when the outcome is
known and recorded, and the interrupt (:class:`tclose.errors.RunInterrupted`) then carries
``published = True``. Only
SIGKILL (or a power cut) can end a run inside that window; the published table then carries the
run id (see ``docs/databases.md``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tclose.errors import RunInterrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within the block (main thread only), SIGTERM raises :class:`KeyboardInterrupt`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Deferral:
    """Holds SIGINT and SIGTERM between :meth:`start` and :meth:`end` (main thread only).

    A signal received in between is remembered; :meth:`end` restores the previous handlers and
    then raises :class:`~tclose.errors.RunInterrupted` (a ``KeyboardInterrupt`` with
    ``published``) if one came.
    """

    def __init__(self) -> None:
        self.previous: dict[int, Callable | int | None] = {}
        self.received: int | None = None
        #: set by the runner once the publish has committed
        self.published = False

    def start(self) -> None:
        if self.previous or threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self.previous[signum] = signal.signal(signum, self._remember)

    def _remember(self, signum: int, _frame: Any) -> None:
        self.received = signum

    def end(self, published: bool) -> None:
        """Restore the handlers; raise the interrupt that arrived meanwhile, if any."""
        previous, self.previous = self.previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if self.received is not None:
            received, self.received = self.received, None
            if previous.get(received) == signal.SIG_DFL and received != signal.SIGINT:
                signal.raise_signal(received)  # SIGTERM without a handler: terminate, as asked
            name = signal.Signals(received).name
            raise RunInterrupted(f"signal {name}", published=published)
