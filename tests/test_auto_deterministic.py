"""``auto`` decides by units of work, never by the clock: the same input gives the same release on
a loaded machine, and with clocks that run at any speed.

The table has 12,000 rows, above the 10,000 rows where ``auto`` once switched to a time budget, a
nominal QI and a confidential attribute that is zero in most rows.
"""

from __future__ import annotations

import hashlib
import itertools
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import tclose

ROWS = 12_000
QIS = {"region": "nominal", "age": "numeric", "income": "numeric"}


def zero_heavy_table(n: int, seed: int) -> pd.DataFrame:
    """A nominal QI, two numeric QIs and a confidential ``spend`` that is 0 in ~70 % of rows."""
    rng = np.random.default_rng(seed)
    regions = np.array(["north", "south", "east", "west", "centre"])
    region = regions[rng.choice(5, size=n, p=[0.35, 0.25, 0.2, 0.12, 0.08])]
    income = np.round(np.exp(rng.normal(10, 0.8, size=n)), 2)
    spend = np.where(rng.random(n) < 0.7, 0.0, np.round(income * rng.uniform(0.01, 0.2, n), 2))
    age = rng.integers(18, 90, size=n).astype(float)
    return pd.DataFrame({"region": region, "age": age, "income": income, "spend": spend})


def release(table: pd.DataFrame) -> tuple[np.ndarray, str, dict]:
    """Labels, a digest of the published rows, and the report of ``auto`` on ``table``."""
    result = tclose.anonymize(
        table, quasi_identifiers=QIS, confidential=["spend"], k=5, t=0.15, algorithm="auto"
    )
    hashed = pd.util.hash_pandas_object(result.data, index=False).to_numpy()
    return result.labels, hashlib.sha256(hashed.tobytes()).hexdigest(), result.report


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return zero_heavy_table(ROWS, seed=11)


@pytest.fixture(scope="module")
def quiet(table):
    return release(table)


def test_a_cpu_hog_beside_auto_changes_nothing(table, quiet):
    hog = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; sys.stdout.write('spinning\\n'); sys.stdout.flush()\nwhile True: pass",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert hog.stdout is not None and hog.stdout.readline() == b"spinning\n"  # it runs
        labels, digest, report = release(table)
        assert hog.poll() is None  # still spinning when auto finished
    finally:
        hog.kill()
        hog.wait()
    assert np.array_equal(labels, quiet[0])
    assert digest == quiet[1]
    assert report["utility"]["sse"] == quiet[2]["utility"]["sse"]
    candidates = report["algorithm"]["info"]["candidates"]
    assert [c["status"] for c in candidates] == ["ran"] * 4  # nothing skipped for lack of time


def test_clocks_at_any_speed_change_nothing(table, quiet, monkeypatch):
    """Every clock of the ``time`` module jumps 10,000 seconds per reading (any time budget
    would be spent at once): no decision of ``auto`` follows any of them."""
    step = 1e4
    ticks = itertools.count()
    for clock in ("perf_counter", "monotonic", "process_time", "time"):
        monkeypatch.setattr(time, clock, lambda: 1e6 + step * next(ticks))
    labels, digest, _ = release(table)
    monkeypatch.undo()
    assert np.array_equal(labels, quiet[0])
    assert digest == quiet[1]
