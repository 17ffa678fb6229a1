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

import contextlib
import dataclasses
import datetime as dt
import decimal
import hashlib
import importlib.metadata
import importlib.util
import logging
import math
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool

from tclose.base.digests import MYSQL_ORDERED_DIGEST_ALGORITHM
from tclose.base.notices import notice_once
from tclose.connectors.mysql_drivers import (
    DISTRIBUTIONS,
    DRIVERS,
    PREFERENCE,  # noqa: F401 (re-exported)
    bare_url_driver,
    description,
    notes,
)
from tclose.connectors.mysql_streams import StreamedDurations, streamed_durations
from tclose.connectors.releases import marked_run
from tclose.connectors.sql import (
    OLD_MARK,
    STAGING_MARK,
    DriverSession,
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    driver_connection,
    random_suffix,
    tables_read_through,
    vanishing_table,
    wait_in_slices,
)
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl
from tclose.naming import OWNED_TABLE, STAGING_SCHEMA

log = logging.getLogger("tclose")

#: Seconds a run waits for another run on the same target to finish before giving up.
LOCK_WAIT_SECONDS = 30
#: ER_CHECKREAD: a locking read met a row changed after the snapshot (snapshot isolation).
RECORD_CHANGED = 1020
#: The server's errors for an account that may not use a database or a table there
#: (ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR) or a database that does not exist.
ACCESS_DENIED = (1044, 1142, 1049)
#: The mark of the empty table a run makes in the target's schema to prove, before any work,
#: the privileges its publish needs there.
PROBE_MARK = "__tclose_p_"


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


#: The registry of the tables runs create, one per schema (see :class:`MySQLSession`).
REGISTRY_TABLE = OWNED_TABLE

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


def run_lock_name(schema: str, target: str) -> str:
    """The named lock (``GET_LOCK``) of the runs that write ``schema.target``; 47 characters,
    within MySQL's limit of 64."""
    return "tclose:" + hashlib.sha256(f"{schema}.{target}".encode()).hexdigest()[:40]


def owner_lock_name(run_id: str) -> str:
    """The named lock one run holds while it lives: its registered tables are not leftovers."""
    return "tclose-run:" + hashlib.sha256(run_id.encode()).hexdigest()[:40]


def _literal(text: str) -> str:
    """``text`` as a string literal that means ``text`` whatever ``sql_mode`` says: its UTF-8
    bytes in hex with the ``utf8mb4`` introducer. A quoted literal with its backslashes
    doubled meant two backslashes under ``NO_BACKSLASH_ESCAPES``: the registry then held
    another name than the staging table's, which the clean-up after a killed run could not
    find."""
    return "_utf8mb4 X'" + text.encode("utf-8").hex() + "'"


class _AsDouble(sa.sql.expression.FunctionElement):
    """``CAST(x AS DOUBLE)`` (SQLAlchemy's ``cast`` leaves out a cast to ``DOUBLE`` on MySQL)."""

    type = sa.Double()
    inherit_cache = True


@compiles(_AsDouble)
def _compile_as_double(element: _AsDouble, compiler: Any, **kw: Any) -> str:
    return f"CAST({compiler.process(element.clauses, **kw)} AS DOUBLE)"


def _is_float(column_type: sa.types.TypeEngine) -> bool:
    """A single-precision ``FLOAT`` column (MySQL's ``DOUBLE`` and ``REAL`` are not)."""
    return isinstance(column_type, sa.FLOAT)


def _non_finite(columns: Sequence[str], rows: Sequence[tuple]) -> tuple[str, int] | None:
    """The first of ``columns`` whose values in ``rows`` include a NaN or an infinity (a
    ``float`` or a ``Decimal``, which MySQL and MariaDB cannot store), and how many rows hold
    one; ``None`` if none does."""
    for i, column in enumerate(columns):
        count = sum(
            1
            for row in rows
            if (isinstance(row[i], float) and not math.isfinite(row[i]))
            or (isinstance(row[i], decimal.Decimal) and not row[i].is_finite())
        )
        if count:
            return column, count
    return None


def _is_temporal(column_type: sa.types.TypeEngine) -> bool:
    """A ``DATE``, ``DATETIME`` or ``TIMESTAMP`` column (which may hold zero dates)."""
    return isinstance(column_type, (sa.Date, sa.DateTime))


def _datetime_or_text(text: str | None) -> dt.datetime | str | None:
    """The server's text of a ``DATETIME``/``TIMESTAMP`` value as a ``datetime``; a zero or
    invalid date (``0000-00-00 00:00:00``, ``2024-00-15 00:00:00``, year 0) stays its text,
    as PyMySQL returns it."""
    if text is None:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        head, dot, fraction = text.partition(".")
        if dot:  # Python 3.10's fromisoformat takes 3 or 6 fractional digits only
            with contextlib.suppress(ValueError):
                return dt.datetime.fromisoformat(f"{head}.{fraction.ljust(6, '0')}")
        return text


def _date_or_text(text: str | None) -> dt.date | str | None:
    """The server's text of a ``DATE`` value as a ``date``; a zero or invalid date stays its
    text."""
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return text


