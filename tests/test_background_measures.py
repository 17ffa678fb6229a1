"""The measures in a background thread while the staging table is written.

From ``tclose.core.runner.BACKGROUND_MEASURES_ROWS`` kept rows on, ``tclose run`` computes the
disclosure-risk and utility measures in a daemon thread beside the write and joins them before
the publish (whose audit row carries a draft report) and before the report. These tests force
the thread on the 400-row demo table (threshold 0) and check that nothing a run promises changes:

- the report holds the same measures as a run that computes them in line, with a ``measures``
  timing (their own duration), also in a dry run, after a failed verification and in the draft
  report of the publishing transaction;
- an error of the measures is the run's error, exactly as in line (type, message, exit code,
  nothing published), also when a later phase fails too;
- an interrupt never waits for the thread and publishes nothing;
- below the threshold no thread is started at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import tclose
import tclose.core.pipeline
import tclose.core.report
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.background import Background
from tclose.base.config import load_config
from tclose.base.registry import load_registry
from tclose.core.runner import run
from tclose.errors import DataError, RunInterrupted, VerificationError

MEASURED = tclose.core.pipeline.measure_configured


@pytest.fixture(params=["verify", "publish"])
def background(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run of the test computes its measures in the background thread, joined before the
    verification (as shipped) or only before the publish and the report."""
    monkeypatch.setattr(tclose.core.runner, "BACKGROUND_MEASURES_ROWS", 0)
    monkeypatch.setattr(
        tclose.core.runner, "JOIN_MEASURES_BEFORE_VERIFY", request.param == "verify"
    )


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


# --- Background ------------------------------------------------------------------------------


def test_background_returns_the_value_and_times_the_work():
    work = Background(lambda: time.sleep(0.05) or 42, "t")
    assert work.result() == 42
    assert work.done and work.seconds is not None and work.seconds >= 0.05
    assert work.result() == 42  # asked again: the same value, no second wait


def test_background_raises_the_very_error_of_the_work():
    error = DataError("the measures broke")

    def fail():
        raise error

    work = Background(fail, "t")
    with pytest.raises(DataError) as raised:
        work.result()
    assert raised.value is error and str(raised.value) == "the measures broke"


def test_background_is_a_daemon_thread():
    release = threading.Event()
    work = Background(release.wait, "tclose-test-daemon")
    try:
        thread = next(t for t in threading.enumerate() if t.name == "tclose-test-daemon")
        assert thread.daemon  # the interpreter exits without joining it
    finally:
        release.set()
        work.result()


def test_waiting_for_background_work_is_interruptible():
    release = threading.Event()
    work = Background(release.wait, "t")

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt("signal SIGALRM")

    previous = signal.signal(signal.SIGALRM, interrupt)
    started = time.monotonic()
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            work.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        release.set()
    assert time.monotonic() - started < 5
    assert work.waited > 0


# --- the run's report -------------------------------------------------------------------------


def _run_report(sqlite_run, tmp_path, name: str, *extra: str) -> dict:
    document = sqlite_run.config(target=f"anon_{name}")
    report = tmp_path / f"{name}.json"
    config = str(sqlite_run.write(document, f"{name}.yaml"))
    assert main(["-q", "run", config, "--report", str(report), *extra]) == 0
    return json.loads(report.read_text())


def test_background_measures_equal_the_in_line_ones(sqlite_run, tmp_path, monkeypatch):
    monkeypatch.setattr(tclose.core.runner, "BACKGROUND_MEASURES_ROWS", 10**12)
    line = _run_report(sqlite_run, tmp_path, "line")
    monkeypatch.setattr(tclose.core.runner, "BACKGROUND_MEASURES_ROWS", 0)
    behind = _run_report(sqlite_run, tmp_path, "behind")

    assert behind["risk"]["record_linkage"] is not None
    assert behind["risk"] == line["risk"]
    assert behind["utility"] == line["utility"]
    assert sqlite_run.rows("anon_behind") == sqlite_run.rows("anon_line")  # content order
    phases = list(behind["timings"])
    assert phases.index("measures") == phases.index("kernel") + 1  # in the order phases started
    assert {"measures", "measures_wait"} <= set(behind["timings"])
    assert "measures_wait" not in line["timings"]
    assert "tclose-measures" not in _threads()


