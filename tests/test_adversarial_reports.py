"""Adversarial: the audit report as an input, hand-edited or hostile.

An auditor feeds a report JSON to ``tclose report`` (the HTML page) and ``tclose verify
--report``. Whatever the file holds (wrong types in any field, a missing section, a list, NaN,
an integer of 400 digits, a key twice, nesting deeper than the parser's stack, bytes that are not
UTF-8), the commands give a clear error naming the file and the field (exit 2) or a verification
verdict, never an internal error (exit 4), and never "verified" on the word of one field that
the report's own checks contradict. The page rendered from any accepted report loads nothing and
runs nothing, and shows control characters and bidirectional overrides as escapes.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.app.html_report import render_html
from tclose.core.report_checks import report_problem

#: Every element tclose's own page uses.
_OWN_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "small", "div",
    "p", "span", "table", "tr", "th", "td", "ul", "li", "pre", "svg", "rect", "line", "text",
}  # fmt: skip

HOSTILE = [
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    '" onmouseover="alert(3)',
    "' autofocus onfocus='alert(4)",
    "<a href=javascript:alert(5)>x</a>",
    "<link rel=stylesheet href=https://evil.example/x.css>",
    "<style>@import url(https://evil.example/y.css)</style>",
    "<!--",
    "]]></svg><iframe src=https://evil.example/>",
    "\u202etxt.exe",
    "a\x01b\x1b[2Jc\x7fd\x9be",
    "x" * 20_000,
]


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def published(sqlite_run, tmp_path) -> tuple[str, dict]:
    """A published run with a nominal quasi-identifier: the config's path and the report."""
    document = sqlite_run.config()
    document["attributes"]["ward"] = {"role": "quasi_identifier", "type": "nominal"}
    document["report"] = {"json": str(tmp_path / "s25r_run.json")}
    config = str(sqlite_run.write(document))
    code, out, err = _cli("run", config)
    assert code == 0, out + err
    return config, json.loads((tmp_path / "s25r_run.json").read_text())


def _write(tmp_path: Path, content: dict | str | bytes, name: str = "s25r_edited.json") -> str:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        text = content if isinstance(content, str) else json.dumps(content)
        path.write_text(text, encoding="utf-8")
    return str(path)


class _Page(HTMLParser):
    """The elements, attributes and text of a page as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def _assert_inert(page: str) -> str:
    """No element, attribute, comment or resource of ``page`` comes from the report; its
    text."""
    parser = _Page()
    parser.feed(page)
    parser.close()
    for tag, attributes in parser.tags:
        assert tag in _OWN_TAGS, tag
        for name, value in attributes.items():
            assert not name.startswith("on") and name not in ("src", "href", "autofocus"), name
            if name in ("style", "xmlns"):
                assert "url(" not in value and "evil" not in value, value
    assert not parser.comments
    # the only URL in an attribute is SVG's namespace; no @import or url() in the style sheet
    assert set(re.findall(r'="(https?:[^"]*)"', page)) == {"http://www.w3.org/2000/svg"}
    style = page[page.index("<style>") : page.index("</style>")]
    assert "@import" not in style and "url(" not in style and "evil" not in style
    return "".join(parser.text)


#: The maps of a report keyed by a name (of a column, category, plugin, phase or fact).
_NAMED = [
    ("distributions",), ("utility", "sse_per_attribute"), ("utility", "moments"),
    ("privacy", "t_achieved"), ("privacy", "distance"), ("privacy", "emd_definitions"),
    ("privacy", "emd_histogram"), ("plugins",), ("timings",), ("algorithm", "info"),
    ("algorithm", "options"), ("risk", "attribute"), ("attributes",),
    ("target", "content_digest", "types"),
]  # fmt: skip


def _hostile(value, texts):
    """``value`` with every text replaced by the next hostile string."""
    if isinstance(value, dict):
        return {key: _hostile(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [_hostile(item, texts) for item in value]
    return next(texts) if isinstance(value, str) else value


def _hostile_report(report: dict) -> dict:
    """``report`` with every text, and every key of :data:`_NAMED`, a hostile string."""
    texts = _cycle(HOSTILE)
    edited = _hostile(report, texts)
    for steps in _NAMED:
        node = edited
        for step in steps[:-1]:
            node = node[step]
        node[steps[-1]] = {next(texts): item for item in node[steps[-1]].values()}
    return edited


def _cycle(strings):
    while True:
        yield from strings


def test_a_report_with_hostile_text_in_every_name_and_value_renders_an_inert_page(
    published, tmp_path
):
    """Every key naming a column, category, plugin, phase or fact and every text of the report
    (table, URL, check names and details, warnings, definitions, plugin versions, the digest's
    statement) replaced by markup, ``javascript:`` URLs, external style sheets, a comment opener, a
    bidi override, control characters and a 20,000-character name: ``tclose report`` writes a page
    with tclose's own elements only, loading nothing; the bidi override and the control characters
    are shown as escapes, so no right-to-left override reverses the text after it."""
    _config, report = published
    report["target"]["content_digest"]["statement"] = HOSTILE[0]
    edited = _hostile_report(report)
    # a verdict needs the k and t checks by name: the t check's holds the hostile column name
    checks = {c["name"]: i for i, c in enumerate(report["verification"]["checks"])}
    (column,) = edited["privacy"]["t_achieved"]
    edited["verification"]["checks"][checks["k_anonymity"]]["name"] = "k_anonymity"
    edited["verification"]["checks"][checks["t_closeness:charge"]]["name"] = f"t_closeness:{column}"
    assert report_problem(edited) is None
    path = _write(tmp_path, edited)
    code, out, err = _cli("report", path, "-o", str(tmp_path / "s25r_page.html"))
    assert code == 0, out + err
    page = (tmp_path / "s25r_page.html").read_text(encoding="utf-8")
    assert page == render_html(edited)
    text = _assert_inert(page)
    assert "</script><script>alert(1)</script>" in text and "<img src=x onerror" in text
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", page)
    assert "\\u202etxt.exe" in text and "a\\x01b\\x1b[2Jc\\x7fd\\x9be" in text


def _paths(value, at=()):
    """Every field of a report (the first two items of a list), and the report's ``config``
    as one field."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*at, key)
            if key != "config":
                yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:2]):
            yield (*at, index)
            yield from _paths(item, (*at, index))


