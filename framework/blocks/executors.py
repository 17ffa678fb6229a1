"""Executors: run independent block tasks in this process, on a local process pool, or on Dask.

A *task* is ``function(shared, payload)``: ``function`` a picklable module-level function,
``shared`` one read-only object that every task needs (e.g. the fitted distances), sent once per
worker, and ``payload`` the task's own arguments (e.g. a block's rows of the QI matrix). The driver
keeps the payloads and gets back one result per task, **in payload order**, whatever the order in
which the tasks finished: the same inputs give the same results on every executor, and the same
as a serial loop, as long as ``function`` is deterministic.

Executors (:func:`run_tasks`, argument ``executor``):

- ``"serial"``: a loop in this process. ``"local"`` falls back to it for a single task or a single
  worker (no process is started, nothing is pickled).
- ``"local"``: a :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes (default:
  one per usable core), started with ``forkserver`` where the platform has it (``spawn``
  elsewhere), never ``fork``, which is unsafe in a process with threads. Workers never re-run
  ``__main__`` (a script from stdin, a notebook or an unguarded script works), and each watches
  the driver: a worker whose driver is gone (even by SIGKILL) exits within a second, and the fork
  server and resource tracker follow. At most ``workers`` tasks
  are in flight, so that a lost worker can be blamed on few tasks and the payloads are pickled as
  they are needed. Workers ignore SIGINT: on Ctrl-C the driver cancels what is queued, terminates
  the workers and re-raises ``KeyboardInterrupt`` (the caller publishes nothing).
- ``"dask"``: Dask distributed. ``scheduler`` is the address of a running scheduler
  (``tcp://host:8786``); when empty, a :class:`distributed.LocalCluster` of ``workers`` processes
  (one thread each) is started for the run and closed after it. ``shared`` is scattered to every
  worker once; the payloads are scattered over the workers in one call. Dask must be installed
  (``pip install "tclose[dask]"``).

Retries: a task that raises is run again, up to ``retries`` times; then the run fails with
:class:`BlockError` (the last exception chained). A worker that dies (killed, out of memory)
breaks a local pool: the pool is replaced, and every task that was in flight is charged one
attempt and resubmitted. Dask reschedules tasks of a lost worker itself (its
``distributed.scheduler.allowed-failures``) and retries raising tasks through ``retries``.
A task that raises a :class:`~tclose.errors.TcloseError` is not retried, on any executor: that
is a verdict on its input (a plugin's bug reported as a
:class:`~tclose.errors.PluginFailure`, a ``DataError``, a ``VerificationError``), which the next
attempt would give again; the run stops at once (the other tasks cancelled, the workers
stopped) and ``run_tasks`` raises that error itself, its exit code unchanged. Its traceback in
the worker is its ``__cause__`` (a :class:`RemoteTraceback`) when it came from another process.

Progress: one INFO line per finished task on the ``tclose`` logger (``block 3/16 done: 62,500
rows in 1.42 s``), a WARNING per retry.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tclose.errors import ConfigError, TcloseError

log = logging.getLogger("tclose")

__all__ = ["EXECUTORS", "BlockError", "RemoteTraceback", "default_workers", "run_tasks"]

#: The executors :func:`run_tasks` knows.
EXECUTORS = ("serial", "local", "dask")

_SHARED: Any = None  # a local pool worker's copy of ``shared``, set by its initializer


class BlockError(TcloseError):
    """A block task failed on every attempt (its last exception is the ``__cause__``)."""

    exit_code = 3


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a Dask worker, as text: the ``__cause__`` of the
    :class:`~tclose.errors.TcloseError` that :func:`run_tasks` raises (printed with ``-v``)."""

    def __str__(self) -> str:
        return f"\n{self.args[0] if self.args else ''}"


class _Raised:
    """A ``TcloseError`` a Dask task raised, returned as its result so that Dask does not retry
    it, with the worker's traceback."""

    def __init__(self, error: TcloseError, text: str) -> None:
        self.error = error
        self.text = text


