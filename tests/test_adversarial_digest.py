"""Adversarial: the content digest an auditor re-checks (``tclose verify --report``, or psql).

The digest must name and cover exactly the published table: a column renamed after the run, a
search path that differs between the run and the auditor, names with quotes, semicolons and shell
metacharacters must never let a changed table pass or make the recorded command unusable.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
from html import unescape

import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.app.html_report import render_html
from tclose.base.config import load_config
from tclose.core.runner import verify_published


def _cli(*args: str) -> tuple[int, str]:
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        code = main(["-q", *args])
    return code, capture.getvalue()


def _run(db, document: dict) -> tuple[str, dict]:
    """Run ``document`` (its JSON report beside it); the config's path and the report."""
    report = db.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    config = str(db.write_config(document))
    code, out = _cli("run", config)
    assert code == 0, out
    return config, json.loads(report.read_text())


def test_a_column_renamed_after_the_run_fails_the_digest_check(db):
    """Renaming a pass-through column keeps every value, and (here) the columns' name order:
    the values hashed are the same, but the table is not the one the run published."""
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    config, _report = _run(db, db.config(source, target))
    report = str(db.tmp_path / "report.json")
    assert _cli("verify", config, "--report", report)[0] == 0

    renamed = {"mysql": "RENAME COLUMN", "sqlite": "RENAME COLUMN"}.get(db.dialect, "RENAME")
    db.execute(f"ALTER TABLE {db.quote(target)} {renamed} {db.quote('note')} TO {db.quote('notf')}")
    code, out = _cli("verify", config, "--report", report)
    assert code == 1 and "FAIL  content_digest" in out and "notf" in out, out


@pytest.fixture
def own_schema(pg):
    """A schema of this test, dropped (with its tables) afterwards."""
    schema = f"{pg.prefix}_sp"
    pg.execute(f"CREATE SCHEMA {pg.quote(schema)}")
    pg.schemas.append(schema)
    yield schema
    pg.execute(f"DROP SCHEMA {pg.quote(schema)} CASCADE")
    pg.schemas.remove(schema)


def test_the_statement_names_the_schema_the_search_path_chose(pg, own_schema, psql_sha256):
    """The run's URL sets ``search_path``; the config names the tables unqualified. The auditor's
    psql, with the default search path and a same-named table in ``public``, must still hash the
    published table: the recorded statement names its schema. So must ``tclose verify``'s."""
    source, target = pg.name("patients"), pg.name("anon")
    pg.create_patients(source, n=60)
    pg.execute(f"ALTER TABLE {pg.quote(source)} SET SCHEMA {pg.quote(own_schema)}")
    pg.create(target, [sa.Column("tclose_row", sa.Integer, primary_key=True)], [{"tclose_row": 1}])
    url = f"{pg.url}?options=-csearch_path%3D{own_schema}"
    document = pg.config(source, target)
    document["source"]["url"] = url
    config, report = _run(pg, document)
    digest = report["target"]["content_digest"]
    assert f"FROM {pg.quote(own_schema)}.{pg.quote(target)} " in digest["statement"]
    assert psql_sha256(pg.url, digest["statement"]) == digest["sha256"]
    verification = verify_published(load_config(config))
    assert verification.content_digest["statement"] == digest["statement"]


def test_the_html_command_recomputes_the_digest_of_a_name_with_shell_metacharacters(pg):
    """Table and column names with a single quote, double quotes, ``;``, ``$(...)`` and a
    backtick: the command the HTML report shows, pasted into ``sh`` (the connection filled in),
    prints the recorded digest and runs nothing else."""
    if shutil.which("psql") is None:
        pytest.skip("psql is not installed: the auditor's command cannot be run here")
    source, target = pg.name("patients"), pg.name("""O'B "q"; $(touch x) `y`""")
    pg.create_patients(source, n=60)
    column = "it's; $(a)"
    pg.execute(f"ALTER TABLE {pg.quote(source)} RENAME COLUMN note TO {pg.quote(column)}")
    document = pg.config(source, target)
    document["attributes"][column] = document["attributes"].pop("note")
    _config, report = _run(pg, document)
    html = render_html(report)
    shown = re.search(r"Recompute it with</th><td>(.*?)</td>", html)
    assert shown is not None
    url = sa.make_url(pg.url)
    conninfo = f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}"
    command = unescape(shown.group(1)).replace("<connection>", shlex.quote(conninfo))
    output = subprocess.run(
        ["sh", "-c", command],
        capture_output=True,
        text=True,
        check=True,
        cwd=pg.tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert output.stdout.split()[0] == report["target"]["content_digest"]["sha256"]
    assert not output.stderr
    assert sorted(p.name for p in pg.tmp_path.iterdir()) == ["report.json", "run.yaml"]


@pytest.mark.parametrize("column", ["ward {rows}", "ward }", "ward {", "ward {0}"])
def test_the_linkage_check_of_a_column_named_with_braces(db, column):
    """A checked pass-through column (not ``allow_unique``) whose name holds format braces: the
    linkage check compares its values like any other's; repeated values pass, unique ones fail."""
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    db.execute(f"ALTER TABLE {db.quote(source)} RENAME COLUMN ward TO {db.quote(column)}")
    document = db.config(source, target)
    del document["attributes"]["ward"]
    document["attributes"][column] = {"role": "other"}
    _run(db, document)
    assert len(db.rows(target)) == 60

    document["attributes"]["code"] = {"role": "other"}  # unique per row
    document["target"]["if_exists"] = "replace"
    code, _out = _cli("run", str(db.write_config(document)))
    assert code == 1


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("null", "null"),
        ("[]", "a list"),
        ('"report"', "a string"),
        ('{"target": []}', "target is a list"),
        ('{"target": {"content_digest": "abc"}}', "target.content_digest is a string"),
    ],
)
def test_a_report_that_is_not_an_audit_report_is_refused(
    sqlite_run, tmp_path, capsys, content, said
):
    """``verify --report`` with a file that is JSON but not an audit report (emptied to ``null`` by
    hand, a list, a section of the wrong type): a usage error naming the file and what is wrong,
    never "verified" without the digest check (``null`` is not "no report") nor an internal error.
    """
    document = sqlite_run.config()
    document["report"] = {"json": str(tmp_path / "report.json")}
    config = str(sqlite_run.write(document))
    assert main(["-q", "run", config]) == 0
    edited = tmp_path / "edited.json"
    edited.write_text(content, encoding="utf-8")
    code, out = _cli("verify", config, "--report", str(edited))
    err = capsys.readouterr().err
    assert code == 2, out + err
    assert f"{edited} is not an audit report" in err and said in err
    assert "verified" not in out and "internal error" not in err
