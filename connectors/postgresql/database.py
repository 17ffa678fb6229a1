"""The PostgreSQL database (:class:`PostgreSQLDatabase`) and the connector plugin ``postgresql``."""

from __future__ import annotations

import dataclasses
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from tclose.connectors.postgresql.catalog import (
    _BLOCKERS,
    _DROPPED_WITH,
    _IDENTITY,
    _READS,
    _REGISTRY_TRUST,
    _ROW_SECURITY,
    _resolved_row,
    _unknown_reads,
)
from tclose.connectors.postgresql.session import PostgreSQLSession
from tclose.connectors.sql import (
    SQLDatabase,
    TableName,
    TablesRead,
    _connection,
    driver_connection,
    random_suffix,
    vanishing_table,
)
from tclose.errors import ConfigError
from tclose.hookspecs import hookimpl
from tclose.naming import RELEASES_TABLE


class PostgreSQLDatabase(SQLDatabase):
    """A PostgreSQL database (driver: psycopg 3; ``postgresql://`` URLs use it too)."""

    session_class = PostgreSQLSession
    identifier_limit = 63  # NAMEDATALEN - 1, in bytes
    identifier_bytes = True
    column_names_compared = "exactly (every name is quoted)"
    interval_type = True
    #: A source's connections: every transaction read-only unless it says otherwise.
    read_only_statements = ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",)
    row_level_security = True

    def column_key(self, name: str) -> str:
        """``name`` itself: tclose quotes every identifier, and PostgreSQL compares quoted
        names exactly (``TCLOSE_ROW`` is another column than ``tclose_row``)."""
        return name

    @property
    def joins_in_snapshot(self) -> bool:
        """True: the run's one transaction is a snapshot (see the module docstring)."""
        return True

    declared = dataclasses.replace(
        SQLDatabase.declared,
        snapshot_reads=True,
        run_lock=True,
        read_hold=True,
        table_dependencies=True,
        in_database_checks=True,
    )

    def adapt_url(self, url: sa.URL) -> sa.URL:
        if url.drivername == "postgresql":
            return url.set(drivername="postgresql+psycopg")
        if url.get_driver_name() != "psycopg":
            raise ConfigError(
                f"The postgresql connector uses the psycopg (3) driver; write the URL as "
                f"postgresql+psycopg://... (got driver {url.get_driver_name()!r})."
            )
        return url

    @property
    def server_version(self) -> int:
        if not hasattr(self, "_server_version"):
            with self.errors("connecting to postgresql"), self.engine.connect() as connection:
                raw = driver_connection(connection)
                self._server_version = int(raw.info.server_version)
        return self._server_version

    def staging_table(
        self, name: TableName, source: sa.Table, *args: Any, **kwargs: Any
    ) -> sa.Table:
        table = super().staging_table(name, source, *args, **kwargs)
        # A random constraint name: a published table keeps its index, and the next staging
        # table of the same target must not collide with it.
        table.primary_key.name = f"tclose_pk_{random_suffix()}"
        return table

    def exists(self, name: TableName, connection: sa.Connection | None = None) -> bool:
        """Whether a relation named ``name`` exists (tables, views, indexes and sequences share
        one name space), as the catalog says now. On a new connection ``to_regclass`` says so.
        Inside a run's ``REPEATABLE READ`` transaction (``connection``) a query of ``pg_class``
        reads the snapshot, which misses a table another session created since, or still sees
        one it dropped, and ``to_regclass`` may answer from the session's cache of the catalog:
        the table is locked instead (``ACCESS SHARE``, in a savepoint), which makes the server
        look the name up afresh, and holds a table found until the publish ends."""
        qualified = self.qualified(name)
        with self.errors(f"looking for table {name}"), _connection(self.engine, connection) as c:
            if connection is None:
                found = c.exec_driver_sql(
                    "SELECT to_regclass(%(name)s) IS NOT NULL", {"name": qualified}
                )
                return bool(found.scalar())
            c.exec_driver_sql("SAVEPOINT tclose_exists")
            try:
                c.exec_driver_sql(
                    f"LOCK TABLE {qualified} IN ACCESS SHARE MODE".replace("%", "%%"), {}
                )
            except sa.exc.DBAPIError as error:
                c.exec_driver_sql("ROLLBACK TO SAVEPOINT tclose_exists")
                # undefined_table: no relation of the name; else one that is not a table
                return getattr(error.orig, "sqlstate", None) != "42P01"
            finally:
                c.exec_driver_sql("RELEASE SAVEPOINT tclose_exists")
            return True

    def resolve_table(self, name: TableName, path: str, create: bool = False) -> TableName:
        """``name`` in the schema PostgreSQL resolves it to: an existing relation's
        (``to_regclass``, which follows the ``search_path`` for an unqualified name), else,
        with ``create``, the one where a ``CREATE TABLE`` of it lands: the table is created
        inside a transaction that is rolled back, and the catalog says where it went and under
        which name. Refused (:class:`ConfigError`): a temporary relation or a temporary schema,
        however spelled (``pg_temp``, ``pg_temp_3``, a search path that starts with it), as
        ``relpersistence`` and ``pg_is_other_temp_schema`` say; a schema that does not exist;
        a name stored otherwise than configured (the server cuts a long one silently)."""
        with (
            self.errors(f"resolving the table name {name}"),
            self.engine.connect() as connection,
        ):
            transaction = connection.begin()
            try:
                found = self._resolved(connection, name, path, create)
            finally:
                transaction.rollback()
        if found is None:
            return name
        schema, stored, temporary = found
        if temporary:
            raise vanishing_table(name, path, f"in the temporary schema {schema}")
        if stored != name.name:
            raise ConfigError(
                f"The table name {name.name!r} is longer than postgresql keeps: "
                f"the server stores it as {stored!r} (names are cut to 63 bytes, silently). "
                f"Choose a shorter name.",
                path=tuple(path.split(".")),
            )
        return TableName(schema, stored)

    def _resolved(
        self, connection: sa.Connection, name: TableName, path: str, create: bool
    ) -> tuple[str, str, bool] | None:
        """``(schema, stored name, temporary)`` of ``name`` (see :meth:`resolve_table`), in
        ``connection``'s transaction (the caller rolls it back)."""
        if name.schema is not None:
            other = connection.exec_driver_sql(
                "SELECT pg_is_other_temp_schema(to_regnamespace(%(s)s))",
                {"s": self.quote(name.schema)},
            ).scalar()
            if other:
                raise vanishing_table(
                    name, path, f"in {name.schema}, another session's temporary schema"
                )
        found = _resolved_row(connection, name, self)
        if found is not None or not create:
            return found
        try:
            # Parameters given (none): the driver then reads %% in a quoted name as %.
            statement = f"CREATE TABLE {self.qualified(name)} ()".replace("%", "%%")
            connection.exec_driver_sql(statement, {})
        except sa.exc.DBAPIError as error:
            if getattr(error.orig, "sqlstate", None) != "3F000":  # invalid_schema_name
                raise
            raise ConfigError(
                f"The schema {name.schema} of table {name} does not exist in "
                f"{self.redacted_url}. Create it, or name an existing schema.",
                path=tuple(path.split(".")),
            ) from None
        return _resolved_row(connection, name, self)

    def table_identity(self, name: TableName) -> tuple | None:
        """The cluster's ``system_identifier`` (else the postmaster's start time and port), the
        database and the table's OID, as ``to_regclass`` resolves the quoted name (the
        ``search_path`` for an unqualified one)."""
        identities = self._identities("SELECT to_regclass(%(name)s)::oid", name)
        return identities[0] if identities else None

    def release_of(
        self, connection: sa.Connection, name: TableName
    ) -> tuple[TableName, str | None] | None:
        """The table's schema and name from ``pg_class``, and its identity
        (:data:`_IDENTITY`): its OID, which a table keeps for its life and no other table has
        while it lives (a table dropped and made again, or another renamed into its place,
        has another); its comment, the run's mark, which only the table's owner may set; its
        columns, with their declared types and ``NOT NULL``; and its rows (their count and two
        sums of a 64-bit hash of each row's text form, ``hashtextextended`` with two seeds, in
        any row order: a row updated, added or deleted changes them; one read of the table,
        its cost in ``docs/databases.md``). A temporary table has none a release can have."""
        row = connection.exec_driver_sql(_IDENTITY, {"name": self.qualified(name)}).first()
        if row is None:
            return None
        home = TableName(row[0], row[1])
        if row[3] == "t":
            return home, None
        content = connection.exec_driver_sql(
            f"SELECT count(*), coalesce(sum(hashtextextended(t::text, 0)::numeric), 0), "
            f"coalesce(sum(hashtextextended(t::text, 1)::numeric), 0) "
            f"FROM {self.qualified(home)} t".replace("%", "%%"),
            {},
        ).one()
        return home, (
            f"oid {row[2]}, comment {row[4]!r}, columns {row[5]}, "
            f"content {content[0]} rows, hash sums {content[1]} {content[2]}"
        )

    def registry_problem(self, connection: sa.Connection, schema: str | None) -> str | None:
        """Why the registry of releases of ``schema`` is not one tclose may trust
        (:data:`_REGISTRY_TRUST`): it is trusted only if it is a plain table owned by the
        connecting role itself, and no other role (``PUBLIC`` included) may write it, whether by
        a grant or as a member of its owner role, nor change its rows behind a write (a
        trigger or a rule on it). ``None`` when it is trusted, or when there is none."""
        registry = self.qualified(TableName(schema, RELEASES_TABLE))
        row = connection.exec_driver_sql(_REGISTRY_TRUST, {"name": registry}).first()
        if row is None:
            return None
        kind, owner, me, writers, members, hooks = row
        if kind != "r":
            return f"{registry} is not a table"
        if owner != me:
            return (
                f"{registry} belongs to role {owner}, not to the connecting role {me}: a "
                f"registry another role made may record any table"
            )
        others = sorted(set(writers or []) | set(members or []))
        if others:
            return (
                f"other roles may write {registry} ({', '.join(others)}): a registry they may "
                f"write may record any table; REVOKE their INSERT, UPDATE, DELETE, TRUNCATE "
                f"and TRIGGER on it"
            )
        if hooks:
            return (
                f"{registry} has triggers or rules ({', '.join(hooks)}), which tclose never makes"
            )
        return None

    def tables_read(self, name: TableName) -> TablesRead:
        """The identities of ``name`` and of every relation whose rows reading it reads: the
        relations a view's rule reads (``pg_rewrite`` and ``pg_depend``), the partitions and
        inheriting tables (``pg_inherits``) of each, and what the row-level security policies
        of each read (``pg_policy``), transitively. Unknown (:class:`TablesRead`) as soon as
        that closure holds anything but tables, views, materialized views, sequences, types
        other than domains and collations: a function or an operator (whose body may read
        any table), a foreign table (whose rows another server reads, possibly this one), a
        domain (whose checks may call functions)."""
        return self._identities(_READS, name)

    def row_security(self, name: TableName) -> dict[str, Any]:
        """:class:`tclose.connector.RowSecurity`: the tables whose row-level security policies
        filter a read of ``name`` by the connecting role (``current_user``): ``name`` itself,
        and the tables a view reads, transitively, each as the role the database checks them
        for (the view's owner, or the reading role for a ``security_invoker`` view). A table's
        policies filter a role unless the table has none enabled (``relrowsecurity``), the
        role is a superuser or ``BYPASSRLS``, or it has the owner's privileges and the table is
        not ``FORCE ROW LEVEL SECURITY``. A partition or inheriting table read through its
        parent is filtered by the parent's policies only, as PostgreSQL does. Over the closure
        of :meth:`tables_read`: when it is unknown (a function, a foreign table), ``applies``
        is true if a table it lists filters, else ``None`` (unknown), never false, and
        ``unknown`` says why."""
        where = f"looking for row-level security on {name}"
        with self.errors(where), self.engine.connect() as connection:
            role = connection.exec_driver_sql("SELECT current_user").scalar()
            rows = connection.exec_driver_sql(_ROW_SECURITY, {"name": self.qualified(name)}).all()
        tables = [{"table": str(table), "role": str(reader)} for table, reader in rows]
        security: dict[str, Any] = {"applies": bool(tables), "role": str(role), "tables": tables}
        unknown = self.tables_read(name).unknown
        if unknown is not None:
            security.update(applies=True if tables else None, unknown=unknown)
        return security

    def tables_dropped(self, name: TableName) -> list[tuple]:
        """The identities of ``name`` and of the partitions a ``DROP TABLE`` of it drops with
        it (those of a partitioned table, transitively)."""
        return self._identities(_DROPPED_WITH, name)

    def replace_blockers(self, name: TableName) -> list[str]:
        """Everything else in the database that is bound to table ``name``, by PostgreSQL's own
        dependency catalog (:data:`_BLOCKERS`): every object ``pg_depend`` records as depending
        on it, on one of its columns or on its row type — a view, a foreign key, a trigger, an
        index, a policy, a publication, a column or function of its row type, ... — other than
        the primary key tclose gives a release; and every table it inherits from or is a
        partition of, and every table inheriting from it or partition of it (``pg_inherits``).
        Replacing the table would drop those objects with it, detach it from its parent, or
        fail at the publish; a table bound to nothing is replaced."""
        with self.errors(f"looking for what depends on {name}"), self.engine.connect() as c:
            rows = c.exec_driver_sql(_BLOCKERS, {"name": self.qualified(name)}).all()
        return sorted(what for (what,) in rows)

    def _identities(self, query: str, name: TableName) -> TablesRead:
        """:meth:`table_identity` of each OID ``query`` gives for the quoted ``name``, unknown
        with the objects ``query`` describes in its second column, if it has one."""
        with self.errors(f"looking for table {name}"), self.engine.connect() as connection:
            rows = connection.exec_driver_sql(query, {"name": self.qualified(name)}).all()
            oids = [int(row[0]) for row in rows if row[0] is not None]
            unlisted = sorted({str(row[1]) for row in rows if len(row) > 1 and row[1]})
            unknown = _unknown_reads(unlisted)
            if not oids:
                return TablesRead([], unknown)
            try:
                with connection.begin_nested():
                    server = connection.exec_driver_sql(
                        "SELECT system_identifier::text FROM pg_control_system()"
                    ).scalar()
            except sa.exc.DBAPIError:  # not granted: the running postmaster is as unique
                server = connection.exec_driver_sql(
                    "SELECT pg_postmaster_start_time()::text || ':' || current_setting('port')"
                ).scalar()
            database = connection.exec_driver_sql("SELECT current_database()").scalar()
        return TablesRead([("postgresql", server, database, oid) for oid in oids], unknown)

    def declared_types(self, connection: sa.Connection, name: TableName) -> dict[str, str]:
        """``format_type`` of each column (``point``, ``xml``, a composite type qualified when
        its schema is not on the ``search_path``)."""
        rows = connection.exec_driver_sql(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%(name)s) AND attnum > 0 AND NOT attisdropped",
            {"name": self.qualified(name)},
        )
        return {column: declared for column, declared in rows}

    def same_dialect_type(self, column_type: sa.types.TypeEngine) -> sa.types.TypeEngine:
        if isinstance(column_type, postgresql.ENUM):
            column_type.create_type = False  # the type exists: the source uses it
        return column_type


class PostgreSQLConnector:
    """Connector for PostgreSQL (``postgresql://`` and ``postgresql+psycopg://`` URLs)."""

    name = "postgresql"
    dialects = ("postgresql",)

    def connect(self, url: str, password_file: str | None = None) -> PostgreSQLDatabase:
        return PostgreSQLDatabase(url, password_file)


@hookimpl
def register_connectors(register):
    register(PostgreSQLConnector())
