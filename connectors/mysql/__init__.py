"""Connector plugin ``mysql``: MySQL and MariaDB through PyMySQL.

- DDL commits implicitly in MySQL, so a writing session first takes the run lock
  (``GET_LOCK``), drops the tables that finished runs recorded in the registry ``tclose_owned``,
  proves on an empty table the privileges its publish needs in the target's schema, records and
  creates the staging table, and only then opens ``START TRANSACTION WITH CONSISTENT SNAPSHOT``
  for the reads and the DML (helper tables are ``TEMPORARY``, whose creation and ``DROP
  TEMPORARY TABLE`` do not commit). The staging rows are verified inside that transaction;
  ``RENAME TABLE`` of both names in one statement commits and publishes them. A killed run can
  leave an empty, registered staging table behind: the next run on the schema drops it.
- The staging table lives in the database ``tclose_staging`` (:data:`STAGING_SCHEMA`), which
  tclose creates and grants to no one: an uncommitted row is read by a ``READ UNCOMMITTED``
  session of any account that may read the table's database, so the unverified rows are kept
  out of the target's. Only accounts with privileges on every database (``SELECT ON *.*``) or
  granted ``tclose_staging`` by an administrator can read them. ``RENAME TABLE`` moves the
  verified table into the target's database (atomically, as any rename).
- ``INSERT ... SELECT`` reads the source with locks, not from the snapshot. On MariaDB with
  ``innodb_snapshot_isolation`` (10.6.18, 10.11.8, 11.x) the session turns it on, so such a read
  of a row changed since the snapshot fails the run instead of mixing two states of the source.
  Without it (MySQL, older MariaDB) the runner does not join in the database: it streams the
  source a second time from the snapshot into a second session.
- Reads: unbuffered (server-side) cursors. Bulk writes: multi-row ``INSERT`` (the drivers'
  ``executemany`` packs rows into statements of up to ~1 MB).
- Drivers (:func:`choose_driver`): ``mysql://`` and ``mariadb://`` use the fastest installed of
  MariaDB Connector/Python (``mariadb``, C, the ``tclose[mariadb]`` extra; reads in the binary
  protocol, so the server sends numbers as bytes instead of formatting them as text), mysqlclient
  (``MySQLdb``, C, ``tclose[mysqlclient]``) and PyMySQL (pure Python). ``+mariadbconnector``,
  ``+mysqldb`` or ``+pymysql`` in the URL choose one. All are DB-API drivers on the one
  connection of the session, so the snapshot and the locks are the same. A run says which
  one it uses, with the faster one to install, the first time that driver is used in the Python
  environment (:func:`tclose.base.notices.notice_once`; an INFO log record, ``-v``, afterwards);
  ``tclose plugins`` always says it (:mod:`tclose.connectors.mysql_drivers`).
"""

from __future__ import annotations

from tclose.connectors.mysql.database import MySQLConnector, MySQLDatabase, register_connectors
from tclose.connectors.mysql.server import (
    ACCESS_DENIED,
    FILE_EXTENSION,
    FILE_NAME_MAX,
    LOCAL_ENGINES,
    MEMORY_ENGINES,
    RECORD_CHANGED,
    TRAILING_SPACES,
    checked_charset,
    choose_driver,
    driver_description,
    error_code,
)
from tclose.connectors.mysql.session import (
    LOCK_WAIT_SECONDS,
    PROBE_MARK,
    REGISTRY_TABLE,
    MySQLSession,
    owner_lock_name,
    run_lock_name,
)
from tclose.connectors.mysql_drivers import DRIVERS, PREFERENCE

__all__ = [
    "ACCESS_DENIED",
    "DRIVERS",
    "FILE_EXTENSION",
    "FILE_NAME_MAX",
    "LOCAL_ENGINES",
    "LOCK_WAIT_SECONDS",
    "MEMORY_ENGINES",
    "MySQLConnector",
    "MySQLDatabase",
    "MySQLSession",
    "PREFERENCE",
    "PROBE_MARK",
    "RECORD_CHANGED",
    "REGISTRY_TABLE",
    "TRAILING_SPACES",
    "checked_charset",
    "choose_driver",
    "driver_description",
    "error_code",
    "owner_lock_name",
    "register_connectors",
    "run_lock_name",
]