WRONG = [None, "<b>x</b>", -1, 1.5, True, [], {}, [[1]], {"a": [1]}, 10**400, 1e308, 1e-320]


def test_any_field_of_any_type_gives_a_page_or_a_clear_error_never_an_internal_one(
    published, tmp_path
):
    """Every field of a real report, in turn, set to each of ``WRONG`` (null, a text, a negative or
    fractional count, a boolean, a list, an object, an integer of 400 digits that no float holds,
    the largest and a subnormal float) or deleted: each is a page or exit 2 naming the file and the
    field, never an internal error (a section emptied to null, a huge count, a histogram of another
    length)."""
    _config, report = published
    crashes = []
    for steps in _paths(report):
        for value in [*WRONG, "delete"]:
            edited = copy.deepcopy(report)
            node = edited
            for step in steps[:-1]:
                node = node[step]
            if value == "delete":
                del node[steps[-1]]
            else:
                node[steps[-1]] = value
            path = _write(tmp_path, edited)
            code, out, err = _cli("report", path, "-o", str(tmp_path / "s25r_page.html"))
            if code == 2:
                assert f"error: {path} is not an audit report" in err, err
            elif code != 0:
                crashes.append((steps, value, code, err.strip()[-200:]))
    assert not crashes, crashes[:5]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda r: r.update(privacy=None), "privacy is null, not an object"),
        (lambda r: r["distributions"]["age"].update(edges=[1.0]), "age.edges has 1 edges"),
        (
            lambda r: r["distributions"]["ward"]["original"].append(3),
            "distributions.ward.original has",
        ),
        (lambda r: r["clusters"]["size_histogram"].update({"1e308": 1}), "not a cluster size"),
        (lambda r: r["risk"].update(record_linkage="0.5"), "risk.record_linkage is a string"),
        (lambda r: r["verification"]["checks"].append(7), "checks[5] is a number"),
        (lambda r: r.pop("verification"), "it has no verification section"),
    ],
)
def test_a_malformed_report_names_the_field(published, tmp_path, edit, said):
    _config, report = published
    edit(report)
    path = _write(tmp_path, report)
    code, out, err = _cli("report", path)
    assert code == 2, out + err
    assert f"{path} is not an audit report" in err and said in err, err
    assert "internal error" not in err
    assert not (tmp_path / "s25r_edited.html").exists()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"verification": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
        (b'{"verification": {"passed": false}, "target": {"table": "caf\xe9"}}', "not UTF-8"),
        ('{"verification": {"checks": [], "passed": ' + "9" * 5000 + "}}", "a number too long"),
        ('{"verification": {"passed": false, "passed": true}}', "'passed' appears twice"),
        ('{"verification": {}, "run": {"id": "a", "id": "b"}}', "'id' appears twice"),
        ("\ufeff{}", "invalid JSON at line 1"),
    ],
)
@pytest.mark.parametrize("command", ["report", "verify"])
def test_an_unparsable_report_is_a_usage_error_for_both_commands(
    published, tmp_path, content, said, command
):
    """Nesting deeper than the parser's stack, bytes that are not UTF-8, an integer of 5,000 digits
    and a key twice in one object (which parsers read differently: the page and another reader would
    disagree on the verdict) are exit 2 for both commands, saying why the file is not an audit
    report."""
    config, _report = published
    path = _write(tmp_path, content)
    args = ("report", path) if command == "report" else ("verify", config, "--report", path)
    code, out, err = _cli(*args)
    assert code == 2, out + err
    assert f"{path} is not an audit report" in err and said in err, err
    assert "verified" not in out and "internal error" not in err


