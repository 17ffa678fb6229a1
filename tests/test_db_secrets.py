"""Passwords reach the servers through ``${VAR}`` and ``password_file``, and nowhere else: never
in stdout, stderr (verbose included), error messages or the report.

MariaDB checks passwords, so a wrong one must fail (exit 3) without being shown. This machine's
PostgreSQL trusts local connections and accepts any password: there the test can only show that
the password travels and never appears.
"""

from __future__ import annotations

import secrets

import pytest

from tclose.app.cli import main


def _no_secret(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text


@pytest.fixture
def pg_login(pg):
    """A PostgreSQL role with a password that may read and create tables in ``public``."""
    role, password = f"{pg.prefix}_login", f"Pg-{secrets.token_hex(8)}"
    pg.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    pg.execute(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
    yield role, password
    pg.execute(f"DROP OWNED BY {role} CASCADE")
    pg.execute(f"DROP ROLE {role}")


@pytest.mark.postgres
def test_postgresql_password_from_environment_and_file(pg, pg_login, tmp_path, monkeypatch, capsys):
    role, password = pg_login
    source, target = pg.name("patients"), pg.name("anon")
    pg.create_patients(source, n=60)
    pg.execute(f"GRANT SELECT ON {source} TO {role}")
    monkeypatch.setenv("TCLOSE_TEST_PG_PASSWORD", password)
    url = pg.engine.url.set(username=role)
    document = pg.config(source, target)
    document["source"]["url"] = url.render_as_string().replace(
        "@", ":${TCLOSE_TEST_PG_PASSWORD}@", 1
    )
    password_file = tmp_path / "pg-password"
    password_file.write_text(password + "\n")
    document["target"].update(url=url.render_as_string(), password_file=str(password_file))
    report = tmp_path / "report.json"

    assert main(["-v", "run", str(pg.write_config(document)), "--report", str(report)]) == 0

    out, err = capsys.readouterr()
    text = report.read_text()
    _no_secret(password, out, err, text)
    assert f"{role}:***@" in text
    assert len(pg.rows(target)) == 60


@pytest.mark.mysql
def test_mariadb_password_file_right_and_wrong(maria, maria_login, tmp_path, capsys):
    user, password = maria_login
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source, n=60)
    password_file = tmp_path / "maria-password"
    document = maria.config(source, target)
    document["source"].update(
        url=maria.engine.url.set(username=user).render_as_string(), password_file=str(password_file)
    )
    wrong = f"Wrong-{secrets.token_hex(8)}"
    password_file.write_text(wrong)
    report = tmp_path / "report.json"
    config = str(maria.write_config(document))

    assert main(["-v", "run", config, "--report", str(report)]) == 3
    out, err = capsys.readouterr()
    assert "Access denied" in err and user in err
    _no_secret(wrong, out, err)
    _no_secret(password, out, err)
    assert not report.exists() and maria.tables() == {source}

    password_file.write_text(password)
    assert main(["-v", "run", config, "--report", str(report)]) == 0
    out, err = capsys.readouterr()
    _no_secret(password, out, err, report.read_text())
    assert len(maria.rows(target)) == 60


@pytest.mark.mysql
def test_mariadb_password_in_a_url_variable_is_redacted_in_errors(
    maria, maria_login, capsys, monkeypatch
):
    user, password = maria_login
    monkeypatch.setenv("TCLOSE_TEST_MARIA_PASSWORD", password)
    document = maria.config(maria.name("absent"), maria.name("anon"))
    url = maria.engine.url.set(username=user).render_as_string()
    document["source"]["url"] = url.replace("@", ":${TCLOSE_TEST_MARIA_PASSWORD}@", 1)

    assert main(["-v", "run", str(maria.write_config(document))]) == 3
    out, err = capsys.readouterr()
    assert "does not exist" in err and f"{user}:***@" in err
    _no_secret(password, out, err)
