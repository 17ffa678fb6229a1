"""What the MariaDB/MySQL connector knows of the server: its error codes, the driver it picks, the
character set of a connection, and the rules of its names (file names, trailing spaces,
engines).
"""

from __future__ import annotations

import re

import sqlalchemy as sa

from tclose.connectors.mysql_drivers import (
    PREFERENCE,  # noqa: F401 (re-exported)
    bare_url_driver,
    description,
)
from tclose.errors import DataError

#: ER_CHECKREAD: a locking read met a row changed after the snapshot (snapshot isolation).
RECORD_CHANGED = 1020
#: The server's errors for an account that may not use a database or a table there
#: (ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR) or a database that does not exist.
ACCESS_DENIED = (1044, 1142, 1049)


def error_code(error: BaseException | None) -> int | None:
    """The server's error number of a driver error (``errno``, else its first argument)."""
    args = getattr(error, "args", None)
    return getattr(error, "errno", None) or (args[0] if args else None)


def choose_driver(url: sa.URL) -> sa.URL:
    """The URL with its driver: the one it names (``+mariadbconnector``, ``+mysqldb``,
    ``+pymysql``), or for a bare ``mysql://``/``mariadb://`` the fastest installed
    (:func:`~tclose.connectors.mysql_drivers.bare_url_driver`)."""
    if "+" in url.drivername:
        return url
    return url.set(drivername=f"{url.drivername}+{bare_url_driver()}")


#: The ``charset`` values that mean UTF-8 (``utf8`` is ``utf8mb3`` on MariaDB: 3-byte only).
_UTF8 = ("utf8mb4", "utf8", "utf8mb3")


def checked_charset(url: sa.URL) -> sa.URL:
    """The URL with its ``charset`` as tclose connects: ``utf8mb4``, which holds every
    character MariaDB stores (MariaDB Connector/Python always speaks it and takes no
    ``charset``, so there it is dropped; ``utf8``/``utf8mb3``, which lack 4-byte characters,
    become ``utf8mb4``). Another charset is refused by name: through it the server replaces
    every character it lacks by ``?``, so distinct values would read alike (a linking column
    would look repeated, a changed value escape the content digest) and be published changed."""
    charset = url.query.get("charset")
    if charset is None:
        return url
    if str(charset).lower() not in _UTF8:
        raise DataError(
            f"The URL asks for charset={charset}; tclose reads text as utf8mb4, which holds every "
            f"character MariaDB stores. Through {charset} the server would replace each "
            f"character it lacks by '?' (distinct values would read alike and be published "
            f"changed). Leave charset out, or write charset=utf8mb4."
        )
    if url.get_driver_name() == "mariadbconnector":
        return url.difference_update_query(["charset"])
    return url.update_query_dict({"charset": "utf8mb4"})


def driver_description(url: sa.URL) -> str:
    """One line naming the driver a URL uses and, for PyMySQL, the faster alternative."""
    return description(url.get_backend_name(), url.get_driver_name())


#: The longest file name (in bytes) the server's file system keeps (``NAME_MAX`` of ext4, XFS,
#: Btrfs, APFS, NTFS), and the longest extension the server gives a table's files (``.ibd``,
#: ``.frm``, ``.MYD``): a table's name, as the server spells it in file names, must fit both.
FILE_NAME_MAX = 255
FILE_EXTENSION = 4
#: The storage engines that keep a table's rows in memory only (gone when the server restarts):
#: the tables a run creates (staging, hence the release, and the audit table) take the engine
#: the server gives a session's new tables, which must not be one of these.
MEMORY_ENGINES = ("MEMORY", "HEAP")


#: Two quoted names joined by a dot, as a view's stored definition names a table
#: (`schema`.`table`; also `alias`.`column`, whose "table" then does not exist).
_QUALIFIED_NAME = re.compile(r"`((?:[^`]|``)+)`\.`((?:[^`]|``)+)`")
#: The characters a MariaDB/MySQL name may not end with (the server's "Incorrect table name").
TRAILING_SPACES = " \t\n\v\f\r"
#: A call of a stored function in a view's definition as the server writes it: the function's
#: name quoted (a built-in's is bare), right before its parenthesis.
_STORED_FUNCTION = re.compile(r"`((?:[^`]|``)+)`\(")
#: The storage engines that keep a table's rows in the table itself: a read of a table of any
#: other engine (``MRG_MyISAM``, ``FEDERATED``, ``CONNECT``, ``SPIDER``) reads other tables.
LOCAL_ENGINES = frozenset(
    {"INNODB", "MYISAM", "ARIA", "MEMORY", "HEAP", "CSV", "ARCHIVE", "SEQUENCE", "BLACKHOLE"}
    | {"COLUMNSTORE", "ROCKSDB", "TOKUDB", "S3"}
)


def _literal(text: str) -> str:
    """``text`` as a string literal that means ``text`` whatever ``sql_mode`` says: its UTF-8
    bytes in hex with the ``utf8mb4`` introducer. A quoted literal with its backslashes
    doubled meant two backslashes under ``NO_BACKSLASH_ESCAPES``: the registry then held
    another name than the staging table's, which the clean-up after a killed run could not
    find."""
    return "_utf8mb4 X'" + text.encode("utf-8").hex() + "'"


#: Characters MariaDB refuses at the end of a column name.
_TRAILING_REFUSED = frozenset(" \t\n\r\v\f")
