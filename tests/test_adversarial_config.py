"""Adversarial: a careless or hostile YAML configuration file.

A bad configuration is exit 2 with a message naming the key path, the problem and the fix; never
a traceback (exit 4), never minutes of work, never silently another meaning: an alias bomb is
refused at once, a deeply nested value or a non-UTF-8 file is a configuration error, and a column
named ``on``, ``NO``, ``null`` or ``010`` is that column, not ``True``, ``False``, ``None`` or
``8`` (as YAML 1.1 reads those keys).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.errors import ConfigError

BASE = """source: {{url: 'sqlite:///{db}', table: discharges, key: patient_id}}
target: {{table: s25y_anon}}
attributes:
  name: identifier
  age: {{role: quasi_identifier}}
  zip: {{role: quasi_identifier}}
  length_of_stay: {{role: quasi_identifier}}
  charge: {{role: confidential}}
  admission_day: other
  procedures: other
  diagnoses: other
  severity: other
  ward: other
privacy: {{k: 3, t: 0.2}}
"""


def allowing_linkage(text: str) -> str:
    """``text`` with its pass-through columns allowed to single out rows (together they do on
    the demo table, and linkage is not the subject of these tests)."""
    return text.replace(": other\n", ": {role: other, allow_unique: true}\n")


def _run(tmp_path: Path, capsys, content: str | bytes) -> tuple[int, str]:
    path = tmp_path / "s25y_run.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    code = main(["-q", "run", str(path)])
    return code, capsys.readouterr().err


@pytest.fixture
def base(demo_db: Path) -> str:
    return BASE.format(db=demo_db)


def _published(demo_db: Path) -> bool:
    with sqlite3.connect(demo_db) as connection:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        return "s25y_anon" in {row[0] for row in tables}


def test_an_alias_bomb_is_refused_at_once(tmp_path, capsys, base, demo_db):
    """Nine lines that expand to 9**9 values are refused at once, without walking them."""
    bomb = "  options:\n    a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"    {c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    started = time.perf_counter()
    code, err = _run(tmp_path, capsys, base + "algorithm:\n  name: t-first\n" + bomb)
    assert time.perf_counter() - started < 10
    assert code == 2, err
    assert "expands to more than 1,000,000 values" in err and "aliases" in err
    assert not _published(demo_db)


def test_aliases_and_merge_keys_still_work(tmp_path, capsys, base, demo_db):
    """A reused anchor is ordinary YAML, and ``<<: *anchor`` merges: both load."""
    text = base.replace("  age: {role: quasi_identifier}", "  age: &qi {role: quasi_identifier}")
    text = text.replace("  zip: {role: quasi_identifier}", "  zip: *qi")
    text = text.replace(
        "  length_of_stay: {role: quasi_identifier}",
        "  length_of_stay: {<<: *qi, type: numeric}",
    )
    code, err = _run(tmp_path, capsys, allowing_linkage(text))
    assert code == 0, err
    config = load_config(tmp_path / "s25y_run.yaml")
    assert config.quasi_identifiers == ["age", "zip", "length_of_stay"]


@pytest.mark.parametrize("opening", ["[", "{a: "])
def test_deep_nesting_is_a_configuration_error(tmp_path, capsys, base, opening):
    """A configuration nested deeper than the parser's stack is a configuration error (exit 2), not
    an internal error."""
    closing = "]" if opening == "[" else "}"
    deep = opening * 3000 + ("" if opening == "[" else "1") + closing * 3000
    code, err = _run(tmp_path, capsys, base + f"report: {deep}\n")
    assert code == 2, err
    assert "more than 100 levels deep" in err and "internal error" not in err


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: text.replace("ward: other", "w\xe9rd: other").encode("latin-1"),
        lambda text: text.encode("utf-16"),
    ],
    ids=["latin-1", "utf-16"],
)
def test_a_file_that_is_not_utf8_is_a_configuration_error(tmp_path, capsys, base, encode):
    """A configuration file that is not UTF-8 is a configuration error (exit 2), not an internal
    error."""
    code, err = _run(tmp_path, capsys, encode(base))
    assert code == 2, err
    assert "is not UTF-8 text" in err and "save it as UTF-8" in err


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: b"\xef\xbb\xbf" + text.encode(),
        lambda text: text.replace("\n", "\r\n").encode(),
    ],
    ids=["bom", "crlf"],
)
def test_a_bom_and_crlf_line_ends_are_accepted(tmp_path, capsys, base, demo_db, encode):
    code, err = _run(tmp_path, capsys, encode(allowing_linkage(base)))
    assert code == 0, err
    assert _published(demo_db)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "is empty"),
        ("# only a comment\n", "is empty"),
        ("- source\n- target\n", "At the top level\nExpected a mapping"),
        ("{base}---\n{base}", "found another document"),
        ("{tabbed}", "found character '\\t'"),
    ],
    ids=["empty", "comment", "list", "two-documents", "tab"],
)
def test_a_file_of_the_wrong_shape_is_a_configuration_error(
    tmp_path, capsys, base, demo_db, content, expected
):
    text = content.format(base=base, tabbed=base.replace("  age:", "\tage:"))
    code, err = _run(tmp_path, capsys, text)
    assert code == 2, err
    assert expected in err
    assert "Traceback" not in err and not _published(demo_db)


YAML_11_NAMES = ["on", "NO", "yes", "null", "~", "true", "010", "0x1F", "1_000", "1:30"]


def test_column_names_yaml_reads_as_other_values_name_those_columns(tmp_path, capsys):
    """``on:`` names the column ``on`` (YAML 1.1 reads the key as true): each column, unquoted,
    is found, and each has the role written for it."""
    database = tmp_path / "s25y_names.db"
    columns = ", ".join(f'"{name}" INTEGER' for name in YAML_11_NAMES)
    with sqlite3.connect(database) as connection:
        connection.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, {columns}, c INTEGER)")
        connection.executemany(
            f"INSERT INTO t VALUES ({', '.join('?' * (len(YAML_11_NAMES) + 2))})",
            [(i, *((i * 7 + j) % 13 for j in range(len(YAML_11_NAMES))), i % 5) for i in range(30)],
        )
    roles = {"on": "quasi_identifier", "NO": "identifier", "010": "quasi_identifier"}
    lines = "".join(f"  {name}: {roles.get(name, 'other')}\n" for name in YAML_11_NAMES)
    text = (
        f"source: {{url: 'sqlite:///{database}', table: t, key: id}}\n"
        f"target: {{table: s25y_anon}}\nattributes:\n{lines}  c: confidential\n"
        f"privacy: {{k: 3, t: 0.5}}\n"
    )
    text = allowing_linkage(text)  # role other on columns unique per row
    code, err = _run(tmp_path, capsys, text)
    assert code == 0, err
    config = load_config(tmp_path / "s25y_run.yaml")
    assert list(config.attributes) == [*YAML_11_NAMES, "c"]
    assert config.quasi_identifiers == ["on", "010"] and config.identifiers == ["NO"]
    with sqlite3.connect(database) as connection:
        published = [d[0] for d in connection.execute("SELECT * FROM s25y_anon").description]
    assert "NO" not in published and {"on", "010", "~", "null"} <= set(published)


def test_two_spellings_of_one_yaml_boolean_are_two_keys(tmp_path):
    """``on:`` and ``yes:`` were one key (``True``), refused as a repeated key; they are two
    columns. ``1:`` and ``"1":`` are still one."""
    path = tmp_path / "s25y_keys.yaml"
    path.write_text("source: {url: 'sqlite:///x.db', table: t}\nattributes: {on: a, yes: b}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "appears twice" not in str(caught.value)
    path.write_text("attributes: {on: other, 1: x, '1': y}\n")
    with pytest.raises(ConfigError, match=r"The key '1' appears twice in the same mapping"):
        load_config(path)


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        ('"5"', "Got '5' instead. It is text (quoted?): write 5 without quotes."),
        ("true", "Got True instead."),
        ("5.0", "Got 5.0 instead."),
        ("1e300", "write 1.0e+300"),
        ("-3", "Got -3 instead."),
        ("[3]", "Got [3] instead."),
    ],
)
def test_k_of_the_wrong_type_names_the_key(tmp_path, capsys, base, k, expected):
    code, err = _run(tmp_path, capsys, base.replace("k: 3", f"k: {k}"))
    assert code == 2, err
    assert "==> At privacy ==> At key: k (line 14)" in err and expected in err


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        ('"0.15"', "write 0.15 without quotes"),
        ("true", "Got True instead."),
        ("1e-3", "write 1.0e-3"),
        ("2024-01-01", "Got datetime.date(2024, 1, 1) instead."),
        ("15%", "Got '15%' instead."),
    ],
)
def test_t_of_the_wrong_type_names_the_key(tmp_path, capsys, base, t, expected):
    code, err = _run(tmp_path, capsys, base.replace("t: 0.2", f"t: {t}"))
    assert code == 2, err
    assert "==> At privacy ==> At key: t (line 14)" in err and expected in err


#: A password that breaks a URL written raw: its '@' ends the userinfo early, and its ':' makes
#: a piece of it the port.
RAW_PASSWORD = "s25y@Se:cr3t/w0rd%#?&x"


@pytest.mark.parametrize("how", ["inline", "whole-url-in-env"])
def test_a_raw_password_in_a_url_never_shows_a_piece(tmp_path, capsys, base, monkeypatch, how):
    """A URL whose raw password holds ``:``, ``/``, ``%`` or ``#`` cannot be parsed, and the error
    shows no piece of the password."""
    url = f"postgresql+psycopg://u:{RAW_PASSWORD}@127.0.0.1:1/db"
    if how == "whole-url-in-env":
        monkeypatch.setenv("S25Y_DATABASE_URL", url)
        url = "${S25Y_DATABASE_URL}"
    code, err = _run(tmp_path, capsys, base.replace(base.split("'")[1], url))
    assert code == 2, err
    for piece in ("Se:cr3t", "cr3t", "w0rd", "%#", "?&x"):
        assert piece not in err, err
    assert "'postgresql+psycopg://***@127.0.0.1:1/db'" in err
    assert "must be percent-encoded" in err


@pytest.mark.parametrize("seed", ["42", "-1", "1.5", "true", "'7'", "null"])
def test_any_seed_is_refused_naming_the_key_and_the_remedy(tmp_path, capsys, base, seed):
    """A release is ordered by its content: whatever ``output.seed`` holds, it is refused."""
    code, err = _run(tmp_path, capsys, base + f"output: {{seed: {seed}}}\n")
    assert code == 2, err
    assert "==> At output ==> At key: seed (line 15)" in err and "Remove the key" in err


@pytest.mark.parametrize(
    ("categories", "expected"),
    [
        ("[no, yes]", "reads the unquoted no (line 13) as the boolean false"),
        ("[on, off]", "reads the unquoted on (line 13) as the boolean true"),
        ("['01', 02, '10']", "reads the unquoted 02 (line 13) as the number 2"),
        ("[a, ~]", "reads the unquoted ~ (line 13) as null"),
        ("[a, 010]", "reads the unquoted 010 (line 13) as the number 8"),
    ],
)
def test_categories_yaml_reads_as_other_values_are_refused(
    tmp_path, capsys, base, categories, expected
):
    """``categories: [no, yes]`` (YAML 1.1 reads them as ``False`` and ``True``, which no text
    matches) is a configuration error naming the key and the quoting that keeps them text, before
    the table is read."""
    spec = f"{{role: quasi_identifier, type: ordinal, categories: {categories}}}"
    code, err = _run(tmp_path, capsys, base.replace("  ward: other", f"  ward: {spec}"))
    assert code == 2, err
    assert "==> At attributes.ward ==> At key: categories (line 13)" in err
    assert expected in err and "Quote it" in err


def test_categories_written_as_numbers_booleans_or_quoted_text_are_accepted(tmp_path):
    """Guards: ``[1, 2, 10]``, ``[false, true]``, ``['no', 'yes']``, ``[1.5, 2.0]``, dates and
    an inline hierarchy whose keys YAML would misread (keys are the text written)."""
    path = tmp_path / "s25y_cats.yaml"
    path.write_text(
        "source: {url: 'sqlite:///x.db', table: t}\ntarget: {table: u}\nattributes:\n"
        "  a: {role: quasi_identifier, type: ordinal, categories: [1, 2, 10]}\n"
        "  b: {role: quasi_identifier, type: ordinal, categories: [false, true]}\n"
        "  c: {role: quasi_identifier, type: nominal, categories: ['no', 'yes']}\n"
        "  d: {role: quasi_identifier, type: ordinal, categories: [1.5, 2.0, 2024-01-01]}\n"
        "  e: {role: quasi_identifier, type: nominal, hierarchy: {any: {on: [x], off: [y]}}}\n"
        "privacy: {k: 2}\n"
    )
    attributes = load_config(path).attributes
    assert attributes["a"].categories == ("1", "2", "10")
    assert attributes["b"].categories == ("False", "True")
    assert attributes["c"].categories == ("no", "yes")
    assert attributes["d"].categories == ("1.5", "2.0", "2024-01-01")
    assert attributes["e"].hierarchy.children["any"] == ["on", "off"]


@pytest.mark.parametrize(
    ("old", "new", "named", "advice"),
    [
        ("table: discharges", "table: 2024", "At source ==> At key: table", "quote a name"),
        ("table: s25y_anon", "table: on", "At target ==> At key: table", "quote a name"),
        # a number not in plain decimal is refused wherever it is (tests/test_config_hygiene.py)
        ("key: patient_id", "key: 010", "At source ==> At key: key", "quote it ('010')"),
    ],
)
def test_a_name_yaml_reads_as_a_value_says_to_quote_it(
    tmp_path, capsys, base, old, new, named, advice
):
    code, err = _run(tmp_path, capsys, base.replace(old, new))
    assert code == 2, err
    assert named in err and advice in err


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        (
            "target: {table: s25y_anon}",
            "target: {table: 's25y_${S25Y_T}'}",
            "At target ==> At key: table",
        ),
        (
            "key: patient_id",
            "key: patient_id, password_file: '${S25Y_T}'",
            "At source ==> At key: password_file",
        ),
        ("privacy:", "report: {json: '${S25Y_T}/r.json'}\nprivacy:", "At report ==> At key: json"),
        (
            "  ward: other",
            "  ward: {role: other, hierarchy: '${S25Y_T}.csv'}",
            "At attributes.ward ==> At key: hierarchy",
        ),
    ],
    ids=["target.table", "password_file", "report.json", "hierarchy"],
)
def test_a_variable_outside_a_url_is_refused(
    tmp_path, capsys, base, demo_db, monkeypatch, old, new, named
):
    """Only URLs are expanded: ``report: {json: '${OUT}/r.json'}`` is refused, never written into a
    folder literally named ``${OUT}``."""
    monkeypatch.setenv("S25Y_T", "x")
    monkeypatch.chdir(tmp_path)
    code, err = _run(tmp_path, capsys, base.replace(old, new))
    assert code == 2, err
    assert named in err and "only in source.url and target.url" in err
    assert not _published(demo_db) and not (tmp_path / "${S25Y_T}").exists()


@pytest.mark.parametrize("section", ["source", "target"])
def test_a_password_written_in_place_of_password_file_is_never_shown(
    tmp_path, capsys, base, section
):
    """A password a careless user wrote in place of ``password_file`` is never shown: the error
    names the key path only."""
    old = "key: patient_id" if section == "source" else "table: s25y_anon"
    code, err = _run(tmp_path, capsys, base.replace(old, f"{old}, password_file: Hunter2-s25y"))
    assert code == 2, err
    assert "Hunter2" not in err
    assert f"==> At {section} ==> At key: password_file" in err and "No such file" in err


@pytest.mark.parametrize("where", ["target", "report"])
def test_a_url_pasted_as_a_table_name_is_refused_unseen(tmp_path, capsys, base, demo_db, where):
    """A URL pasted as a table name (``postgresql://u:Hunter2-s25y@h/db``) is refused without
    showing it, never published or made the audit table (on SQLite the name would be a valid table).
    """
    pasted = "'postgresql://u:Hunter2-s25y@h/db'"
    text = base + f"report: {{json: {tmp_path / 'r.json'}}}\n"
    if where == "target":
        text = text.replace("table: s25y_anon", f"table: {pasted}")
    else:
        text = text.replace("report: {", f"report: {{table: {pasted}, ")
    code, err = _run(tmp_path, capsys, text)
    assert code == 2, err
    assert "Hunter2" not in err and "looks like a database URL" in err
    assert f"==> At {where} ==> At key: table" in err
    assert not _published(demo_db) and not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("url", ["root:Hunter2-s25y@127.0.0.1:3306/test", "localhost/test"])
def test_a_url_without_its_scheme_is_a_configuration_error(tmp_path, capsys, base, url):
    """A URL without its scheme is a configuration error that shows no part of it (the whole text
    would be taken for the dialect's name, password included)."""
    code, err = _run(tmp_path, capsys, base.replace(base.split("'")[1], url))
    assert code == 2, err
    assert "==> At source ==> At key: url (line 1)" in err and "starting with its scheme" in err
    assert "Hunter2" not in err


@pytest.mark.mysql
def test_a_query_option_pymysql_does_not_take_is_a_connection_error(tmp_path, capsys, base, maria):
    """A query option PyMySQL does not take (``?foo=bar``) is a connection error (exit 3), as
    PostgreSQL's driver makes it, not an internal error."""
    url = maria.engine.url.set(drivername="mysql+pymysql", query={"foo": "bar"})
    url_text = url.render_as_string(hide_password=False)
    code, err = _run(tmp_path, capsys, base.replace(base.split("'")[1], url_text))
    assert code == 3, err
    assert "unexpected keyword argument 'foo'" in err and "internal error" not in err


def test_a_url_before_a_colon_keeps_its_database_name():
    """A URL before a sentence's colon keeps its database name in messages (``test``, not
    ``test%3A``)."""
    from tclose.base.redaction import redact_url

    text = redact_url("on postgresql+psycopg://u:s25y-pw@h:5432/test: connection failed")
    assert text == "on postgresql+psycopg://u:***@h:5432/test: connection failed"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///${S25Y_EMPTY}"])
def test_an_in_memory_sqlite_target_is_refused(tmp_path, capsys, base, monkeypatch, url):
    """An in-memory SQLite target (also ``sqlite:///`` from an empty variable) is refused: a
    database that vanishes when the process exits is never reported as published."""
    monkeypatch.setenv("S25Y_EMPTY", "")
    text = base.replace("target: {table: s25y_anon", f"target: {{url: '{url}', table: s25y_anon")
    code, err = _run(tmp_path, capsys, text)
    assert code == 2, err
    assert "==> At target ==> At key: url (line 2)" in err and "in memory" in err


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  ward: other\n", "  ward: {role: other, type: bogus}\n"),
        ("  name: identifier\n", "  name: {role: identifier, type: nominl}\n"),
    ],
)
def test_an_unknown_type_on_any_role_names_the_key(tmp_path, capsys, base, demo_db, old, new):
    """``type:`` is checked on every role: a misspelled type on a pass-through or identifier column
    is a configuration error naming the key."""
    assert old in base
    code, err = _run(tmp_path, capsys, base.replace(old, new))
    assert code == 2, err
    assert "At key: type" in err and "Unknown attribute type" in err
    assert not _published(demo_db)