def _date_text(value: Any) -> Any:
    """A ``datetime`` or ``date`` as the text MariaDB parses back exactly; others as they are."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return value.isoformat() if isinstance(value, dt.date) else value


class MySQLSession(DriverSession):
    """A MySQL/MariaDB session: DDL first, then one transaction with a consistent snapshot.

    The tables a run creates (the staging table; the replaced target between ``RENAME`` and
    ``DROP``) are recorded in the registry table ``tclose_owned`` of their schema *before* they
    exist, with the name of a lock the run holds while it lives (``GET_LOCK``). A later run drops
    a registered table only once that lock is free (its run is over); it never drops a table
    that is not registered, whatever its name.
    """

    database: MySQLDatabase

    def streamed_values(
        self, source: sa.Table, columns: Sequence[str], target_dialect: str
    ) -> StreamedDurations | None:
        """Zero dates refused, durations as times of day, into another kind of database
        (:mod:`tclose.connectors.mysql_streams`)."""
        return streamed_durations(source, columns, self.database.dialect, target_dialect)

    def read_expression(self, column: sa.ColumnElement) -> sa.ColumnElement:
        """What every driver reads alike: a ``FLOAT`` as ``CAST(... AS DOUBLE)``, its exact
        value (the text protocol of mysqlclient and PyMySQL would give the server's 6
        significant digits: 16777217 stored as 16777216 reads 16777200, 1.2345678 and 1.2345679
        both 1.23457), a ``BIT`` as its unsigned integer (every driver gives bytes, which a
        numeric attribute would read as the digits they spell: ``b'0'``, 48, as 0), a
        ``DATE``, ``DATETIME`` or ``TIMESTAMP`` as its text (:meth:`stream`
        parses it: a zero or invalid date that MariaDB Connector/Python cannot read and
        mysqlclient reads as ``None`` stays its text, as PyMySQL returns it)."""
        if _is_float(column.type):
            return _AsDouble(column)
        if isinstance(column.type, mysql.BIT):
            return sa.cast(column, mysql.INTEGER(unsigned=True))
        if _is_temporal(column.type):
            return sa.cast(column, sa.CHAR())
        return column

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its ``COLUMN_TYPE`` (``varchar(40)``, ``int(10) unsigned``) and, for
        text, ``COLLATE`` and its collation (which decides whether ``'a' = 'A'`` or
        ``'a' = 'a  '``), as ``information_schema`` gives them; an integer's display width
        (``int(11)``) left out: it changes no value, and MySQL 8 no longer shows it."""
        rows = self.connection.execute(
            sa.text(
                "SELECT COLUMN_NAME, COLUMN_TYPE, COLLATION_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = COALESCE(:s, DATABASE()) AND TABLE_NAME = :t"
            ),
            {"s": table.schema, "t": table.name},
        ).fetchall()
        types = {}
        for name, kind, collation in rows:
            name, kind, collation = (
                v.decode() if isinstance(v, (bytes, bytearray)) else v
                for v in (name, kind, collation)
            )
            kind = _DISPLAY_WIDTH.sub(r"\1", str(kind))
            types[str(name)] = kind + (f" COLLATE {collation}" if collation else "")
        return types

    def begin(self, staging: sa.Table | None) -> None:
        # TIMESTAMP values are instants shown in the session's time zone (the server's by
        # default): in UTC they are read and written alike whatever the servers' settings.
        self.execute("SET time_zone = '+00:00'")
        if staging is not None:
            target = staging.info.get("target") or TableName(staging.schema, staging.name)
            self.lock(target)
            self.run_lock = owner_lock_name(staging.info.get("run_id") or staging.name)
            self.execute(f"SELECT GET_LOCK('{self.run_lock}', 0)")
            self.prepare_staging(staging)
            if self.database.joins_in_snapshot:
                self.execute("SET SESSION innodb_snapshot_isolation = ON")
        # A consistent snapshot exists only in REPEATABLE READ: under a server's or an account's
        # READ COMMITTED default, each statement would read the latest rows.
        self.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        if self.read_only:
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        else:
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")

    def hold(self, name: TableName) -> None:
        """Open table ``name`` (a metadata lock) before the snapshot begins (call it first in a
        read-only session): a ``RENAME TABLE`` under way ends first, and the new table is read
        whole, or waits until this session ends. A consistent snapshot taken before the publish
        would read the new table as empty. A missing table is left to the read to report."""
        self.execute("ROLLBACK")
        self.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        self.execute("START TRANSACTION READ ONLY")
        with contextlib.suppress(sa.exc.DBAPIError):
            self.execute(f"SELECT 1 FROM {self.database.qualified(name)} LIMIT 0")

    def lock(self, target: TableName) -> None:
        """Take the run lock of ``target`` (a named lock held by this connection), waiting up
        to :data:`LOCK_WAIT_SECONDS` in slices (:func:`~tclose.connectors.sql.wait_in_slices`):
        a signal stops the wait within one, whichever driver blocks in ``GET_LOCK``."""
        schema = target.schema or self.database.url.database or ""
        name = run_lock_name(schema, target.name)

        def attempt(seconds: int) -> bool:
            got = self.execute(f"SELECT GET_LOCK('{name}', {seconds})")
            return bool(got) and got[0][0] == 1

        if not wait_in_slices(attempt, LOCK_WAIT_SECONDS):
            raise DataError(
                f"Another tclose run is writing {target} (waited {LOCK_WAIT_SECONDS} s); "
                f"nothing was written. Retry when it has finished."
            )

    def prepare_staging(self, staging: sa.Table) -> None:
        """Drop leftovers, prove the privileges of the publish and create ``staging``: in
        :data:`STAGING_SCHEMA` (made if need be; the target's database gives the table its
        default character set and collation) after a probe of the target's database, or where
        its name says."""
        name = TableName(staging.schema, staging.name)
        if name.schema != STAGING_SCHEMA:
            self.drop_leftovers(name.schema)
            self.create_staging(staging)
            return
        target = staging.info.get("target") or TableName(None, name.name)
        self.prove_target_rights(target, staging.info.get("run_id") or random_suffix())
        charset, collation = self.execute(
            "SELECT default_character_set_name, default_collation_name FROM "
            "information_schema.schemata WHERE schema_name = "
            + (_literal(target.schema) if target.schema else "DATABASE()")
        )[0]
        staging.dialect_options["mysql"]["charset"] = charset
        staging.dialect_options["mysql"]["collate"] = collation
        try:
            with contextlib.suppress(sa.exc.DBAPIError):  # denied: an administrator made it
                self.execute(f"CREATE DATABASE IF NOT EXISTS {self.database.quote(name.schema)}")
            self.drop_leftovers(name.schema)
            self.create_staging(staging)
        except (sa.exc.DBAPIError, DataError) as error:
            driver_error = getattr(error, "orig", None) or getattr(error, "driver_error", None)
            if error_code(driver_error) not in ACCESS_DENIED:
                raise
            raise DataError(
                f"tclose keeps the unverified rows of a run in the database {STAGING_SCHEMA}, "
                f"which no account that may read {target.schema or 'the target database'} may "
                f"read, and this account may not create it or use its tables: "
                f"{' '.join(str(driver_error).split())}. Ask an administrator to run CREATE "
                f"DATABASE IF NOT EXISTS {STAGING_SCHEMA}; GRANT ALL ON {STAGING_SCHEMA}.* TO "
                f"this account. Nothing was written."
            ) from None

    def prove_target_rights(self, target: TableName, run_id: str) -> None:
        """Drop the leftovers of the target's database, then prove there, on an empty registered
        table (:data:`PROBE_MARK`), what the publish needs (``CREATE`` and ``INSERT`` for the
        table renamed in, ``ALTER`` and ``DROP`` for the one renamed out): a missing privilege
        stops the run before any work, not after it."""
        self.drop_leftovers(target.schema)
        probe = self.database.owned_name(target, PROBE_MARK, run_id)
        quoted = self.database.qualified(probe)
        self.create_registered(probe, lambda: self.execute(f"CREATE TABLE {quoted} (x INT)"))
        self.prove_publish_rights(probe, f"INSERT INTO {quoted} VALUES (1)")
        self.unregister(probe)

    def create_staging(self, staging: sa.Table) -> None:
        """Record and create ``staging``, proving on it that it can be renamed and dropped."""
        name = TableName(staging.schema, staging.name)
        self.create_registered(name, lambda: staging.create(self.connection))
        self.staging = staging
        self.prove_publish_rights(name)
        staging.create(self.connection)

    def create_registered(self, name: TableName, create: Callable[[], Any]) -> None:
        """Record table ``name`` as this run's, then make it with ``create``. Never a name a
        table holds; and a table that appears under it before ``create`` is not this run's: the
        (committed) registration is taken back, so that no later run drops it."""
        if self.database.exists(name, self.connection):  # never adopt a table not created here
            raise DataError(f"Table {name} exists already; nothing was written. Run again.")
        self.register(name)
        try:
            create()
        except Exception:
            with contextlib.suppress(Exception):
                self.unregister(name)
            raise

    def prove_publish_rights(self, name: TableName, *statements: str) -> None:
        """Prove on the empty table ``name`` what publishing needs in its database, rather than
        after the work: ``ALTER`` (``RENAME TABLE``), ``statements``, then ``DROP`` (it drops
        the table)."""
        quoted = self.database.qualified(name)
        try:
            self.execute(f"ALTER TABLE {quoted} RENAME TO {quoted}")
            for statement in statements:
                self.execute(statement)
            self.execute(f"DROP TABLE {quoted}")
        except sa.exc.DBAPIError as error:
            raise DataError(
                f"The database user may create tables in {name.schema or 'the database'} but "
                f"not alter or drop them, which publishing needs (RENAME TABLE, DROP TABLE): "
                f"{' '.join(str(error.orig).split())}. Nothing was written."
            ) from None

    # --- the registry of owned tables ----------------------------------------------------------

    def registry(self, schema: str | None) -> str:
        return self.database.qualified(TableName(schema, REGISTRY_TABLE))

    def register(self, name: TableName, create: bool = True) -> None:
        """Record ``name`` as this run's before creating it (committed at once outside a
        transaction; ``create``: create the registry first, which commits)."""
        if create:
            self.execute(
                f"CREATE TABLE IF NOT EXISTS {self.registry(name.schema)} (name VARCHAR(64) "
                f"CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, run_lock VARCHAR(64) "
                f"NOT NULL, created_at DATETIME NOT NULL) ENGINE=InnoDB"
            )
        self.execute(
            f"INSERT INTO {self.registry(name.schema)} VALUES "
            f"({_literal(name.name)}, {_literal(self.run_lock)}, UTC_TIMESTAMP())"
        )

    def unregister(self, name: TableName, execute: Any = None) -> None:
        (execute or self.execute)(
            f"DELETE FROM {self.registry(name.schema)} WHERE name = {_literal(name.name)}"
        )

    def drop_leftovers(self, schema: str | None) -> list[TableName]:
        """Drop the registered tables of runs that are over (their lock is free)."""
        exists = self.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
            + (_literal(schema) if schema else "DATABASE()")
            + f" AND table_name = {_literal(REGISTRY_TABLE)}"
        )
        if not exists[0][0]:
            return []
        rows = self.execute(
            f"SELECT name FROM {self.registry(schema)} WHERE IS_FREE_LOCK(run_lock) = 1"
        )
        dropped = []
        for (name,) in rows:
            table = TableName(schema, name)
            if self.database.exists(table, self.connection):
                try:
                    self.execute(f"DROP TABLE {self.database.qualified(table)}")
                except sa.exc.DBAPIError as error:  # e.g. a view: another run's cleanup is no
                    log.warning(  # reason to fail this one
                        "could not drop %s, left by an interrupted tclose run: %s",
                        table,
                        " ".join(str(error.orig).split()),
                    )
                    continue
                log.warning("dropped table %s, left by an interrupted tclose run", table)
                dropped.append(table)
            self.unregister(table)
        return dropped

    # --- reading, writing, publishing ----------------------------------------------------------

    def stream(
        self,
        statement: sa.Select,
        chunk_size: int,
        column_types: Sequence[sa.types.TypeEngine] = (),
    ) -> Iterator[list[tuple]]:
        """An unbuffered cursor of the driver (``SSCursor`` of PyMySQL or mysqlclient) used
        directly: SQLAlchemy's row objects would add ~70% to the time the driver spends parsing
        the rows. The text of the temporal columns among ``column_types`` (the last columns of
        the statement; :meth:`read_expression`) is parsed into ``date`` and ``datetime``."""
        parsers: dict[int, Callable[[Any], Any]] = {}
        offset = len(statement.selected_columns) - len(column_types)
        for i, column_type in enumerate(column_types):
            if isinstance(column_type, sa.DateTime):
                parsers[offset + i] = _datetime_or_text
            elif _is_temporal(column_type):
                parsers[offset + i] = _date_or_text
        for rows in self._stream(statement, chunk_size):
            if parsers and rows:
                columns = list(zip(*rows))
                for i, parser in parsers.items():
                    columns[i] = tuple(map(parser, columns[i]))
                rows = list(zip(*columns))
            yield rows

    def _stream(self, statement: sa.Select, chunk_size: int) -> Iterator[list[tuple]]:
        module = DRIVERS[self.database.url.get_driver_name()][0]
        sql = str(statement.compile(dialect=self.database.engine.dialect))
        raw = driver_connection(self.connection)
        if module == "mariadb":  # the binary protocol: numbers travel as binary, not as text
            cursor = raw.cursor(binary=True, buffered=False)
        else:
            cursor = raw.cursor(importlib.import_module(f"{module}.cursors").SSCursor)
        try:
            cursor.execute(sql, ())  # parameters given so that the driver turns %% back into %
            while True:
                rows = cursor.fetchmany(chunk_size)
                if not rows:
                    break
                yield rows
        finally:
            # A stream left unfinished when its session has ended is closed later, on a closed
            # connection: nothing is left to release, and the error would only be printed.
            with contextlib.suppress(self.database.engine.dialect.loaded_dbapi.Error):
                cursor.close()

    def end(self) -> None:
        try:
            self._end()
        finally:
            # The server frees a closed connection's named locks only once it has handled the
            # disconnect, which under load came after the next run had asked IS_FREE_LOCK: that
            # run then kept this one's leftover staging table for one run more.
            with contextlib.suppress(Exception):
                self.execute("DO RELEASE_ALL_LOCKS()")

    def _end(self) -> None:
        if self.published or self.staging is None:
            if not self.published:
                self.execute("ROLLBACK")
            return
        staging = TableName(self.staging.schema, self.staging.name)
        try:
            self.execute("ROLLBACK")
            self.execute(f"DROP TABLE IF EXISTS {self.database.qualified(staging)}")
            self.unregister(staging)
        except Exception:  # a broken connection (e.g. after an interrupt): use a new one
            try:
                self._drop_with_new_connection(staging)
            except Exception as error:
                log.warning(
                    "could not drop the staging table %s (%s); it holds no committed row, and "
                    "the next tclose run on this schema that may drop tables drops it",
                    staging,
                    " ".join(str(getattr(error, "orig", error)).split()),
                )

    def _drop_with_new_connection(self, staging: TableName) -> None:
        with self.database.engine.connect() as fresh:
            fresh = fresh.execution_options(isolation_level="AUTOCOMMIT")

            def execute(sql: str) -> None:
                if fresh.dialect.paramstyle in ("format", "pyformat"):
                    sql = sql.replace("%", "%%")
                fresh.exec_driver_sql(sql)

            execute(f"DROP TABLE IF EXISTS {self.database.qualified(staging)}")
            self.unregister(staging, execute)

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """As :meth:`DriverSession.insert_rows`; for MariaDB Connector/Python, whose
        ``executemany`` takes one Python type per column, a date column that mixes ``date`` or
        ``datetime`` values with zero dates (their text, :meth:`read_expression`) is sent as
        text, which the server parses back exactly."""
        if self.database.url.get_driver_name() == "mariadbconnector" and rows:
            mixed = [
                i
                for i, column in enumerate(columns)
                if _is_temporal(table.c[column].type) and any(isinstance(r[i], str) for r in rows)
            ]
            if mixed:
                rows = [
                    tuple(_date_text(v) if i in mixed else v for i, v in enumerate(row))
                    for row in rows
                ]
        wide = [
            i for i, column in enumerate(columns) if _may_hold_wide_integers(table.c[column].type)
        ]
        if wide:
            rows = _wide_integers_as_decimals(rows, wide)
        try:
            super().insert_rows(table, columns, rows)
        except DataError:
            found = _non_finite(columns, rows)
            if not found:
                raise
            column, count = found
            raise DataError(
                f"Column {column!r} holds NaN or infinity in {count} row(s) of a batch of "
                f"{len(rows)}, which MariaDB and MySQL cannot store. Publish into a database "
                f"that can (PostgreSQL, DuckDB), or drop the column (role: identifier)."
            ) from None

    def content_order(self, columns: Sequence[sa.ColumnElement]) -> list[sa.ColumnElement]:
        """Each value in MariaDB's order, NULL first; text (and JSON) by its bytes
        (``CAST(... AS BINARY)``), not by its collation, which calls ``'a'``, ``'A'`` and
        ``'a '`` equal. Text and blobs are compared on their first ``max_sort_length`` bytes
        only, so a column whose values may be longer adds the ``MD5`` of its bytes."""
        (prefix,) = self.execute("SELECT @@max_sort_length")[0]
        keys: list[sa.ColumnElement] = []
        for column in columns:
            bytes_ = sa.cast(column, mysql.BINARY())
            text = isinstance(column.type, (sa.String, sa.JSON))
            keys.append(bytes_ if text else column)
            if _may_be_longer(column.type, int(prefix)):
                keys.append(sa.func.md5(bytes_))
        return keys

    def drop_helpers(self, tables: Sequence[sa.Table]) -> None:
        # DROP TABLE would commit the transaction (and with it the unverified staging rows).
        for table in tables:
            self.execute(f"DROP TEMPORARY TABLE {self.database.qualified(table)}")

    def map_key(self, key_type: sa.types.TypeEngine) -> list[sa.schema.SchemaItem]:
        """A text or binary key without a length cannot be a MySQL key: it gets a prefix index
        instead (the join still compares whole values)."""
        unbounded = isinstance(key_type, (sa.Text, sa.LargeBinary)) or (
            isinstance(key_type, sa.String) and not key_type.length
        )
        if not unbounded:
            return super().map_key(key_type)
        column = sa.Column("src_key", key_type, nullable=False)
        return [column, sa.Index("tclose_map_key", column, mysql_length=255)]

    publishes_in_transaction = False

    def publish(
        self,
        staging: TableName,
        target: TableName,
        replace: bool,
        before_commit: Callable[[Any], None] | None = None,
    ) -> None:
        """``RENAME TABLE`` of both names in one statement (atomic; it commits the staging rows,
        verified in this transaction), then drop the old target. ``before_commit`` is never
        called: the RENAME commits by itself (:attr:`publishes_in_transaction` is false)."""
        quoted = self.database.qualified
        with self.database.errors(f"publishing {target}"):
            exists = self.database.exists(target, self.connection)
            if exists and not replace:
                raise DataError(
                    f"The target table {target} already exists and target.if_exists "
                    f"is 'fail'. Nothing was published."
                )
            if exists:
                self.refuse_foreign(target)
            self.check_staging(staging)
            # No COMMIT before the RENAME: the RENAME commits the verified rows (and the
            # registration of the old target's parking name) as it runs.
            if exists:
                run_id = self.staging.info.get("run_id") if self.staging is not None else None
                old = self.database.owned_name(target, OLD_MARK, run_id or random_suffix())
                if self.database.exists(old, self.connection):  # not this run's: never adopt it
                    raise DataError(
                        f"A table {old} exists, under the name this run parks the replaced "
                        f"target with; it was not made by this run. Nothing was published; "
                        f"run again."
                    )
                self.register(old, create=False)
                try:
                    self.execute(
                        f"RENAME TABLE {quoted(target)} TO {quoted(old)}, "
                        f"{quoted(staging)} TO {quoted(target)}"
                    )
                except Exception:
                    # The registration committed with the RENAME's implicit commit, but the
                    # table under that name (if any) is not this run's: a later run must not
                    # drop it.
                    with contextlib.suppress(Exception):
                        self.unregister(old)
                    raise
            else:
                self.execute(f"RENAME TABLE {quoted(staging)} TO {quoted(target)}")
            self.published = True
        self.tidy_after_publish(staging, target, old if exists else None)

    def hold_target(self, target: TableName) -> None:
        """Read the target in the run's transaction: its metadata lock, held to the transaction's
        end, keeps other sessions from dropping or renaming it until the ``RENAME TABLE``."""
        self.execute(f"SELECT 1 FROM {self.database.qualified(target)} LIMIT 0")

    @contextlib.contextmanager
    def registry_transaction(self) -> Iterator[None]:
        """A transaction of its own: the registry is written after the ``RENAME``, which
        committed the run's (the DDL that makes the registry commits too, so it comes first)."""
        self.execute("START TRANSACTION")
        try:
            yield
        except BaseException:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def check_staging(self, staging: TableName) -> None:
        """:class:`DataError` unless ``staging`` holds exactly the rows this run wrote.

        The staging table is committed (its DDL commits), so another session can insert into
        it, and the verification read the run's snapshot, without such rows. A locking read sees
        the latest rows and, in ``REPEATABLE READ``, locks every gap up to the end of the table:
        no other session can add a row until the ``RENAME`` commits."""
        if self.rows_written is None:
            return
        quoted = self.database.qualified(staging)
        try:
            found = self.execute(f"SELECT COUNT(*) FROM {quoted} LOCK IN SHARE MODE")[0][0]
        except sa.exc.OperationalError as error:
            if error_code(error.orig) != RECORD_CHANGED:
                raise
            found = None  # snapshot isolation: a row committed by another session
        if found != self.rows_written:
            raise DataError(
                f"Another session wrote into the staging table {staging} after this run wrote "
                f"and verified its {self.rows_written} rows. Nothing was published; run again."
            )

    def tidy_after_publish(
        self, staging: TableName, target: TableName, old: TableName | None
    ) -> None:
        """Record ``target`` as a release, drop the replaced target and clear the registry. The
        target is published already: a failure here is logged; the next run drops what is still
        registered, and refuses to replace a release left unrecorded."""
        try:
            self.record_release(target)
        except Exception as error:
            log.warning(
                "published; recording %s as a release failed (%s): a run with if_exists: "
                "replace will refuse to replace it (drop it yourself then)",
                target,
                " ".join(str(getattr(error, "orig", error)).split()),
            )
        try:
            if old is not None:
                self.execute(f"DROP TABLE {self.database.qualified(old)}")
                self.unregister(old)
            self.unregister(staging)
        except Exception as error:
            log.warning(
                "published; cleaning up afterwards failed (%s); the next run drops what remains",
                " ".join(str(getattr(error, "orig", error)).split()),
            )


