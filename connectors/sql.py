"""Connector plugin ``sqlalchemy``: SQLite, PostgreSQL and MySQL/MariaDB through SQLAlchemy 2.

The connector knows SQL and nothing of privacy. It reads columns in streamed chunks, creates and
fills the staging table, reads it back for verification, and publishes it under the target's name
atomically. Table names may be qualified (``schema.table``); every identifier is quoted by
SQLAlchemy, so odd column names (spaces, capitals, reserved words) are safe.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url

from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl

#: Suffixes of the helper tables a run creates next to the target; a leftover one (from a killed
#: run) is dropped at the start of the next run for the same target.
STAGING_SUFFIX = "__tclose_staging"
MAP_SUFFIX = "__tclose_map"
#: Name of the new surrogate key column of the published table.
ROW_COLUMN = "tclose_row"


@dataclass(frozen=True)
class TableName:
    """A possibly schema-qualified table name."""

    schema: str | None
    name: str

    @classmethod
    def parse(cls, qualified: str) -> TableName:
        schema, _, name = qualified.rpartition(".")
        return cls(schema or None, name)

    def with_suffix(self, suffix: str) -> TableName:
        return TableName(self.schema, self.name + suffix)

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def url_with_password(url: str, password_file: str | None) -> sa.URL:
    """The SQLAlchemy URL, with the password read from ``password_file`` if one is given."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        raise ConfigError(f"Cannot parse the database URL {url.split('@')[-1]!r}.") from None
    if password_file:
        try:
            password = Path(password_file).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ConfigError(
                f"Cannot read password_file {password_file}: {error.strerror}."
            ) from None
        parsed = parsed.set(password=password)
    return parsed


