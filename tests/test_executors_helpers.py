"""Task functions for tests/test_executors.py (no tests here).

Worker processes import task functions by module name; pytest's ``importlib`` import mode gives
test modules names that other processes cannot import, so the tasks live in this plain module,
which tests/test_executors.py imports with its folder put on ``sys.path`` (the pools pass
``sys.path`` on to their workers).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np


def square_sum(shared: int, payload: np.ndarray) -> float:
    """A deterministic task: ``shared + sum(payload ** 2)``."""
    return float(shared + np.sum(payload**2))


def fail_once(shared: str, payload: int) -> int:
    """Raise on the first attempt of each payload (a marker file per payload in ``shared``)."""
    marker = Path(shared) / f"failed-{payload}"
    with open(Path(shared) / f"attempt-{payload}", "a") as attempts:
        attempts.write("x")
    if not marker.exists():
        marker.touch()
        raise RuntimeError(f"transient failure of task {payload}")
    return payload * 10


def always_fail(shared: str, payload: int) -> int:
    """Raise every time, counting attempts in a file."""
    with open(Path(shared) / f"attempt-{payload}", "a") as attempts:
        attempts.write("x")
    raise RuntimeError("permanent failure")


def die_once(shared: str, payload: int) -> int:
    """Kill the worker process on the first attempt of payload 1 (a lost worker)."""
    marker = Path(shared) / "died"
    if payload == 1 and not marker.exists():
        marker.touch()
        os._exit(13)
    time.sleep(0.05)
    return payload + 100


def interrupt_driver(shared: int, payload: int) -> int:
    """Send SIGINT to the driver (pid ``shared``) from task 0, then keep the workers busy."""
    if payload == 0:
        os.kill(shared, signal.SIGINT)
    time.sleep(30)
    return payload


def refuse(shared: str, payload: int) -> int:
    """Raise a DataError (a verdict, not a transient failure) in task 1, counting attempts."""
    from tclose.errors import DataError

    with open(Path(shared) / f"attempt-{payload}", "a") as attempts:
        attempts.write("x")
    if payload == 1:
        raise DataError(f"task {payload} refuses its rows")
    return payload