def _may_be_longer(column_type: sa.types.TypeEngine, limit: int) -> bool:
    """Whether values of a text or binary type may be longer than ``limit`` bytes (a
    character takes up to 4 bytes; a text or binary type without a length may be long)."""
    if not isinstance(column_type, (sa.String, sa.LargeBinary, sa.JSON)):
        return False
    length = getattr(column_type, "length", None)
    return length is None or 4 * length > limit


#: Characters MariaDB refuses at the end of a column name.
_TRAILING_REFUSED = frozenset(" \t\n\r\v\f")


class MySQLDatabase(SQLDatabase):
    """A MySQL or MariaDB database through MariaDB Connector/Python, mysqlclient or PyMySQL
    (:func:`choose_driver`). Its :attr:`dialect` is ``"mysql"`` for ``mysql://`` and
    ``mariadb://`` URLs alike: one kind of database, whose tables move between them as they
    are."""

    row_level_security = False  # no row-level security: no read is filtered

    session_class = MySQLSession
    identifier_limit = 64
    #: A source's connections: every transaction read-only, autocommitted statements included.
    read_only_statements = ("SET SESSION TRANSACTION READ ONLY",)
    declared = dataclasses.replace(
        SQLDatabase.declared,
        snapshot_reads=True,
        run_lock=True,
        read_hold=True,
        table_dependencies=True,
        staging_readers=True,
        adapts_streams=True,
        digest_algorithm=MYSQL_ORDERED_DIGEST_ALGORITHM,
    )
    column_names_compared = "without regard to case (any letter, not only A-Z)"

    def column_key(self, name: str) -> str:
        """Each character in lower case, mapped one to one (``K``, the Kelvin sign, is ``k``;
        ``ß`` stays ``ß``): MariaDB's ``utf8mb3_general_ci`` comparison of column names, which
        ignores case but not accents. (Names ending with a space do not exist there.)"""
        return "".join(c.lower()[:1] for c in name)

    def column_name_problem(self, column: str) -> str | None:
        """Also: MariaDB refuses a column name that ends with an ASCII space, tab, line feed,
        carriage return, vertical tab or form feed (error 1166, "Incorrect column name"), and
        one holding a character beyond U+FFFF, such as an emoji (names are stored in
        ``utf8mb3``: error 1300, "Invalid utf8mb4 character string"). And a name with a line
        break anywhere, which the server takes but SQLAlchemy cannot read back (:meth:`table`)."""
        if column[-1:] in _TRAILING_REFUSED:
            return f"{self.dialect} refuses a column name that ends with {column[-1]!r}"
        if "\n" in column:
            return (
                f"SQLAlchemy cannot read back a {self.dialect} column name with a line break "
                f"(it parses SHOW CREATE TABLE line by line)"
            )
        beyond = next((c for c in column if ord(c) > 0xFFFF), None)
        if beyond is not None:
            return (
                f"{self.dialect} refuses a column name with a character outside the Basic "
                f"Multilingual Plane ({beyond!r}, U+{ord(beyond):04X})"
            )
        return super().column_name_problem(column)

    def __init__(self, url: str, password_file: str | None = None) -> None:
        super().__init__(url, password_file)
        # mysql:// and mariadb:// name one kind of database: tables move between them as they are.
        self.dialect = "mysql"
        #: character → its bytes in the server's file names (:meth:`file_name_size`)
        self._file_name_sizes: dict[str, int] = {}

    def adapt_url(self, url: sa.URL) -> sa.URL:
        url = choose_driver(url)
        if url.get_driver_name() not in DRIVERS:
            known = ", ".join(f"+{d} ({m[1]})" for d, m in DRIVERS.items())
            raise DataError(
                f"The {url.get_backend_name()} driver {url.get_driver_name()!r} is not "
                f"supported; use {known}."
            )
        driver = url.get_driver_name()
        module, name = DRIVERS[driver]
        if importlib.util.find_spec(module) is None:
            distribution, extra = DISTRIBUTIONS[driver]
            raise DataError(
                f"The URL names the driver +{driver} ({name}), which is not installed: pip "
                f"install 'tclose[{extra}]' (the {distribution} package), or write "
                f"{url.get_backend_name()}:// without a driver to use the fastest installed one."
            )
        notice_once(f"mysql-driver-{driver}", driver_description(url))
        return checked_charset(url)

    def create_engine(self) -> sa.Engine:
        """The engine; PyMySQL gets a non-ASCII password as UTF-8 bytes, as the C drivers send
        it (PyMySQL encodes a ``str`` password in Latin-1, which the server refuses)."""
        password = self.url.password
        if self.url.get_driver_name() != "pymysql" or password is None or password.isascii():
            return super().create_engine()
        return sa.create_engine(
            self.url, poolclass=NullPool, connect_args={"password": password.encode("utf-8")}
        )

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def describe(self, error: BaseException | None, action: str) -> DataError:
        if error_code(error) == RECORD_CHANGED:
            return DataError(
                f"The source table changed while tclose was reading it (another transaction "
                f"wrote to it after the snapshot was taken), while {action} on "
                f"{self.redacted_url}. Nothing was published; run again when the source is quiet."
            )
        return super().describe(error, action)

    def table_identity(self, name: TableName) -> tuple | None:
        """The server (``@@hostname``, ``@@port``, ``@@datadir``), the schema (``DATABASE()`` for
        an unqualified name) and the table name as the server stores it (folded to lower case
        under ``lower_case_table_names``)."""
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            host, port, datadir, fold, current = connection.exec_driver_sql(
                "SELECT @@hostname, @@port, @@datadir, @@lower_case_table_names, DATABASE()"
            ).one()
            schema = name.schema or current
            if schema is None:
                return None
            row = _catalog_row(connection, "table_schema, table_name", schema, name.name, fold)
        if row is None:
            return None
        stored = tuple(v.lower() if int(fold) else v for v in row)
        return ("mysql", host, int(port), datadir, *stored)

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` in its database (the given one, else the URL's, ``DATABASE()``), both
        spelled as the server stores them. MariaDB/MySQL has no temporary schema (a temporary
        table belongs to its session, and each session of a run is new). Refused
        (:class:`ConfigError`): a name without a database when the URL selects none; with
        ``create``, a server that gives new tables an engine keeping them in memory
        (:data:`MEMORY_ENGINES`), a database that does not exist, or a name the server would not
        store as it is (:meth:`name_problem`: its file name)."""
        with (
            self.errors(f"resolving the table name {name}"),
            self.engine.connect() as connection,
        ):
            fold, current, engine = connection.exec_driver_sql(
                "SELECT @@lower_case_table_names, DATABASE(), "
                "COALESCE(@@enforce_storage_engine, @@default_storage_engine)"
            ).one()
            if create and str(engine).upper() in MEMORY_ENGINES:
                raise vanishing_table(
                    name,
                    path,
                    f"a table of the {engine} engine, which keeps its rows in memory only (the "
                    f"engine this server gives the tables a session creates: "
                    f"default_storage_engine, set by the server or the URL's init_command)",
                    database=True,
                )
            schema = name.schema or current
            if schema is None:
                raise ConfigError(
                    f"==> At {path}\nThe table {name} names no database, and the URL selects "
                    f"none ({self.redacted_url}): write it as database.table, or name the "
                    f"database in the URL."
                )
            found = _catalog_row(connection, "table_schema, table_name", schema, name.name, fold)
            if found is not None or not create:
                return TableName(str(found[0]), str(found[1])) if found is not None else name
            compare = "LOWER(schema_name) = LOWER(%s)" if int(fold) else "BINARY schema_name = %s"
            if connection.dialect.paramstyle == "qmark":
                compare = compare.replace("%s", "?")
            database = connection.exec_driver_sql(
                f"SELECT schema_name FROM information_schema.schemata WHERE {compare}", (schema,)
            ).first()
        if database is None:
            raise ConfigError(
                f"==> At {path}\nThe database {schema} of table {name} does not exist on "
                f"{self.redacted_url}. Create it, or name an existing one."
            )
        self.check_configured_name(name, path)
        return TableName(str(database[0]), name.name)

    def name_problem(self, name: str) -> str | None:
        """Also: a name whose file name on the server is too long. The server keeps a table in
        files named after it, each character as its ``filename`` character set spells it
        (``a``-``z``, ``0``-``9`` and ``_`` as themselves, ``é`` as ``@0p``, ``€`` as ``@20ac``):
        the name, so spelled (:meth:`file_name_size`), and the longest extension must fit a file
        name (:data:`FILE_NAME_MAX` bytes). 64 characters ``€`` passed the limit of 64
        characters and failed at the publish, "File name too long"."""
        problem = super().name_problem(name)
        if problem is not None:
            return problem
        if name[-1] in TRAILING_SPACES:
            return f"ending with white space ({name[-1]!r}), which {self.dialect} refuses in names"
        beyond = sorted({c for c in name if ord(c) > 0xFFFF})
        if beyond:
            return (
                f"holding {', '.join(repr(c) for c in beyond)}, beyond the characters "
                f"{self.dialect} keeps in names (U+0001 to U+FFFF)"
            )
        size, limit = self.file_name_size(name), FILE_NAME_MAX - FILE_EXTENSION
        if size > limit:
            return (
                f"longer than {self.dialect} stores: the server's file name for it takes {size} "
                f"bytes (each character other than a-z, A-Z, 0-9 and _ takes 3 to 5, e.g. € "
                f"is @20ac), and a table's file name holds {limit} ({FILE_NAME_MAX} with its "
                f"extension)"
            )
        return None

    def file_name_size(self, name: str) -> int:
        """The bytes of ``name`` as the server spells it in file names, by its own answer
        (``LENGTH(CONVERT(... USING filename))``, which spells each character on its own):
        one query for the characters not measured before."""
        sizes = self._file_name_sizes
        new = sorted(set(name) - sizes.keys())
        if new:
            measures = ", ".join(f"LENGTH(CONVERT({_literal(c)} USING filename))" for c in new)
            with self.errors("measuring a table name"), self.engine.connect() as connection:
                row = connection.exec_driver_sql(f"SELECT {measures}").one()
            sizes.update(zip(new, (int(size) for size in row), strict=True))
        return sum(sizes[c] for c in name)

    def owned_name(self, target: TableName, mark: str, run_id: str) -> TableName:
        """As :meth:`SQLDatabase.owned_name`; the staging table's in :data:`STAGING_SCHEMA`."""
        name = super().owned_name(target, mark, run_id)
        return TableName(STAGING_SCHEMA, name.name) if mark == STAGING_MARK else name

    def release_of(
        self, connection: sa.Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """The table's database and name as ``information_schema.tables`` stores them, and its
        identity: its ``CREATE_TIME`` (the second of its last ``CREATE``, ``RENAME`` or
        ``ALTER``: a publish's ``RENAME`` sets it), its comment (``tclose run <id>``), its
        columns (name, type, nullability, collation: an ``ALTER`` done in place may keep the
        time) and its rows (``CHECKSUM TABLE``). MariaDB gives a table no lasting id that
        every account may read (InnoDB's needs ``PROCESS``), so the same table is a base table
        of that name last made, renamed or altered in the second the run published it,
        carrying the run's comment, columns and rows: a table dropped and made again, renamed
        into its place (a ``CREATE TABLE ... LIKE`` copy carries the comment) or altered since
        has another time or other columns, and one whose rows changed another checksum."""
        fold, current = connection.exec_driver_sql(
            "SELECT @@lower_case_table_names, DATABASE()"
        ).one()
        schema = name.schema or current
        if schema is None:
            return None
        columns = "table_schema, table_name, table_type, create_time, table_comment"
        row = _catalog_row(connection, columns, schema, name.name, fold)
        if row is None:
            return None
        home = TableName(str(row[0]), str(row[1]))
        if row[2] != "BASE TABLE" or row[3] is None:
            return home, None
        statement = f"CHECKSUM TABLE {self.qualified(home)}"
        if connection.dialect.paramstyle in ("format", "pyformat"):
            statement = statement.replace("%", "%%")
        checksum = connection.exec_driver_sql(statement).one()[1]
        query = (
            "SELECT GROUP_CONCAT(CONCAT_WS(' ', column_name, column_type, is_nullable, "
            "collation_name) ORDER BY ordinal_position SEPARATOR ', ') FROM "
            "information_schema.columns WHERE table_schema = %s AND table_name = %s"
        )
        if connection.dialect.paramstyle == "qmark":
            query = query.replace("%s", "?")
        described = connection.exec_driver_sql(query, (home.schema, home.name)).scalar()
        return home, (
            f"created {row[3]:%Y-%m-%d %H:%M:%S}, comment {row[4]!r}, columns {described}, "
            f"checksum {checksum}"
        )

    def release_mark(self, connection: sa.Connection, home: TableName) -> str | None:
        """The run its comment names, from ``information_schema.tables``."""
        fold = connection.exec_driver_sql("SELECT @@lower_case_table_names").scalar()
        row = _catalog_row(connection, "table_comment", str(home.schema), home.name, fold)
        return marked_run(row[0]) if row is not None else None

    def replace_blockers(self, name: TableName) -> list[str]:
        """What the server's catalog binds to table ``name`` (:data:`_BOUND`): the foreign keys
        of other tables that reference it (``information_schema.referential_constraints``), the
        triggers on it (``information_schema.triggers``: a ``DROP TABLE`` drops them with it)
        and the views whose definition names it (``information_schema.views``, which writes
        each table as `` `schema`.`table` ``; a view this account may not see is not found).
        Replacing it would drop them, fail, or leave a view reading another table."""
        with self.errors(f"looking for what depends on {name}"), self.engine.connect() as c:
            fold, current = c.exec_driver_sql("SELECT @@lower_case_table_names, DATABASE()").one()
            schema = name.schema or current
            if schema is None:
                return []
            statement = _BOUND if c.dialect.paramstyle != "qmark" else _BOUND.replace("%s", "?")
            rows = c.exec_driver_sql(statement, (schema, name.name) * 2).all()
            views = c.exec_driver_sql(
                "SELECT table_schema, table_name, view_definition FROM information_schema.views"
            ).all()
        found = [str(what) for (what,) in rows]
        same = (lambda a, b: a.lower() == b.lower()) if int(fold) else (lambda a, b: a == b)
        for view_schema, view, definition in views:
            named = _QUALIFIED_NAME.findall(definition or "")
            if any(
                same(s.replace("``", "`"), schema) and same(t.replace("``", "`"), name.name)
                for s, t in named
            ):
                found.append(f"view {view_schema}.{view}")
        return sorted(set(found))

    def staging_readers(self) -> dict[str, Any]:
        """:class:`tclose.connector.StagingReaders`: the other accounts whose grants reach
        :data:`STAGING_SCHEMA`, by the server's grant tables: ``SELECT`` on every database
        (``mysql.user``: ``every_database``, an administrator who may read the source too), on
        a database pattern that matches it (``mysql.db``, as the server matches it: ``LIKE``
        with ``\\`` escaping, so `` `%`.* `` and `` `tclose\\_%`.* `` match) or on one of its
        tables or columns; a role's grant counts for every account granted the role
        (``mysql.roles_mapping``), and one to ``PUBLIC`` for every account. ``checked`` is
        false when this account may not read those tables."""
        me = None
        found: list[dict[str, Any]] = []
        try:
            with self.engine.connect() as connection:
                me = str(connection.exec_driver_sql("SELECT CURRENT_USER()").scalar())
                for user, host, through, every in _grant_rows(connection):
                    for account in _accounts_of(connection, str(user), str(host)):
                        found.append(
                            {"account": account, "through": through, "every_database": every}
                        )
        except sa.exc.DBAPIError as error:
            if error_code(error.orig) not in ACCESS_DENIED:
                raise DataError(
                    f"Reading the grant tables of {self.redacted_url}: {error}"
                ) from None
            return {"checked": False, "accounts": []}
        user, _, host = (me or "").rpartition("@")
        mine = f"'{user}'@'{host}'"
        unique = {(a["account"], a["through"]): a for a in found if a["account"] != mine}
        return {"checked": True, "accounts": [unique[k] for k in sorted(unique)]}

    def tables_read(self, name: TableName) -> TablesRead:
        """The identities of ``name`` and, if it is a view, of every table its definition names
        (``information_schema.views``, where the server writes each table as
        ``schema``.``table``), transitively. Unknown (:class:`TablesRead`) when this account
        may not see a view's definition (no ``SHOW VIEW``), when a view calls a stored function (the server writes its name quoted, a built-in's bare:
        ``` `f`(``` ), whose body may read any table, or a table keeps its rows elsewhere: an
        engine not in :data:`LOCAL_ENGINES` (``MRG_MyISAM`` reads other tables, ``FEDERATED``,
        ``CONNECT`` and ``SPIDER`` other servers)."""
        return tables_read_through(self, name, self._view_reads)

    def _view_reads(
        self, table: TableName, identity: tuple
    ) -> tuple[list[TableName], list, str | None]:
        """The tables the definition of view ``table`` names (none for a table), and why the
        catalog cannot list everything a read of ``table`` reads (``None``: it can)."""
        query = (
            "SELECT t.engine, t.table_type, v.view_definition FROM information_schema.tables t "
            "LEFT JOIN information_schema.views v ON v.table_schema = t.table_schema "
            "AND v.table_name = t.table_name WHERE t.table_schema = %s AND t.table_name = %s"
        )
        with self.errors(f"reading the definition of {table}"), self.engine.connect() as c:
            if c.dialect.paramstyle == "qmark":
                query = query.replace("%s", "?")
            row = c.exec_driver_sql(query, (identity[-2], identity[-1])).first()
        engine, kind, definition = row if row is not None else (None, None, None)
        names = [
            TableName(schema.replace("``", "`"), name.replace("``", "`"))
            for schema, name in _QUALIFIED_NAME.findall(definition or "")
        ]
        called = sorted({f.replace("``", "`") for f in _STORED_FUNCTION.findall(definition or "")})
        if kind == "VIEW" and not definition:
            why = f"the definition of view {table} is hidden from this account (no SHOW VIEW)"
        elif called:
            why = f"view {table} calls the stored function(s) {', '.join(called)}"
        elif engine is not None and engine.upper() not in LOCAL_ENGINES:
            why = f"table {table} is a {engine} table, whose rows are read from elsewhere"
        else:
            why = None
        if why is not None:
            why += ", which the catalog does not list the reads of"
        return names, [], why

    def table(self, name: TableName, connection: sa.Connection | None = None) -> sa.Table:
        """The reflected table, with exactly the columns the server's catalog lists:
        :class:`DataError` naming the columns SQLAlchemy's reflection misread (it parses
        ``SHOW CREATE TABLE`` line by line, so a column whose name holds a line break vanished
        from the table, unpublished and unreported)."""
        table = super().table(name, connection)
        with (
            self.errors(f"reading the definition of table {name}"),
            _connection(self.engine, connection) as bound,
        ):
            rows = bound.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = COALESCE(%(schema)s, DATABASE()) AND table_name = %(table)s "
                "ORDER BY ordinal_position",
                {"schema": name.schema, "table": name.name},
            )
            catalog = [column for (column,) in rows]
        reflected = [c.name for c in table.columns]
        if reflected != catalog:
            misread = [repr(c) for c in catalog if c not in reflected] or [
                repr(c) for c in reflected if c not in catalog
            ]
            raise DataError(
                f"Table {name} has column(s) {', '.join(misread) or '(reordered)'} that "
                f"SQLAlchemy cannot read back from {self.dialect} (a line break in a column "
                f"name). Rename the column(s), or read the table through a view that renames "
                f"them."
            )
        return table

    def reflected_column(self, column: dict[str, Any]) -> None:
        """SQLAlchemy reads column names from ``SHOW CREATE TABLE`` without undoing its quoting:
        a column named ``a`b`` came back as ``a``b``, which the run then quoted again and asked
        the server for a column that does not exist (or another one, named ``a``b``). The name
        is the server's again (``tests/test_adversarial_injection.py`` checks it against
        ``information_schema``)."""
        column["name"] = column["name"].replace("``", "`")

    def declared_types(self, connection: sa.Connection, name: TableName) -> dict[str, str]:
        """``information_schema.columns.column_type`` of each column (``point``, ``inet6``)."""
        rows = connection.exec_driver_sql(
            "SELECT column_name, column_type FROM information_schema.columns "
            "WHERE table_schema = COALESCE(%(schema)s, DATABASE()) AND table_name = %(table)s",
            {"schema": name.schema, "table": name.name},
        )
        return {column: declared for column, declared in rows}

    @property
    def joins_in_snapshot(self) -> bool:
        """True when the server has ``innodb_snapshot_isolation`` (MariaDB 10.6.18+)."""
        if not hasattr(self, "_snapshot_isolation"):
            with self.errors("connecting to mysql"), self.engine.connect() as connection:
                try:
                    connection.exec_driver_sql("SELECT @@innodb_snapshot_isolation")
                    self._snapshot_isolation = True
                except sa.exc.DBAPIError:
                    self._snapshot_isolation = False
        return self._snapshot_isolation

    def adapt_portable_type(self, generic: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """Text without a length becomes ``LONGTEXT``, ``NUMERIC`` without a precision
        ``DECIMAL(65, 30)``, floats ``DOUBLE``, times keep microseconds."""
        if isinstance(generic, sa.Text) or (isinstance(generic, sa.String) and not generic.length):
            return mysql.LONGTEXT()
        if isinstance(generic, sa.Float):
            return (
                mysql.DOUBLE() if not generic.precision or generic.precision > 24 else mysql.FLOAT()
            )
        if isinstance(generic, sa.Numeric) and generic.precision is None:
            return mysql.DECIMAL(65, 30)
        if isinstance(generic, sa.LargeBinary):
            return mysql.LONGBLOB()
        return super().adapt_portable_type(generic)  # times: fsp=6


#: The foreign keys of other tables that reference a table, and the triggers on it
#: (:meth:`MySQLDatabase.replace_blockers`); parameters: its schema and name, twice.
_BOUND = """
SELECT CONCAT('foreign key ', constraint_name, ' of ', constraint_schema, '.', table_name)
    FROM information_schema.referential_constraints
    WHERE unique_constraint_schema = %s AND referenced_table_name = %s
UNION ALL
SELECT CONCAT('trigger ', trigger_schema, '.', trigger_name)
    FROM information_schema.triggers
    WHERE event_object_schema = %s AND event_object_table = %s
"""


#: The grants that let an account read :data:`STAGING_SCHEMA` (:func:`_grant_rows`): the
#: account, the grant in words and whether it reaches every database.
_STAGING_GRANTS = f"""
SELECT User, Host, 'SELECT ON *.*', 1 FROM mysql.user WHERE Select_priv = 'Y'
UNION ALL
SELECT User, Host, CONCAT('SELECT ON `', Db, '`.*'), 0 FROM mysql.db
    WHERE Select_priv = 'Y' AND '{STAGING_SCHEMA}' LIKE Db
UNION ALL
SELECT User, Host, CONCAT('SELECT ON `', Db, '`.`', Table_name, '`'), 0 FROM mysql.tables_priv
    WHERE FIND_IN_SET('Select', Table_priv) AND '{STAGING_SCHEMA}' LIKE Db
UNION ALL
SELECT DISTINCT User, Host, CONCAT('SELECT on columns of `', Db, '`.`', Table_name, '`'), 0
    FROM mysql.columns_priv
    WHERE FIND_IN_SET('Select', Column_priv) AND '{STAGING_SCHEMA}' LIKE Db
"""


def _grant_rows(connection: sa.Connection) -> list[tuple]:
    """:data:`_STAGING_GRANTS`, each as ``(user, host, grant, every database)``."""
    statement = _STAGING_GRANTS
    if connection.dialect.paramstyle in ("format", "pyformat"):
        statement = statement.replace("%", "%%")
    return [(u, h, g, bool(e)) for u, h, g, e in connection.exec_driver_sql(statement).all()]


def _accounts_of(connection: sa.Connection, user: str, host: str) -> list[str]:
    """The accounts a grant to ``user``@``host`` reaches: that account; for a role (host
    empty), every account granted it, through roles granted roles; for ``PUBLIC``, every
    account (``'PUBLIC'``, as the server names it)."""
    if host or user == "PUBLIC":
        return [f"'{user}'@'{host}'" if host else "every account (PUBLIC)"]
    query = "SELECT User, Host FROM mysql.roles_mapping WHERE Role = %s"
    if connection.dialect.paramstyle == "qmark":
        query = query.replace("%s", "?")
    accounts: list[str] = []
    for member, member_host in connection.exec_driver_sql(query, (user,)).all():
        for account in _accounts_of(connection, str(member), str(member_host)):
            accounts.append(f"{account} through role {user}")
    return accounts


def _catalog_row(
    connection: sa.Connection, columns: str, schema: str, table: str, fold: Any
) -> Any:
    """``columns`` of table ``schema.table``'s row of ``information_schema.tables`` (``None``
    if none), names compared as the server compares them (in lower case under
    ``lower_case_table_names`` ``fold``)."""
    compare = "BINARY table_schema = %s AND BINARY table_name = %s"
    if int(fold):
        compare = "LOWER(table_schema) = LOWER(%s) AND LOWER(table_name) = LOWER(%s)"
    if connection.dialect.paramstyle == "qmark":
        compare = compare.replace("%s", "?")
    return connection.exec_driver_sql(
        f"SELECT {columns} FROM information_schema.tables WHERE {compare}", (schema, table)
    ).first()


def _may_hold_wide_integers(column_type: sa.types.TypeEngine) -> bool:
    """Whether a column of ``column_type`` may receive integers beyond 64 bits: a decimal of
    more than 20 digits (DuckDB's ``HUGEINT`` becomes ``DECIMAL(39,0)``)."""
    if not isinstance(column_type, sa.Numeric) or isinstance(column_type, sa.Float):
        return False
    return column_type.precision is None or column_type.precision > 20


def _wide_integers_as_decimals(rows: Sequence[tuple], columns: Sequence[int]) -> Sequence[tuple]:
    """``rows`` with the integers of each of ``columns`` (indexes) that holds one beyond 64 bits
    as ``Decimal`` (the same number): MariaDB Connector/Python failed to bind such an ``int``
    (an internal error), and it takes one Python type per column, so the column's other
    integers go as ``Decimal`` too."""
    wide = {
        i for i in columns if any(type(r[i]) is int and not -(2**63) <= r[i] < 2**64 for r in rows)
    }
    if not wide:
        return rows
    return [
        tuple(decimal.Decimal(v) if i in wide and type(v) is int else v for i, v in enumerate(r))
        for r in rows
    ]


class MySQLConnector:
    """Connector for MySQL and MariaDB (``mysql://``, ``mariadb://``, with ``+mysqldb`` or
    ``+pymysql``)."""

    name = "mysql"
    dialects = ("mysql", "mariadb")

    def connect(self, url: str, password_file: str | None = None) -> MySQLDatabase:
        return MySQLDatabase(url, password_file)

    def notes(self) -> list[str]:
        """The driver a bare URL reads through, and the faster one to install."""
        return notes()


@hookimpl
def register_connectors(register: Any) -> None:
    register(MySQLConnector())


#: An integer type's display width (``int(11)``), which :meth:`MySQLSession.column_types` drops.
_DISPLAY_WIDTH = re.compile(r"\b(tinyint|smallint|mediumint|int|integer|bigint)\(\d+\)", re.I)
