"""MariaDB/MySQL sessions: the run's snapshot, its run lock, the staging table kept in the staging
schema and recorded in the registry of owned tables, reads and bulk writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from tclose.connectors.mysql.server import ACCESS_DENIED, RECORD_CHANGED, _literal, error_code
from tclose.connectors.mysql.streams import StreamedDurations, streamed_durations
from tclose.connectors.mysql.values import (
    _DISPLAY_WIDTH,
    _AsDouble,
    _date_or_text,
    _date_text,
    _datetime_or_text,
    _is_float,
    _is_temporal,
    _may_be_longer,
    _may_hold_wide_integers,
    _non_finite,
    _wide_integers_as_decimals,
)
from tclose.connectors.mysql_drivers import (
    DRIVERS,
    PREFERENCE,  # noqa: F401 (re-exported)
)
from tclose.connectors.sql import (
    OLD_MARK,
    DriverSession,
    TableName,
    driver_connection,
    random_suffix,
    wait_in_slices,
)
from tclose.errors import DataError
from tclose.naming import OWNED_TABLE, STAGING_SCHEMA

if TYPE_CHECKING:
    from tclose.connectors.mysql.database import MySQLDatabase


log = logging.getLogger("tclose")

#: Seconds a run waits for another run on the same target to finish before giving up.
LOCK_WAIT_SECONDS = 30
#: The mark of the empty table a run makes in the target's schema to prove, before any work,
#: the privileges its publish needs there.
PROBE_MARK = "__tclose_p_"


#: The registry of the tables runs create, one per schema (see :class:`MySQLSession`).
REGISTRY_TABLE = OWNED_TABLE


def run_lock_name(schema: str, target: str) -> str:
    """The named lock (``GET_LOCK``) of the runs that write ``schema.target``; 47 characters,
    within MySQL's limit of 64."""
    return "tclose:" + hashlib.sha256(f"{schema}.{target}".encode()).hexdigest()[:40]


def owner_lock_name(run_id: str) -> str:
    """The named lock one run holds while it lives: its registered tables are not leftovers."""
    return "tclose-run:" + hashlib.sha256(run_id.encode()).hexdigest()[:40]


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
        (:mod:`tclose.connectors.mysql.streams`)."""
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
            exists = self.replaceable_target(target, replace)
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
