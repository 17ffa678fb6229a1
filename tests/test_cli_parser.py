"""The ``tclose`` parser is built once per process: a parse leaves nothing in it that changes
the next parse, whatever the first one was (valid, an option given twice, an empty value, a
usage error, help)."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from tclose.app.cli import _parser

ARGVS = [
    ["-q", "run", "a.yaml"],
    ["run", "a.yaml", "--report", "r.json", "--dry-run"],
    ["run", "a.yaml", "--report", "r.json", "--report", "s.json"],  # given twice
    ["run", "a.yaml", "--report", ""],  # empty value
    ["-v", "verify", "a.yaml", "--source", "--report", "r.json"],
    ["compare", "a.yaml", "--k", "3", "--k", "5"],  # given twice
    ["compare", "a.yaml", "--k", "3,5", "--t", "0.2"],
    ["init", "sqlite:///x.db", "people", "-o", "out.yaml"],
    ["demo", "--rows", "many"],  # not an integer
    ["run"],  # no config
    ["plugins", "--help"],
]


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[str, object]:
    """What the parser makes of ``argv``: the namespace, or the exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return "parsed", vars(parser.parse_args(argv))
        except SystemExit as exit_:
            return "exit", (exit_.code, out.getvalue(), err.getvalue())


def test_the_parser_is_built_once():
    assert _parser() is _parser()


@pytest.fixture(scope="module")
def expected() -> list[tuple[str, object]]:
    """Each case parsed by a parser of its own."""
    return [_parse(_parser.__wrapped__(), argv) for argv in ARGVS]


@pytest.mark.parametrize("first", ARGVS)
def test_a_parse_does_not_change_the_next(first, expected):
    shared = _parser.__wrapped__()
    for second, alone in zip(ARGVS, expected, strict=True):
        _parse(shared, first)
        assert _parse(shared, second) == alone, second


def test_the_cases_parse_and_fail():
    """The cases above include parses that succeed and parses that fail, so the rule is tested on
    both."""
    outcomes = {_parse(_parser.__wrapped__(), argv)[0] for argv in ARGVS}
    assert outcomes == {"parsed", "exit"}
