"""The MariaDB/MySQL database (:class:`MySQLDatabase`) and the connector plugin ``mysql``."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.pool import NullPool

import tclose.connectors.mysql.types  # noqa: F401 (registers MariaDB/MySQL's source types)
from tclose.base.digests import MYSQL_ORDERED_DIGEST_ALGORITHM
from tclose.base.notices import notice_once
from tclose.connectors.mysql.catalog import _BOUND, _accounts_of, _catalog_row, _grant_rows
from tclose.connectors.mysql.server import (
    _QUALIFIED_NAME,
    _STORED_FUNCTION,
    _TRAILING_REFUSED,
    ACCESS_DENIED,
    FILE_EXTENSION,
    FILE_NAME_MAX,
    LOCAL_ENGINES,
    MEMORY_ENGINES,
    RECORD_CHANGED,
    TRAILING_SPACES,
    _literal,
    checked_charset,
    choose_driver,
    driver_description,
    error_code,
)
from tclose.connectors.mysql.session import MySQLSession
from tclose.connectors.mysql_drivers import (
    DISTRIBUTIONS,
    DRIVERS,
    notes,
)
from tclose.connectors.releases import marked_run
from tclose.connectors.sql import (
    STAGING_MARK,
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    tables_read_through,
    vanishing_table,
)
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl
from tclose.naming import STAGING_SCHEMA


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
                    f"The table {name} names no database, and the URL selects "
                    f"none ({self.redacted_url}): write it as database.table, or name the "
                    f"database in the URL.",
                    path=tuple(path.split(".")),
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
                f"The database {schema} of table {name} does not exist on "
                f"{self.redacted_url}. Create it, or name an existing one.",
                path=tuple(path.split(".")),
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
