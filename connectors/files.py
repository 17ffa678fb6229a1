"""Connector plugin ``files``: Parquet and CSV files, read and written through DuckDB.

URLs name the file as SQLite URLs do: ``parquet:///relative/file.parquet``,
``parquet:////absolute/file.parquet``, ``csv:///relative/file.csv``. A file holds one table,
named after the file without its suffix (``patients.parquet`` holds table ``patients``): that is
the ``source.table`` or ``target.table`` to write. A CSV file is a source only.

How it works: every connection is a fresh in-memory DuckDB database in which the file, if it
exists, is a view (``read_parquet``, or ``read_csv`` with its types inferred from the whole
file). A source is therefore read by DuckDB in chunks, in key order, without loading the file
into Python (DuckDB sorts out of core when the file does not fit in memory). A Parquet source
has no primary key: name ``source.key``. The source file is only ever read, by DuckDB's readers.

DuckDB's readers take a file name as a glob pattern (``data[2024].parquet`` reads
``data0.parquet`` and ``data2.parquet``; so do ``*``, ``?`` and ``**``). tclose hands DuckDB no
file name of the user's: every file it reads (the source, an existing target, the written
temporary file) is read through a symbolic link in a private folder of its own, which DuckDB's
``glob`` gives back as itself (:meth:`FileDatabase.literal`). A file name is thus always that one
file, whatever characters it holds. Files are written (``COPY ... TO``) and renamed by their own
names, which DuckDB and the operating system take literally.

A target's staging table lives in the writing session's in-memory database (DuckDB spills it to
its temporary directory when memory runs short), where it is verified like any staging table.
Publishing then writes it with ``COPY ... TO`` into a hidden temporary file next to the target
(``.<name>.tclose-<run>.tmp``, rows in ``tclose_row`` order, the content order), checks that the
file holds every row, with the types and values verified (:meth:`FileSession._check_file`),
flushes it to disk and renames it over the target — atomically: a reader
sees the old file or the new one, never a half-written one, and a killed run leaves at most the
hidden temporary file (never the target). With ``if_exists: fail``, the new file is linked
under the target's name only if no such file exists (so two runs cannot both create it). Files
have no run lock: of two runs replacing one file, the last to publish wins, each file whole.
The publishing run's id is kept in the Parquet file's key-value metadata (``tclose_run``).

A file's folder is resolved once, when the URL is read (``realpath``: a link among the folders
is followed then, and every later step works in that real folder); a target that is itself a
symbolic link (to a file, to a missing file, to a folder; relative or absolute) is refused
before any work, and again at the publish: tclose never writes through a link nor replaces one.

The staging table of a Parquet target has the types a Parquet file holds exactly
(:func:`parquet_type`), so that what is verified, and the content digest the report records, are
those of the file an auditor will read.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from tclose.base.atomic import name_max
from tclose.connector import TablesRead
from tclose.connectors.duckdb import DRIVER, DuckDBDatabase, DuckDBSession, duckdb_engine
from tclose.connectors.releases import NO_RECORD
from tclose.connectors.sql import (
    RUN_ID_LENGTH,
    NativeType,
    TableName,
    _connection,
    driver_connection,
    type_text,
)
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl

#: The formats a file URL may name, and the DuckDB function that reads each.
READERS = {"parquet": "read_parquet({path})", "csv": "read_csv({path}, sample_size = -1)"}


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


#: A DuckDB fixed-size array of a plain element type (``INTEGER[3]``, ``DOUBLE[2][4]``).
_FIXED_ARRAY = re.compile(r"([A-Z][A-Z0-9_ ]*(?:\(\d+,\s*\d+\))?)((?:\[\d+\])+)")
#: DuckDB types that a Parquet file gives back as another type with the same values, as DuckDB
#: reads them and as Python sees them (so the content digest is the same): the type read back.
_READ_BACK_AS = {"BIT": "VARCHAR", "BIGNUM": "VARCHAR", "VARINT": "VARCHAR"}
_READ_BACK_AS.update({"TIMESTAMP_S": "TIMESTAMP", "TIMESTAMP_MS": "TIMESTAMP"})


def parquet_type(
    column_type: sa.types.TypeEngine, column: str, dialect: sa.engine.Dialect
) -> sa.types.TypeEngine:
    """``column_type`` (a staging column's DuckDB type) as a Parquet file holds it exactly.

    - ``HUGEINT`` and ``UHUGEINT`` become ``DECIMAL(38,0)``: Parquet has no 128-bit integer
      (DuckDB would write a ``DOUBLE``, merging distinct values); a value of 39 digits is refused
      when written, naming the column.
    - A fixed-size array (``INTEGER[3]``) becomes a list (``INTEGER[]``), which Parquet gives
      back: the same values, and the same content digest.

    Raises:
        DataError: for ``TIME WITH TIME ZONE`` (Parquet keeps such a time in UTC only: the
            offsets would be lost) and ``UNION`` (Parquet gives it back as a ``STRUCT`` with a
            tag), naming the column, before any work.
    """
    text = column_type.compile(dialect=dialect).upper()
    if text in ("HUGEINT", "UHUGEINT"):
        return sa.Numeric(38, 0)
    fixed = _FIXED_ARRAY.fullmatch(text)
    if fixed:
        return NativeType(fixed.group(1) + "[]" * fixed.group(2).count("["))
    if text in ("TIME WITH TIME ZONE", "TIMETZ") or text.startswith("UNION("):
        why = (
            "which a Parquet file holds in UTC only: the time zone offsets would be lost"
            if not text.startswith("UNION(")
            else "which a Parquet file holds as a STRUCT with a tag, not as a union"
        )
        raise DataError(
            f"Column {column!r} has type {type_text(column_type)}, {why}. Publish into a "
            f"database table, cast the column in a view of the source, or drop it (role: "
            f"identifier). Nothing was done."
        )
    return column_type


def _read_back_as(kind: str) -> str:
    """The DuckDB type a Parquet file gives back for a column of type ``kind``, when it holds
    the same values (:data:`_READ_BACK_AS`; an ``ENUM`` is read back as ``VARCHAR``)."""
    return "VARCHAR" if kind.startswith("ENUM(") else _READ_BACK_AS.get(kind, kind)


class FileSession(DuckDBSession):
    """A session on a file: DuckDB's transaction holds the staging table; publishing writes the
    file (see the module's docstring)."""

    database: FileDatabase
    #: The audit hooks run after the file is in place, not inside a transaction.
    publishes_in_transaction: ClassVar[bool] = False

    def relation_kind(self, table: sa.Table) -> str | None:
        """``None``: a file is read through a view of it, which is what the run published."""
        return None

    def publish(
        self,
        staging: TableName,
        target: TableName,
        replace: bool,
        before_commit: Callable[[Connection], None] | None = None,
    ) -> None:
        """Write ``staging`` to a temporary file next to the target, check it, and rename it
        over the target (or link it, when the target must not exist); then end the session."""
        path = self.database.path
        if path.exists() and not replace:
            raise DataError(
                f"The target file {path} already exists and target.if_exists is 'fail'. "
                f"Nothing was published."
            )
        if path.is_symlink():
            raise DataError(f"{_link_refused(path)} Nothing was published.")
        problem = self.database.release_problem(target) if path.exists() else None
        if problem is not None:
            raise DataError(
                f"The target file {path} is not a release tclose published ({problem}); tclose "
                f"replaces only its own releases. Nothing was published."
            )
        run_id = (self.staging.info.get("run_id") if self.staging is not None else None) or ""
        temporary = _temporary(path, run_id)
        try:
            with self.database.errors(f"writing {temporary}"):
                self._copy(staging, temporary, run_id)
            if before_commit is not None:
                before_commit(self.connection)
            _flush(temporary)
            if replace:
                os.replace(temporary, path)
            else:
                try:
                    os.link(temporary, path)
                except FileExistsError:
                    raise DataError(
                        f"The target file {path} appeared while tclose was writing it and "
                        f"target.if_exists is 'fail'. Nothing was published."
                    ) from None
            _flush(path.parent)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
        self.published = True
        if self.transaction is not None:
            self.transaction.rollback()  # the staging table has served its purpose

    def _described(self, relation: str) -> dict[str, str]:
        """Column name → DuckDB type of ``relation`` (a table, or ``read_parquet(...)``)."""
        rows = self.connection.exec_driver_sql(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        return {name: kind for name, kind, *_ in rows}

    def _check_intervals(self, table: str) -> None:
        """:class:`DataError` naming an ``INTERVAL`` column of ``table`` that holds a part
        finer than a millisecond, and counting the rows: Parquet's interval counts
        milliseconds (DuckDB would drop the rest)."""
        for name, kind in self._described(table).items():
            column = self.database.quote(name)
            if kind == "INTERVAL":
                finer = self.connection.exec_driver_sql(
                    f"SELECT count(*) FROM {table} WHERE "
                    f"datepart('microseconds', {column}) % 1000 <> 0"
                ).scalar()
                if finer:
                    raise DataError(
                        f"Column {name!r} holds intervals with a part finer than a millisecond "
                        f"in {finer} row(s), which a Parquet interval (milliseconds) cannot "
                        f"hold. Publish into a database table, or drop the column (role: "
                        f"identifier)."
                    )

    def _check_file(self, table: str, written: str) -> None:
        """:class:`DataError` (nothing is published) unless the Parquet file just written
        (``written``, a ``read_parquet(...)`` relation) holds exactly the values of the staging
        table ``table``, the rows that were verified, with types that give them back alike.

        Each column must read back with its staging type (or one of :func:`_read_back_as`), so
        an auditor's content digest of the file is the report's. Then the values: the sum of
        DuckDB's 64-bit ``hash`` of every value, per column and per row (all columns), must be
        the same on both sides (two scans, ~0.3 s for 1M rows of 18 columns; the row count is
        already checked equal); when a sum differs, the rows that differ are counted
        (``EXCEPT ALL``, ~2 s) for the message. :func:`parquet_type` chose staging types
        Parquet holds exactly: this catches what it does not know (a ``HUGEINT`` inside a
        ``STRUCT``, a list of times with time zones)."""
        staged, found = self._described(table), self._described(written)
        changed = [
            f"{name!r} ({kind} written as {found.get(name, 'nothing')})"
            for name, kind in staged.items()
            if _read_back_as(kind) != found.get(name)
        ]
        if changed or len(found) != len(staged):
            raise DataError(
                f"Parquet would change the type of column(s) {', '.join(changed) or '(extra)'}. "
                f"Publish into a database table, cast the column in a view of the source, or "
                f"drop it (role: identifier). Nothing was published."
            )
        columns = list(staged)
        written_values = [self.database.quote(c) for c in columns]
        staged_values = [
            f"CAST({q} AS {found[c]})" if staged[c] != found[c] else q
            for q, c in zip(written_values, columns, strict=True)
        ]

        def hash_sums(values: list[str], relation: str) -> tuple:
            sums = [f"sum(hash({v})::HUGEINT)" for v in [*values, ", ".join(values)]]
            query = f"SELECT {', '.join(sums)} FROM {relation}"
            return tuple(self.connection.exec_driver_sql(query).one())

        before, after = hash_sums(staged_values, table), hash_sums(written_values, written)
        if before == after:
            return
        differ = [repr(c) for c, b, a in zip(columns, before, after, strict=False) if b != a]
        rows = self.connection.exec_driver_sql(
            f"SELECT count(*) FROM (SELECT {', '.join(staged_values)} FROM {table} "
            f"EXCEPT ALL SELECT {', '.join(written_values)} FROM {written})"
        ).scalar()
        raise DataError(
            f"Parquet would change the values of column(s) {', '.join(differ) or '(rows mixed)'}"
            f" in {rows} row(s). Publish into a database table, cast the column in a view of "
            f"the source, or drop it (role: identifier). Nothing was published."
        )

    def _copy(self, staging: TableName, temporary: Path, run_id: str) -> None:
        """``COPY`` the staging table, in ``tclose_row`` order, to ``temporary`` and check that
        the file holds every row written and verified, unchanged (:meth:`_check_file`)."""
        table = self.database.qualified(staging)
        self._check_intervals(table)
        values = [
            self.database.quote(c)
            if _read_back_as(k) == k
            else f"CAST({self.database.quote(c)} AS {_read_back_as(k)})"
            for c, k in self._described(table).items()
        ]
        content = _content_mark(self.connection, table, values)
        metadata = (
            f", KV_METADATA {{tclose_run: {sql_string(run_id)}, "
            f"tclose_content: {sql_string(content)}}}"
            if run_id
            else ""
        )
        self.connection.exec_driver_sql(
            f"COPY (SELECT * FROM {table} ORDER BY 1) TO {sql_string(str(temporary))} "
            f"(FORMAT parquet{metadata})"
        )
        expected = self.rows_written
        if expected is None:
            expected = self.connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar()
        literal = self.database.literal(temporary, driver_connection(self.connection))
        written = f"read_parquet({sql_string(literal)})"
        count = self.connection.exec_driver_sql(f"SELECT count(*) FROM {written}").scalar()
        if count != expected:
            raise DataError(
                f"The file {temporary} holds {count} rows instead of {expected}. "
                f"Nothing was published."
            )
        self._check_file(table, written)


def _content_mark(connection: Connection, relation: str, values: Sequence[str]) -> str:
    """The content of a Parquet release as its metadata ``tclose_content`` records it: the row
    count and the sum of DuckDB's ``hash`` of each row's ``values`` (SQL expressions, in the
    file's column order), as :meth:`FileSession._check_file` compares a file with its staging
    table."""
    count, total = connection.exec_driver_sql(
        f"SELECT count(*), sum(hash({', '.join(values)})::HUGEINT) FROM {relation}"
    ).one()
    return f"{count} rows, hash sum {total}"


#: Bytes the publishing run's temporary file adds to the target's name (:func:`_temporary`).
_TEMPORARY_EXTRA = len(".") + len(".tclose-") + RUN_ID_LENGTH + len(".tmp")


def _link_refused(path: Path) -> str:
    """Why the target ``path``, a symbolic link, is not written: a sentence."""
    return (
        f"The target {path} is a symbolic link (to {os.readlink(path)}): tclose writes a "
        f"target file itself, never through a link, which would put the release where the "
        f"link points (or replace the link with it) and judge the file it points to."
    )


def _temporary(path: Path, run_id: str) -> Path:
    """The hidden file next to ``path`` that a run writes, then renames over ``path``."""
    return path.with_name(
        f".{path.name}.tclose-{(run_id or 'x' * RUN_ID_LENGTH)[:RUN_ID_LENGTH]}.tmp"
    )


def _holds_parquet(path: Path) -> bool:
    """Whether ``path`` is empty or starts and ends with Parquet's magic bytes ``PAR1``."""
    size = path.stat().st_size
    if size == 0:
        return True
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(max(size - 4, 0))
        return head == b"PAR1" and size >= 8 and handle.read(4) == b"PAR1"


def _flush(path: Path) -> None:
    """Make ``path`` (a file, or a folder's entries) durable on disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class FileDatabase(DuckDBDatabase):
    """A Parquet or CSV file, seen as a one-table DuckDB database (see the module's docstring).

    Attributes:
        path: the file (it need not exist for a target).
        format: ``"parquet"`` or ``"csv"``.
        dialect: ``"duckdb"``, the engine's: a column keeps its exact DuckDB type between a
            file and a DuckDB database.
    """

    session_class = FileSession
    path: Path
    #: One file holding one table; the content digest records no column types: the file's
    #: format gives the staging table's types back as others (Parquet: ``HUGEINT`` as
    #: ``DECIMAL(38,0)``, ``ENUM`` as ``VARCHAR``), with the same values
    #: (:func:`tclose.core.published.column_types`).
    declared = dataclasses.replace(
        DuckDBDatabase.declared, table_per_file=True, records_types=False
    )
    #: Why the file could not be read as a table on the last connection (``None``: it could).
    unreadable: str | None = None

    def __init__(self, url: str, password_file: str | None = None) -> None:
        parsed = sa.make_url(url)
        self.format = parsed.get_backend_name()
        if self.format not in READERS:
            raise ConfigError(f"Unknown file format {self.format!r}; known: {sorted(READERS)}.")
        if not parsed.database:
            raise ConfigError(
                f"The URL {url!r} names no file: write {self.format}:///relative/path or "
                f"{self.format}:////absolute/path."
            )
        given = Path(parsed.database).absolute()
        self.path = Path(os.path.realpath(given.parent)) / given.name
        self._links: dict[Path, str] = {}
        self._link_folder: Path | None = None
        self._file_url = parsed
        super().__init__(url, password_file)
        self.dialect = "duckdb"

    def literal(self, path: Path, connection: Any) -> str:
        """A path that DuckDB reads as the file ``path`` and nothing else, checked on the DuckDB
        ``connection`` (a driver connection): a symbolic link to ``path`` in a private folder
        (made once per database, removed with it), named by a number and ``path``'s suffixes
        (DuckDB infers a compression from them), which DuckDB's own ``glob`` must give back as
        itself. The link follows ``path``: a file renamed over it is the one read.

        Raises:
            DataError: DuckDB's ``glob`` gives back another list of files (the temporary
                folder's own path holds characters DuckDB reads as a pattern), or no link
                can be made there.
        """
        link = self._links.get(path)
        if link is None:
            if self._link_folder is None:
                self._link_folder = Path(tempfile.mkdtemp(prefix="tclose-files-"))
                weakref.finalize(self, shutil.rmtree, self._link_folder, True)
            suffixes = re.sub(r"[^A-Za-z0-9.]", "", "".join(path.suffixes))
            link = str(self._link_folder / f"{len(self._links)}{suffixes}")
            try:
                os.symlink(path, link)
            except OSError as error:
                raise DataError(
                    f"Cannot make the link {link} by which DuckDB reads {path} as one file "
                    f"(DuckDB reads a file name as a pattern): {error.strerror}. Set TMPDIR "
                    f"to a folder where links can be made."
                ) from None
            self._links[path] = link
        found = [
            row[0] for row in connection.execute("SELECT file FROM glob(?)", [link]).fetchall()
        ]
        if found != [link]:
            raise DataError(
                f"DuckDB reads the link {link} to {path} as a pattern (it names "
                f"{len(found)} file(s)): set TMPDIR to a folder whose path holds none of the "
                f"characters *, ?, [, ], {{ and }}."
            )
        return link

    def describe(self, error: BaseException | None, action: str) -> DataError:
        """As :meth:`DuckDBDatabase.describe`, each link of :meth:`literal` named by its file."""
        described = super().describe(error, action)
        text = str(described)
        for path, link in self._links.items():
            text = text.replace(link, str(path))
        if text == str(described):
            return described
        named = DataError(text)
        named.driver_error = getattr(described, "driver_error", error)
        return named

    @property
    def table_name(self) -> str:
        """The name of the file's one table: the file's name without its suffix."""
        return self.path.name.split(".", 1)[0]

    def create_engine(self) -> Engine:
        if duckdb_engine is None:
            return super().create_engine()  # says which extra to install
        engine = sa.create_engine(f"{DRIVER}:///:memory:", poolclass=NullPool)
        sa.event.listen(engine, "connect", self._create_view)
        return engine

    def _create_view(self, dbapi_connection: Any, _record: Any) -> None:
        """On every new connection: the file, if it exists and can be read, as view
        :attr:`table_name` (else :attr:`unreadable` says why: a target may be aggregated)."""
        self.unreadable = None
        if self.path.is_file():
            literal = self.literal(self.path, dbapi_connection)
            reader = READERS[self.format].format(path=sql_string(literal))
            name = self.quote(self.table_name)
            try:
                dbapi_connection.execute(f"CREATE VIEW {name} AS SELECT * FROM {reader}")
            except self.engine.dialect.loaded_dbapi.Error as error:
                self.unreadable = " ".join(str(error).replace(literal, str(self.path)).split())
                return
            if self.format == "csv":
                columns = dbapi_connection.execute(f"DESCRIBE {name}").fetchall()
                self.unreadable = _unsplit(self.path, [c[0] for c in columns])
                if self.unreadable:
                    dbapi_connection.execute(f"DROP VIEW {name}")

    def staging_table(
        self,
        name: TableName,
        source: sa.Table,
        output_columns: Sequence[str],
        aggregated: Collection[str],
        rounded: Collection[str] = (),
        source_dialect: str | None = None,
    ) -> sa.Table:
        """As :meth:`DuckDBDatabase.staging_table`, each column with a type a Parquet file
        holds exactly (:func:`parquet_type`): the staging table holds, the verification reads
        and the report's content digest hashes the values the file will give back."""
        table = super().staging_table(
            name, source, output_columns, aggregated, rounded, source_dialect
        )
        for column in list(table.columns)[1:]:
            column.type = parquet_type(column.type, column.name, self.engine.dialect)
        return table

    def target_beside(self, table: str) -> tuple[str, str]:
        """The URL and table of the Parquet file beside this file for a table named ``table``
        (a dot or a slash in it becomes ``_``: a file's table is its name up to its first
        dot), spelled as this file's URL is (a relative path stays relative)."""
        name = re.sub(r"[./\\\0]", "_", table) or "_"
        database = str(Path(str(self._file_url.database)).with_name(f"{name}.parquet"))
        url = self._file_url.set(drivername="parquet", database=database)
        return url.render_as_string(hide_password=False), name

    def check_table_name(self, name: TableName, path: str = "target.table") -> None:
        """:class:`ConfigError` unless ``name`` is the file's table and the file can be written
        there: a CSV file is no target, nor a folder, nor a file in a folder that does not
        exist, nor an existing file that is not a Parquet file (``if_exists: replace`` replaces
        a table, not a user's other file); a file keeps no audit table (``report.table``)."""
        if path == "report.table":
            raise ConfigError(
                f"A {self.format} file holds one table, the release: an audit "
                f"table there would be a table of the in-memory database DuckDB reads the file "
                f"with, gone after the run. Remove report.table (the JSON report keeps the "
                f"record), or publish into a database.",
                path=tuple(path.split(".")),
            )
        if self.format == "csv":
            url, table = self.target_beside(name.name)
            raise ConfigError(
                f"A CSV file can be a source only. Publish "
                f"into a Parquet file: target.url: {url} and target.table: {table}; or into a "
                f"database table.",
                path=(path.split(".")[0], "url"),
            )
        self._check_name(name, path)
        if self.path.is_symlink():
            raise ConfigError(
                f"{_link_refused(self.path)} Name the file "
                f"itself (its real path), or another target file.",
                path=(path.split(".")[0], "url"),
            )
        if self.path.is_dir():
            raise ConfigError(
                f"The target {self.path} is a folder, not a file: name the "
                f"Parquet file to write (e.g. {self.path / (self.table_name + '.parquet')}).",
                path=tuple(path.split(".")),
            )
        if not self.path.parent.is_dir():
            raise ConfigError(
                f"The folder {self.path.parent} of the target file does not "
                f"exist: create it first (tclose creates no folders).",
                path=tuple(path.split(".")),
            )
        longest = name_max(self.path.parent)
        if longest is not None and len(os.fsencode(_temporary(self.path, "").name)) > longest:
            raise ConfigError(
                f"The target file's name is too long for its "
                f"folder once its temporary file's {_TEMPORARY_EXTRA} bytes are added (at most "
                f"{longest} bytes): choose a shorter name.",
                path=(path.split(".")[0], "url"),
            )
        if self.path.is_file() and not _holds_parquet(self.path):
            raise ConfigError(
                f"The target {self.path} exists and is not a Parquet file; "
                f"tclose replaces a table, never another file. Choose another target file, "
                f"or remove it.",
                path=tuple(path.split(".")),
            )

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """The file's own table, as it is; :class:`ConfigError` for any other name (a file holds
        one table, see :meth:`check_table_name`)."""
        self._check_name(name, path)
        return name

    def _check_name(self, name: TableName, path: str) -> None:
        if not name.schema and name.name == self.table_name:
            return
        section = path.split(".")[0]
        advice = f"write {section}.table: {self.table_name} (not {str(name)!r})."
        if section == "target":
            url, table = self.target_beside(name.name)
            advice = (
                f"{self.table_name!r}. To publish {str(name)!r}, name its own file: "
                f"target.url: {url} and target.table: {table}."
            )
        raise ConfigError(
            f"The file {self.path} holds one table, named after the file: {advice}",
            path=tuple(path.split(".")),
        )

    def table(self, name: TableName, connection: Connection | None = None) -> sa.Table:
        if name.name == self.table_name and not self.path.is_file():
            raise DataError(f"The {self.format} file {self.path} does not exist.")
        if "__tclose_" not in name.name:  # the run's own tables live in the session
            self._check_name(name, "source.table")
        return super().table(name, connection)

    def _catalog_name(self, bound: Connection, name: TableName) -> tuple[str, str] | None:
        found = super()._catalog_name(bound, name)
        if found is None and name.name == self.table_name and self.unreadable:
            raise DataError(f"Cannot read the {self.format} file {self.path}: {self.unreadable}")
        return found

    def exists(self, name: TableName, connection: Connection | None = None) -> bool:
        if name.name == self.table_name and not name.schema:
            return self.path.is_file()
        return super().exists(name, connection)

    def files(self) -> list[Path]:
        """The one file."""
        return [self.path]

    def table_identity(self, name: TableName) -> tuple | None:
        """The file (device and inode), whatever path names it."""
        if name.name != self.table_name or not self.path.is_file():
            return None
        stat = self.path.stat()
        return ("file", stat.st_dev, stat.st_ino)

    def tables_read(self, name: TableName) -> TablesRead:
        """The file's identity: a file reads nothing else (DuckDB's views do)."""
        identity = self.table_identity(name)
        return TablesRead([] if identity is None else [identity])

    def release_problem(self, name: TableName, connection: Connection | None = None) -> str | None:
        """Why the existing file is not a release tclose published, unchanged since; ``None``
        when it is one. A file has no registry: its mark is its own metadata, ``tclose_run``
        (the run) and ``tclose_content`` (its rows, :func:`_content_mark`). The same release is
        a Parquet file of those rows under that metadata: a user's file has no such metadata,
        and a release whose rows changed since (rewritten, edited, appended to) is another
        file."""
        if self.format != "parquet" or not self.path.is_file():
            return "it is not a Parquet file"
        if self.path.stat().st_size == 0:
            return None  # an empty file holds nothing to lose
        with (
            self.errors(f"reading the metadata of {self.path}"),
            _connection(self.engine, connection) as bound,
        ):
            literal = sql_string(self.literal(self.path, driver_connection(bound)))
            relation = f"read_parquet({literal})"
            metadata: dict[str, str] = dict(
                bound.exec_driver_sql(
                    f"SELECT decode(key), decode(value) FROM parquet_kv_metadata({literal})"
                ).all()
            )
            run, recorded = metadata.get("tclose_run"), metadata.get("tclose_content")
            if not run or not recorded:
                return f"{NO_RECORD} (its metadata names no tclose run and rows it wrote)"
            described = bound.exec_driver_sql(f"DESCRIBE SELECT * FROM {relation}").all()
            now = _content_mark(bound, relation, [self.quote(row[0]) for row in described])
        if now != recorded:
            return f"its rows are not those run {run} wrote: it changed since"
        return None

    def table_comment(self, name: TableName) -> str | None:
        """``tclose run <id>`` from a Parquet file's key-value metadata ``tclose_run``."""
        if self.format != "parquet" or not self.path.is_file():
            return None
        query = sa.text(
            "SELECT decode(value) FROM parquet_kv_metadata(:path) WHERE decode(key) = 'tclose_run'"
        )
        with (
            self.errors(f"reading the metadata of {self.path}"),
            _connection(self.engine, None) as bound,
        ):
            literal = self.literal(self.path, driver_connection(bound))
            row = bound.execute(query, {"path": literal}).first()
        return f"tclose run {row[0]}" if row and row[0] else None


def _unsplit(path: Path, columns: list[str]) -> str | None:
    """Why DuckDB read each line of the CSV file ``path`` as one column ``columns[0]`` (its
    sniffer does so when the lines do not all have the header's number of fields), or ``None``
    when the file has several columns or its one column's name holds no delimiter."""
    if len(columns) != 1:
        return None
    header = columns[0]
    delimiter = max(",;\t|", key=header.count)
    if delimiter not in header:
        return None
    fields = len(next(csv.reader([header], delimiter=delimiter)))
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        for line, row in enumerate(csv.reader(handle, delimiter=delimiter), start=1):
            if row and len(row) != fields:
                return (
                    f"line {line} has {len(row)} fields, the header {fields} (delimiter "
                    f"{delimiter!r}); every line needs the header's number of fields."
                )
    return f"its lines cannot be split into columns at {delimiter!r}."


class FileConnector:
    """Connector for Parquet and CSV files (``parquet:///file.parquet``, ``csv:///file.csv``)."""

    name = "files"
    dialects = tuple(READERS)

    def connect(self, url: str, password_file: str | None = None) -> FileDatabase:
        return FileDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(FileConnector())
