"""Config hygiene: a number is what it spells, and a configuration is small.

YAML 1.1 reads ``010`` as 8, ``0x10`` as 16, ``1_000`` as 1000 and ``1:30`` as 90 (base 60),
silently (``k: 010`` would run with k = 8). Every integer or float scalar of the document that is
not written in plain decimal is refused (exit 2) with the key path, the line, what YAML made of it
and the fix, wherever it is: privacy, source, attribute specs, plugin options, lists, anchors.
A configuration over :data:`tclose.base.config.MAX_CONFIG_BYTES` is refused before it is parsed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.base.config import MAX_CONFIG_BYTES, load_config
from tclose.errors import ConfigError

from .test_adversarial_config import BASE  # privacy on line 14, its k 3 and t 0.2


@pytest.fixture
def base(demo_db: Path) -> str:
    return BASE.format(db=demo_db)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "h28.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    return str(caught.value)


@pytest.mark.parametrize(
    ("written", "reading", "fix"),
    [
        ("010", "the octal number 8", "write 8, or 10"),
        ("+010", "the octal number 8", "write 8, or 10"),
        ("0x10", "the hexadecimal number 16", "write 16"),
        ("0b11", "the binary number 3", "write 3"),
        ("1_0", "the number 10", "write 10"),
        ("1:30", "the base-60 number 90", "write 90"),
        ("!!int '010'", "the octal number 8", "write 8, or 10"),
    ],
)
def test_k_not_in_plain_decimal_is_refused_naming_key_line_and_fix(
    tmp_path, capsys, base, written, reading, fix
):
    path = _write(tmp_path, base.replace("k: 3", f"k: {written}"))
    assert main(["-q", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "==> At privacy ==> At key: k (line 14)" in err, err
    assert reading in err and fix in err and "plain decimal" in err, err


def test_following_the_advice_runs(tmp_path, capsys, base):
    """The fix the message gives is a configuration that loads with that k."""
    path = _write(tmp_path, base.replace("k: 3", "k: 010"))
    assert main(["-q", "run", "--dry-run", str(path)]) == 2
    assert "write 8, or 10" in capsys.readouterr().err
    passing = base.replace(": other\n", ": {role: other, allow_unique: true}\n")  # linkage aside
    path.write_text(passing.replace("k: 3", "k: 10"), encoding="utf-8")
    assert main(["-q", "run", "--dry-run", str(path)]) == 0
    assert load_config(path).k == 10


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        # an attribute spec
        ("  age: {role: quasi_identifier}", "  age: {role: quasi_identifier, weight: 010}",
         "At attributes.age ==> At key: weight (line 5)"),
        # a plugin's options, nested, and in a list
        ("privacy:", "algorithm: {name: t-first, options: {candidates: 0x5}}\nprivacy:",
         "At algorithm.options ==> At key: candidates (line 14)"),
        ("privacy:", "algorithm:\n  name: auto\n  options:\n    blocks: {sizes: [1, 010]}\nprivacy:",
         "At algorithm.options.blocks ==> At key: sizes (line 17)"),
        # source settings
        ("key: patient_id}", "key: patient_id, chunk_size: 1_000}",
         "At source ==> At key: chunk_size (line 1)"),
        ("privacy:", "output: {seed: 1:05}\nprivacy:", "At output ==> At key: seed (line 14)"),
        # floats in base 60 or with underscores
        ("t: 0.2", "t: 0:0.2", "At privacy ==> At key: t (line 14)"),
        ("privacy:", "report: {interval_p: 0_0.05}\nprivacy:",
         "At report ==> At key: interval_p (line 14)"),
    ],
)  # fmt: skip
def test_every_number_of_the_document_is_covered(tmp_path, base, old, new, where):
    assert old in base
    message = _refusal(tmp_path, base.replace(old, new))
    assert where in message and "plain decimal" in message, message


@pytest.mark.parametrize("tagged", ["!!int ''", "!!float ''", "!!int '-'", "!!int 0x", "!!float x"])
def test_a_number_tag_on_no_number_is_a_configuration_error(tmp_path, base, tagged):
    """``k: !!int ''`` (a number tag on no number) is a configuration error naming the key, not an
    internal error."""
    message = _refusal(tmp_path, base.replace("k: 3", f"k: {tagged}"))
    assert "At privacy ==> At key: k (line 14)" in message and "tagged as a number" in message


def test_an_anchored_number_is_refused_where_it_is_written(tmp_path, base):
    text = base.replace("k: 3", "k: &k 010").replace("  name: identifier", "  name: identifier")
    text += "output: {seed: *k}\n"
    message = _refusal(tmp_path, text)
    assert "At privacy ==> At key: k (line 14)" in message, message


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("t: 0.2", "t: .2"),  # a float without its leading 0: the same number in YAML 1.2
        ("t: 0.2", "t: 00.2"),  # leading zeros of a float: no octal floats exist
        ("t: 0.2", "t: 2.0e-1"),
        ("k: 3", "k: +3"),
        ("k: 3", "k: 0x"),  # text (not a number): refused by k's own check, not this one
    ],
)
def test_plain_forms_pass_this_rule(tmp_path, base, old, new):
    text = base.replace(old, new)
    if new == "k: 0x":
        assert "must be an integer" in _refusal(tmp_path, text)
        return
    config = load_config(_write(tmp_path, text))
    assert config.k == 3 and config.t == pytest.approx(0.2)


def test_keys_stay_the_text_written(tmp_path, base):
    """A column named ``010`` (a key) is still the column ``010``, not a number."""
    text = base.replace("  ward: other", "  ward: other\n  010: other")
    assert "010" in load_config(_write(tmp_path, text)).attributes


@pytest.mark.parametrize(
    ("k", "fix"),
    [("'010'", "write 10 without quotes"), ("08", "write 8"), ("'1_000'", "write 1000")],
)
def test_text_that_looks_like_a_number_gets_advice_that_loads(tmp_path, base, k, fix):
    """``08`` is text to YAML 1.1 (8 is no octal digit); the advice must not be "write 08
    without quotes", which is the same text again."""
    message = _refusal(tmp_path, base.replace("k: 3", f"k: {k}"))
    assert fix in message, message
    assert "write 08" not in message and "write 010" not in message


def test_a_configuration_over_the_size_limit_is_refused_before_parsing(tmp_path, capsys, base):
    padding = "# " + "x" * 100 + "\n"
    text = base + padding * (MAX_CONFIG_BYTES // len(padding) + 1)
    assert len(text.encode()) > MAX_CONFIG_BYTES
    path = _write(tmp_path, text + "privacy: [not, parsed]\n")  # a YAML error, never reached
    assert main(["-q", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "1 MiB" in err and "not valid YAML" not in err and "appears twice" not in err, err


def test_a_configuration_at_the_size_limit_loads(tmp_path, base):
    padding = "#" * 99 + "\n"
    text = base + padding * ((MAX_CONFIG_BYTES - len(base)) // len(padding))
    assert len(text.encode()) <= MAX_CONFIG_BYTES
    assert load_config(_write(tmp_path, text)).k == 3
