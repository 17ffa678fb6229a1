"""Connector plugin ``mysql``: MySQL and MariaDB through PyMySQL.

- DDL commits implicitly in MySQL, so a writing session first takes the run lock
  (``GET_LOCK``), drops leftovers and creates the staging table, and only then opens
  ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` for the reads and the DML (helper tables are
  ``TEMPORARY``, whose creation does not commit). The staging rows are committed before the
  verification reads them back; ``RENAME TABLE`` of both names in one statement publishes them.
  A killed run can leave a staging table behind: the next run for the target drops it.
- ``INSERT ... SELECT`` reads the source with locks, not from the snapshot. On MariaDB with
  ``innodb_snapshot_isolation`` (10.6.18, 10.11.8, 11.x) the session turns it on, so such a read
  of a row changed since the snapshot fails the run instead of mixing two states of the source.
  Without it (MySQL, older MariaDB) the runner does not join in the database: it streams the
  source a second time from the snapshot into a second session.
- Reads: unbuffered (server-side) cursors. Bulk writes: multi-row ``INSERT`` (PyMySQL's
  ``executemany`` packs rows into statements of up to ~1 MB).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from tclose.errors import DataError
from tclose.hookspecs import hookimpl

from .sql import OLD_SUFFIX, Session, SQLDatabase, TableName

#: Seconds a run waits for another run on the same target to finish before giving up.
LOCK_WAIT_SECONDS = 30
#: ER_CHECKREAD: a locking read met a row changed after the snapshot (snapshot isolation).
RECORD_CHANGED = 1020


def run_lock_name(schema: str, staging: str) -> str:
    """The named lock (``GET_LOCK``) of the runs that write ``schema.staging``; 47 characters,
    within MySQL's limit of 64."""
    return "tclose:" + hashlib.sha256(f"{schema}.{staging}".encode()).hexdigest()[:40]


class MySQLSession(Session):
    """A MySQL/MariaDB session: DDL first, then one transaction with a consistent snapshot."""

    database: MySQLDatabase

    def begin(self, staging: sa.Table | None) -> None:
        if staging is not None:
            self.lock(TableName(staging.schema, staging.name))
            self.prepare_staging(staging)
            if self.database.joins_in_snapshot:
                self.execute("SET SESSION innodb_snapshot_isolation = ON")
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        elif self.read_only:
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        else:
            self.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")

    def lock(self, staging: TableName) -> None:
        """Take the run lock of ``staging``'s target (a named lock held by this connection)."""
        schema = staging.schema or self.database.url.database or ""
        name = run_lock_name(schema, staging.name)
        got = self.execute(f"SELECT GET_LOCK('{name}', {LOCK_WAIT_SECONDS})")
        if not got or got[0][0] != 1:
            raise DataError(
                f"Another tclose run is writing {staging} (waited {LOCK_WAIT_SECONDS} s); "
                f"nothing was written. Retry when it has finished."
            )

    def stream(
        self,
        statement: sa.Select,
        chunk_size: int,
        column_types: Sequence[sa.types.TypeEngine] = (),
    ) -> Iterator[list[tuple]]:
        """An unbuffered PyMySQL cursor (``SSCursor``) used directly: SQLAlchemy's row objects
        would add ~70% to the time PyMySQL spends parsing the rows."""
        import pymysql.cursors

        sql = str(statement.compile(dialect=self.database.engine.dialect))
        raw = self.connection.connection.driver_connection
        cursor = raw.cursor(pymysql.cursors.SSCursor)
        try:
            cursor.execute(sql, ())  # parameters given so that PyMySQL turns %% back into %
            while True:
                rows = cursor.fetchmany(chunk_size)
                if not rows:
                    break
                yield rows
        finally:
            cursor.close()

    def writes_done(self) -> None:
        self.execute("COMMIT")

    def end(self, failed: bool) -> None:
        if self.published:
            return
        self.execute("ROLLBACK")
        if self.staging is not None:
            self.execute(f"DROP TABLE IF EXISTS {self.database.qualified(self.staging)}")

    def publish(self, staging: TableName, target: TableName, replace: bool) -> None:
        """``RENAME TABLE`` of both names in one statement (atomic), then drop the old target."""
        quoted = self.database.qualified
        with self.database.errors(f"publishing {target}"):
            exists = self.database.exists(target, self.connection)
            if exists and not replace:
                raise DataError(
                    f"The target table {target} already exists and target.if_exists "
                    f"is 'fail'. Nothing was published."
                )
            if exists:
                old = target.with_suffix(OLD_SUFFIX)
                self.execute(
                    f"RENAME TABLE {quoted(target)} TO {quoted(old)}, "
                    f"{quoted(staging)} TO {quoted(target)}"
                )
                self.published = True
                self.execute(f"DROP TABLE {quoted(old)}")
            else:
                self.execute(f"RENAME TABLE {quoted(staging)} TO {quoted(target)}")
                self.published = True


class MySQLDatabase(SQLDatabase):
    """A MySQL or MariaDB database (driver: PyMySQL; ``mysql://`` URLs use it too)."""

    session_class = MySQLSession

    def adapt_url(self, url: sa.URL) -> sa.URL:
        if url.drivername in ("mysql", "mariadb"):
            return url.set(drivername=f"{url.drivername}+pymysql")
        return url

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def describe(self, error: BaseException, action: str) -> DataError:
        code = error.args[0] if getattr(error, "args", None) else None
        if code == RECORD_CHANGED:
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
            compare = "BINARY table_schema = %s AND BINARY table_name = %s"
            if int(fold):
                compare = "LOWER(table_schema) = LOWER(%s) AND LOWER(table_name) = LOWER(%s)"
            row = connection.exec_driver_sql(
                f"SELECT table_schema, table_name FROM information_schema.tables WHERE {compare}",
                (schema, name.name),
            ).first()
        if row is None:
            return None
        stored = tuple(v.lower() if int(fold) else v for v in row)
        return ("mysql", host, int(port), datadir, *stored)

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
        if isinstance(generic, sa.DateTime):
            return mysql.DATETIME(fsp=6)
        if isinstance(generic, sa.Time):
            return mysql.TIME(fsp=6)
        return generic


class MySQLConnector:
    """Connector for MySQL and MariaDB (``mysql+pymysql://`` and ``mariadb+pymysql://`` URLs)."""

    name = "mysql"
    dialects = ("mysql", "mariadb")

    def connect(self, url: str, password_file: str | None = None) -> MySQLDatabase:
        return MySQLDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(MySQLConnector())