def default_workers() -> int:
    """The number of cores this process may use (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def run_tasks(
    function: Callable[[Any, Any], Any],
    payloads: Sequence[Any],
    *,
    shared: Any = None,
    executor: str = "local",
    scheduler: str = "",
    workers: int = 0,
    retries: int = 2,
    sizes: Sequence[int] | None = None,
    preload: Sequence[str] = (),
) -> list[Any]:
    """Run ``function(shared, payload)`` for every payload; return the results in payload order.

    Args:
        function: a module-level (picklable) function of ``(shared, payload)``.
        payloads: one payload per task.
        shared: an object every task receives, sent once per worker.
        executor: ``"serial"``, ``"local"`` or ``"dask"``.
        scheduler: Dask scheduler address; empty for a LocalCluster (``"dask"`` only).
        workers: processes (``"local"``) or LocalCluster workers (``"dask"``); ``0``: one per core.
        retries: attempts after the first for a task that fails.
        sizes: rows of each task, for the progress lines only.
        preload: modules the local pool's fork server imports, besides the function's own (e.g.
            one that loads compiled kernels, so that workers start warm); the local pool
            imports them in this process first (a first run compiles such kernels here, once,
            and the fork server loads them from the cache).

    Returns:
        ``[function(shared, p) for p in payloads]``, computed on the chosen executor.

    Raises:
        BlockError: a task failed ``retries + 1`` times.
        TcloseError: the error a task raised (not retried), e.g. a
            :class:`~tclose.errors.PluginFailure`.
        ConfigError: an unknown executor, or Dask not installed.
        KeyboardInterrupt: after the workers were stopped.
    """
    if executor not in EXECUTORS:
        raise ConfigError(f"Unknown executor {executor!r}; expected one of {EXECUTORS}.")
    if retries < 0:
        raise ValueError(f"retries must be >= 0. Got {retries!r} instead.")
    workers = workers or default_workers()
    tracker = _Tracker(len(payloads), sizes, retries)
    if executor == "dask":
        return _run_dask(function, payloads, shared, scheduler, workers, retries, tracker)
    if executor == "serial" or workers == 1 or len(payloads) <= 1:
        return _run_serial(function, payloads, shared, tracker)
    modules = [function.__module__, *preload]
    for module in preload:  # here first: what they compile is compiled once, in this process
        importlib.import_module(module)
    return _run_local(function, payloads, shared, min(workers, len(payloads)), tracker, modules)


class _Tracker:
    """Attempts per task, and the progress lines."""

    def __init__(self, count: int, sizes: Sequence[int] | None, retries: int) -> None:
        self.count = count
        self.sizes = sizes
        self.retries = retries
        self.failures = [0] * count
        self.done = 0
        self.started = time.perf_counter()

    def finished(self, index: int, seconds: float, where: str) -> None:
        self.done += 1
        rows = f"{self.sizes[index]:,} rows " if self.sizes is not None else ""
        log.info(
            "block %d/%d done: %sin %.2f s (%s; %d/%d finished, %.1f s elapsed)",
            index + 1,
            self.count,
            rows,
            seconds,
            where,
            self.done,
            self.count,
            time.perf_counter() - self.started,
        )

    def failed(self, index: int, error: BaseException) -> None:
        """Charge one attempt to task ``index``; raise :class:`BlockError` when none are left."""
        self.failures[index] += 1
        if self.failures[index] > self.retries:
            raise BlockError(
                f"Block {index + 1} of {self.count} failed {self.failures[index]} time(s); "
                f"last error: {type(error).__name__}: {error}"
            ) from error
        log.warning(
            "block %d/%d failed (%s: %s); retry %d of %d",
            index + 1,
            self.count,
            type(error).__name__,
            error,
            self.failures[index],
            self.retries,
        )


def _timed(
    function: Callable[[Any, Any], Any], shared: Any, payload: Any
) -> tuple[Any, float, str]:
    start = time.perf_counter()
    result = function(shared, payload)
    return result, time.perf_counter() - start, f"pid {os.getpid()}"


def _run_serial(function, payloads, shared, tracker: _Tracker) -> list[Any]:
    results = []
    for index, payload in enumerate(payloads):
        while True:
            try:
                result, seconds, where = _timed(function, shared, payload)
            except TcloseError:
                raise  # a verdict, not retried (module documentation)
            except Exception as error:
                tracker.failed(index, error)
                continue
            tracker.finished(index, seconds, "in process")
            results.append(result)
            break
    return results


# ------------------------------------------------------------------------------------------------
# Local process pool


def _worker_init(shared: Any, driver: int | None = None) -> None:
    global _SHARED
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver alone handles Ctrl-C
    _SHARED = shared
    if driver is not None:
        threading.Thread(
            target=_watch_driver, args=(driver,), name="tclose-watchdog", daemon=True
        ).start()


#: Seconds between two checks that the driver still lives.
WATCHDOG_SECONDS = 0.5


def _watch_driver(driver: int) -> None:
    """End this worker as soon as the driver process is gone (killed with SIGKILL, say): a
    worker of a fork server is not the driver's child, so nothing else would stop it."""
    while True:
        time.sleep(WATCHDOG_SECONDS)
        try:
            os.kill(driver, 0)
        except ProcessLookupError:
            os._exit(1)
        except PermissionError:  # pragma: no cover - the pid was reused by another user's
            os._exit(1)


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """Hide ``__main__``'s file and spec from multiprocessing while workers start, so that no
    worker (nor the fork server) re-runs the main script: the tasks are module-level functions
    of installed modules. A script read from stdin, a notebook, or a script without an
    ``if __name__ == "__main__"`` guard all work then."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved: dict[str, Any] = {a: vars(main)[a] for a in ("__file__", "__spec__") if a in vars(main)}
    try:
        main.__spec__ = None
        vars(main).pop("__file__", None)
        yield
    finally:
        vars(main).pop("__spec__", None)
        vars(main).update(saved)


def _worker_call(function: Callable[[Any, Any], Any], payload: Any) -> tuple[Any, float, str]:
    return _timed(function, _SHARED, payload)


def _context(modules: list[str]) -> multiprocessing.context.BaseContext:
    """``forkserver`` (with ``modules`` preloaded in the server) where available, else ``spawn``.

    The fork server lives as long as this process: its workers start by forking it, with the task
    function's module (NumPy, Numba, the kernels) already imported, so that a pool after the first
    starts in a fraction of a second. The preload list is only read when the server starts.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(modules)
    return context


