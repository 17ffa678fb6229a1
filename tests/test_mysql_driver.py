"""The MySQL/MariaDB driver: the fastest installed of MariaDB Connector/Python,
mysqlclient and PyMySQL, the choice named to the user, and the same snapshot reads and the same
published table through every driver.

The two C drivers build against libmariadb-dev, so the ``test`` extra does not install them: their
tests skip with the reason unless TCLOSE_TEST_C_DRIVERS=1 says they must run (.ci/run sets it when
it has installed them); see ``tests/conftest.py``'s :func:`require_driver`."""

from __future__ import annotations

import importlib.util

import pytest
import sqlalchemy as sa

from tclose.base.config import parse_config
from tclose.connectors import mysql as connector
from tclose.core.runner import run
from tclose.errors import DataError
from tests.conftest import require_driver


def _installed(driver: str) -> bool:
    return importlib.util.find_spec(connector.DRIVERS[driver][0]) is not None


_need = require_driver


def _without(monkeypatch, *modules: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a)
    )


def test_a_named_driver_is_kept():
    for driver in connector.DRIVERS:
        for backend in ("mysql", "mariadb"):
            url = sa.make_url(f"{backend}+{driver}://u@h/db")
            assert connector.choose_driver(url) == url


def test_a_bare_url_takes_the_fastest_installed_driver(monkeypatch):
    for driver in connector.PREFERENCE:
        _need(driver)
    bare = sa.make_url("mariadb://u@h/db")
    assert connector.choose_driver(bare).drivername == "mariadb+mariadbconnector"
    _without(monkeypatch, "mariadb")
    assert connector.choose_driver(bare).drivername == "mariadb+mysqldb"
    _without(monkeypatch, "mariadb", "MySQLdb")
    assert connector.choose_driver(sa.make_url("mysql://u@h/d")).drivername == "mysql+pymysql"


def test_the_driver_in_use_is_named_with_the_faster_alternative():
    slow = connector.driver_description(sa.make_url("mysql+pymysql://u@h/db"))
    assert slow.startswith("mysql driver: PyMySQL ") and "tclose[mariadb]" in slow
    if _installed("mariadbconnector"):
        fast = connector.driver_description(sa.make_url("mariadb+mariadbconnector://u@h/db"))
        assert fast.startswith("mariadb driver: MariaDB Connector/Python ")
        assert "faster" not in fast


def test_an_unsupported_driver_is_refused_by_name():
    with pytest.raises(DataError, match=r"driver 'mysqlconnector' is not supported.*\+pymysql"):
        connector.MySQLDatabase("mysql+mysqlconnector://root@127.0.0.1:3306/test")


def test_the_mariadb_connector_drops_a_utf8_charset_and_refuses_another():
    _need("mariadbconnector")
    url = "mysql+mariadbconnector://root@127.0.0.1:3306/test"
    database = connector.MySQLDatabase(url + "?charset=utf8mb4")
    assert "charset" not in database.url.query
    database.engine.dispose()
    with pytest.raises(DataError, match="charset=latin1.*utf8mb4"):
        connector.MySQLDatabase(url + "?charset=latin1")


def test_the_connection_notice_names_the_driver(caplog):
    with caplog.at_level("INFO", logger="tclose"):
        connector.MySQLDatabase("mysql+pymysql://root@127.0.0.1:3306/test").engine.dispose()
    assert "mysql driver: PyMySQL" in caplog.text


@pytest.mark.mysql
def test_every_driver_publishes_the_same_table(maria):
    """Runs through each driver read the same rows (each driver's unbuffered cursor) and publish
    the same table."""
    for driver in connector.DRIVERS:
        _need(driver)
    source = maria.name("patients")
    maria.create_patients(source, n=300)
    published = {}
    for driver in connector.DRIVERS:
        url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}")
        target = maria.name(f"anon_{driver[:5]}")
        document = maria.config(source, target)
        document["source"]["url"] = url.render_as_string(hide_password=False)
        document["target"] = {"table": target}
        result = run(parse_config(document))
        assert result.report["verification"]["passed"]
        published[driver] = maria.rows(target, order="tclose_row")
    first = published["pymysql"]
    assert len(first) == 300 and all(rows == first for rows in published.values())


@pytest.mark.mysql
@pytest.mark.parametrize("driver", list(connector.DRIVERS))
def test_each_driver_streams_the_rows_of_its_snapshot(maria, driver):
    """Rows committed by another connection after the session's snapshot are not streamed."""
    _need(driver)
    name = maria.name("snap")
    table = maria.create(
        name,
        [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)],
        [{"id": i} for i in range(5)],
    )
    url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}")
    database = connector.MySQLDatabase(url.render_as_string(hide_password=False))
    with database.session(read_only=True) as session:
        first = [r for chunk in session.stream(sa.select(table.c.id), 2) for r in chunk]
        maria.execute(f"INSERT INTO {maria.quote(name)} VALUES (100)")
        again = [r for chunk in session.stream(sa.select(table.c.id), 2) for r in chunk]
    database.engine.dispose()
    assert sorted(r[0] for r in first) == sorted(r[0] for r in again) == list(range(5))


@pytest.mark.mysql
def test_the_command_names_the_driver_once_except_with_quiet(maria, capsys, tmp_path, monkeypatch):
    """Named the first time in an environment (tests/test_driver_notice.py): a fresh cache."""
    from tclose.app.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source, n=60)
    document = maria.config(source, target)
    document["source"]["url"] = (
        sa.make_url(maria.url).set(drivername="mysql+pymysql").render_as_string(hide_password=False)
    )
    document["target"] = {"table": target, "if_exists": "replace"}
    config = str(maria.write_config(document))
    assert main(["run", config]) == 0
    first = capsys.readouterr().err
    assert "mysql driver: PyMySQL" in first and "tclose[mariadb]" in first, first
    assert main(["-q", "run", config]) == 0
    assert capsys.readouterr().err == ""
    # once per environment: not on every run and verify, always with -v
    assert main(["run", config]) == 0
    assert "mysql driver" not in capsys.readouterr().err
    assert main(["verify", config]) == 0
    assert "mysql driver" not in capsys.readouterr().err
    assert main(["-v", "run", config]) == 0
    assert "mysql driver: PyMySQL" in capsys.readouterr().err


@pytest.mark.mysql
@pytest.mark.parametrize("driver", list(connector.DRIVERS))
def test_no_driver_prints_a_wrong_or_right_password(maria, maria_login, driver, tmp_path, capsys):
    """A careless user's password (``@``, ``#``, ``/`` in it) through each driver: a wrong one is
    refused (exit 3) and neither is printed, verbose included; the right one publishes."""
    from tclose.app.cli import main

    _need(driver)
    user, password = maria_login
    maria.execute(f"SET PASSWORD FOR '{user}'@'%' = PASSWORD('{password}@#/!')")
    password = f"{password}@#/!"
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source, n=40)
    password_file = tmp_path / "password"
    url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}", username=user)
    document = maria.config(source, target)
    document["source"].update(url=url.render_as_string(), password_file=str(password_file))
    config = str(maria.write_config(document))
    wrong = f"Wrong@{password}"
    password_file.write_text(wrong)

    assert main(["-v", "run", config]) == 3
    out, err = capsys.readouterr()
    assert "Access denied" in err and user in err
    assert wrong not in out + err and password not in out + err

    password_file.write_text(password)
    assert main(["-v", "run", config]) == 0
    out, err = capsys.readouterr()
    assert password not in out + err
    assert len(maria.rows(target)) == 40
