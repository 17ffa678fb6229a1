"""The MySQL/MariaDB drivers the ``mysql`` connector reads through, and the line that names the
one in use, without SQLAlchemy: ``tclose plugins`` lists them (:func:`notes`) without importing
the connector.

The connector (:mod:`tclose.connectors.mysql`) picks the fastest installed driver for a bare
``mysql://`` or ``mariadb://`` URL and tells the user which one it uses, with the faster one to
install, once per Python environment (:func:`tclose.base.notices.notice_once`); ``tclose plugins``
always says it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util

#: SQLAlchemy driver name -> (the module it imports, the distribution to name in messages).
DRIVERS = {
    "mysqldb": ("MySQLdb", "mysqlclient"),
    "pymysql": ("pymysql", "PyMySQL"),
    "mariadbconnector": ("mariadb", "MariaDB Connector/Python"),
}


#: SQLAlchemy driver name -> (the distribution pip installs, the tclose extra that installs it).
DISTRIBUTIONS = {
    "mysqldb": ("mysqlclient", "mysqlclient"),
    "pymysql": ("PyMySQL", "mysql"),
    "mariadbconnector": ("mariadb", "mariadb"),
}


#: The drivers a bare ``mysql://`` or ``mariadb://`` URL tries, fastest read first.
PREFERENCE = ("mariadbconnector", "mysqldb", "pymysql")

#: Why a driver reads slower than MariaDB Connector/Python, for the drivers that do.
_SLOWER = {"pymysql": "pure Python", "mysqldb": "text protocol"}


def installed(driver: str) -> bool:
    """Whether ``driver``'s module can be imported."""
    return importlib.util.find_spec(DRIVERS[driver][0]) is not None


def bare_url_driver() -> str:
    """The driver a bare ``mysql://`` or ``mariadb://`` URL uses: the first of
    :data:`PREFERENCE` that is installed (PyMySQL, a dependency of the ``mysql`` extra, last)."""
    return next((d for d in PREFERENCE[:-1] if installed(d)), PREFERENCE[-1])


def faster_hint(driver: str) -> str | None:
    """The faster driver to install, for a driver that reads slower (``None`` for the others)."""
    if driver not in _SLOWER:
        return None
    return f"{_SLOWER[driver]}; pip install 'tclose[mariadb]' reads several times faster"


def driver_name(driver: str) -> str:
    """``driver``'s distribution and installed version (PyMySQL's ``__version__`` is the
    MySQLdb version it imitates: the distribution's is named)."""
    _module, name = DRIVERS.get(driver, (driver, driver))
    try:
        version = importlib.metadata.version(DISTRIBUTIONS.get(driver, (driver,))[0])
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    return f"{name} {version}"


def description(backend: str, driver: str) -> str:
    """One line naming the driver a URL uses and, for a slower one, the faster alternative."""
    hint = faster_hint(driver)
    return f"{backend} driver: {driver_name(driver)}" + (f" ({hint})" if hint else "")


def notes() -> list[str]:
    """What ``tclose plugins`` says under the connector: the driver a bare URL reads through,
    and the faster one to install."""
    driver = bare_url_driver()
    if not installed(driver):
        return ["no driver installed: pip install 'tclose[mysql]' (or 'tclose[mariadb]')"]
    hint = faster_hint(driver)
    line = f"mysql:// and mariadb:// read through {driver_name(driver)}"
    return [line + (f" ({hint})" if hint else "")]
