"""A configuration error's place in the YAML document is data (``ConfigError.path``/``line``),
and its text reads ``==> At a.b ==> At key: c (line 7)`` then the problem."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tclose.app.cli import main
from tclose.base.config import _Checker
from tclose.errors import ConfigError, PluginError

# A key as a YAML document may spell it: no dot (the text reads keys as dotted names), no line
# break, not the phrases the text itself uses.
KEYS = st.text(
    st.characters(blacklist_characters=".\n\r\x00", blacklist_categories=("Cs",)), min_size=1
).filter(lambda k: k == k.strip() and "==> At" not in k and "(line " not in k)


@pytest.mark.parametrize(
    ("path", "line", "text"),
    [
        (("attributes", "age", "type"), 7, "==> At attributes.age ==> At key: type (line 7)\nbad"),
        (("privacy",), None, "==> At key: privacy\nbad"),
        ((), None, "==> At the top level\nbad"),
        ((), 1, "==> At the top level (line 1)\nbad"),
        (("a\0b", "c"), None, "==> At a\\x00b ==> At key: c\nbad"),
    ],
)
def test_a_place_given_as_data_is_written_as_before(path, line, text):
    error = ConfigError("bad", path=path, line=line)
    assert str(error) == text
    assert (error.path, error.line, error.problem) == (path, line, "bad")


@given(st.lists(KEYS, max_size=5), st.one_of(st.none(), st.integers(1, 10**6)))
def test_a_message_is_never_parsed_for_a_place(path, line):
    """The place is data only: the text of a placed error, given again as a message, is a
    problem with no place (a connector or plugin must pass ``path=``)."""
    written = ConfigError("a problem\non two lines", path=path, line=line)
    read = ConfigError(str(written))
    assert (read.path, read.line, read.problem) == (None, None, str(written))
    assert read.located_text(3) == str(written)


def test_a_part_checked_on_its_own_is_placed_below_its_prefix():
    inner = ConfigError("Unknown option 'x'.", path=("x",), line=4)
    placed = inner.at("attributes", "age", "distance_options")
    assert placed.path == ("attributes", "age", "distance_options", "x")
    assert str(placed) == (
        "==> At attributes.age.distance_options ==> At key: x\nUnknown option 'x'."
    )
    assert placed.line is None  # the inner line was of another document
    assert type(PluginError("p", path=("a",)).at("b")) is PluginError
    unplaced = ConfigError("no place").at("algorithm", "options")
    assert str(unplaced) == "==> At algorithm ==> At key: options\nno place"


def test_the_place_survives_pickling_to_and_from_a_worker():
    error = ConfigError("bad", path=("algorithm", "options", "blocks"), line=9, published=False)
    again = pickle.loads(pickle.dumps(error))
    assert (again.path, again.line, again.problem, str(again)) == (
        error.path,
        error.line,
        error.problem,
        str(error),
    )


def test_the_parser_of_the_configuration_gives_the_place_as_data():
    error = _Checker({("privacy",): 3, ("privacy", "k"): 4}).fail(("privacy", "k"), "k is 0.")
    assert (error.path, error.line, error.problem) == (("privacy", "k"), 4, "k is 0.")
    assert str(error) == "==> At privacy ==> At key: k (line 4)\nk is 0."
    nearest = _Checker({("privacy",): 3}).fail(("privacy", "t"), "t is 2.")
    assert nearest.line == 3 and str(nearest).startswith("==> At privacy ==> At key: t (line 3)")


def test_the_command_adds_the_file_and_the_line_of_an_error_found_after_parsing(sqlite_run, capsys):
    """An unknown algorithm option is found when the plugins are resolved, after the parser:
    the error names its place without a line, and the command adds the file and the line."""
    document = sqlite_run.config(algorithm={"name": "t-first", "options": {"nonsense": 1}})
    config = sqlite_run.write(document)
    assert main(["run", str(config)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    line = next(
        number
        for number, text in enumerate(config.read_text().splitlines(), 1)
        if text.strip().startswith("nonsense:")
    )
    assert first == (
        f"error: {config}: ==> At algorithm.options ==> At key: nonsense (line {line})"
    )
