"""Waiting in tests on the event itself, with a deadline: never on a guess of how long it takes.

A test that needs another thread, process or server to have reached a point polls for the sign
of that point (a file the child writes, a lock the server shows waiting, a process that ended)
with :func:`wait_for`; a machine under load makes it slower, never wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds between two looks at the condition.
POLL_SECONDS = 0.02


def wait_for(condition: Callable[[], T], timeout: float, what: str) -> T:
    """Return ``condition()``'s first truthy value, looking again every
    :data:`POLL_SECONDS` for at most ``timeout`` seconds.

    Raises:
        AssertionError: ``condition`` stayed falsy for ``timeout`` seconds; the message says
            ``what`` was awaited and for how long.
        Exception: whatever ``condition`` raises (e.g. to stop waiting for a process that
            ended), unchanged.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {what}, in vain")
        time.sleep(POLL_SECONDS)
