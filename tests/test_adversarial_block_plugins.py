"""Adversarial: an algorithm plugin that raises inside a block, on every executor.

In process, an algorithm that raises an unexpected exception ends the run with a
:class:`~tclose.errors.PluginFailure` (exit 4) naming the plugin (tests/test_adversarial_plugins.py).
A blocked run (``algorithm.options.blocks``) runs the plugin's ``partition_block`` in this process,
on a local process pool or on Dask: the same bug must end it the same way, naming the plugin and
the block, without retrying a deterministic failure, with nothing published, no staging table left
and the source untouched.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import tclose
import tclose.app.cli
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.registry import load_registry

sys.path.insert(0, str(Path(__file__).parent))
import block_plugins_helpers as helpers  # noqa: E402

BLOCKS = 4


def _registry():
    class Plugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(helpers.Faulty())
            register(helpers.FaultyNative())

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


def _run(sqlite_run, monkeypatch, fault, executor="local", workers=2, extra=(), name="faulty"):
    """Exit code of ``tclose run`` with the blocked algorithm ``faulty`` (k = 3, 4 blocks)."""
    registry = _registry()
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    options = {
        "fault": fault,
        "attempts": str(sqlite_run.tmp_path / "attempts"),
        "blocks": BLOCKS,
        "executor": executor,
        "workers": workers,
        "retries": 2,
    }
    document = sqlite_run.config(algorithm={"name": name, "options": options})
    document["privacy"]["t"] = 1.0
    document["target"]["if_exists"] = "replace"
    document["report"] = {
        "json": str(sqlite_run.tmp_path / "r.json"),
        "html": str(sqlite_run.tmp_path / "r.html"),
    }
    return main(["-q", "run", str(sqlite_run.write(document)), *extra])


@pytest.fixture
def published(sqlite_run, monkeypatch, capsys):
    """A target published by an honest blocked run (serial); returns its rows and the source's."""
    assert _run(sqlite_run, monkeypatch, "none", workers=1) == 0, capsys.readouterr().err
    for name in ("r.json", "r.html", "attempts"):
        (sqlite_run.tmp_path / name).unlink()
    return sqlite_run.rows("discharges_anon"), sqlite_run.rows("discharges")


def _refused(sqlite_run, capsys, published, code, expected):
    """The error text, after checking the exit code, that every block ran at most once (no
    retry of a deterministic failure), and that nothing changed and no report was written."""
    err = capsys.readouterr().err
    assert code == expected, err
    assert 1 <= helpers.attempts(sqlite_run.tmp_path / "attempts") <= BLOCKS, err
    assert "retry" not in err and "internal error" not in err and "bug in tclose" not in err
    assert sqlite_run.tables() == {"discharges", "discharges_anon"}  # no staging table
    assert (sqlite_run.rows("discharges_anon"), sqlite_run.rows("discharges")) == published
    assert not (sqlite_run.tmp_path / "r.json").exists()
    assert not (sqlite_run.tmp_path / "r.html").exists()
    return err


def _named(err):
    """The message names the plugin (and its class) and the block."""
    assert "Algorithm 'faulty' (block_plugins_helpers.Faulty)" in err, err
    assert f" of {BLOCKS} (" in err and "rows)" in err, err
    assert "a bug in the plugin" in err, err


def test_an_honest_blocked_run_publishes_on_the_pool(sqlite_run, monkeypatch, capsys, published):
    """The fixture's algorithm works on the pool: the failures below are the faults'."""
    assert _run(sqlite_run, monkeypatch, "none") == 0, capsys.readouterr().err
    assert helpers.attempts(sqlite_run.tmp_path / "attempts") == BLOCKS
    assert sorted(sqlite_run.rows("discharges_anon")) == sorted(published[0])


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
def test_a_plugin_that_raises_in_a_block_is_a_plugin_failure(
    sqlite_run, monkeypatch, capsys, published, workers
):
    """A plugin that raises in a block is a plugin failure naming the plugin and its error (exit 4,
    not a bug of tclose), on the pool as in process: no block runs twice, nothing is published."""
    code = _run(sqlite_run, monkeypatch, "zero", workers=workers)
    err = _refused(sqlite_run, capsys, published, code, 4)
    _named(err)
    assert "ZeroDivisionError: division by zero" in err and "-v" in err


def test_the_traceback_of_a_worker_is_printed_with_v(sqlite_run, monkeypatch, capsys, published):
    code = _run(sqlite_run, monkeypatch, "zero", extra=["-v"])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" in err and "block_plugins_helpers.py" in err and "1 / 0" in err, err


@pytest.mark.parametrize("fault", ["exit", "unpicklable"])
def test_sys_exit_or_an_unpicklable_exception_in_a_worker(
    sqlite_run, monkeypatch, capsys, published, fault
):
    """``sys.exit(0)`` in a block, or an exception the pool cannot send back as it is."""
    code = _run(sqlite_run, monkeypatch, fault)
    err = _refused(sqlite_run, capsys, published, code, 4)
    _named(err)
    assert ("SystemExit" if fault == "exit" else "_Unpicklable: the plugin's own") in err, err


def test_a_clear_error_of_the_plugin_is_its_own_and_not_retried(
    sqlite_run, monkeypatch, capsys, published
):
    """A plugin's own DataError in a block: exit 3 with its message, as in process, without
    retries."""
    code = _run(sqlite_run, monkeypatch, "data")
    err = _refused(sqlite_run, capsys, published, code, 3)
    assert "Faulty refuses these rows on purpose." in err and "failed 3 time" not in err


def _dask():
    if os.environ.get("CI", "").lower() == "true":
        import distributed  # a missing Dask fails in CI

        return distributed
    return pytest.importorskip("distributed")


def test_a_plugin_that_raises_on_dask_is_a_plugin_failure(
    sqlite_run, monkeypatch, capsys, published
):
    """Dask retried the task ``retries`` times itself, then the run ended with exit 3."""
    _dask()
    code = _run(sqlite_run, monkeypatch, "zero", executor="dask")
    err = _refused(sqlite_run, capsys, published, code, 4)
    _named(err)
    assert "ZeroDivisionError: division by zero" in err


def test_a_plugin_in_the_problem_form_is_named_too(sqlite_run, monkeypatch, capsys, published):
    """An algorithm whose hooks take the problem, as the built-ins' do."""
    code = _run(sqlite_run, monkeypatch, "zero", name="faulty-native")
    err = _refused(sqlite_run, capsys, published, code, 4)
    assert "Algorithm 'faulty-native' (block_plugins_helpers.FaultyNative) failed in block" in err


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
def test_a_block_result_the_pool_cannot_send_back(
    sqlite_run, monkeypatch, capsys, published, workers
):
    """A ``partition_block`` whose answer cannot be pickled (a lambda in its info) is refused by the
    contract's check on every executor, naming the plugin, in process as on the pool, and nothing is
    published."""
    code = _run(
        sqlite_run, monkeypatch, "unpicklable_result", workers=workers, name="faulty-native"
    )
    err = _refused(sqlite_run, capsys, published, code, 1)
    assert "Algorithm 'faulty-native' (block_plugins_helpers.FaultyNative) returned an info" in err