@pytest.mark.parametrize(
    ("steps", "value", "said"),
    [
        (("run",), "r1", "run is a string, not an object"),
        (("run",), None, "run is null"),
        (("run", "id"), ["r1"], "run.id is a list"),
        (("run", "id"), {}, "run.id is an object"),
        (("target", "rows"), "400", "target.rows is a string"),
        (("target", "rows"), 400.5, "target.rows is a number, not a whole number"),
        (("target", "rows"), True, "target.rows is a boolean"),
        (("target", "content_digest", "types"), 7, "content_digest.types is a number"),
        (("target", "content_digest", "types"), "INTEGER", "content_digest.types is a string"),
        (("target", "content_digest", "types", "age"), [], "types.age is a list"),
        (("target", "content_digest", "columns"), "age", "content_digest.columns is a string"),
        (("target", "content_digest", "sha256"), 12, "content_digest.sha256 is a number"),
        (("target", "content_digest", "algorithm"), {}, "content_digest.algorithm is an object"),
    ],
)
def test_verify_with_a_report_field_of_the_wrong_type_is_a_usage_error(
    published, tmp_path, steps, value, said
):
    """``run`` as a text or a number, ``content_digest.types`` as a number or a text, and ``run.id``
    as a list or an object are exit 2 naming the field: never a crash, never a check skipped
    silently."""
    config, report = published
    node = report
    for step in steps[:-1]:
        node = node[step]
    node[steps[-1]] = value
    path = _write(tmp_path, report)
    code, out, err = _cli("verify", config, "--report", path)
    assert code == 2, out + err
    assert f"{path} is not an audit report: " in err and said in err, err
    assert "verified" not in out and "internal error" not in err


@pytest.mark.parametrize(
    ("steps", "value", "check"),
    [
        (("config_sha256",), 123, "config_sha256"),
        (("config_sha256",), ["a"], "config_sha256"),
        (("config_sha256",), None, "config_sha256"),
        (("target", "rows"), 399, "row_count"),
        (("target", "content_digest", "sha256"), None, "content_digest"),
        (("target", "content_digest", "columns"), None, "content_digest"),
        (("run", "id"), "0" * 32, "run_id"),
    ],
)
def test_a_report_of_another_release_or_with_a_field_emptied_fails_verification(
    published, tmp_path, steps, value, check
):
    """Guard: a report whose digest, row count or run id belongs to another release, or is
    emptied to null, is a failed verification (exit 1) naming the check, never "verified"."""
    config, report = published
    node = report
    for step in steps[:-1]:
        node = node[step]
    node[steps[-1]] = value
    code, out, err = _cli("verify", config, "--report", _write(tmp_path, report))
    assert code == 1, out + err
    assert f"FAIL  {check}" in out and "verdict: NOT verified" in out, out


def test_a_report_of_another_configuration_fails_verification(published, sqlite_run, tmp_path):
    """Guard: the same table checked with a configuration of another t: its digest is not the
    report's."""
    config, report = published
    document = sqlite_run.config()
    document["attributes"]["ward"] = {"role": "quasi_identifier", "type": "nominal"}
    document["privacy"]["t"] = 0.25
    other = str(sqlite_run.write(document, "s25r_other.yaml"))
    code, out, err = _cli("verify", other, "--report", _write(tmp_path, report))
    assert code == 1, out + err
    assert "FAIL  config_sha256" in out and "verdict: NOT verified" in out


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r["verification"]["checks"][1].update(passed=False),
        lambda r: r["verification"]["checks"][1].update(passed=None),
        lambda r: r["verification"].update(checks=[]),
    ],
    ids=["a_check_failed", "a_check_without_verdict", "no_check"],
)
def test_a_report_claiming_verified_against_its_own_checks_is_refused(published, tmp_path, edit):
    """``verification.passed: true`` beside a failed check (or none at all): the command refuses the
    report (exit 2, naming the check), and the page of such a report (rendered through the API) says
    FAILED, never the green "Verified and published" banner above a FAIL row."""
    _config, report = published
    edit(report)
    path = _write(tmp_path, report)
    code, out, err = _cli("report", path)
    assert code == 2, out + err
    assert "verification.passed is true, but" in err, err
    page = render_html(report)
    assert "Verification FAILED" in page and "Verified and published" not in page


