"""The connector contract: what a database connector must provide, and what it may.

A connector plugin registers a :class:`Connector` (``register_connectors`` hook). Its
:meth:`Connector.connect` returns a :class:`Database`, whose :meth:`Database.session` yields a
:class:`Session`. These three Protocols hold the **required** members: the runner, ``tclose
verify`` and ``tclose init`` use nothing else, except the **optional capabilities** a database
declares in its :class:`Capabilities` (read by :func:`capabilities_of`; each flag's fallback is
in its docstring), whose members are in these Protocols:

- :class:`InDatabaseJoin`: build a same-database target inside the database (else the runner
  streams the source a second time into the target session);
- :class:`BulkLoad`: fast bulk writes (used by the generic connector's own fills);
- :class:`RunLock`: runs on one target exclude each other;
- :class:`ReadHold`: ``tclose verify`` reads a table whole while a run publishes it;
- :class:`NameResolution`: the qualified name a name resolves to (search paths, temporary
  schemas and in-memory databases play no part);
- :class:`TableIdentity`: say which table a name denotes (source = target guard, run ids);
- :class:`TableDependencies`: the tables a source reads (or why the catalog cannot list them:
  :class:`TablesRead`) and a target's drop takes with it;
- :class:`Releases`: which existing tables are releases tclose published (the only ones a
  publish replaces);
- :class:`DatabaseFiles`: the files a database is kept in (no report or file target on them);
- :class:`TablePerFile`: a database that is one file holding one table (another table is
  another file);
- :class:`RowSecurity`: whether row-level security policies filter a read of the source;
- :class:`StagingReaders`: which other accounts may read a run's staging rows;
- :class:`StreamCheck`: refuse values a stream would change;
- :class:`StreamAdapter`: map the values streamed into another kind of database;
- :class:`PublishedRecord`: the content digest's types and relation;
- :class:`InDatabaseChecks`: the digest and linkage check done by the database;
- :class:`ReadOnlySource`: a source opened read-only by its driver;
- :class:`SQLAlchemyEngine`: the SQLAlchemy engine that reaches the database.

A :class:`Connector` may also offer :class:`ConnectorNotes` (what ``tclose plugins`` says).

Every SQLAlchemy dialect gets the required members and most capabilities from the generic
connector (:class:`tclose.connectors.sql.SQLDatabase`, whose ``declared`` capabilities say which);
the built-in connectors override it where they are faster or stricter. ``tclose.testing.check_connector`` checks a connector against the contract.
Tables are named by ``tclose.naming.TableName`` and described by ``sqlalchemy.Table``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import sqlalchemy as sa

    from tclose.naming import TableName


@runtime_checkable
class Connector(Protocol):
    """A connector plugin: the object passed to ``register(...)`` in ``register_connectors``.

    Attributes:
        name: the connector's registered name (``tclose plugins`` lists it).
        dialects: the SQLAlchemy dialect names it serves (the URL's scheme before ``+`` and
            ``://``, e.g. ``("postgresql",)``); ``("*",)`` serves every dialect no other
            connector claims (the generic connector does).
    """

    name: str
    dialects: tuple[str, ...]

    def connect(self, url: str, password_file: str | None = None) -> Database:
        """The :class:`Database` at ``url``; ``password_file`` holds the password (its content,
        stripped). Raises ``DataError`` when the database cannot be reached or has no driver,
        ``ConfigError`` when the URL is malformed. Never shows the password in a message."""
        ...


class Database(Protocol):
    """One database, as :meth:`Connector.connect` returns it.

    Attributes:
        dialect: the SQLAlchemy dialect name (``"sqlite"``, ``"postgresql"``, ...); the
            staging table translates types when the source is of another dialect.
        redacted_url: the URL with its password replaced by ``***`` (shown in reports).
    """

    dialect: str

    @property
    def redacted_url(self) -> str: ...

    def table(self, name: TableName) -> sa.Table:
        """The reflected table ``name``; ``DataError`` naming the existing tables if there is
        none."""
        ...

    def exists(self, name: TableName) -> bool:
        """Whether table ``name`` exists."""
        ...

    def row_key(self, table: sa.Table, key: str | None) -> sa.ColumnElement:
        """The column that orders and identifies the rows: ``key``, else the single-column
        primary key (or a row id the dialect has); ``ConfigError`` if there is none, ``DataError``
        if ``key`` is not a column."""
        ...

    def check_table_name(self, name: TableName, path: str = "target.table") -> None:
        """``ConfigError`` (at YAML ``path``) if the database would cut or refuse ``name``."""
        ...

    def owned_name(self, target: TableName, mark: str, run_id: str) -> TableName:
        """The name of a table a run creates next to ``target``: ``target``'s name shortened to
        fit, then ``mark`` and the run id."""
        ...

    def staging_table(
        self,
        name: TableName,
        source: sa.Table,
        output_columns: Sequence[str],
        aggregated: Collection[str],
        rounded: Collection[str] = (),
        source_dialect: str | None = None,
    ) -> sa.Table:
        """The definition (not created) of the staging table: ``tclose_row`` (the new key, a
        ``BIGINT``-like primary key) first, then ``output_columns``. Pass-through columns keep
        their source type exactly (translated from ``source_dialect`` without loss: a double
        stays 64-bit, a decimal keeps precision and scale, a timestamp its microseconds);
        ``aggregated`` columns hold 64-bit floats, or their integer type when ``rounded``.

        Raises :class:`~tclose.errors.ConfigError` when two columns would be one column of the
        table as the database compares names (``TCLOSE_ROW`` is ``tclose_row`` on SQLite);
        :class:`~tclose.errors.DataError` when a pass-through column's type cannot be made
        here, naming the column and the type."""
        ...

    def session(
        self, staging: sa.Table | None = None, *, read_only: bool = False
    ) -> AbstractContextManager[Session]:
        """A context manager yielding a :class:`Session`: one connection, one transaction.

        With ``staging`` (from :meth:`staging_table`, ``info`` holding ``target`` and
        ``run_id``) the session creates it, invisible to others or removable. Leaving the block
        without :meth:`Session.publish` leaves nothing behind: the staging table and every
        helper table are gone, the target unchanged, whatever exception ended the block."""
        ...

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`Session.read` in a read-only session of its own."""
        ...


class Session(Protocol):
    """One connection holding one transaction, yielded by :meth:`Database.session`."""

    def table(self, name: TableName) -> sa.Table:
        """The table as this session sees it (its own uncommitted staging table included)."""
        ...

    def read_rows(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """Stream ``columns`` of ``name`` ordered by the row key (:meth:`Database.row_key`), in
        chunks of at most ``chunk_size`` rows, never the whole table in memory. Each row is a
        tuple of the driver's own values (``None`` for NULL, no lossy conversion); with
        ``with_key`` the row key comes first. ``DataError`` names a missing column."""
        ...

    def read(
        self,
        name: TableName,
        columns: Sequence[str],
        key: str | None = None,
        chunk_size: int = 50_000,
        with_key: bool = True,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`read_rows` as DataFrames; with ``with_key`` the first column is ``__key__``."""
        ...

    def fill_streamed(self, staging: sa.Table, chunks: Iterable[list[tuple]]) -> int:
        """Write rows computed by the runner into the created ``staging`` table, in this
        session's transaction: each chunk a list of tuples of the output columns, in the
        staging table's column order after ``tclose_row``. The session numbers the rows
        ``1..n`` (``tclose_row``) in their content order, a function of the values alone (ties
        only between rows of the same values), and stores them in that order: the order the
        rows arrive in, the source's, must be neither numbered nor stored. Returns the number of
        rows written."""
        ...

    def publish(
        self,
        staging: TableName,
        target: TableName,
        replace: bool,
        before_commit: Callable[[Any], None] | None = None,
    ) -> None:
        """Put the verified ``staging`` table in place under ``target``'s name, atomically: the
        target shows the old rows or all the new ones, never a mix or nothing (``DataError`` if
        it exists and not ``replace``, or is not a release tclose published (:class:`Releases`),
        nothing changed); the published table is recorded as a release. ``before_commit`` (see
        :attr:`Capabilities.publishes_in_transaction`) is called with the connection before the
        commit."""
        ...

    def close(self) -> None:
        """End the session early (the ``with`` block ends it too); idempotent."""
        ...


# --- optional capabilities ------------------------------------------------------------------


class InDatabaseJoin(Protocol):
    """Optional, on a :class:`Session`: build the target inside the database
    (:attr:`Capabilities.joins_in_snapshot`).

    When the target is in the source's database, one session reads, calls ``fill_joined`` and
    publishes: pass-through columns never leave the database. Fallback: the runner reads the
    source twice (a read-only session) and streams the rows into the target session with
    :meth:`Session.fill_streamed`."""

    def fill_joined(
        self,
        source: sa.Table,
        key: str | None,
        staging: sa.Table,
        keys: np.ndarray,
        labels: np.ndarray,
        aggregated: Mapping[str, np.ndarray],
    ) -> None:
        """Fill ``staging`` from ``source`` read in this session's snapshot:
        row ``keys[i]`` is in cluster ``labels[i]`` and takes its ``aggregated`` values; rows
        numbered and stored in content order, as :meth:`Session.fill_streamed` says;
        ``DataError`` if the source no longer has every key."""
        ...


class BulkLoad(Protocol):
    """Optional, on a :class:`Session`: bulk writes (COPY, multi-row INSERT, executemany).

    The generic connector's ``fill_streamed`` and ``fill_joined`` write through these; a
    subclass overrides them with the fastest path of its database."""

    def insert_rows(self, table: sa.Table, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Insert ``rows`` (tuples in ``columns`` order) in the session's transaction."""
        ...

    def insert_arrays(
        self, table: sa.Table, arrays: Mapping[str, np.ndarray], chunk_size: int = 50_000
    ) -> None:
        """Insert equally long 1-D arrays, one per column, in the session's transaction."""
        ...


class RunLock(Protocol):
    """Optional, on a :class:`Session`: runs writing one target exclude each other.

    A writing session takes ``lock(target)`` before it creates its staging table and holds it
    to its end; a second run waits a bounded time, then fails with ``DataError``. Fallback: two
    runs on one target both publish, the last one wins (each publish is still atomic)."""

    def lock(self, target: TableName) -> None:
        """Take the run lock of ``target`` for the rest of the session."""
        ...


class ReadHold(Protocol):
    """Optional, on a :class:`Session`: a read-only session reads one table whole while a run
    publishes it.

    ``tclose verify`` calls ``hold(table)`` first in its read-only session, before anything
    else is read. Fallback: a snapshot older than a publish may read the new table as missing
    or empty; ``tclose verify`` reads the table's run id before and after its rows and reads
    again when they differ, but a table found missing stops it (exit 3)."""

    def hold(self, name: TableName) -> None:
        """Lock table ``name`` against a concurrent publish before the session's snapshot
        begins: a publish under way ends first, a later one waits for the session."""
        ...


class NameResolution(Protocol):
    """Optional, on a :class:`Database`: the qualified name a table name resolves to, as the
    database resolves it.

    :func:`tclose.core.plan.build_plan` resolves the source, the target and the audit table once,
    and every later statement of the run names the result, schema-qualified: a session's search
    path plays no part. The database decides, not the spelling: a name that lives (or would be
    created) in a temporary schema or an in-memory database is refused before any work, and so
    is a name the database would store cut. Fallback: names are used as configured."""

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` qualified with the schema the database resolves it to (an existing table's
        or view's, else, with ``create``, the one a ``CREATE TABLE`` of it would use), spelled
        as the database stores it; ``name`` itself when it does not exist and ``create`` is
        false. ``ConfigError`` (at YAML ``path``) when it is or would be temporary or in
        memory, or stored under another name."""
        ...

    def check_configured_name(self, name: TableName, path: str) -> None:
        """``ConfigError`` (at YAML ``path``) when ``name``, of a table the run only reads,
        breaks the database's rules for names (empty, white space only, a NUL, too long, a
        character or an ending the database refuses)."""
        ...


class TableIdentity(Protocol):
    """Optional, on a :class:`Database`: which table a name really denotes.

    Fallback: the guard that refuses source = target compares names as spelled, and ``tclose
    verify`` cannot read the run id of a published table."""

    def table_identity(self, name: TableName) -> tuple | None:
        """Equal for two names (two URLs, two spellings) exactly when they denote the same
        table; ``None`` when there is no such table."""
        ...

    def table_comment(self, name: TableName) -> str | None:
        """The comment of ``name`` (``tclose run <id>`` on a published table), or ``None``."""
        ...


class TablesRead(list):
    """The answer of :meth:`TableDependencies.tables_read`: a list of the identities of the
    tables a read of a table reads, and :attr:`unknown`.

    Attributes:
        unknown: ``None`` when the database's catalog lists everything the read reads, so that
            the list is the whole closure and no other table's rows reach the read; else why
            it cannot (a function, a macro, a foreign table: their reads are not in the
            catalog), in words for a message, and the list holds only what the catalog knows.
    """

    def __init__(self, identities: Iterable[tuple] = (), unknown: str | None = None) -> None:
        super().__init__(identities)
        self.unknown = unknown


class TableDependencies(Protocol):
    """Optional, on a :class:`Database` with :class:`TableIdentity`: which tables a name reads
    and which a ``DROP`` of it drops.

    Fallback: the guard compares the source's and the target's own identities only, so a
    target that is a table the source view reads, or a partition of the source, is not refused
    (replacing it changes the source)."""

    def tables_read(self, name: TableName) -> list[tuple]:
        """The :meth:`~TableIdentity.table_identity` of ``name`` and of every table whose rows a
        read of ``name`` reads (the tables a view reads, partitions, inheriting tables),
        transitively; empty when there is no such table. A :class:`TablesRead` whose
        ``unknown`` says why when the catalog cannot list every table the read reads (it
        calls a function or a macro, or reads a foreign table): an existing target is then
        never replaced, and row-level security is reported unknown."""
        ...

    def tables_dropped(self, name: TableName) -> list[tuple]:
        """The identity of ``name`` and of every table a ``DROP TABLE`` of it drops with it (the
        partitions of a partitioned table); empty when there is no such table."""
        ...

    def replace_blockers(self, name: TableName) -> list[str]:
        """Everything the database's own dependency catalog binds to table ``name`` (objects
        that depend on it: views, foreign keys, triggers, ...; tables it inherits from or is a
        partition of, and tables that inherit from it), each described in words: a replace
        would drop them, detach the table from them or fail. Empty when nothing is."""
        ...


#: How :meth:`Releases.release_problem` begins when nothing records the table as a release (a
#: table tclose never published, or did not record), as opposed to a release that is no longer
#: the table tclose published (which ``tclose verify`` reports as a failure).
NO_RELEASE_RECORD = "tclose has no record of publishing it"


class Releases(Protocol):
    """Optional, on a :class:`Database`: which existing tables are releases tclose published.

    A publish records its table in a registry only tclose writes, with the identity the
    database gives the table (``tclose.connectors.releases``); ``if_exists: replace`` replaces
    an existing target only when :meth:`release_problem` finds it recorded there by a registry
    tclose trusts, marked by the run recorded and still the table that was published (its
    columns and rows). Fallback: an existing target is never replaced (exit 2)."""

    def release_problem(self, name: TableName) -> str | None:
        """Why the existing table ``name`` is not a release tclose published and still the
        table it published, in words for a message (beginning with :data:`NO_RELEASE_RECORD`
        when nothing records it); ``None`` when it is one."""
        ...


class DatabaseFiles(Protocol):
    """Optional, on a :class:`Database`: the files that hold it.

    Fallback: a report path, or a file target, is not compared with the database's files (a
    report path holding a SQLite database, or any file that is not a report of tclose, is still
    refused)."""

    def files(self) -> list[Path]:
        """The files that hold this database, side files included, existing or not (none for
        a server)."""
        ...


class StagingReaders(Protocol):
    """Optional, on a :class:`Database` whose staging rows other accounts may read while a
    run verifies them (MariaDB/MySQL: its staging database is committed, and a ``READ
    UNCOMMITTED`` session reads uncommitted rows): which accounts may. The run's summary warns
    and the report's ``target.staging_readers`` says it. Fallback: no other session can read a
    run's staging rows (``target.staging_readers`` is null)."""

    def staging_readers(self) -> dict[str, Any]:
        """``{"checked": bool, "accounts": [{"account": ..., "through": ...}]}``: each other
        account that may read the staging rows and the grant it may by (``SELECT ON *.*``, a
        database pattern, a table, a role); ``checked`` false (and no account) when the
        connecting account may not read the grant tables, so nobody knows."""
        ...


class RowSecurity(Protocol):
    """Optional, on a :class:`Database`: whether row-level security policies filter what a read
    of a table returns, so that a release covers only the rows the connecting role sees (the
    run's summary warns, the report's ``source.row_security`` says it). Fallback: not known
    (``source.row_security`` is null)."""

    def row_security(self, name: TableName) -> dict[str, Any] | None:
        """``{"applies": bool, "tables": [...]}`` for a read of ``name`` by the connecting role:
        ``tables`` lists, as ``{"table": ..., "role": ...}``, each table whose policies filter
        the read (``name`` itself, or a table a view reads) and the role they filter (the view
        owner's, for a view that is not ``security_invoker``), and ``role`` is the connecting
        role where there are policies; ``applies`` is false with no table for a database
        without row-level security. ``applies`` is ``None`` with ``unknown`` (why, in words)
        when the read reaches tables the catalog cannot list (``tables_read`` unknown): policies
        may filter rows read through a function or a foreign table, so "not filtered" is never
        said of such a read. ``None``: the connector cannot tell."""
        ...


@runtime_checkable
class ConnectorNotes(Protocol):
    """Optional, on a :class:`Connector`: what ``tclose plugins`` says under it (the driver in
    use, a faster one to install). Fallback: nothing."""

    def notes(self) -> list[str]:
        """Lines about the connector's installation, each a sentence; computed without
        importing the connector's heavy modules (``tclose plugins`` stays quick)."""
        ...


class TablePerFile(Protocol):
    """Optional, on a :class:`Database`: a database that is one file holding one table named
    after the file (a Parquet file), so that another table is another file.

    ``tclose init`` proposes the target file beside the source file, and the advice of a
    refused target (the source itself, an existing target) names a file, not a table. Fallback:
    another table of the same database (``<table>_anon``, no ``target.url``).

    Attributes:
        path: the file (its real path).
    """

    path: Path

    def target_beside(self, table: str) -> tuple[str, str]:
        """The URL and the table name of a file beside this one to publish a table named
        ``table`` (a file's table is its name without its suffix: a dot or a slash in
        ``table`` becomes ``_``)."""
        ...


class StreamCheck(Protocol):
    """Optional, on a :class:`Session`: refuse values its reads cannot carry exactly.

    Before it streams the pass-through columns of a source session into a target (the two are
    not one database), the runner calls ``refuse_unstreamable``; it raises
    :class:`~tclose.errors.DataError` naming each column that holds values its reads would give
    changed (DuckDB's infinite dates read as ``9999-12-31``) or that a target of
    ``target_dialect`` would change (SQLite's values of another type than declared). Fallback:
    values are streamed as read."""

    def refuse_unstreamable(
        self, name: TableName, columns: Sequence[str], target_dialect: str
    ) -> None:
        """:class:`~tclose.errors.DataError` naming each of ``columns`` of ``name`` that holds
        values the stream into a database of ``target_dialect`` would change, with its count of
        rows."""
        ...


class PublishedRecord(Protocol):
    """Optional, on a :class:`Session`: what the content digest and its record need to know.

    ``tclose.core.published.scan_published`` digests every published row as read by
    :meth:`Session.read_rows` (:data:`tclose.base.digests.ORDERED_DIGEST_ALGORITHM`) and records
    the columns' types and the relation beside the digest (:attr:`Capabilities.digest_algorithm`
    names the digest its reads give, :attr:`Capabilities.records_types` whether its types are
    the published ones). Fallbacks: the types compiled from the reflected ``sqlalchemy.Table``
    for ``column_types``, no relation check without ``relation_kind``."""

    def column_types(self, table: sa.Table) -> dict[str, str]:
        """Column name → its type as the database's catalog declares it (the text a type
        changed after the run, keeping every value, would change)."""
        ...

    def relation_kind(self, table: sa.Table) -> str | None:
        """What ``table``'s name stands for when it is not a plain table (``"view"``, a
        relation that may show each session other rows), else ``None``."""
        ...


class InDatabaseChecks(Protocol):
    """Optional, on a :class:`Session`: the verifier's checks of the whole table done by the
    database, which reads only the QI and confidential columns back.

    With ``content_digest``, a scan uses this digest (its own algorithm name, e.g.
    :data:`tclose.base.digests.COPY_DIGEST_ALGORITHM`), ``unique_rows`` for the linkage check and
    ``read_with_digest`` for the columns it checks. Fallback: every column is read once and
    digested and compared in Python (:class:`PublishedRecord`)."""

    def content_digest(self, table: sa.Table, published_as: TableName | None = None) -> dict:
        """The content digest of ``table`` (``algorithm``, ``columns``, ``sha256``, perhaps
        ``statement``), naming ``published_as`` (the target a staging table becomes)."""
        ...

    def unique_rows(self, table: sa.Table, columns: Sequence[str]) -> int:
        """How many rows of ``table`` hold a tuple of values of ``columns`` (taken together)
        that no other row holds, each value compared by what it is (NULL equal to NULL, text
        byte for byte, ``-0.0`` apart from ``0.0``)."""
        ...

    def read_with_digest(
        self,
        name: TableName,
        columns: Sequence[str],
        digest: dict,
        chunk_size: int = 50_000,
        published_as: TableName | None = None,
    ) -> Iterator[pd.DataFrame]:
        """The frames of ``read(name, columns, "tclose_row", chunk_size, with_key=False)``,
        and ``content_digest`` of the table put into ``digest`` once they are all read."""
        ...


class ReadOnlySource(Protocol):
    """Optional, on a :class:`Database`: every connection opened read-only by the driver.

    A source whose database is not the target's (another URL, and not a file of the target's
    database of its kind) is only read, and so is every database that ``tclose verify``,
    ``compare`` and ``init`` read: before its first connection, ``open_read_only()`` is called
    (:func:`open_read_only`), and from then on the driver or the server refuses every write
    through any of its connections (SQLite's ``mode=ro``, DuckDB's ``read_only``, PostgreSQL's
    and MariaDB's read-only transactions by default), so no statement, the run's or a plugin's,
    can change the source, and a database file's bytes stay as they were. Fallback: the source
    is read in read-only sessions (:meth:`Database.session` with ``read_only``) only."""

    def open_read_only(self) -> None:
        """Open every later connection read-only by the driver."""
        ...


class StreamAdapter(Protocol):
    """Optional, on a :class:`Session`: values streamed into another kind of database, mapped
    to what that database stores (:attr:`Capabilities.adapts_streams`).

    When the runner streams pass-through columns into a target of another dialect, it passes
    each chunk it read (rows it publishes, key first) through the :class:`StreamedValues` that
    ``streamed_values`` gives, and calls its ``refuse`` once every chunk is read. MariaDB/MySQL:
    a ``TIME`` read as a duration within a day becomes that time of day; a zero date (read as
    text) or a duration outside a day is refused. Fallback: values are streamed as read."""

    def streamed_values(
        self, source: sa.Table, columns: Sequence[str], target_dialect: str
    ) -> StreamedValues | None:
        """The mapping of ``columns`` of ``source`` (in this order, after the key) into a
        database of ``target_dialect``; ``None`` when every value streams as read."""
        ...


class StreamedValues(Protocol):
    """The values of one stream, mapped chunk by chunk (:class:`StreamAdapter`)."""

    def rows(self, rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]] | None:
        """``rows`` (the key, then the columns) with each value as the target stores it;
        ``None`` once a value the target cannot store was found, in this chunk or an earlier
        one (the rest of the stream is then read only to count such values)."""
        ...

    def refuse(self) -> None:
        """:class:`~tclose.errors.DataError` naming each column that holds values the target
        cannot store, with its count of rows; nothing when there is none."""
        ...


class SQLAlchemyEngine(Protocol):
    """Optional, on a :class:`Database`: the SQLAlchemy engine that reaches it
    (:attr:`Capabilities.sqlalchemy_engine`).

    ``tclose init`` describes the column types in the engine's dialect, the conformance suite
    drops its tables and its records of releases through it, and audit hooks write through it.
    Fallback: types described in SQLAlchemy's default dialect; the conformance suite drops
    tables through the ``drop`` it is given.

    Attributes:
        engine: the ``sqlalchemy.Engine``.
    """

    engine: sa.Engine


#: :attr:`Capabilities.digest_algorithm` by default
#: (:data:`tclose.base.digests.ORDERED_DIGEST_ALGORITHM`).
DEFAULT_DIGEST_ALGORITHM = (
    "sha256 of (sorted column names, row count, sha256 of the sha256(row) in tclose_row order)"
)


@dataclass(frozen=True)
class Capabilities:
    """What a :class:`Database` and its sessions offer beyond the required members: every flag
    with its default (a database that declares nothing offers nothing optional).

    A flag that promises an optional Protocol (:data:`PROMISED`) is true only when the
    Protocol's members are implemented (on the database, or on its sessions as the Protocol
    says); ``tclose.testing.check_connector`` checks it. The framework reads the flags through
    :func:`capabilities_of` and calls a member only when its flag is true.
    """

    joins_in_snapshot: bool = False
    """Same-database targets are built by :class:`InDatabaseJoin` in the snapshot of the
    session's reads; else the source is streamed a second time into the target session."""
    bulk_load: bool = False
    """Sessions write in bulk (:class:`BulkLoad`)."""
    snapshot_reads: bool = False
    """Every read of one session sees the database as it was when the session began, so pass 1,
    the second pass and the join agree. Else the runner still checks that the second pass
    returns the keys of the first, row for row; a value changed in place is not detected."""
    run_lock: bool = False
    """Runs writing one target exclude each other (:class:`RunLock`)."""
    read_hold: bool = False
    """A read-only session reads one table whole while a run publishes it (:class:`ReadHold`)."""
    name_resolution: bool = False
    """Names resolve as the database resolves them (:class:`NameResolution`)."""
    table_identity: bool = False
    """The database says which table a name denotes (:class:`TableIdentity`)."""
    table_dependencies: bool = False
    """The database lists the tables a read reads and a drop drops
    (:class:`TableDependencies`)."""
    releases: bool = False
    """The database tells the releases tclose published (:class:`Releases`); else an existing
    target is never replaced."""
    database_files: bool = False
    """The database lists the files that hold it (:class:`DatabaseFiles`)."""
    table_per_file: bool = False
    """The database is one file holding one table (:class:`TablePerFile`)."""
    row_security: bool = False
    """The database says whether row-level security filters a read (:class:`RowSecurity`)."""
    staging_readers: bool = False
    """Other accounts may read a run's staging rows, and the database says which
    (:class:`StagingReaders`)."""
    publishes_in_transaction: bool = False
    """:meth:`Session.publish` calls ``before_commit`` inside the publishing transaction, so
    audit records commit with the published table; else ``run_finished`` records the run after
    the publish."""
    stream_check: bool = False
    """Sessions refuse values a stream would change (:class:`StreamCheck`)."""
    adapts_streams: bool = False
    """Sessions map the values streamed into another kind of database (:class:`StreamAdapter`)."""
    published_record: bool = False
    """Sessions give the published columns' types and relation (:class:`PublishedRecord`)."""
    digest_algorithm: str = DEFAULT_DIGEST_ALGORITHM
    """The name of the digest a session's reads give (MariaDB/MySQL's values, read alike by
    every driver, differ from other databases')."""
    records_types: bool = True
    """The types a scan records are the published ones (false for a file whose format maps the
    staging table's types)."""
    in_database_checks: bool = False
    """Sessions digest a table and count its unique rows in the database
    (:class:`InDatabaseChecks`)."""
    read_only_source: bool = False
    """The database can be opened read-only by its driver (:class:`ReadOnlySource`)."""
    sqlalchemy_engine: bool = False
    """The database is reached through a SQLAlchemy engine (:class:`SQLAlchemyEngine`)."""


@runtime_checkable
class Declared(Protocol):
    """A :class:`Database` or a :class:`Session` that declares its :class:`Capabilities`."""

    capabilities: Capabilities


#: The capabilities of a database that declares none.
NO_CAPABILITIES = Capabilities()


def capabilities_of(part: Any) -> Capabilities:
    """The :class:`Capabilities` that ``part`` (a database or a session) declares, else
    :data:`NO_CAPABILITIES`: the one place where the framework asks an object what it offers."""
    return part.capabilities if isinstance(part, Declared) else NO_CAPABILITIES


def open_read_only(database: Any) -> Any:
    """``database``, opened read-only by its driver where it can be (:class:`ReadOnlySource`):
    for a source that is only read (a run's whose target is in another database, ``tclose
    verify``'s, ``compare``'s, ``init``'s)."""
    if capabilities_of(database).read_only_source:
        cast(ReadOnlySource, database).open_read_only()
    return database


def reads_unknown(read: Iterable[tuple]) -> str | None:
    """Why ``read`` (a ``tables_read`` answer) is not the whole closure, or ``None`` when it is
    (a plain list of a connector that does not say: its tables, as listed)."""
    return read.unknown if isinstance(read, TablesRead) else None


#: Required members of each Protocol, as the docs list them (``tests/test_plugins.py``).
REQUIRED = {"Connector": Connector, "Database": Database, "Session": Session}
#: Optional capabilities, as the docs list them.
OPTIONAL = {
    "InDatabaseJoin": InDatabaseJoin,
    "BulkLoad": BulkLoad,
    "RunLock": RunLock,
    "ReadHold": ReadHold,
    "NameResolution": NameResolution,
    "TableIdentity": TableIdentity,
    "TableDependencies": TableDependencies,
    "Releases": Releases,
    "DatabaseFiles": DatabaseFiles,
    "TablePerFile": TablePerFile,
    "RowSecurity": RowSecurity,
    "StagingReaders": StagingReaders,
    "ConnectorNotes": ConnectorNotes,
    "StreamCheck": StreamCheck,
    "StreamAdapter": StreamAdapter,
    "PublishedRecord": PublishedRecord,
    "InDatabaseChecks": InDatabaseChecks,
    "ReadOnlySource": ReadOnlySource,
    "SQLAlchemyEngine": SQLAlchemyEngine,
}
#: The flag of :class:`Capabilities` that promises each optional Protocol of a database.
PROMISED: dict[str, type] = {
    "joins_in_snapshot": InDatabaseJoin,
    "bulk_load": BulkLoad,
    "run_lock": RunLock,
    "read_hold": ReadHold,
    "name_resolution": NameResolution,
    "table_identity": TableIdentity,
    "table_dependencies": TableDependencies,
    "releases": Releases,
    "database_files": DatabaseFiles,
    "table_per_file": TablePerFile,
    "row_security": RowSecurity,
    "staging_readers": StagingReaders,
    "stream_check": StreamCheck,
    "adapts_streams": StreamAdapter,
    "published_record": PublishedRecord,
    "in_database_checks": InDatabaseChecks,
    "read_only_source": ReadOnlySource,
    "sqlalchemy_engine": SQLAlchemyEngine,
}


def unkept_promises(capabilities: Capabilities, database: Any, session: Any) -> list[str]:
    """Each true flag of ``capabilities`` (:data:`PROMISED`) whose Protocol has a member that
    neither ``database`` nor ``session`` (one of its sessions) has, as ``"flag: member"``."""
    found, flags = [], asdict(capabilities)
    for flag, protocol in PROMISED.items():
        if not flags[flag]:
            continue
        for member in protocol_members(protocol):
            if not (hasattr(database, member) or hasattr(session, member)):
                found.append(f"{flag}: {member}")
    return found


def protocol_members(protocol: type) -> list[str]:
    """The public members a Protocol declares (attributes, properties and methods), sorted."""
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n in vars(protocol) if not n.startswith("_")}
    return sorted(names)
