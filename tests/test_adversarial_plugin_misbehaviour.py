"""Adversarial: plugins that misbehave the way research prototypes do.

tests/test_adversarial_plugins.py and tests/test_adversarial_block_plugins.py cover wrong answers
and ordinary exceptions. Here: ``BaseException`` subclasses, exceptions whose ``str()`` fails or
holds the data, state kept across calls and blocks, output on stdout, and distances that
under-report their EMD. Whatever the plugin does, nothing unverified is published, the source is
untouched, and the error names the plugin, never blaming tclose.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import block_plugins_helpers as helpers  # noqa: E402
import test_adversarial_block_plugins as blocks  # noqa: E402
import test_adversarial_plugins as rogue  # noqa: E402

published = rogue.published


@pytest.fixture
def blocked_published(sqlite_run, monkeypatch, capsys):
    """A target published by an honest blocked run (serial); its rows and the source's."""
    assert blocks._run(sqlite_run, monkeypatch, "none", workers=1) == 0, capsys.readouterr().err
    for name in ("r.json", "r.html", "attempts"):
        (sqlite_run.tmp_path / name).unlink()
    return sqlite_run.rows("discharges_anon"), sqlite_run.rows("discharges")


def _raising(error):
    def partition(x, distances, k):
        raise error

    return partition


# --- BaseException subclasses and exceptions that cannot be printed -----------------------------


@pytest.mark.parametrize("fault", ["generator_exit", "base_exception", "unprintable"], ids=str)
def test_a_plugin_raising_what_is_not_an_exception_is_a_plugin_failure(
    sqlite_run, monkeypatch, capsys, published, fault
):
    """``GeneratorExit`` or a ``BaseException`` of the plugin's own escaped ``tclose run``
    (Python's traceback, exit 1: "verification failed"); an exception whose ``str()`` raises
    was an internal error blaming tclose. Each is the plugin's failure, exit 4, naming it."""
    errors = {
        "generator_exit": GeneratorExit(),
        "base_exception": helpers._Abort("the plugin gave up"),
        "unprintable": helpers._Unprintable("secret 4242"),
    }
    code = rogue._run(sqlite_run, monkeypatch, _raising(errors[fault]))
    err = rogue._refused(sqlite_run, capsys, published, code, 4)
    assert type(errors[fault]).__name__ in err and "a bug in the plugin" in err, err
    assert "4242" not in err


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
@pytest.mark.parametrize("fault", ["generator_exit", "base_exception", "unprintable"])
def test_the_same_in_a_block(sqlite_run, monkeypatch, capsys, blocked_published, workers, fault):
    code = blocks._run(sqlite_run, monkeypatch, fault, workers=workers)
    err = blocks._refused(sqlite_run, capsys, blocked_published, code, 4)
    blocks._named(err)
    assert "4242" not in err


def test_a_long_exception_message_is_cut(sqlite_run, monkeypatch, capsys, published):
    """A prototype's ``ValueError(f"bad input {x}")`` put the whole array (here 1 MB of it)
    on the screen; the message is cut as an internal error's is (the traceback, with -v, has
    it all)."""
    code = rogue._run(sqlite_run, monkeypatch, _raising(ValueError("7" * 1_000_000)))
    err = rogue._refused(sqlite_run, capsys, published, code, 4)
    assert "ValueError: 777" in err and len(err) < 2_000, len(err)


# --- State kept across calls and blocks ---------------------------------------------------------


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
def test_every_block_gets_the_options_as_validated(
    sqlite_run, monkeypatch, capsys, blocked_published, workers
):
    """A ``partition_block`` that pops its options changed them for the next block run in the
    same process: in process (or on a worker that ran two blocks) the second block got other
    options than the first, and the run depended on the executor."""
    code = blocks._run(
        sqlite_run, monkeypatch, "pops_options", workers=workers, name="faulty-native"
    )
    assert code == 0, capsys.readouterr().err
    assert helpers.attempts(sqlite_run.tmp_path / "attempts") == blocks.BLOCKS


# --- Output on stdout ---------------------------------------------------------------------------


def test_a_plugin_printing_does_not_write_into_the_results(
    sqlite_run, monkeypatch, capsys, published
):
    """stdout holds the run's results (the summary, ``tclose init``'s YAML); a plugin's
    ``print`` was mixed into them. It goes to stderr."""

    def printing(x, distances, k):
        print("rogue: debugging output")
        return rogue._honest(x, distances, k)

    assert rogue._run(sqlite_run, monkeypatch, printing) == 0
    out, err = capsys.readouterr()
    assert "debugging output" not in out and "debugging output" in err


def test_a_plugin_printing_in_a_block_does_not_write_into_the_results(
    sqlite_run, monkeypatch, capsys
):
    """The same in a block run in this process (a pool's workers run the same code, but their
    output escapes pytest's capture)."""
    assert blocks._run(sqlite_run, monkeypatch, "prints", workers=1) == 0
    out, err = capsys.readouterr()
    assert "debugging output" not in out and "debugging output" in err