def _start_pool(workers: int, shared: Any, modules: list[str]) -> ProcessPoolExecutor:
    with _main_hidden():
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_context(modules),
            initializer=_worker_init,
            initargs=(shared, os.getpid()),
        )


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel queued tasks and terminate the workers now (used on errors and interrupts)."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    # Before 3.14 there is no public way; shutdown() forgets the processes, so list them first.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=5)


def _run_local(
    function, payloads, shared, workers: int, tracker: _Tracker, modules: list[str]
) -> list[Any]:
    results: list[Any] = [None] * len(payloads)
    queue = list(range(len(payloads)))[::-1]  # next task at the end
    pool = _start_pool(workers, shared, modules)
    in_flight: dict[Future, int] = {}
    try:
        while queue or in_flight:
            while queue and len(in_flight) < workers:
                index = queue.pop()
                with _main_hidden():  # a submit may start a worker
                    in_flight[pool.submit(_worker_call, function, payloads[index])] = index
            finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            broken = False
            for future in finished:
                index = in_flight.pop(future)
                error = future.exception()
                if error is None:
                    results[index], seconds, where = future.result()
                    tracker.finished(index, seconds, where)
                    continue
                if isinstance(error, TcloseError):
                    raise error  # a verdict, not retried: the pool is stopped below
                broken = broken or isinstance(error, BrokenProcessPool)
                tracker.failed(index, error)
                queue.append(index)
            if broken:
                # Every future of a broken pool fails: charge those still in flight and restart.
                for index in list(in_flight.values()):
                    tracker.failed(index, BrokenProcessPool("a worker process died"))
                    queue.append(index)
                in_flight.clear()
                _stop_pool(pool)
                pool = _start_pool(workers, shared, modules)
                queue.sort(reverse=True)
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return results


# ------------------------------------------------------------------------------------------------
# Dask distributed


def _dask_call(
    function: Callable[[Any, Any], Any], shared: Any, payload: Any
) -> tuple[Any, float, str] | _Raised:
    """A Dask task: :func:`_timed`, with a ``TcloseError`` returned (not retried by Dask)."""
    try:
        return _timed(function, shared, payload)
    except TcloseError as error:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return _Raised(error, text)


def _run_dask(
    function, payloads, shared, scheduler: str, workers: int, retries: int, tracker: _Tracker
) -> list[Any]:
    client, cluster = _dask_client(scheduler, workers)
    futures: list[Any] = []
    try:
        futures = _submit_dask(client, function, payloads, shared, retries)
        return _collect_dask(client, futures, retries, tracker)
    finally:
        if futures:
            client.cancel(futures)
        client.close()
        if cluster is not None:
            cluster.close()


def _dask_client(scheduler: str, workers: int) -> tuple[Any, Any]:
    """A Dask client of ``scheduler``, or of a new LocalCluster of ``workers`` processes (also
    returned, to be closed; ``None`` with a scheduler)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - depends on the installation
        raise ConfigError(
            "executor 'dask' needs Dask distributed: pip install "
            "'tclose[dask]' (or 'dask[distributed]')."
        ) from None
    if scheduler:
        try:
            return Client(scheduler, set_as_default=False), None
        except (OSError, TimeoutError) as error:
            raise BlockError(f"Cannot reach the Dask scheduler {scheduler!r}: {error}") from error
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.WARNING,
    )
    try:
        return Client(cluster, set_as_default=False), cluster
    except BaseException:
        cluster.close()
        raise


def _submit_dask(client: Any, function, payloads, shared, retries: int) -> list[Any]:
    """One future per payload, the shared value broadcast to every worker."""
    run = uuid.uuid4().hex[:12]
    shared_future = client.scatter(shared, broadcast=True, hash=False)
    # One call: Dask spreads the payloads over the workers (round robin), and a task runs
    # where its payload is (then work stealing balances).
    data_futures = client.scatter(list(payloads), hash=False)
    return [
        client.submit(
            _dask_call,
            function,
            shared_future,
            data,
            key=f"tclose-block-{run}-{index}",
            retries=retries,
            pure=False,
        )
        for index, data in enumerate(data_futures)
    ]


def _collect_dask(client: Any, futures: list[Any], retries: int, tracker: _Tracker) -> list[Any]:
    """The futures' results in submission order, as they complete."""
    from distributed import as_completed

    position = {future.key: index for index, future in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    for future in as_completed(futures, loop=client.loop):
        index = position[future.key]
        if future.status == "error":
            failure = future.exception()
            tracker.failures[index] = retries
            tracker.failed(index, failure)  # raises: Dask has used the retries already
        outcome = future.result()
        if isinstance(outcome, _Raised):
            raise outcome.error from RemoteTraceback(outcome.text)
        results[index], seconds, where = outcome
        tracker.finished(index, seconds, f"dask, {where}")
    return results
