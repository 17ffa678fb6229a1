"""Adversarial: a secret given in any of the ways a driver accepts never appears in any output.

Every output of a run is grepped for the secret: stdout and stderr (``-v``), the JSON and HTML
reports, every row of the audit table, and the YAML written by ``tclose init``. Passwords hold
``@``, ``:`` and ``/`` on purpose. A category error must name rows, never the data values.
"""

from __future__ import annotations

import secrets
import sqlite3
from urllib.parse import quote

import pytest
import sqlalchemy as sa

from tclose.app.cli import main

#: A password with every character that breaks a naive URL.
WEIRD = "p@ss:w/rd%#?-"


def _password() -> str:
    return f"{WEIRD}{secrets.token_hex(6)}"


def _grep(secret: str, texts: dict[str, str]) -> list[str]:
    """The outputs that show ``secret`` (raw or percent-encoded, or its random tail)."""
    tail = secret[len(WEIRD) :]
    forms = {secret, quote(secret, safe=""), quote(secret), tail}
    return [name for name, text in texts.items() if any(f in text for f in forms)]


@pytest.fixture
def maria_user(maria):
    user, password = f"{maria.prefix}_u", _password()
    escaped = password.replace("\\", "\\\\").replace("'", "\\'")
    maria.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{escaped}'")
    maria.execute(f"GRANT ALL ON `{maria.engine.url.database}`.* TO '{user}'@'%'")
    maria.execute(f"GRANT ALL ON `tclose_staging`.* TO '{user}'@'%'")  # where runs stage
    yield user, password
    maria.execute(f"DROP USER '{user}'@'%'")


def _outputs(tmp_path, capsys, database, audit: str) -> dict[str, str]:
    out, err = capsys.readouterr()
    texts = {"stdout": out, "stderr": err}
    for name in ("report.json", "report.html"):
        path = tmp_path / name
        texts[name] = path.read_text() if path.exists() else ""
    texts["audit table"] = repr(database.rows(audit))
    return texts


@pytest.mark.mysql
@pytest.mark.parametrize("how", ["query", "env"])
def test_mariadb_password_in_query_or_env_never_printed(
    maria, maria_user, tmp_path, capsys, how, monkeypatch
):
    user, password = maria_user
    source, target, audit = maria.name("src"), maria.name("anon"), maria.name("audit")
    maria.create_patients(source, n=40)
    base = maria.engine.url.set(username=user)
    if how == "query":
        url = base.update_query_dict({"password": password}).render_as_string(hide_password=False)
    else:
        monkeypatch.setenv("TCLOSE_TEST_WEIRD_PASSWORD", password)
        url = base.render_as_string().replace("@", ":${TCLOSE_TEST_WEIRD_PASSWORD}@", 1)
    document = maria.config(source, target)
    document["source"]["url"] = url
    document["report"] = {
        "json": str(tmp_path / "report.json"),
        "html": str(tmp_path / "report.html"),
        "table": audit,
    }
    assert main(["-v", "run", str(maria.write_config(document))]) == 0
    texts = _outputs(tmp_path, capsys, maria, audit)
    assert _grep(password, texts) == []
    assert len(maria.rows(target)) == 40 and len(maria.rows(audit)) == 1

    # tclose init writes the URL with a variable in place of every credential.
    init_url = base.update_query_dict({"password": password}).render_as_string(hide_password=False)
    skeleton = tmp_path / "init.yaml"
    assert main(["init", init_url, source, "-o", str(skeleton)]) == 0
    out, err = capsys.readouterr()
    text = skeleton.read_text()
    assert _grep(password, {"init.yaml": text, "stdout": out, "stderr": err}) == []
    assert "password=${TCLOSE_DB_PASSWORD}" in text


@pytest.mark.postgres
def test_postgresql_credential_parameters_are_redacted(pg, tmp_path, capsys):
    password, sslpassword = _password(), _password()
    source, target, audit = pg.name("src"), pg.name("anon"), pg.name("audit")
    pg.create_patients(source, n=40)
    url = pg.engine.url.update_query_dict({"password": password, "sslpassword": sslpassword})
    document = pg.config(source, target)
    document["source"]["url"] = url.render_as_string(hide_password=False)
    document["report"] = {
        "json": str(tmp_path / "report.json"),
        "html": str(tmp_path / "report.html"),
        "table": audit,
    }
    assert main(["-v", "run", str(pg.write_config(document))]) == 0
    texts = _outputs(tmp_path, capsys, pg, audit)
    assert _grep(password, texts) == [] and _grep(sslpassword, texts) == []
    assert "password=***" in texts["report.json"]


def test_an_env_password_with_url_characters_in_a_bad_url_is_never_shown(
    tmp_path, capsys, monkeypatch
):
    password = _password()
    monkeypatch.setenv("TCLOSE_TEST_WEIRD_PASSWORD", password)
    config = tmp_path / "run.yaml"
    config.write_text(
        "source: {url: 'postgresql://u:${TCLOSE_TEST_WEIRD_PASSWORD}@127.0.0.1:1/db', "
        "table: t, key: id}\n"
        "target: {table: t2}\n"
        "attributes: {a: {role: quasi_identifier}}\n"
        "privacy: {k: 2}\nalgorithm: {name: mdav}\n"
    )
    code = main(["-v", "run", str(config)])
    out, err = capsys.readouterr()
    assert code == 3, err
    assert _grep(password, {"stdout": out, "stderr": err}) == []
    assert "Traceback" not in err


def test_category_errors_name_rows_not_values(tmp_path, capsys):
    database = tmp_path / "d.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, age INTEGER, dx TEXT)")
        rows = [(i, 20 + i % 30, "flu" if i % 2 else "cold") for i in range(1, 41)]
        rows[6] = (7, 30, "HIV - patient Jane Roe")
        connection.executemany("INSERT INTO p VALUES (?, ?, ?)", rows)
    config = tmp_path / "run.yaml"
    config.write_text(
        f"source: {{url: 'sqlite:///{database}', table: p, key: id}}\n"
        "target: {table: q}\n"
        "attributes:\n  age: {role: quasi_identifier}\n"
        "  dx: {role: confidential, type: nominal, categories: [flu, cold]}\n"
        "privacy: {k: 2, t: 0.5}\nalgorithm: {name: t-first}\n"
    )
    assert main(["-v", "run", str(config)]) == 3
    out, err = capsys.readouterr()
    assert "Jane Roe" not in out + err and "HIV" not in out + err
    assert "1 distinct value(s) not in attributes.dx.categories (rows 7;" in err
    assert sa.inspect(sa.create_engine(f"sqlite:///{database}")).get_table_names() == ["p"]