def test_a_dry_run_reports_the_background_measures(sqlite_run, tmp_path, background):
    report = _run_report(sqlite_run, tmp_path, "dry", "--dry-run")
    assert report["run"]["dry_run"] is True and report["run"]["published"] is False
    assert report["risk"]["record_linkage"] is not None
    assert report["utility"]["il1s"] is not None
    assert "measures" in report["timings"]
    assert "anon_dry" not in sqlite_run.tables()


def test_a_failed_verification_reports_the_background_measures(
    sqlite_run, singletons_registry, background
):
    document = sqlite_run.config(algorithm={"name": "singletons", "options": {}})
    with pytest.raises(VerificationError) as failed:
        run(load_config(sqlite_run.write(document)), registry=singletons_registry)
    report = failed.value.report
    assert report["verification"]["passed"] is False
    assert report["risk"]["record_linkage"] == 1.0  # every row is its own class
    assert "measures" in report["timings"]
    assert "discharges_anon" not in sqlite_run.tables()


def test_the_draft_report_of_the_publish_holds_the_measures(sqlite_run, background):
    seen = []

    class Recorder:
        @tclose.hookimpl
        def run_publishing(self, report, config, connection):
            seen.append(report.get("risk"))

    registry = load_registry(extra_plugins=[Recorder()], entry_points=False)
    result = run(load_config(sqlite_run.write(sqlite_run.config())), registry=registry)
    assert result.published
    assert len(seen) == 1 and seen[0] is not None
    assert seen[0] == result.report["risk"]


@pytest.mark.parametrize("rows", [0, 10**12], ids=["background", "in line"])
def test_the_release_summary_is_computed_once_for_both_reports(sqlite_run, monkeypatch, rows):
    monkeypatch.setattr(tclose.core.runner, "BACKGROUND_MEASURES_ROWS", rows)
    calls = []
    summarize = tclose.core.runner.release_summary

    def counted(*args, **kwargs):
        calls.append(threading.current_thread().name)
        return summarize(*args, **kwargs)

    monkeypatch.setattr(tclose.core.runner, "release_summary", counted)
    monkeypatch.setattr(tclose.core.report, "release_summary", counted)
    seen = []

    class Recorder:
        @tclose.hookimpl
        def run_publishing(self, report, config, connection):
            seen.append(report)

    registry = load_registry(extra_plugins=[Recorder()], entry_points=False)
    result = run(load_config(sqlite_run.write(sqlite_run.config())), registry=registry)
    assert result.published and len(seen) == 1
    assert calls == ["tclose-measures" if rows == 0 else "MainThread"]
    final = result.report
    for part in ("clusters", "utility", "distributions", "warnings"):
        assert seen[0][part] == final[part], part
    assert final["distributions"] and final["utility"]["sse"] > 0
    assert final["utility"]["il1s"] is not None  # the measures' utility is added, not lost


# --- errors and interrupts --------------------------------------------------------------------


def _broken(error: BaseException, delay: float = 0.0):
    def measure(*_args, **_kwargs):
        time.sleep(delay)
        raise error

    return measure


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (DataError("the published column 'age' holds 3 value(s)"), 3, "the published column"),
        (ZeroDivisionError("a bug in the measures"), 4, "internal error: ZeroDivisionError"),
    ],
)
def test_an_error_of_the_background_measures_is_the_runs_error(
    sqlite_run, tmp_path, monkeypatch, capsys, error, code, line
):
    config = str(sqlite_run.write(sqlite_run.config()))
    outcomes = []
    for rows in (10**12, 0):  # in line, then in the background
        monkeypatch.setattr(tclose.core.runner, "BACKGROUND_MEASURES_ROWS", rows)
        monkeypatch.setattr(
            tclose.core.pipeline, "measure_configured", _broken(error, 0.2 * (rows == 0))
        )
        outcomes.append((main(["-q", "run", config]), capsys.readouterr().err.strip()))
        assert sqlite_run.tables() == {"discharges"}  # nothing published, no staging left
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][0] == code and line in outcomes[1][1]


@pytest.mark.parametrize("later", ["write", "verify", "verification"])
def test_the_measures_error_wins_over_a_later_failure(
    sqlite_run, singletons_registry, monkeypatch, background, later
):
    """In line, the measures fail before the write starts; in the background they fail while it
    runs. The run's error must still be theirs, whatever fails after them."""
    monkeypatch.setattr(
        tclose.core.pipeline, "measure_configured", _broken(ZeroDivisionError("measures"), 0.3)
    )
    document = sqlite_run.config()
    if later == "verification":
        document["algorithm"] = {"name": "singletons", "options": {}}
    else:

        def broken_phase(*_args, **_kwargs):
            raise DataError(f"the {later} broke")

        monkeypatch.setattr(tclose.core.runner.Phases, later, broken_phase)
    with pytest.raises(ZeroDivisionError, match="^measures$"):
        run(load_config(sqlite_run.write(document)), registry=singletons_registry)
    assert sqlite_run.tables() == {"discharges"}


