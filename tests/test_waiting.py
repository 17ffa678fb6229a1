"""tests/waiting.py: waiting on an event with a deadline."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from waiting import wait_for  # noqa: E402


def test_returns_the_first_truthy_value_once_the_event_happened():
    happened = threading.Event()
    values = iter([0, None, "", "ready", "later"])

    def condition():
        value = next(values)
        if value == "ready":
            happened.set()
        return value

    assert wait_for(condition, 10, "the value") == "ready"
    assert happened.is_set()


def test_waits_for_an_event_of_another_thread():
    done = threading.Event()
    worker = threading.Thread(target=done.set)
    worker.start()
    assert wait_for(done.is_set, 30, "the thread") is True
    worker.join()


def test_fails_naming_what_it_waited_for_after_the_timeout():
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"waited 0\.2 s for the mark file, in vain"):
        wait_for(lambda: False, 0.2, "the mark file")
    assert time.monotonic() - started >= 0.2


def test_the_conditions_own_error_stops_the_wait():
    def ended():
        raise RuntimeError("the child ended")

    with pytest.raises(RuntimeError, match="the child ended"):
        wait_for(ended, 30, "the child")
