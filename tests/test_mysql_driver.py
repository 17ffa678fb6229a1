"""The MySQL/MariaDB driver (issue 14): mysqlclient when installed, PyMySQL as the fallback, the
choice named to the user, and the same published table through either driver.

With CI=true, mysqlclient must be installed (it is in the ``test`` extra); elsewhere its tests
skip with the reason."""

from __future__ import annotations

import importlib.util
import os

import pytest
import sqlalchemy as sa

from tclose.config import parse_config
from tclose.connectors import mysql as connector
from tclose.errors import DataError
from tclose.runner import run

HAVE_MYSQLCLIENT = importlib.util.find_spec("MySQLdb") is not None


def _need_mysqlclient() -> None:
    if not HAVE_MYSQLCLIENT:
        message = "mysqlclient (MySQLdb) is not installed: pip install 'tclose[mysqlclient]'"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):  # as conftest.in_ci
            pytest.fail(message)
        pytest.skip(message)


def test_a_named_driver_is_kept():
    for url in ("mysql+pymysql://u@h/db", "mariadb+pymysql://u@h/db", "mysql+mysqldb://u@h/db"):
        assert connector.choose_driver(sa.make_url(url)) == sa.make_url(url)


def test_a_bare_url_takes_mysqlclient_when_installed_else_pymysql(monkeypatch):
    _need_mysqlclient()
    assert connector.choose_driver(sa.make_url("mysql://u@h/db")).drivername == "mysql+mysqldb"
    assert connector.choose_driver(sa.make_url("mariadb://u@h/d")).drivername == "mariadb+mysqldb"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "MySQLdb" else real(name, *a)
    )
    assert connector.choose_driver(sa.make_url("mysql://u@h/db")).drivername == "mysql+pymysql"


def test_the_driver_in_use_is_named_and_pymysql_points_to_the_faster_one():
    slow = connector.driver_description(sa.make_url("mysql+pymysql://u@h/db"))
    assert slow.startswith("mysql driver: PyMySQL ") and "tclose[mysqlclient]" in slow
    if HAVE_MYSQLCLIENT:
        fast = connector.driver_description(sa.make_url("mariadb+mysqldb://u@h/db"))
        assert fast.startswith("mariadb driver: mysqlclient ") and "faster" not in fast


def test_an_unsupported_driver_is_refused_by_name():
    with pytest.raises(DataError, match=r"driver 'mysqlconnector' is not supported.*\+pymysql"):
        connector.MySQLDatabase("mysql+mysqlconnector://root@127.0.0.1:3306/test")


def test_the_connection_notice_names_the_driver(caplog):
    with caplog.at_level("INFO", logger="tclose"):
        connector.MySQLDatabase("mysql+pymysql://root@127.0.0.1:3306/test").engine.dispose()
    assert "mysql driver: PyMySQL" in caplog.text


@pytest.mark.mysql
def test_both_drivers_publish_the_same_table(maria, tmp_path):
    """A run through mysqlclient and one through PyMySQL read the same rows (streamed through
    each driver's unbuffered cursor) and publish the same table."""
    _need_mysqlclient()
    source = maria.name("patients")
    maria.create_patients(source, n=300)
    published = {}
    for driver in ("mysqldb", "pymysql"):
        url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}")
        target = maria.name(f"anon_{driver}")
        document = maria.config(source, target)
        document["source"]["url"] = url.render_as_string(hide_password=False)
        document["target"] = {"table": target}
        result = run(parse_config(document))
        assert result.report["verification"]["passed"]
        published[driver] = maria.rows(target, order="tclose_row")
    assert published["mysqldb"] == published["pymysql"] and len(published["pymysql"]) == 300


@pytest.mark.mysql
def test_each_driver_streams_the_rows_of_its_snapshot(maria):
    """Rows committed by another connection after the session's snapshot are not streamed,
    whichever driver reads."""
    drivers = ["pymysql"] + (["mysqldb"] if HAVE_MYSQLCLIENT else [])
    name = maria.name("snap")
    table = maria.create(
        name,
        [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)],
        [{"id": i} for i in range(5)],
    )
    for driver in drivers:
        url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}")
        database = connector.MySQLDatabase(url.render_as_string(hide_password=False))
        with database.session(read_only=True) as session:
            first = [r for chunk in session.stream(sa.select(table.c.id), 2) for r in chunk]
            maria.execute(f"INSERT INTO {maria.quote(name)} VALUES (100)")
            again = [r for chunk in session.stream(sa.select(table.c.id), 2) for r in chunk]
            maria.execute(f"DELETE FROM {maria.quote(name)} WHERE id = 100")
        database.engine.dispose()
        assert sorted(r[0] for r in first) == sorted(r[0] for r in again) == list(range(5))
    if not HAVE_MYSQLCLIENT:
        _need_mysqlclient()