def test_the_later_failure_stands_when_the_measures_succeed(sqlite_run, monkeypatch, background):
    def broken_write(*_args, **_kwargs):
        raise DataError("the write broke")

    monkeypatch.setattr(tclose.core.runner.Phases, "write", broken_write)
    with pytest.raises(DataError, match="the write broke"):
        run(load_config(sqlite_run.write(sqlite_run.config())))
    assert sqlite_run.tables() == {"discharges"}


@pytest.fixture
def held_measures(monkeypatch: pytest.MonkeyPatch):
    """The measures wait (up to 60 s) until the test ends: a run must not wait for them."""
    release = threading.Event()

    def slow(*args, **kwargs):
        release.wait(60)
        return MEASURED(*args, **kwargs)

    monkeypatch.setattr(tclose.core.pipeline, "measure_configured", slow)
    yield
    release.set()


def test_an_interrupt_does_not_wait_for_the_measures(
    sqlite_run, monkeypatch, background, held_measures
):
    def interrupted_write(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tclose.core.runner.Phases, "write", interrupted_write)
    started = time.monotonic()
    with pytest.raises(RunInterrupted) as interrupted:
        run(load_config(sqlite_run.write(sqlite_run.config())))
    assert time.monotonic() - started < 30
    assert interrupted.value.published is False
    assert sqlite_run.tables() == {"discharges"}


def test_a_signal_while_the_run_waits_for_the_measures_publishes_nothing(
    sqlite_run, background, held_measures
):
    main_thread = threading.main_thread().ident
    assert main_thread is not None

    def waiting_in_result() -> bool:
        frame = sys._current_frames().get(main_thread)
        while frame is not None:
            if frame.f_code is Background.result.__code__:
                return True
            frame = frame.f_back
        return False

    def interrupt_once_waiting():
        deadline = time.monotonic() + 30
        while not waiting_in_result():
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=interrupt_once_waiting)
    sender.start()
    started = time.monotonic()
    try:
        with pytest.raises(RunInterrupted) as interrupted:
            run(load_config(sqlite_run.write(sqlite_run.config())))
        assert time.monotonic() - started < 30
        assert interrupted.value.published is False
        assert sqlite_run.tables() == {"discharges"}
    finally:
        sender.join()
        signal.signal(signal.SIGINT, previous)


def test_a_small_run_starts_no_thread(sqlite_run, tmp_path, monkeypatch):
    assert tclose.core.runner.BACKGROUND_MEASURES_ROWS > 400

    def no_thread(*_args, **_kwargs):
        raise AssertionError("a thread was started for a small run")

    monkeypatch.setattr(tclose.core.runner, "Background", no_thread)
    report = _run_report(sqlite_run, tmp_path, "small")
    assert "measures" in report["timings"] and "measures_wait" not in report["timings"]
    assert report["risk"]["record_linkage"] is not None


def test_sigterm_ends_a_process_whose_measures_never_finish(sqlite_run):
    """A real ``tclose run`` process, its measures stuck in the background thread: SIGTERM ends
    it at once with exit 130 and nothing published (a thread the interpreter joined at exit
    would hang it until the timeout)."""
    script = (
        "import os, signal, sys, threading, time\n"
        "import tclose.core.pipeline\n"
        "import tclose.core.runner\n"
        "from tclose.app.cli import main\n"
        "from tclose.base.background import Background\n"
        "def waiting_in_result():\n"
        "    frame = sys._current_frames().get(threading.main_thread().ident)\n"
        "    while frame is not None and frame.f_code is not Background.result.__code__:\n"
        "        frame = frame.f_back\n"
        "    return frame is not None\n"
        "def stuck(*a, **k):\n"
        "    while not waiting_in_result():  # the run waits for these measures\n"
        "        time.sleep(0.01)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(600)\n"
        "tclose.core.runner.BACKGROUND_MEASURES_ROWS = 0\n"
        "tclose.core.pipeline.measure_configured = stuck\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    config = sqlite_run.write(sqlite_run.config())
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script, "run", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 130, done.stderr
    assert "interrupted: nothing was published" in done.stderr
    assert time.monotonic() - started < 60
    assert sqlite_run.tables() == {"discharges"}
