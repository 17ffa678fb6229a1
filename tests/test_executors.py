"""Executors (tclose.blocks.executors): order, determinism, retries, lost workers, interrupts, Dask.

The Dask tests run whenever ``distributed`` is installed and are never skipped in CI
(``CI=true``): there a missing Dask is a failure.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.blocks.executors import BlockError, run_tasks

sys.path.insert(0, str(Path(__file__).parent))
import test_executors_helpers as tasks  # noqa: E402


def _dask():
    if os.environ.get("CI", "").lower() == "true":
        import distributed  # a missing Dask fails in CI

        return distributed
    return pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def dask_scheduler():
    """A LocalCluster of two in-process workers (threads): quick to start."""
    distributed = _dask()
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
    ) as cluster:
        yield cluster.scheduler_address


PAYLOADS = [np.arange(i, i + 5, dtype=np.float64) for i in range(7)]
EXPECTED = [3.0 + float(np.sum(p**2)) for p in PAYLOADS]


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_results_in_payload_order(executor: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="tclose")
    got = run_tasks(
        tasks.square_sum, PAYLOADS, shared=3, executor=executor, workers=2, sizes=[5] * 7
    )
    assert got == EXPECTED
    done = [r for r in caplog.records if "done" in r.getMessage()]
    assert len(done) == 7 and "5 rows" in done[0].getMessage()


def test_dask_results_in_payload_order(dask_scheduler: str) -> None:
    got = run_tasks(tasks.square_sum, PAYLOADS, shared=3, executor="dask", scheduler=dask_scheduler)
    assert got == EXPECTED


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_a_task_that_fails_once_is_retried(executor: str, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="tclose")
    got = run_tasks(
        tasks.fail_once, [0, 1, 2], shared=str(tmp_path), executor=executor, workers=2, retries=2
    )
    assert got == [0, 10, 20]
    assert all((tmp_path / f"attempt-{i}").read_text() == "xx" for i in range(3))
    assert sum("retry 1 of 2" in r.getMessage() for r in caplog.records) == 3


def test_dask_retries_a_task_that_fails_once(dask_scheduler: str, tmp_path: Path) -> None:
    got = run_tasks(
        tasks.fail_once,
        [0, 1],
        shared=str(tmp_path),
        executor="dask",
        scheduler=dask_scheduler,
        retries=2,
    )
    assert got == [0, 10]


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_a_task_that_always_fails_stops_the_run(executor: str, tmp_path: Path) -> None:
    with pytest.raises(BlockError, match=r"Block ([12]) of 2 failed 3 time") as raised:
        run_tasks(
            tasks.always_fail,
            [0, 1],
            shared=str(tmp_path),
            executor=executor,
            workers=1 if executor == "serial" else 2,
            retries=2,
        )
    block = int(str(raised.value).split()[1])
    assert (tmp_path / f"attempt-{block - 1}").read_text() == "xxx"
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_dask_task_that_always_fails(dask_scheduler: str, tmp_path: Path) -> None:
    with pytest.raises(BlockError, match="permanent failure"):
        run_tasks(
            tasks.always_fail,
            [0],
            shared=str(tmp_path),
            executor="dask",
            scheduler=dask_scheduler,
            retries=1,
        )
    assert (tmp_path / "attempt-0").read_text() == "xx"


@pytest.mark.parametrize("executor", ["serial", "local", "dask"])
def test_a_tclose_error_of_a_task_is_raised_as_it_is_and_not_retried(
    executor: str, tmp_path: Path, request
) -> None:
    """A TcloseError is a verdict the next attempt would give again (e.g. a plugin's bug, as a
    PluginFailure): it is raised as it is, not retried nor wrapped in a BlockError."""
    from tclose.errors import DataError

    scheduler = request.getfixturevalue("dask_scheduler") if executor == "dask" else ""
    with pytest.raises(DataError, match="^task 1 refuses its rows$") as raised:
        run_tasks(
            tasks.refuse,
            [0, 1, 2],
            shared=str(tmp_path),
            executor=executor,
            scheduler=scheduler,
            workers=2,
            retries=2,
        )
    assert type(raised.value) is DataError
    assert (tmp_path / "attempt-1").read_text() == "x"


def test_a_lost_worker_is_replaced_and_its_task_retried(tmp_path: Path) -> None:
    got = run_tasks(
        tasks.die_once, [0, 1, 2, 3], shared=str(tmp_path), executor="local", workers=2, retries=2
    )
    assert got == [100, 101, 102, 103]
    assert (tmp_path / "died").exists()


def test_interrupt_stops_the_pool(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_tasks(
            tasks.interrupt_driver, [0, 1, 2], shared=os.getpid(), executor="local", workers=2
        )
    assert time.monotonic() - started < 20  # the sleeping workers were terminated, not awaited
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


def test_unknown_executor() -> None:
    from tclose.errors import ConfigError

    with pytest.raises(ConfigError, match="Unknown executor"):
        run_tasks(tasks.square_sum, PAYLOADS, shared=0, executor="ray")


def _frame(n: int = 1201) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "zip": rng.integers(0, 50, n),
            "stay": rng.poisson(3, n),
            "charge": np.round(rng.lognormal(8, 1, n), 2),
        }
    )


@pytest.mark.parametrize("algorithm", ["t-first", "mdav", "merge", "k-first"])
def test_same_labels_on_every_executor(algorithm: str, dask_scheduler: str) -> None:
    frame = _frame()
    common = dict(
        quasi_identifiers=["age", "zip", "stay"],
        confidential=["charge"],
        k=3,
        t=None if algorithm == "mdav" else 0.2,  # mdav does not enforce t
        algorithm=algorithm,
        blocks=4,
    )
    serial = tclose.anonymize(frame, **common, workers=1)
    local = tclose.anonymize(frame, **common, executor="local", workers=2)
    dask = tclose.anonymize(frame, **common, executor="dask", scheduler=dask_scheduler)
    assert serial.report["algorithm"]["info"]["blocks"] == 4
    assert np.array_equal(serial.labels, local.labels)
    assert np.array_equal(serial.labels, dask.labels)
    assert dask.report["verification"]["passed"]


def test_unreachable_dask_scheduler_is_a_block_error() -> None:
    _dask()
    import dask

    with (
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
        pytest.raises(BlockError, match="Cannot reach the Dask scheduler 'tcp://127.0.0.1:9'"),
    ):
        run_tasks(
            tasks.square_sum, PAYLOADS, shared=0, executor="dask", scheduler="tcp://127.0.0.1:9"
        )