class SQLDatabase:
    """One database, reached through a SQLAlchemy engine."""

    def __init__(self, url: str, password_file: str | None = None) -> None:
        self.url = url_with_password(url, password_file)
        self.dialect = self.url.get_backend_name()
        try:
            self.engine: Engine = sa.create_engine(self.url)
        except (ImportError, sa.exc.NoSuchModuleError) as error:
            raise DataError(f"No driver for {self.dialect}: {error}.") from None

    @property
    def redacted_url(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def same_database(self, other: SQLDatabase) -> bool:
        return self.url == other.url

    # --- inspection -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except sa.exc.OperationalError as error:
            raise DataError(
                f"Database error while {action} on {self.redacted_url}: {error.orig}"
            ) from None

    def table(self, name: TableName) -> sa.Table:
        """The reflected table; :class:`DataError` if it does not exist."""
        with self._errors(f"reading the definition of table {name}"):
            if not sa.inspect(self.engine).has_table(name.name, schema=name.schema):
                raise DataError(f"Table {name} does not exist in {self.redacted_url}.")
            return sa.Table(name.name, sa.MetaData(), schema=name.schema,
                            autoload_with=self.engine)

    def exists(self, name: TableName) -> bool:
        with self._errors(f"looking for table {name}"):
            return sa.inspect(self.engine).has_table(name.name, schema=name.schema)

    def row_key(self, table: sa.Table, key: str | None) -> sa.ColumnElement:
        """The column that identifies source rows: ``key``, else the single-column primary key,
        else SQLite's ``rowid``."""
        if key is not None:
            if key not in table.c:
                raise DataError(f"source.key {key!r} is not a column of {table.fullname}.")
            return table.c[key]
        primary = list(table.primary_key.columns)
        if len(primary) == 1:
            return primary[0]
        if self.dialect == "sqlite":
            qualified = self.engine.dialect.identifier_preparer.format_table(table)
            return sa.literal_column(f"{qualified}.rowid", sa.Integer)
        raise ConfigError(
            f"==> At source ==> At key: key\nTable {table.fullname} has no single-column primary "
            f"key; name a unique, non-null column as source.key."
        )

    def count(self, name: TableName) -> int:
        table = self.table(name)
        with self._errors(f"counting rows of {name}"), self.engine.connect() as connection:
            return int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar())

    # --- reading ----------------------------------------------------------------------------

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """Stream ``columns`` of table ``name`` in chunks, ordered by the row key.

        With ``with_key`` the first column of every chunk is the row key, named ``__key__``.
        Rows come through a server-side cursor (``yield_per``), so memory holds one chunk.
        """
        table = self.table(name)
        missing = [c for c in columns if c not in table.c]
        if missing:
            raise DataError(
                f"Column {missing[0]!r} does not exist in table {name}. "
                f"Its columns are: {', '.join(table.c.keys())}."
            )
        row_key = self.row_key(table, key)
        selected = [row_key.label("__key__")] if with_key else []
        selected += [table.c[c] for c in columns]
        statement = sa.select(*selected).order_by(row_key)
        names = (["__key__"] if with_key else []) + list(columns)
        with self._errors(f"reading {name}"), self.engine.connect() as connection:
            result = connection.execution_options(yield_per=chunk_size).execute(statement)
            for part in result.partitions():
                yield pd.DataFrame.from_records(part, columns=names)

    # --- writing ----------------------------------------------------------------------------

    def drop_if_exists(self, name: TableName) -> bool:
        """Drop table ``name`` if it exists; return whether it existed."""
        with self._errors(f"dropping {name}"), self.engine.begin() as connection:
            if not sa.inspect(connection).has_table(name.name, schema=name.schema):
                return False
            sa.Table(name.name, sa.MetaData(), schema=name.schema).drop(connection)
            return True

    def write_joined(
        self,
        source: TableName,
        key: str | None,
        staging: TableName,
        keys: np.ndarray,
        new_rows: np.ndarray,
        replaced: dict[str, np.ndarray],
        output_columns: Sequence[str],
        rounded: Sequence[str] = (),
        chunk_size: int = 50_000,
    ) -> None:
        """Build the staging table inside the source's database.

        The small per-row result (source key, new surrogate key, replaced QI values) is written to a
        helper table; the staging table is filled by one ``INSERT ... SELECT ... JOIN`` ordered by
        the new key, so pass-through columns never leave the database and the physical row order
        is shuffled.

        Args:
            source: the source table.
            key: ``source.key`` (or ``None`` for the primary key / rowid).
            staging: the staging table to create.
            keys: source key of every row, shape ``(n,)``.
            new_rows: new surrogate key of every row, a permutation of ``1..n``.
            replaced: column → new values ``(n,)`` (the aggregated quasi-identifiers).
            output_columns: source columns of the output, in order (identifiers already removed).
            rounded: replaced columns written as integers.
            chunk_size: rows per bulk insert.
        """
        table = self.table(source)
        row_key = self.row_key(table, key)
        helper = staging.with_suffix(MAP_SUFFIX)
        self.drop_if_exists(helper)
        metadata = sa.MetaData()
        key_type = row_key.type if not isinstance(row_key.type, sa.types.NullType) \
            else sa.BigInteger()
        map_columns = [sa.Column("src_key", key_type, primary_key=True),
                       sa.Column("new_row", sa.BigInteger, nullable=False)]
        map_columns += [
            sa.Column(f"v{i}", sa.BigInteger if c in rounded else sa.Float(precision=53))
            for i, c in enumerate(replaced)
        ]
        map_table = sa.Table(helper.name, metadata, *map_columns, schema=helper.schema)
        staging_table = self._staging_table(staging, table, output_columns, replaced, rounded)
        try:
            with self._errors(f"writing {staging}"), self.engine.begin() as connection:
                map_table.create(connection)
                staging_table.create(connection)
                frame = {"src_key": keys, "new_row": new_rows}
                for i, column in enumerate(replaced):
                    values = replaced[column]
                    frame[f"v{i}"] = np.rint(values).astype(np.int64) if column in rounded \
                        else values
                self._bulk_insert(connection, map_table, pd.DataFrame(frame), chunk_size)
                replaced_index = {c: i for i, c in enumerate(replaced)}
                selected = [map_table.c.new_row]
                for column in output_columns:
                    if column in replaced_index:
                        selected.append(map_table.c[f"v{replaced_index[column]}"])
                    else:
                        selected.append(table.c[column])
                query = (
                    sa.select(*selected)
                    .select_from(table.join(map_table, row_key == map_table.c.src_key))
                    .order_by(map_table.c.new_row)
                )
                connection.execute(
                    staging_table.insert().from_select([ROW_COLUMN, *output_columns], query)
                )
                map_table.drop(connection)
        except BaseException:
            self.drop_if_exists(staging)
            self.drop_if_exists(helper)
            raise

    def write_streamed(
        self,
        staging: TableName,
        source_table: sa.Table,
        chunks: Iterator[pd.DataFrame],
        output_columns: Sequence[str],
        replaced: Sequence[str],
        rounded: Sequence[str] = (),
        chunk_size: int = 50_000,
    ) -> None:
        """Create the staging table and fill it from already transformed chunks (used when the
        target lives in another database than the source). Each chunk has ``tclose_row`` and the
        output columns."""
        staging_table = self._staging_table(staging, source_table, output_columns,
                                            {c: None for c in replaced}, rounded)
        try:
            with self._errors(f"writing {staging}"), self.engine.begin() as connection:
                staging_table.create(connection)
                for chunk in chunks:
                    self._bulk_insert(connection, staging_table, chunk, chunk_size)
        except BaseException:
            self.drop_if_exists(staging)
            raise

    def _staging_table(self, staging: TableName, source: sa.Table, output_columns: Sequence[str],
                       replaced: dict[str, Any], rounded: Sequence[str]) -> sa.Table:
        columns = [sa.Column(ROW_COLUMN, sa.BigInteger, primary_key=True, autoincrement=False)]
        for name in output_columns:
            if name == ROW_COLUMN:
                raise ConfigError(f"The source has a column named {ROW_COLUMN!r}, which tclose "
                                  f"uses for the new row key. Rename or drop it.")
            if name in replaced:
                column_type = source.c[name].type if name in rounded else sa.Float(precision=53)
                if name in rounded and not isinstance(column_type, sa.Integer):
                    column_type = sa.BigInteger()
            else:
                column_type = source.c[name].type
            columns.append(sa.Column(name, column_type, nullable=True))
        return sa.Table(staging.name, sa.MetaData(), *columns, schema=staging.schema)

    def _bulk_insert(self, connection: Connection, table: sa.Table, frame: pd.DataFrame,
                     chunk_size: int) -> None:
        columns = list(frame.columns)
        statement = table.insert()
        for start in range(0, len(frame), chunk_size):
            part = frame.iloc[start:start + chunk_size]
            rows = [dict(zip(columns, values)) for values in
                    part.astype(object).where(part.notna(), None).itertuples(index=False)]
            if rows:
                connection.execute(statement, rows)

    # --- publishing -------------------------------------------------------------------------

    def publish(self, staging: TableName, target: TableName, replace: bool) -> None:
        """Rename ``staging`` to ``target`` atomically, replacing ``target`` if ``replace``.

        SQLite and PostgreSQL run the DDL in one transaction; MySQL renames both names in one
        ``RENAME TABLE`` statement. Raises :class:`DataError` if the target exists and not
        ``replace``.
        """
        preparer = self.engine.dialect.identifier_preparer

        def quoted(name: TableName) -> str:
            if name.schema:
                return f"{preparer.quote_schema(name.schema)}.{preparer.quote(name.name)}"
            return preparer.quote(name.name)

        with self._errors(f"publishing {target}"), self.engine.begin() as connection:
            exists = sa.inspect(connection).has_table(target.name, schema=target.schema)
            if exists and not replace:
                raise DataError(f"The target table {target} already exists (if_exists: fail).")
            if self.dialect in ("mysql", "mariadb"):
                if exists:
                    old = target.with_suffix("__tclose_old")
                    connection.exec_driver_sql(
                        f"RENAME TABLE {quoted(target)} TO {quoted(old)}, "
                        f"{quoted(staging)} TO {quoted(target)}"
                    )
                    connection.exec_driver_sql(f"DROP TABLE {quoted(old)}")
                else:
                    connection.exec_driver_sql(f"RENAME TABLE {quoted(staging)} TO {quoted(target)}")
                return
            if exists:
                connection.exec_driver_sql(f"DROP TABLE {quoted(target)}")
            connection.exec_driver_sql(
                f"ALTER TABLE {quoted(staging)} RENAME TO {preparer.quote(target.name)}"
            )


class SQLAlchemyConnector:
    """Connector for the databases SQLAlchemy 2 reaches with the installed drivers."""

    name = "sqlalchemy"
    dialects = ("sqlite", "postgresql", "mysql", "mariadb")

    def connect(self, url: str, password_file: str | None = None) -> SQLDatabase:
        return SQLDatabase(url, password_file)


@hookimpl
def register_connectors(register):
    register(SQLAlchemyConnector())
