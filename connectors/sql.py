"""The generic SQLAlchemy connector: any database with a SQLAlchemy dialect, on Core only.

:class:`SQLDatabase` and :class:`Session` implement the connector contract
(:mod:`tclose.connector`) with SQLAlchemy Core alone: transactions through ``conn.begin()``,
writes through ``table.insert()``, DDL through ``CreateTable``/``DropTable`` and
:class:`RenameTable` (compiled with the dialect's identifier preparer), types through the
dialect's type compiler; no SQL text. The connector plugin ``sqlalchemy``
(:class:`SQLAlchemyConnector`, dialects ``("*",)``) serves every dialect no other connector
claims. The built-in connectors — :mod:`~tclose.connectors.sqlite`,
:mod:`~tclose.connectors.postgresql` and :mod:`~tclose.connectors.mysql` — subclass it where they
are faster or stricter (``BEGIN IMMEDIATE``, ``REPEATABLE READ``, ``COPY``, server-side cursors,
run locks), through :class:`DriverSession`. Connectors know SQL and nothing of privacy.

The runner uses a connector in this order (see ``docs/databases.md``)::

    database = connector.connect(url, password_file)
    source = database.table(TableName.parse("schema.table"))          # reflect, or DataError
    staging = database.staging_table(name, source, columns, aggregated, rounded, source_dialect)
    with database.session(staging) as session:    # snapshot opened, own leftovers dropped, staging made
        frames = session.read(source_name, kernel_columns, key)        # pass 1, streamed
        session.fill_joined(...)        # or, for a target in another database, fill_streamed(...)
        frames = session.read(staging_name, ...)                       # verification read-back
        session.publish(staging_name, target_name, replace=False)      # atomic swap
    # Leaving the block without publish() rolls back or drops the staging and helper tables.

Every identifier is quoted, so odd column names (spaces, capitals, reserved words, quotes,
``%``) are safe; table names may be qualified as ``schema.table``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import secrets
import string
import time
import traceback
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool

from tclose.base.atomic import read_text
from tclose.base.redaction import redact_url, remember_secret, url_secrets
from tclose.connector import NO_RELEASE_RECORD, Capabilities, TablesRead
from tclose.connectors.releases import (
    content_identity,
    marked_run,
    record_release,
    release_problem,
    releases_table,
)
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl
from tclose.naming import (  # noqa: F401 (re-exported: the names connectors share with the core)
    CENTROID_MARK,
    KEY_LABEL,
    MAP_MARK,
    OLD_MARK,
    ROW_COLUMN,
    ROWS_MARK,
    RUN_ID_LENGTH,
    STAGING_MARK,
    TableName,
    run_table_name,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("tclose")

#: ASCII upper-case letters to lower case (str.translate table of :meth:`SQLDatabase.column_key`).
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

#: Types whose order tells every two different values apart: sorting by the value alone is a
#: content order (``Session.content_order``; floats, numerics, intervals and collated text are
#: not among them: their order calls some different values equal).
ORDER_IS_IDENTITY = (
    sa.Integer,
    sa.Boolean,
    sa.Date,
    sa.DateTime,
    sa.Time,
    sa.Uuid,
    sa.LargeBinary,
)


def url_with_password(url: str, password_file: str | None) -> sa.URL:
    """The SQLAlchemy URL, with the password read from ``password_file`` if one is given.

    The file's content, stripped of surrounding whitespace, is the password. Messages never show
    the password: an unparsable URL is shown from its host part on.
    """
    try:
        parsed = make_url(url)
    except (sa.exc.ArgumentError, ValueError) as error:  # ValueError: e.g. a port that is no number
        # The driver's text is not shown: a raw password's '@' or ':' makes a piece of it the
        # port, which it quotes ("invalid literal for int() with base 10: 'w0rd'").
        detail = (
            ": its port is not a number. A password holding @, :, / or ? must be "
            "percent-encoded in a URL (or given as ${VAR} or password_file)"
            if isinstance(error, ValueError)
            else ""
        )
        raise ConfigError(f"Cannot parse the database URL {redact_url(url)!r}{detail}.") from None
    if password_file:
        try:
            password = read_text(password_file).strip()
        except OSError as error:
            # The value is not shown: a careless user writes the password itself there.
            raise ConfigError(
                f"Cannot read the password_file: {error.strerror} (its value is not shown, in "
                f"case it is a password written in place of the file's path)."
            ) from None
        except UnicodeDecodeError as error:  # bad input: a configuration error, not a bug
            raise ConfigError(
                f"The password_file is not UTF-8 text (byte {error.start + 1} is not UTF-8): "
                f"save it as UTF-8."
            ) from None
        parsed = parsed.set(password=password)
    for secret in url_secrets(parsed):
        remember_secret(secret)
    return parsed


def _raised_in(error: BaseException, module: Any) -> bool:
    """Whether ``error`` was raised by ``module`` (a DBAPI driver), or by its ``connect()``
    refusing the arguments SQLAlchemy made of the URL (then the last frame is SQLAlchemy's)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    if last.name == "connect" and last.filename.endswith(os.path.join("engine", "default.py")):
        return True
    folder = os.path.dirname(getattr(module, "__file__", None) or "")
    return bool(folder) and last.filename.startswith(folder)


class RenameTable(sa.schema.ExecutableDDLElement):
    """``ALTER TABLE <table> RENAME TO <new_name>`` as a Core DDL construct, quoted by the
    dialect's identifier preparer; a dialect that spells it otherwise adds its own
    ``@compiles(RenameTable, "<dialect>")``."""

    inherit_cache = False

    def __init__(self, table: TableName, new_name: str) -> None:
        self.table = table
        self.new_name = new_name


@compiles(RenameTable)
def _compile_rename(element: RenameTable, compiler: Any, **_kw: Any) -> str:
    preparer = compiler.preparer
    old = preparer.format_table(sa.table(element.table.name, schema=element.table.schema))
    return f"ALTER TABLE {old} RENAME TO {preparer.quote(element.new_name)}"


#: The translation of a source dialect's column types (:func:`register_source_types`).
SourceTypes = Callable[
    [sa.types.TypeEngine, sa.types.TypeEngine | None, str], tuple[sa.types.TypeEngine | None, str]
]
_SOURCE_TYPES: dict[str, SourceTypes] = {}


def register_source_types(dialects: Iterable[str], translate: SourceTypes) -> None:
    """Have :meth:`SQLDatabase.portable_type` translate the column types of a source of each
    of ``dialects`` with ``translate(column_type, generic, dialect)``: the type that holds every
    value of ``column_type`` exactly in a database of ``dialect`` (``generic``: SQLAlchemy's
    generic type, or ``None`` when it has none), else ``None`` and why, completing "has no
    portable equivalent in <dialect>" (empty: tclose knows no such type). A dialect's connector
    registers its own when its module is imported (MariaDB/MySQL's unsigned integers, ``SET``
    and ``BIT``; DuckDB's unsigned and 128-bit integers)."""
    for dialect in dialects:
        _SOURCE_TYPES[dialect] = translate


#: The longest a single wait on a server lasts (seconds): a longer wait (for a run lock, say)
#: is made of such slices, and between two of them the process acts on a pending signal, so a
#: SIGINT or SIGTERM stops a waiting run within a slice, whatever the driver does meanwhile.
WAIT_SLICE_SECONDS = 1


def wait_in_slices(attempt: Callable[[int], bool], seconds: float) -> bool:
    """Call ``attempt(slice_seconds)`` (one wait on the server of at most that many whole
    seconds; true when it got what it waited for) until it succeeds or ``seconds`` have passed;
    whether it succeeded. Each return to Python lets the interpreter run the handler of a
    signal received meanwhile (SIGINT, and SIGTERM under the CLI, raise
    ``KeyboardInterrupt``), so the wait is interruptible even when the driver's blocking call
    is not."""
    deadline = time.monotonic() + seconds
    while True:
        if attempt(WAIT_SLICE_SECONDS):
            return True
        if time.monotonic() >= deadline:
            return False


def blank_name_problem(name: str, dialect: str) -> str | None:
    """Why ``name`` is no name on any database (completes "The table name ... is "), or
    ``None``: empty or white space only (a name nobody can see in a message or a listing; most
    databases refuse it, SQLite keeps it), or holding a NUL character (which the servers and
    SQLite cannot store, and C strings end at)."""
    if not name:
        return "empty"
    if name.isspace():
        return "white space only: a name must have a visible character"
    if "\x00" in name:
        return f"holding a NUL character, which {dialect} cannot keep in a name"
    return None


def tables_read_through(
    database: Any,
    name: TableName,
    reads: Callable[[TableName, tuple], tuple[Iterable[TableName], Iterable[tuple], str | None]],
) -> TablesRead:
    """The walk behind the dialects' ``tables_read``: the identity of ``name`` and of every
    table that ``reads(table, identity)`` names (its first item, walked in turn), with the
    identities it gives as they are (its second item: files a view reads, say), each once;
    unknown when ``reads`` says of any table why the catalog cannot list what it reads (its
    third item)."""
    found: list[tuple] = []
    unknown: list[str] = []
    names = [name]
    while names:
        table = names.pop()
        identity = database.table_identity(table)
        if identity is None or identity in found:
            continue
        found.append(identity)
        more, others, why = reads(table, identity)
        names.extend(more)
        found.extend(other for other in others if other not in found)
        if why is not None and why not in unknown:
            unknown.append(why)
    return TablesRead(found, "; ".join(unknown) or None)


def shown(table: sa.Table) -> str:
    """``table`` as messages name it: as the configuration spelled it (its ``info["name"]``, the
    :class:`TableName` it was made from), else its schema-qualified name."""
    name = table.info.get("name")
    return str(name) if name is not None else table.fullname


def bare_table(name: TableName) -> sa.Table:
    """A Core table for ``name`` without columns, for ``DropTable`` and counts."""
    return sa.Table(name.name, sa.MetaData(), schema=name.schema)


def precise_time_type(generic: sa.types.TypeEngine, dialect: str) -> sa.types.TypeEngine:
    """``generic`` itself, or for a ``DateTime``/``Time`` the type of ``dialect`` that keeps
    microseconds where SQLAlchemy's generic one does not (MySQL/MariaDB ``DATETIME`` without
    ``fsp``, SQL Server ``DATETIME``, Oracle ``DATE``): the generic connector serves a
    database of any of them."""
    if not isinstance(generic, (sa.DateTime, sa.Time)):
        return generic
    zone = bool(getattr(generic, "timezone", False))
    if dialect in ("mysql", "mariadb"):
        from sqlalchemy.dialects import mysql

        if isinstance(generic, sa.DateTime):
            return mysql.DATETIME(timezone=zone, fsp=6)
        return mysql.TIME(timezone=zone, fsp=6)
    if dialect == "mssql":
        from sqlalchemy.dialects import mssql

        if isinstance(generic, sa.DateTime):
            return mssql.DATETIMEOFFSET(7) if zone else mssql.DATETIME2(7)
        return mssql.TIME(7)
    if dialect == "oracle" and isinstance(generic, sa.DateTime):
        from sqlalchemy.dialects import oracle

        return oracle.TIMESTAMP(timezone=zone)
    return generic


class SQLDatabase:
    """One database reached through a SQLAlchemy engine: the generic connector's database
    (:class:`tclose.connector.Database` with every optional capability but the snapshot
    guarantee and the run lock); subclassed per dialect.

    Attributes:
        url: the SQLAlchemy URL (it may hold a password: show :attr:`redacted_url` instead).
        dialect: the SQLAlchemy backend name (``"postgresql"``, ``"mysql"``, ``"sqlite"``).
        engine: the engine (see :meth:`create_engine`).
    """

    #: The :class:`Session` subclass of the dialect.
    session_class: ClassVar[type[Session]]
    engine: Engine
    #: The longest table name the database keeps (``None``: no limit), in characters, or in
    #: UTF-8 bytes when :attr:`identifier_bytes`.
    identifier_limit: ClassVar[int | None] = None
    identifier_bytes: ClassVar[bool] = False
    #: How the database compares the column names of one table, as :meth:`column_key` does
    #: (completes "<dialect> compares column names ...").
    column_names_compared: ClassVar[str] = "without regard to case (A-Z as a-z)"
    #: Whether the database has an interval type (months, days and time apart, as PostgreSQL's
    #: and DuckDB's): an interval of another database is refused where it has none.
    interval_type: ClassVar[bool] = False
    #: Whether the database has row-level security policies (``False``: it has none, so no read
    #: is filtered; ``None``: unknown, a dialect of the generic connector). A database that has
    #: them says what they filter in :meth:`row_security`.
    row_level_security: ClassVar[bool | None] = None

    def __init__(self, url: str, password_file: str | None = None) -> None:
        self.url = self.adapt_url(url_with_password(url, password_file))
        self.dialect = self.url.get_backend_name()
        try:
            self.engine = self.create_engine()
        except (ImportError, sa.exc.NoSuchModuleError) as error:
            raise DataError(f"No driver for {self.dialect}: {error}.") from None

    def create_engine(self) -> Engine:
        """The engine; without a pool, so that a session's connection (its temporary tables and
        locks) ends with the session."""
        return sa.create_engine(self.url, poolclass=NullPool)

    #: Whether every connection is opened read-only by the driver (:meth:`open_read_only`).
    read_only: bool = False
    #: SQL run on each new connection of a database opened with :meth:`open_read_only`, after
    #: which the server refuses every write of the connection's transactions (the generic
    #: connector knows none: its source is read in read-only sessions only).
    read_only_statements: ClassVar[tuple[str, ...]] = ()

    def open_read_only(self) -> None:
        """Open every later connection read-only by the driver or the server
        (:class:`tclose.connector.ReadOnlySource`): for a source whose database is not the
        target's, called before its first connection. The engine is made again by
        :meth:`create_engine`, which sees :attr:`read_only` (SQLite's ``mode=ro``, DuckDB's
        ``read_only``), and each new connection runs :attr:`read_only_statements`."""
        self.read_only = True
        self.engine.dispose()
        self.engine = self.create_engine()
        if self.read_only_statements:
            sa.event.listen(self.engine, "connect", self._connected_read_only)

    def _connected_read_only(self, dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            for statement in self.read_only_statements:
                cursor.execute(statement)
        finally:
            cursor.close()
        dbapi_connection.commit()

    def adapt_url(self, url: sa.URL) -> sa.URL:
        """The URL to connect with (a dialect may choose its driver here)."""
        return url

    @property
    def redacted_url(self) -> str:
        """The URL with its password and credential parameters replaced by ``***``."""
        return redact_url(self.url)

    @property
    def joins_in_snapshot(self) -> bool:
        """Whether a same-database target is built by ``INSERT ... SELECT ... JOIN`` inside the
        source's snapshot (else the runner streams the source again into a second session).
        Generic: false, since a dialect's isolation level need not give a snapshot."""
        return False

    #: What the dialect offers (:class:`tclose.connector.Capabilities`), but
    #: ``joins_in_snapshot`` and ``publishes_in_transaction``, which :attr:`capabilities` takes
    #: from :attr:`joins_in_snapshot` and the session class. Generic: every capability the
    #: generic connector implements with SQLAlchemy Core alone; a dialect replaces it
    #: (``dataclasses.replace(SQLDatabase.declared, ...)``).
    declared: ClassVar[Capabilities] = Capabilities(
        bulk_load=True,
        name_resolution=True,
        table_identity=True,
        releases=True,
        database_files=True,
        row_security=True,
        published_record=True,
        read_only_source=True,
        sqlalchemy_engine=True,
    )

    @property
    def capabilities(self) -> Capabilities:
        """:attr:`declared`, with :attr:`joins_in_snapshot` and whether the session class
        publishes in its transaction (:attr:`Session.publishes_in_transaction`)."""
        return dataclasses.replace(
            self.declared,
            joins_in_snapshot=self.joins_in_snapshot,
            publishes_in_transaction=self.session_class.publishes_in_transaction,
        )

    # --- errors and quoting ---------------------------------------------------------------------

    @contextlib.contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Turn database errors raised inside the block into :class:`DataError` (exit code 3)
        naming ``action``; the message shows the server's text and the redacted URL."""
        try:
            yield
        except sa.exc.DBAPIError as error:
            raise self.describe(error.orig, action) from None
        except sa.exc.NoSuchTableError as error:
            raise DataError(f"Table {error} does not exist in {self.redacted_url}.") from None
        except self.engine.dialect.loaded_dbapi.Error as error:  # the driver used directly
            raise self.describe(error, action) from None
        except TypeError as error:
            # PyMySQL's connect() takes the URL's query string as keyword arguments: an unknown
            # one (?foo=bar) is a driver error (exit 3), as libpq's is, not an internal error.
            if not _raised_in(error, self.engine.dialect.loaded_dbapi):
                raise
            raise self.describe(error, action) from None

    def describe(self, error: BaseException | None, action: str) -> DataError:
        """The :class:`DataError` for a driver error raised while doing ``action``."""
        text = " ".join(str(error).split()) or type(error).__name__
        failure = DataError(f"Database error while {action} on {self.redacted_url}: {text}")
        failure.driver_error = error
        return failure

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier, for SQL executed without parameters."""
        return '"' + name.replace('"', '""') + '"'

    def qualified(
        self, name: TableName | sa.Table, quote: Callable[[str], str] | None = None
    ) -> str:
        """The quoted, possibly schema-qualified name of a table (``quote``: default
        :meth:`quote`)."""
        quote = quote or self.quote
        if isinstance(name, sa.Table):
            name = TableName(name.schema, name.name)
        if name.schema:
            return f"{quote(name.schema)}.{quote(name.name)}"
        return quote(name.name)

    # --- inspection -----------------------------------------------------------------------------

    def table(self, name: TableName, connection: Connection | None = None) -> sa.Table:
        """The reflected table; :class:`DataError` if it does not exist."""
        with (
            self.errors(f"reading the definition of table {name}"),
            _connection(self.engine, connection) as bound,
        ):
            inspector = sa.inspect(bound)
            if not inspector.has_table(name.name, schema=name.schema):
                raise DataError(
                    f"Table {name} does not exist in {self.redacted_url}. "
                    f"{_existing_tables(inspector, name.schema)}"
                )
            with unknown_types_unremarked():
                try:
                    table = sa.Table(
                        name.name,
                        sa.MetaData(),
                        schema=name.schema,
                        autoload_with=bound,
                        listeners=[("column_reflect", self._column_reflected)],
                    )
                except sa.exc.ArgumentError as error:
                    if "non-blank name" not in str(error):
                        raise
                    raise DataError(  # SQLite accepts the name "": SQLAlchemy cannot reflect it
                        f"Table {name} has a column with an empty name, which tclose cannot "
                        f'read. Rename the column (ALTER TABLE ... RENAME COLUMN "" TO ...), '
                        f"or read the table through a view that renames it."
                    ) from None
            unknown = [c for c in table.columns if isinstance(c.type, sa.types.NullType)]
            declared = self.declared_types(bound, name) if unknown else {}
            for column in unknown:
                if column.name in declared:
                    column.type = NativeType(declared[column.name])
            table.info["name"] = name
            return table

    def reflected_column(self, column: dict[str, Any]) -> None:
        """Correct, in place, a column as SQLAlchemy reflects it (the ``column`` mapping of its
        ``column_reflect`` event: ``name``, ``type``, ...) before :meth:`table` builds it. The
        base changes nothing; a dialect whose reflection misreads a name fixes it here."""

    def _column_reflected(self, _inspector: Any, _table: sa.Table, column: Any) -> None:
        self.reflected_column(column)

    def declared_types(self, connection: Connection, name: TableName) -> dict[str, str]:
        """Column name → its type as the database's catalog declares it (SQL, valid in a new
        table of the same database), for :meth:`table`: the columns SQLAlchemy reflects without a
        type (``NullType``) get it as a :class:`NativeType`. The generic connector reads no
        catalog (``{}``): such a column then stops a run at :meth:`staging_table`, named."""
        return {}

    def exists(self, name: TableName, connection: Connection | None = None) -> bool:
        """Whether table ``name`` exists (as seen by ``connection``, if given)."""
        with (
            self.errors(f"looking for table {name}"),
            _connection(self.engine, connection) as bound,
        ):
            return sa.inspect(bound).has_table(name.name, schema=name.schema)

    def table_identity(self, name: TableName) -> tuple | None:
        """What the database itself says table ``name`` is, or ``None`` if there is no such table.

        Two names (from two URLs, or two spellings) denote the same table exactly when their
        identities are equal. The base implementation knows only the URL (without credentials),
        the schema and the name as given; the built-in dialects ask the server: its identity,
        the database, the schema and the name as the database folds it, or the catalog's object
        id (see ``docs/databases.md``).
        """
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            if not sa.inspect(connection).has_table(name.name, schema=name.schema):
                return None
        url = self.url.set(password=None, query={})
        return (self.dialect, url.render_as_string(), name.schema or "", name.name)

    def files(self) -> list[Path]:
        """The files that hold this database, side files included, existing or not (none for
        a server): no report and no file target may be one of them
        (:func:`tclose.core.guards.refuse_output_paths`)."""
        return []

    def _size(self, name: str) -> int:
        return len(name.encode()) if self.identifier_bytes else len(name)

    def name_problem(self, name: str) -> str | None:
        """Why the database would not keep ``name`` as a table name as it is (completes "The
        table name ... is "), or ``None``: :func:`blank_name_problem` (empty, white space only,
        a NUL character: refused on every database), or longer than
        :attr:`identifier_limit`. A connector whose database has more rules (MariaDB's file
        names and trailing spaces, SQLite's reserved prefix) extends it."""
        problem = blank_name_problem(name, self.dialect)
        if problem is not None:
            return problem
        limit = self.identifier_limit
        if limit is not None and self._size(name) > limit:
            unit = "bytes" if self.identifier_bytes else "characters"
            return f"longer than {self.dialect} allows ({self._size(name)} {unit}; at most {limit})"
        return None

    def check_table_name(self, name: TableName, path: str = "target.table") -> None:
        """:class:`ConfigError` if the database would cut or refuse table name ``name``."""
        self.check_configured_name(name, path)

    def check_configured_name(self, name: TableName, path: str) -> None:
        """:class:`ConfigError` (exit 2, at YAML key ``path``, the value and the problem) when
        a part of the configured name ``name`` (its schema, its table) is one the database
        cannot store as written (:meth:`name_problem`). Every configured name (source, target,
        audit table) is checked so before anything is looked up."""
        for what, part in (("schema", name.schema), ("table", name.name)):
            problem = None if part is None else self.name_problem(part)
            if problem is not None:
                raise ConfigError(
                    f"The {what} name {part!r} of {path} is {problem}. Choose another name.",
                    path=tuple(path.split(".")),
                )

    def owned_name(self, target: TableName, mark: str, run_id: str) -> TableName:
        """The name of a table the run creates next to ``target`` (``mark``: :data:`STAGING_MARK`
        or :data:`OLD_MARK`): ``target``'s name, shortened until the database keeps the whole
        name (:meth:`name_problem`), the mark and the run id."""
        tail = mark + run_id[:RUN_ID_LENGTH]
        head = target.name
        while head and self.name_problem(head + tail) is not None:
            head = head[:-1]
        return target.with_name(head + tail)

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` with the schema the database resolves it to (see
        :class:`tclose.connector.NameResolution`). Generic: the given schema, else the
        dialect's default schema (SQLAlchemy's ``default_schema_name``); the generic connector
        knows nothing of temporary schemas. The built-in dialects ask their database."""
        if name.schema is not None:
            return name
        with self.errors(f"resolving the table name {name}"), self.engine.connect() as bound:
            schema = sa.inspect(bound).default_schema_name
        return TableName(schema, name.name) if schema else name

    def table_comment(self, name: TableName) -> str | None:
        """The comment of table ``name`` (``None`` if none, or the database has no comments);
        a published table's says which run published it (``tclose run <id>``)."""
        if not self.engine.dialect.supports_comments:
            return None
        with (
            self.errors(f"reading the comment of {name}"),
            self.engine.connect() as connection,
            unknown_types_unremarked(),  # MySQL parses the whole CREATE TABLE
        ):
            return sa.inspect(connection).get_table_comment(name.name, schema=name.schema)["text"]

    # --- releases -------------------------------------------------------------------------------

    def release_of(
        self, connection: Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """Table ``name`` as the registry of releases knows it (:mod:`tclose.connectors.releases`):
        its schema and name as the database stores them (the registry is that schema's) and its
        identity now (``None``: none a release can have, e.g. a temporary table); ``None`` when
        there is no such table. Generic: the name as given, and the table's content
        (:func:`~tclose.connectors.releases.content_identity`), since the generic connector
        knows no lasting identity of a table: the same table is the same rows."""
        if not sa.inspect(connection).has_table(name.name, schema=name.schema):
            return None
        result = connection.execute(sa.select(sa.text("*")).select_from(bare_table(name)))
        return name, content_identity(list(result.keys()), result)

    def release_problem(self, name: TableName, connection: Connection | None = None) -> str | None:
        """Why the existing table ``name`` is not a release that tclose published and that is
        still the table it published (words for a message), or ``None`` when it is one: the
        only tables ``if_exists: replace`` replaces (:class:`tclose.connector.Releases`)."""
        with (
            self.errors(f"looking for the release record of {name}"),
            _connection(self.engine, connection) as bound,
        ):
            found = self.release_of(bound, name)
            if found is None:
                return "it is not a table of the database's own catalog that tclose publishes"
            home, identity = found
            distrust = self.registry_problem(bound, home.schema)
            if distrust is not None:
                return (
                    f"{NO_RELEASE_RECORD} that it may trust: the registry of releases of its "
                    f"schema is not trusted ({distrust})"
                )
            mark = self.release_mark(bound, home) if self.marks_releases else None
            return release_problem(bound, home, identity, mark, marks=self.marks_releases)

    @property
    def marks_releases(self) -> bool:
        """Whether a published table carries the mark of its run (:meth:`release_mark`).
        Generic: where the dialect keeps table comments."""
        return bool(self.engine.dialect.supports_comments)

    def release_mark(self, connection: Connection, home: TableName) -> str | None:
        """The run id the mark of table ``home`` names (its comment ``tclose run <id>``), else
        ``None``; read on ``connection``."""
        comment = sa.inspect(connection).get_table_comment(home.name, schema=home.schema)
        return marked_run(comment.get("text"))

    def registry_problem(self, connection: Connection, schema: str | None) -> str | None:
        """Why the registry of releases of ``schema`` is not one tclose may trust (words for a
        message), ``None`` when it is (or there is none). Generic: trusted (the generic
        connector knows no roles)."""
        return None

    def tables_dropped(self, name: TableName) -> list[tuple]:
        """The identity of ``name`` (:meth:`table_identity`), empty when there is no such
        table: a ``DROP TABLE`` drops the table alone, unless the dialect says otherwise
        (partitions)."""
        identity = self.table_identity(name)
        return [] if identity is None else [identity]

    def replace_blockers(self, name: TableName) -> list[str]:
        """What the database's catalog binds to table ``name`` (see
        :class:`tclose.connector.TableDependencies`). Generic: nothing known."""
        return []

    def row_security(self, name: TableName) -> dict[str, Any] | None:
        """:class:`tclose.connector.RowSecurity`: no table filtered where the database has no
        row-level security (:attr:`row_level_security` false), else ``None`` (unknown)."""
        return {"applies": False, "tables": []} if self.row_level_security is False else None

    def row_key(self, table: sa.Table, key: str | None) -> sa.ColumnElement:
        """The column that identifies source rows: ``key``, else the single-column primary key;
        :class:`ConfigError` if there is neither."""
        if key is not None:
            if key not in table.c:
                raise DataError(f"source.key {key!r} is not a column of {shown(table)}.")
            return table.c[key]
        primary = list(table.primary_key.columns)
        if len(primary) == 1:
            return primary[0]
        raise ConfigError(
            f"Table {shown(table)} has no single-column primary "
            f"key; name a unique, non-null column as source.key.",
            path=("source", "key"),
        )

    # --- reading outside a run ------------------------------------------------------------------

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """Stream ``columns`` of table ``name`` in a read-only session; see :meth:`Session.read`."""
        with self.session(read_only=True) as session:
            yield from session.read(name, columns, key, chunk_size, with_key)

    # --- the staging table ----------------------------------------------------------------------

    def row_type(self) -> sa.types.TypeEngine:
        """Column type of the new surrogate key ``tclose_row``."""
        return sa.BigInteger()

    def column_key(self, name: str) -> str:
        """``name`` as the database compares column names: two names with the same key are the
        same column of a table. The default folds ASCII letters to lower case, as SQLite and
        DuckDB do (both keep non-ASCII letters, spaces and accents as they are); a connector
        whose database compares otherwise overrides it and :attr:`column_names_compared`."""
        return name.translate(_ASCII_LOWER)

    def column_name_problem(self, column: str) -> str | None:
        """Why the database would cut or refuse ``column`` as a column name (``None``: it
        keeps it as it is): longer than :attr:`identifier_limit` (PostgreSQL silently cuts a
        name to 63 bytes, so a long column name from another database would be published under
        another name). Connectors with more rules extend it."""
        limit = self.identifier_limit
        if limit is not None and self._size(column) > limit:
            unit = "bytes" if self.identifier_bytes else "characters"
            return (
                f"{self.dialect} names a column with at most {limit} {unit} and this name has "
                f"{self._size(column)}"
            )
        return None

    def check_column_names(self, output_columns: Sequence[str]) -> None:
        """Refuse output columns that would be one column of the staging table: one equal to
        :data:`~tclose.naming.ROW_COLUMN` up to :meth:`column_key` (``TCLOSE_ROW`` on a
        database that compares names without case), or two source columns equal up to it (a
        source that is case-sensitive, published into a database that is not), and any column
        whose name the database would cut or refuse (:meth:`column_name_problem`).

        Raises:
            ConfigError: naming the column(s), the rule of the database and the remedies.
        """
        seen = {self.column_key(ROW_COLUMN): ROW_COLUMN}
        for column in output_columns:
            problem = self.column_name_problem(column)
            if problem is not None:
                raise ConfigError(
                    f"Column {column!r} cannot be written: "
                    f"{problem}. Rename it in the source (a view can rename it), or drop it from "
                    f"the output (role: identifier).",
                    path=("attributes", column),
                )
            key = self.column_key(column)
            other = seen.get(key)
            if other is None:
                seen[key] = column
                continue
            rule = (
                ""
                if other == column
                else f"{self.dialect} compares column names {self.column_names_compared}, so "
            )
            if other == ROW_COLUMN:
                clash = (
                    f"{rule}it would be the column {ROW_COLUMN!r}, the row key tclose adds to "
                    f"every table it writes"
                )
            else:
                clash = f"{rule}it would be the same column as {other!r} in the table written"
            raise ConfigError(
                f"Column {column!r} cannot be written: {clash}. "
                f"Rename it in the source, or drop it from the output (role: identifier).",
                path=("attributes", column),
            )

    def staging_table(
        self,
        name: TableName,
        source: sa.Table,
        output_columns: Sequence[str],
        aggregated: Collection[str],
        rounded: Collection[str] = (),
        source_dialect: str | None = None,
    ) -> sa.Table:
        """The definition (not yet created) of the staging table.

        Column ``tclose_row`` (the new key, primary key) comes first, then ``output_columns`` in
        order. Pass-through columns keep their source type; aggregated quasi-identifiers become
        double precision, or keep their integer type (``BIGINT`` if the source type is not an
        integer) when ``rounded``. When the source is another dialect, types are translated
        through their SQLAlchemy generic equivalents (:meth:`portable_type`).
        """
        self.check_column_names(output_columns)
        columns = [sa.Column(ROW_COLUMN, self.row_type(), primary_key=True, autoincrement=False)]
        for column in output_columns:
            column_type = source.c[column].type
            if isinstance(column_type, sa.types.NullType):
                raise DataError(
                    f"Column {column!r} has a type that neither SQLAlchemy nor the "
                    f"{source_dialect or self.dialect} connector can name, so tclose cannot "
                    f"create a column for it. Drop the column (role: identifier), or cast it "
                    f"in a view of the source."
                )
            if column in aggregated:
                if column not in rounded:
                    column_type = sa.Double()
                elif not isinstance(column_type, sa.Integer):
                    column_type = sa.BigInteger()
            if source_dialect is not None and source_dialect != self.dialect:
                column_type = self.portable_type(column_type, column, source_dialect)
            else:
                column_type = self.same_dialect_type(column_type)
            columns.append(sa.Column(column, column_type, nullable=True))
        table = sa.Table(name.name, sa.MetaData(), *columns, schema=name.schema)
        table.info.update(name=name, source_dialect=source_dialect or self.dialect)
        return table

    def same_dialect_type(self, column_type: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """A reflected type, ready to be used in a new table of the same database."""
        return column_type

    def portable_type(
        self, column_type: sa.types.TypeEngine, column: str, source_dialect: str | None = None
    ) -> sa.types.TypeEngine:
        """A type of another dialect (``source_dialect``), translated for this one;
        :class:`DataError` if it has no equivalent.

        A PostgreSQL array has none: its values have bounds (``[0:1]={1,2}``) and dimensions of
        equal lengths that no other kind's lists hold (the PostgreSQL connector reads them as
        their text). Nor has an interval in a database without an interval type
        (:attr:`interval_type`): SQLAlchemy would store it as a date-time after the epoch
        (MariaDB would publish ``1 day`` as ``2024-00-00 00:00:00``). A type SQLAlchemy does not
        know, or has no generic type for, takes the type that holds its values exactly where
        there is one (DuckDB's unsigned and 128-bit integers, MariaDB's ``YEAR``, ``ENUM``,
        ``INET6``...: :func:`register_source_types`); the message of a refusal says why."""
        try:
            generic = column_type.as_generic()
        except NotImplementedError:
            generic = None
        if source_dialect == "postgresql" and isinstance(generic, sa.ARRAY):
            generic = None
        if isinstance(generic, sa.Interval) and not self.interval_type:
            generic = None
        if isinstance(generic, sa.Float) and not isinstance(generic, sa.Double):
            generic = sa.Double()  # every float as 64 bits: a 32-bit one widens without loss
        if source_dialect == "sqlite" and isinstance(generic, sa.Integer):
            generic = sa.BigInteger()  # SQLite stores any integer in 64 bits, whatever declared
        why = ""
        translate = _SOURCE_TYPES.get(source_dialect or "")
        if translate is not None:
            generic, why = translate(column_type, generic, self.dialect)
        if isinstance(generic, sa.String) and generic.collation is not None:
            # A collation name is the source database's own (MariaDB's utf8mb4_bin, also that of
            # its JSON columns; PostgreSQL's "C"): text keeps its value under the target's default.
            generic = copy.copy(generic)
            generic.collation = None
        if generic is not None:
            generic = self.adapt_portable_type(generic)
            try:
                generic.compile(dialect=self.engine.dialect)
            except (sa.exc.CompileError, sa.exc.ArgumentError):
                generic = None
        if generic is None:
            interval = isinstance(column_type, sa.Interval)
            if not why and interval and not self.interval_type:
                why = f": {self.dialect} has no interval type (months, days and time apart)"
            elif not why and source_dialect == "postgresql" and isinstance(column_type, sa.ARRAY):
                why = ": its values have bounds and dimensions that no other kind's lists hold"
            elif not why:
                why = f": tclose knows no {self.dialect} type that holds its values exactly"
            raise DataError(
                f"Column {column!r} has type {type_text(column_type)}, which has no portable "
                f"equivalent in {self.dialect}{why}. Publish into a database of the source's "
                f"kind, or drop the column (role: identifier)."
            )
        return generic

    def adapt_portable_type(self, generic: sa.types.TypeEngine) -> sa.types.TypeEngine:
        """A generic type (from another dialect) as this dialect should store it: times keep
        their microseconds where the generic type would drop them (:func:`precise_time_type`)."""
        return precise_time_type(generic, self.dialect)

    # --- sessions -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def session(
        self, staging: sa.Table | None = None, *, read_only: bool = False
    ) -> Iterator[Session]:
        """A :class:`Session`: one connection in one consistent snapshot of the database.

        With ``staging``, the session first drops the tables that interrupted runs provably left
        (see :meth:`Session.drop_leftovers`) and creates the staging table, in the way the
        dialect keeps it invisible or removable. Leaving the block without :meth:`Session.publish`
        rolls back or drops everything the session created.

        Args:
            staging: the staging table to create (from :meth:`staging_table`), or ``None``.
            read_only: open a read-only transaction (ignored when ``staging`` is given).
        """
        with self.errors(f"connecting to {self.dialect}"):
            connection = self.session_class.open_connection(self.engine)
        session = self.session_class(self, connection, read_only=read_only and staging is None)
        try:
            with self.errors(
                "opening a transaction"
                if staging is None
                else f"creating the staging table {shown(staging)}"
            ):
                session.begin(staging)
            yield session
        except BaseException:
            session.close()
            raise
        session.close()


class Session:
    """One connection holding one transaction, opened by :meth:`SQLDatabase.session`: the generic
    connector's session (:class:`tclose.connector.Session`, :class:`~tclose.connector.BulkLoad`
    and :class:`~tclose.connector.InDatabaseJoin`), on SQLAlchemy Core only.

    The transaction is ``connection.begin()``; a staging table left by a rollback (on a database
    whose DDL commits by itself) is dropped when the session ends. The built-in dialects
    subclass :class:`DriverSession` instead, which controls the transaction with SQL statements.
    """

    def __init__(self, database: SQLDatabase, connection: Connection, *, read_only: bool) -> None:
        self.database = database
        self.connection = connection
        self.read_only = read_only
        self.staging: sa.Table | None = None
        self.published = False
        self.closed = False
        self.transaction: sa.RootTransaction | None = None
        #: Rows written into the staging table (checked again at publish), if known.
        self.rows_written: int | None = None

    #: The schema that names the session's temporary helper tables in every statement, where
    #: the database has one (PostgreSQL's ``pg_temp``): an unqualified name would follow the
    #: search path, which may put a user's table of the same name first. ``None``: unqualified.
    helper_schema: ClassVar[str | None] = None

    @classmethod
    def open_connection(cls, engine: Engine) -> Connection:
        """The session's connection (generic: the engine's default isolation level)."""
        return engine.connect()

    # --- lifecycle ------------------------------------------------------------------------------

    def begin(self, staging: sa.Table | None) -> None:
        """Open the transaction, then drop leftovers and create ``staging`` (if given)."""
        self.transaction = self.connection.begin()
        if staging is not None:
            self.prepare_staging(staging)

    def commit(self) -> None:
        """Commit the session's transaction (at publish)."""
        assert self.transaction is not None
        self.transaction.commit()

    def prepare_staging(self, staging: sa.Table) -> None:
        """Drop what interrupted runs provably left, and create ``staging``."""
        self.drop_leftovers(staging.schema)
        staging.create(self.connection)
        self.staging = staging

    def drop_leftovers(self, schema: str | None) -> list[TableName]:
        """Drop the tables that killed runs left in ``schema`` and that tclose recorded as its
        own; return them. Never a table because of its name.

        The base implementation has nothing to drop (where DDL is transactional a killed run
        leaves no table behind). MySQL keeps a registry.
        """
        return []

    def close(self) -> None:
        """End the session: roll back unless published, drop what must not outlive it, close.

        Cleanup errors are logged, never raised over the error that ended the session.
        """
        if self.closed:
            return
        self.closed = True
        try:
            self.end()
        except Exception as error:  # the connection may be gone; the server cleans up then
            log.warning(
                "cleanup after the session on %s failed: %s",
                self.database.redacted_url,
                " ".join(str(error).split()),
            )
        finally:
            with contextlib.suppress(Exception):
                self.connection.close()

    def end(self) -> None:
        """Roll back unless published; then drop the staging table if it outlived the rollback
        (its ``CREATE TABLE`` committed by itself), on a new connection if this one broke."""
        if self.published:
            return
        try:
            if self.transaction is not None and self.transaction.is_active:
                self.transaction.rollback()
            if self.staging is not None:
                self._drop_staging(self.connection)
        except Exception:  # e.g. a connection broken by an interrupt: a fresh one cleans up
            if self.staging is None:
                raise
            with self.database.engine.connect() as fresh:
                self._drop_staging(fresh)

    def _drop_staging(self, connection: Connection) -> None:
        assert self.staging is not None
        staging = TableName(self.staging.schema, self.staging.name)
        with connection.begin():
            if self.database.exists(staging, connection):
                connection.execute(sa.schema.DropTable(self.staging))

    # --- reading --------------------------------------------------------------------------------

    def table(self, name: TableName) -> sa.Table:
        """The table as this session sees it (its own uncommitted staging table included)."""
        return self.database.table(name, self.connection)

    @property
    def capabilities(self) -> Capabilities:
        """Its database's :attr:`SQLDatabase.capabilities`."""
        return self.database.capabilities

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its type compiled for this session's dialect (``VARCHAR(40)``; a type
        the dialect cannot compile as SQLAlchemy's ``repr`` of it). Generic: the reflected
        types, the catalog being the dialect's own business."""
        types = {}
        for column in table.columns:
            try:
                types[column.name] = str(column.type.compile(dialect=self.connection.dialect))
            except Exception:  # noqa: BLE001 - any type SQLAlchemy cannot compile: its repr
                types[column.name] = repr(column.type)
        return types

    def relation_kind(self, table: sa.Table) -> str | None:
        """What ``table``'s name stands for when it is not a table (``"view"``), else ``None``:
        a view in place of a published table is not the table the run published, and it may
        show each session other rows (``tclose verify --report`` fails ``content_digest``).
        Generic: the inspector's views of its schema, names compared without case."""
        try:
            views = sa.inspect(self.connection).get_view_names(schema=table.schema)
        except (NotImplementedError, sa.exc.SQLAlchemyError):
            return None
        return "view" if table.name.lower() in {v.lower() for v in views} else None

    def read_rows(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """Stream ``columns`` of table ``name`` ordered by the row key, as lists of tuples of the
        driver's Python values (``None`` for NULL), through a server-side cursor.

        With ``with_key`` the row key comes first in every tuple. :class:`DataError` names a
        column that does not exist.
        """
        statement, types = self.read_statement(name, columns, key, with_key)
        with self.database.errors(f"reading {name}"):
            yield from self.stream(statement, chunk_size, types)

    def table_with(self, name: TableName, columns: Sequence[str]) -> sa.Table:
        """The table ``name`` as :meth:`table` reflects it; :class:`DataError` names the first
        of ``columns`` it does not have."""
        table = self.table(name)
        missing = [c for c in columns if c not in table.c]
        if missing:
            raise DataError(
                f"Column {missing[0]!r} does not exist in table {name}. "
                f"Its columns are: {', '.join(table.c.keys())}."
            )
        return table

    def read_expression(self, column: sa.ColumnElement) -> sa.ColumnElement:
        """What :meth:`read_statement` selects for ``column`` (the row key too, so that both
        passes and every driver see a key alike): the column itself, or (a dialect
        whose drivers convert a type differently) an expression that every driver reads alike;
        :meth:`stream` turns its values into the column's Python values."""
        return column

    def read_statement(
        self, name: TableName, columns: Sequence[str], key: str | None, with_key: bool
    ) -> tuple[sa.Select, list[sa.types.TypeEngine]]:
        """The ``SELECT`` of :meth:`read_rows` (the row key first if ``with_key``, then
        ``columns``, ordered by the row key; result columns untyped) and the reflected types of
        its result columns, the key's included; :class:`DataError` names a column that does not
        exist."""
        table = self.table_with(name, columns)
        row_key = self.database.row_key(table, key)
        # Untyped result columns: values come as the driver returns them, without SQLAlchemy's
        # result processing (which would, e.g., turn MySQL doubles into Decimal).
        selected = [_raw(self.read_expression(row_key), KEY_LABEL)] if with_key else []
        selected += [_raw(self.read_expression(table.c[c]), c) for c in columns]
        statement = sa.select(*selected).order_by(row_key)
        types = [row_key.type] if with_key else []
        return statement, types + [table.c[c].type for c in columns]

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`read_rows` as DataFrames; with ``with_key`` the first column is ``__key__``."""
        import pandas as pd

        names = ([KEY_LABEL] if with_key else []) + list(columns)
        for rows in self.read_rows(name, columns, key, chunk_size, with_key):
            yield pd.DataFrame.from_records(rows, columns=names)

    def stream(
        self,
        statement: sa.Select,
        chunk_size: int,
        column_types: Sequence[sa.types.TypeEngine] = (),
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """Run ``statement`` with a server-side cursor (``yield_per``) and yield its rows in
        chunks; ``column_types`` are the reflected types of the selected columns (the key's
        included), for a dialect that chooses a transfer format by type."""
        result = self.connection.execute(statement, execution_options={"yield_per": chunk_size})
        try:
            yield from result.partitions()
        finally:
            result.close()

    # --- writing --------------------------------------------------------------------------------

    def content_order(self, columns: Sequence[sa.ColumnElement]) -> list[sa.ColumnElement]:
        """The sort keys of the content order of rows of ``columns`` (the published columns,
        in the staging table's order): the order ``tclose_row`` numbers and stores a release in.

        The order must be a function of the values alone, with ties only between rows that
        hold the same values (then any order among them is the same release). Generic: each
        column in the database's own order, so values it calls equal (a case-insensitive
        collation's ``'a'`` and ``'A'``) may come in any order; the built-in connectors order
        text by its bytes and break such ties (``docs/databases.md``, "The content order")."""
        return list(columns)

    def insert_in_content_order(
        self, staging: sa.Table, selected: Sequence[sa.ColumnElement]
    ) -> int:
        """Fill ``staging`` with the rows of ``selected`` (the columns of a table or subquery,
        one per output column, in the staging table's order) in content order: ``INSERT ...
        SELECT ROW_NUMBER() OVER (ORDER BY keys), ... ORDER BY keys`` with the keys of
        :meth:`content_order`, so that ``tclose_row`` numbers the rows in that order and they
        are stored in it. Returns the rows inserted (``-1``: unknown); :meth:`joined_rows_written`
        is for the caller to call once it has checked the count."""
        output_columns = [c.name for c in staging.columns][1:]
        keys = self.content_order(selected)
        query = sa.select(sa.func.row_number().over(order_by=keys), *selected).order_by(*keys)
        return self.insert_joined(
            staging, staging.insert().from_select([ROW_COLUMN, *output_columns], query)
        )

    def fill_joined(
        self,
        source: sa.Table,
        key: str | None,
        staging: sa.Table,
        keys: np.ndarray,
        labels: np.ndarray,
        aggregated: Mapping[str, np.ndarray],
    ) -> None:
        """Fill ``staging`` inside this database, from ``source`` read in this session's snapshot.

        The small per-row result goes to temporary helper tables of the run — ``__tclose_m_<run>``
        (source key, cluster) and ``__tclose_c_<run>`` (cluster, the aggregated values), names no
        user's table may bear, so neither shadows one — and one ``INSERT ... SELECT ... JOIN``
        numbers the rows in content order (:meth:`insert_in_content_order`), so pass-through
        columns never leave the database and neither ``tclose_row`` nor the stored order depends
        on the source's order.

        Args:
            source: the reflected source table.
            key: ``source.key`` (``None``: the primary key).
            staging: the created staging table.
            keys: the source key of every row read in pass 1, shape ``(n,)``.
            labels: dense cluster labels ``0..L-1`` of every row.
            aggregated: column → new value of every row (constant within a cluster).

        Raises:
            DataError: the join did not find every row of pass 1 (the source changed).
        """
        action = f"writing the staging table {shown(staging)} from {shown(source)}"
        with self.database.errors(action):
            self._fill_joined(source, key, staging, keys, labels, aggregated)

    def _fill_joined(
        self,
        source: sa.Table,
        key: str | None,
        staging: sa.Table,
        keys: np.ndarray,
        labels: np.ndarray,
        aggregated: Mapping[str, np.ndarray],
    ) -> None:
        row_key = self.database.row_key(source, key)
        run_id = str(staging.info.get("run_id") or random_suffix())
        value_columns = {column: f"v{i}" for i, column in enumerate(aggregated)}
        mapping, centroids = self._join_helpers(row_key, staging, value_columns, run_id)
        mapping.create(self.connection)
        centroids.create(self.connection)
        self._load_map(mapping, keys, labels, row_key, source)
        first = np.unique(labels, return_index=True)[1]
        self.insert_arrays(
            centroids,
            {
                "cluster": np.arange(len(first), dtype=np.int64),
                **{value_columns[c]: values[first] for c, values in aggregated.items()},
            },
        )
        self.helpers_loaded([mapping, centroids])
        output_columns = [c.name for c in staging.columns][1:]
        # Labelled by position: SQLite resolves no subquery column labelled "true" or "false".
        selected = [
            (centroids.c[value_columns[c]] if c in value_columns else source.c[c]).label(f"c{i}")
            for i, c in enumerate(output_columns)
        ]
        rows = (
            sa.select(*selected)
            .select_from(
                source.join(mapping, row_key == mapping.c.src_key).join(
                    centroids, centroids.c.cluster == mapping.c.cluster
                )
            )
            .subquery("tclose_joined")
        )
        found = self.insert_in_content_order(staging, list(rows.c))
        if found not in (-1, len(keys)):
            raise DataError(
                f"{len(keys)} rows of {shown(source)} were partitioned but the write found "
                f"{found} by their key {row_key.name!r}: the table changed while tclose was "
                f"reading it, or values of {row_key.name!r} that differ as read are not distinct "
                f"under the database's equality (a case-insensitive type, say)."
            )
        self.joined_rows_written(staging)
        self.drop_helpers([centroids, mapping])
        self.rows_written = len(keys)
        self.writes_done()

    def _join_helpers(
        self,
        row_key: sa.ColumnElement,
        staging: sa.Table,
        value_columns: Mapping[str, str],
        run_id: str,
    ) -> tuple[sa.Table, sa.Table]:
        """The definitions of the join's temporary helper tables: the map (source key →
        cluster) and the centroids (cluster → the aggregated values, as ``value_columns``
        names them)."""
        key_type = row_key.type
        if isinstance(key_type, (sa.Integer, sa.types.NullType)):
            key_type = sa.BigInteger()
        metadata = sa.MetaData()
        mapping = sa.Table(
            run_table_name(MAP_MARK, run_id),
            metadata,
            *self.map_key(key_type),
            sa.Column("cluster", sa.BigInteger(), nullable=False),
            prefixes=["TEMPORARY"],
            schema=self.helper_schema,
        )
        centroids = sa.Table(
            run_table_name(CENTROID_MARK, run_id),
            metadata,
            sa.Column("cluster", sa.BigInteger(), primary_key=True, autoincrement=False),
            *[sa.Column(v, staging.c[c].type) for c, v in value_columns.items()],
            prefixes=["TEMPORARY"],
            schema=self.helper_schema,
        )
        return mapping, centroids

    def _load_map(
        self,
        mapping: sa.Table,
        keys: np.ndarray,
        labels: np.ndarray,
        row_key: sa.ColumnElement,
        source: sa.Table,
    ) -> None:
        """Insert each row's key and cluster into the map; :class:`DataError` when two keys
        that differ as read are one key under the database's equality."""
        try:
            self.insert_arrays(mapping, {"src_key": keys, "cluster": labels})
        except DataError as failure:
            integrity = self.database.engine.dialect.loaded_dbapi.IntegrityError
            if not isinstance(failure.driver_error, integrity):
                raise
            raise DataError(
                f"Values of the key {row_key.name!r} of {shown(source)} that differ as read "
                f"are not distinct under the database's equality (a case-insensitive type or "
                f"collation, trailing spaces, say): {failure.driver_error}. Name a key whose "
                f"values the database tells apart as source.key."
            ) from None

    def insert_joined(self, staging: sa.Table, insert: sa.Insert) -> int:
        """Run the ``INSERT ... SELECT`` of :meth:`insert_in_content_order` into ``staging``;
        return the rows it inserted (``-1``: unknown)."""
        # Without preserve_rowcount SQLAlchemy reports -1 for an INSERT on some drivers
        # (psycopg), and the count is the check that every row was found once.
        options = {"preserve_rowcount": True}
        return self.connection.execute(insert, execution_options=options).rowcount

    def joined_rows_written(self, staging: sa.Table) -> None:
        """Called after :meth:`insert_joined` once its row count is checked (PostgreSQL adds
        the staging table's primary key back here)."""

    def drop_helpers(self, tables: Sequence[sa.Table]) -> None:
        """Drop the session's temporary helper tables (in its transaction)."""
        for table in tables:
            table.drop(self.connection)

    def map_key(self, key_type: sa.types.TypeEngine) -> list[sa.schema.SchemaItem]:
        """The ``src_key`` column of the join's map helper table (its primary key), and any
        index it needs; the source key is known to be unique and non-null."""
        return [sa.Column("src_key", key_type, primary_key=True, autoincrement=False)]

    def fill_streamed(self, staging: sa.Table, chunks: Iterable[list[tuple]]) -> int:
        """Fill ``staging`` from rows computed by the runner (a target in another database).

        Each chunk is a list of tuples of the output columns, in the staging table's column
        order after ``tclose_row``. The rows go to a temporary helper table as they come
        (:meth:`insert_rows`), then into ``staging`` numbered in content order
        (:meth:`insert_in_content_order`): the order they arrived in, the source's, is
        neither numbered nor stored. Returns the number of rows written.
        """
        columns = [c.name for c in staging.columns][1:]
        run_id = str(staging.info.get("run_id") or random_suffix())
        arrived = sa.Table(
            run_table_name(ROWS_MARK, run_id),
            sa.MetaData(),
            *[sa.Column(c, staging.c[c].type, nullable=True) for c in columns],
            prefixes=["TEMPORARY"],
            schema=self.helper_schema,
        )
        arrived.info["source_dialect"] = staging.info.get("source_dialect", self.database.dialect)
        written = 0
        with self.database.errors(f"writing the staging table {shown(staging)}"):
            arrived.create(self.connection)
            for rows in chunks:
                self.insert_rows(arrived, columns, rows)
                written += len(rows)
            found = self.insert_in_content_order(staging, list(arrived.c))
            if found not in (-1, written):
                raise DataError(
                    f"{written} rows were written into {arrived.name} but {found} reached the "
                    f"staging table {shown(staging)}. Nothing was published."
                )
            self.joined_rows_written(staging)
            self.drop_helpers([arrived])
            self.writes_done()
        self.rows_written = written
        return written

    def helpers_loaded(self, tables: Sequence[sa.Table]) -> None:
        """Called after the helper tables are filled (PostgreSQL analyzes them here)."""

    def writes_done(self) -> None:
        """Called when the staging table is complete (MySQL commits here)."""

    def insert_arrays(
        self, table: sa.Table, arrays: Mapping[str, np.ndarray], chunk_size: int = 50_000
    ) -> None:
        """Bulk-insert equally long 1-D arrays, one per column of ``table``."""
        columns = list(arrays)
        lists = [np.asarray(a).tolist() for a in arrays.values()]
        rows = list(zip(*lists, strict=True))
        for start in range(0, len(rows), chunk_size):
            self.insert_rows(table, columns, rows[start : start + chunk_size])

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Bulk-insert ``rows`` (tuples of Python values in ``columns`` order): one Core
        ``table.insert()`` executed with many parameter sets, in the session's transaction.

        Values read from a database of the table's own dialect go to the driver as they came
        from it (untyped parameters: no conversion can change them); values from another
        dialect go through the column types' bind processing."""
        if not rows:
            return
        same = table.info.get("source_dialect", self.database.dialect) == self.database.dialect
        names = [f"p{i}" for i in range(len(columns))]
        statement = sa.insert(table).values(
            {
                table.c[c]: sa.bindparam(p, type_=DriverValue() if same else table.c[c].type)
                for c, p in zip(columns, names, strict=True)
            }
        )
        with self.database.errors(f"writing {shown(table)}"):
            self.connection.execute(statement, [dict(zip(names, row)) for row in rows])

    # --- publishing -----------------------------------------------------------------------------

    #: Whether :meth:`publish` calls ``before_commit`` inside its transaction (DDL that does not
    #: commit by itself).
    publishes_in_transaction: ClassVar[bool] = True

    def replaceable_target(self, target: TableName, replace: bool) -> bool:
        """Whether ``target`` exists, once checked that a publish may replace it:
        :class:`DataError` if it exists and not ``replace``, and a table tclose did not
        publish is refused (:meth:`refuse_foreign`)."""
        exists = self.database.exists(target, self.connection)
        if exists and not replace:
            raise DataError(
                f"The target table {target} already exists and target.if_exists "
                f"is 'fail'. Nothing was published."
            )
        if exists:
            self.refuse_foreign(target)
        return exists

    def publish(
        self,
        staging: TableName,
        target: TableName,
        replace: bool,
        before_commit: Callable[[Connection], None] | None = None,
    ) -> None:
        """Swap ``staging`` in under ``target``'s name and commit, atomically.

        In the session's transaction: ``DropTable`` of the old target, :class:`RenameTable` of
        the staging table, a count of the renamed table's rows against :attr:`rows_written`
        (verified publication: a rename that lost rows fails here, before the commit), then
        ``before_commit`` with the session's connection (the audit record is written there),
        then the commit. Raises :class:`DataError` if the target exists and not ``replace``;
        whatever ``before_commit`` raises rolls everything back.
        """
        with self.database.errors(f"publishing {target}"):
            exists = self.replaceable_target(target, replace)
            if exists:
                # IF EXISTS: a table dropped meanwhile by another session is no error
                self.connection.execute(sa.schema.DropTable(bare_table(target), if_exists=True))
            self.connection.execute(RenameTable(staging, target.name))
            self.renamed(target)
            self.check_published(target)
            self.record_release(target)
            if before_commit is not None:
                before_commit(self.connection)
            self.commit()
            self.published = True

    def refuse_foreign(self, target: TableName) -> None:
        """:class:`DataError` (nothing published) unless the existing ``target`` is a release
        tclose published, still the table it published (checked again in the publishing
        transaction: the plan's check came before the work), once :meth:`hold_target` keeps
        other sessions from replacing it until the publish."""
        self.hold_target(target)
        problem = self.database.release_problem(target, self.connection)
        if problem is not None:
            raise DataError(
                f"The target table {target} is not a release tclose published ({problem}); "
                f"tclose replaces only its own releases. Nothing was published."
            )

    def hold_target(self, target: TableName) -> None:
        """Lock the existing ``target`` so that no other session drops or replaces it between
        the check that it is a release and the publish. Generic: nothing (the dialect's
        isolation decides)."""

    def record_release(self, target: TableName) -> None:
        """Record the just-renamed ``target`` in the registry of releases of its schema
        (:mod:`tclose.connectors.releases`), in :meth:`registry_transaction`. A table without an
        identity a release can have is not recorded (it can never be replaced), nor one into a
        registry tclose does not trust (:meth:`SQLDatabase.registry_problem`)."""
        run_id = self.staging.info.get("run_id") if self.staging is not None else None
        found = self.database.release_of(self.connection, target)
        identity = found[1] if found is not None else None
        if not run_id or found is None or identity is None:
            return
        home = found[0]
        if self.database.registry_problem(self.connection, home.schema) is not None:
            return  # a registry tclose does not trust records nothing (and is never believed)
        self.create_registry(releases_table(home.schema))
        with self.registry_transaction():
            record_release(self.connection, home, str(run_id), identity)

    @contextlib.contextmanager
    def registry_transaction(self) -> Iterator[None]:
        """Where the registry is written: the publishing transaction itself."""
        yield

    def create_registry(self, table: sa.Table) -> None:
        """Create the registry ``table`` if it does not exist, in the session's transaction."""
        self.connection.execute(sa.schema.CreateTable(table, if_not_exists=True))

    def check_published(self, target: TableName) -> None:
        """:class:`DataError` if ``target`` does not hold the :attr:`rows_written` rows."""
        if self.rows_written is None:
            return
        count = sa.select(sa.func.count()).select_from(bare_table(target))
        found = self.connection.execute(count).scalar()
        if found != self.rows_written:
            raise DataError(
                f"Publishing {target} failed: the renamed table holds {found} rows, "
                f"{self.rows_written} were written and verified. Nothing was published."
            )

    def renamed(self, target: TableName) -> None:
        """Called after the staging table got the target's name, before the commit."""


class DriverSession(Session):
    """A session that controls its transaction with SQL statements on an ``AUTOCOMMIT``
    connection (``BEGIN IMMEDIATE``, ``BEGIN ISOLATION LEVEL REPEATABLE READ``, ``START
    TRANSACTION WITH CONSISTENT SNAPSHOT``): the base of the built-in dialects, which know their
    SQL. Bulk writes use the driver's ``executemany`` with the dialect's :attr:`placeholder`."""

    #: The driver's parameter placeholder (``"?"`` for sqlite3, ``"%s"`` for PyMySQL).
    placeholder: ClassVar[str] = "%s"

    @classmethod
    def open_connection(cls, engine: Engine) -> Connection:
        return engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def execute(self, statement: str) -> list[Any]:
        """Run one SQL statement written by the dialect module (identifiers quoted with
        :meth:`SQLDatabase.quote`, no parameters); return its rows, if any."""
        if self.connection.dialect.paramstyle in ("format", "pyformat"):
            # The driver reads % as a placeholder; MariaDB Connector/Python (qmark) does not, and
            # took a %% for two characters of a name (another table's, if one had that name).
            statement = statement.replace("%", "%%")
        result = self.connection.exec_driver_sql(statement)
        return list(result.fetchall()) if result.returns_rows else []

    def begin(self, staging: sa.Table | None) -> None:
        self.execute("BEGIN")
        if staging is not None:
            self.prepare_staging(staging)

    def commit(self) -> None:
        self.execute("COMMIT")

    def end(self) -> None:
        """Roll back whatever is still open (the dialect may also drop what it committed)."""
        if not self.published:
            self.execute("ROLLBACK")

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Bulk-insert ``rows`` (tuples of Python values in ``columns`` order) with the driver's
        ``executemany``, in the session's transaction."""
        if not rows:
            return
        sql = self.insert_sql(table, columns)
        cursor = driver_connection(self.connection).cursor()
        with self.database.errors(f"writing {shown(table)}"):
            try:
                cursor.executemany(sql, rows)
            finally:
                cursor.close()

    def insert_sql(self, table: sa.Table, columns: Sequence[str]) -> str:
        """``INSERT INTO table (columns) VALUES (placeholders)`` with :attr:`placeholder`."""
        quote = self.database.quote
        if self.placeholder == "%s":  # the driver applies %, so a % in an identifier is %%

            def quote(name: str) -> str:
                return self.database.quote(name).replace("%", "%%")

        names = ", ".join(quote(c) for c in columns)
        values = ", ".join([self.placeholder] * len(columns))
        return f"INSERT INTO {self.database.qualified(table, quote)} ({names}) VALUES ({values})"


class NativeType(sa.types.UserDefinedType):
    """A column type kept by the name its database gives it (DuckDB's ``HUGEINT`` or
    ``INTEGER[]``, PostgreSQL's ``point`` or ``xml``, MariaDB's ``INET6``, an untyped SQLite
    column: ``""``), for the types SQLAlchemy does not know. A table of the same database gets
    exactly this type; another kind of database cannot take it (no generic equivalent). Values
    are the driver's, unconverted."""

    cache_ok = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_col_spec(self, **_kw: Any) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"NativeType({self.name!r})"


class BitString(NativeType):
    """A string of ``length`` bits from a source that reads it as its unsigned integer or its
    bytes (MariaDB/MySQL's ``BIT(length)``), as the target's type for strings of bits
    (PostgreSQL's ``BIT(length)``, DuckDB's ``BIT``): the target's session writes :meth:`bits`
    of each value (``5`` in a ``BIT(4)`` is ``'0101'``)."""

    cache_ok = True  # its state, the length and the name, makes its cache key

    def __init__(self, length: int, name: str) -> None:
        super().__init__(name)
        self.length = length

    def bits(self, value: Any, column: str) -> str | None:
        """``value`` as its string of :attr:`length` bits; :class:`DataError` naming ``column``
        if it has more bits."""
        if value is None:
            return None
        number = int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else value
        if not isinstance(number, int) or not 0 <= number < 1 << self.length:
            raise DataError(
                f"Column {column!r} holds a value that is not a BIT({self.length}) ({value!r}), "
                f"which tclose cannot write as {self.length} bits."
            )
        return format(number, f"0{self.length}b")

    def __repr__(self) -> str:
        return f"BitString({self.length}, {self.name!r})"


def bits_as_text(table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> Sequence[tuple]:
    """``rows`` with the values of each :class:`BitString` column of ``table`` as their strings
    of bits (the text a target's bit-string type reads); ``rows`` itself if there is none."""
    bits = {i: t for i, c in enumerate(columns) if isinstance(t := table.c[c].type, BitString)}
    if not bits:
        return rows
    return [
        tuple(bits[i].bits(v, columns[i]) if i in bits else v for i, v in enumerate(row))
        for row in rows
    ]


@contextlib.contextmanager
def unknown_types_unremarked() -> Iterator[None]:
    """Silence SQLAlchemy's warning about a reflected type it does not know: tclose names such
    a type itself (:meth:`SQLDatabase.declared_types`), or stops with a message naming it. And
    its warnings about lines of MySQL's ``SHOW CREATE TABLE`` it cannot parse (a column name
    with a line break), which printed the pieces of the name raw: ``MySQLDatabase.table``
    names such a column, escaped."""
    with warnings.catch_warnings():
        for message in ("Did not recognize type", "Unknown schema content", "Unknown column def"):
            warnings.filterwarnings("ignore", message, sa.exc.SAWarning)
        yield


def type_text(column_type: sa.types.TypeEngine) -> str:
    """A column type as messages show it: a :class:`NativeType` by its database's name (an
    untyped column as ``no declared type``), others as SQLAlchemy writes them."""
    if isinstance(column_type, NativeType):
        return column_type.name or "no declared type"
    return repr(column_type)


class DriverValue(sa.types.UserDefinedType):
    """A parameter type that hands the value to the driver unchanged (a value the same driver
    returned), where a column type's bind processing could convert it."""

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        raise NotImplementedError("DriverValue types parameters, never columns")


def _existing_tables(inspector: sa.Inspector, schema: str | None, shown: int = 20) -> str:
    """``Its tables are: a, b (2).``, naming the tables the schema does have."""
    try:
        names = sorted(inspector.get_table_names(schema=schema))
    except sa.exc.SQLAlchemyError:
        return ""
    where = f"Schema {schema}" if schema else "It"
    if not names:
        return f"{where} has no table."
    more = f", ... ({len(names)} in all)" if len(names) > shown else ""
    return f"{where} has the tables: {', '.join(names[:shown])}{more}."


def _raw(column: sa.ColumnElement, name: str) -> sa.ColumnElement:
    return sa.type_coerce(column, sa.types.NullType()).label(name)


@contextlib.contextmanager
def _connection(engine: Engine, connection: Connection | None) -> Iterator[Connection]:
    if connection is not None:
        yield connection
    else:
        with engine.connect() as fresh:
            yield fresh


def driver_connection(connection: Connection) -> Any:
    """The driver's own connection (psycopg, PyMySQL, sqlite3) under a checked-out ``connection``."""
    raw = connection.connection.driver_connection
    assert raw is not None  # set while the connection is checked out of the pool
    return raw


def random_suffix() -> str:
    """A short random suffix for names that must not collide (constraints, locks)."""
    return secrets.token_hex(4)


def vanishing_table(name: TableName, path: str, where: str, database: bool = False) -> ConfigError:
    """The error for table ``name`` (at YAML ``path``) that is, or would be, ``where``: in a
    temporary schema or an in-memory database, whose tables the database forgets when the
    connection (or the process) ends. A release or audit row there would be gone after a run
    that said it published. With ``database`` the URL's database itself is the one forgotten:
    the error points at the URL (``source.url``, else ``target.url``: the target's database
    holds the audit table too)."""
    if database:
        path = "source.url" if path.startswith("source.") else "target.url"
    return ConfigError(
        f"The table {name} is (or would be) {where}, which the database "
        f"forgets when the run's connection ends: a table published there would be gone after "
        f"the run. Name a table of a permanent schema in a database kept on disk.",
        path=tuple(path.split(".")),
    )


SQLDatabase.session_class = Session


class SQLAlchemyConnector:
    """The generic connector (plugin ``sqlalchemy``): any SQLAlchemy dialect that no other
    connector claims, through :class:`SQLDatabase` (install the dialect's package and driver,
    and write the URL as SQLAlchemy documents it)."""

    name = "sqlalchemy"
    dialects = ("*",)

    def connect(self, url: str, password_file: str | None = None) -> SQLDatabase:
        return SQLDatabase(url, password_file)


@hookimpl
def register_connectors(register: Any) -> None:
    register(SQLAlchemyConnector())