@pytest.mark.parametrize("passed", ["true", "yes", 1, [True]])
def test_a_verdict_that_is_not_a_boolean_is_refused(published, tmp_path, passed):
    """``"passed": "false"`` (any non-empty text, 1, a list: all truthy) is refused, naming the
    field: the page never says "Verified and published" for it."""
    _config, report = published
    report["verification"]["passed"] = passed
    report["verification"]["checks"][0]["passed"] = "false"
    code, out, err = _cli("report", _write(tmp_path, report))
    assert code == 2, out + err
    assert "verification.passed is" in err and "not true, false or null" in err, err
    report["verification"]["passed"] = False
    page = render_html(report)
    assert '<span class="pass">PASS</span></td><td>row_count' not in page


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize(
    "key",
    [
        ("privacy", "t"),  # a number field
        ("verification", "passed"),  # a field of another type
        ("verification", "checks", 0, "actual"),  # in a list
        ("tool", "s25r_unread"),  # a field no command reads
    ],
)
def test_a_report_holding_nan_or_an_infinity_is_refused_naming_its_key(
    published, tmp_path, token, key
):
    """A report is strict JSON (tclose writes a figure it cannot define as null): a NaN, an
    infinity or a number no float holds anywhere in it is exit 2 for ``tclose report`` and
    ``verify --report``, naming the key, with nothing written."""
    config, report = published
    *parents, last = key
    node = report
    for step in parents:
        node = node[step]
    node[last] = "s25r-token"
    text = json.dumps(report).replace('"s25r-token"', token)
    path = _write(tmp_path, text)
    page = tmp_path / "s25r_nan.html"
    dotted = ".".join(str(step) for step in key).replace(".0.", "[0].")
    for args in (("report", path, "-o", str(page)), ("verify", config, "--report", path)):
        code, out, err = _cli(*args)
        assert code == 2, out + err
        assert f"not an audit report: {dotted} is NaN or an infinity" in err, err
    assert not page.exists()


def test_no_source_value_in_the_messages_of_a_refused_report(published, tmp_path):
    """A report whose category labels hold a source value (a nominal QI's categories) and whose
    shape is wrong elsewhere: the error names the field, never the value of a field."""
    _config, report = published
    secret = "s25r-secret-ward-value"
    report["distributions"]["ward"]["categories"][0] = secret
    report["distributions"]["ward"]["anonymized"] = secret
    code, out, err = _cli("report", _write(tmp_path, report))
    assert code == 2
    assert "distributions.ward.anonymized is a string, not a list" in err, err
    assert secret not in err + out


def test_a_deeply_nested_unread_field_does_not_crash_the_rebuilt_audit_row(sqlite_run, tmp_path):
    """``verify --report`` rebuilds the audit row of the table's run from the report when the row is
    missing, copying the report recursively: a field nobody reads nested past 200 is refused before
    anything is read (exit 2); 199 deep is rebuilt."""
    import sqlite3

    document = sqlite_run.config()
    document["report"] = {"json": str(tmp_path / "s25r_run.json"), "table": "s25r_audit"}
    config = str(sqlite_run.write(document))
    assert _cli("run", config)[0] == 0
    text = (tmp_path / "s25r_run.json").read_text().rstrip()[:-1]
    for depth, expected in ((900, 2), (199, 0)):
        with sqlite3.connect(sqlite_run.db) as connection:
            connection.execute("DELETE FROM s25r_audit")
        path = _write(tmp_path, text + ', "extra": ' + "[" * depth + "]" * depth + "}")
        code, out, err = _cli("verify", config, "--report", path)
        assert code == expected, out + err
        if expected == 2:
            assert "nested more than 200 deep" in err and "PASS" not in out, out + err
        else:
            assert "audit rebuilt the audit record" in out and "verdict: verified" in out, out


def test_report_output_onto_a_file_it_did_not_write_names_the_flag(published, tmp_path):
    """``tclose report JSON -o FILE`` onto a file that is not a page of tclose: refused, exit 2,
    the message naming ``-o`` (not a configuration key: there is no configuration here), and
    the file kept."""
    _config, report = published
    path = _write(tmp_path, report)
    notes = tmp_path / "s25r_notes.html"
    notes.write_text("<html><body>my notes</body></html>", encoding="utf-8")
    code, out, err = _cli("report", path, "-o", str(notes))
    assert code == 2 and err.startswith("error: -o: The report path"), out + err
    assert "==> At" not in err
    assert notes.read_text(encoding="utf-8") == "<html><body>my notes</body></html>"
