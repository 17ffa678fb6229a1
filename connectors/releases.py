"""The registry of releases: the tables tclose published, so that a publish replaces only those.

Every schema a run publishes into holds a table ``tclose_releases`` (:data:`RELEASES_TABLE`),
written by tclose alone, in the publishing transaction where the database has one: one row per
published table, its name as the database stores it, the run id, the moment and the table's
*identity* as the database gives it when the table is published (:meth:`release_of` of each
connector; what "the same table" means on each database is said there and in
``docs/databases.md``). ``if_exists: replace`` replaces an existing table only when the registry
of its schema is one tclose may trust (the connector's ``registry_problem``: on PostgreSQL,
owned by the connecting role and written by no other), records it under its name with the
identity it has now (its lasting id where the database gives one, its columns and its rows),
and the table carries the mark of the run recorded (its comment ``tclose run <id>``, which only
who may alter the table can set) (:func:`release_problem`); any other table — a user's, one
recreated or renamed into a release's place, a release changed since — is refused before any
work, and again inside the publishing transaction. A name that denotes the registry itself is reserved
(:func:`tclose.naming.reserved`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tclose.connector import NO_RELEASE_RECORD as NO_RECORD
from tclose.naming import RELEASES_TABLE, TableName

#: How a table's mark (its comment, or what stands for it) names the run that published it.
MARK_PREFIX = "tclose run "

#: SHA-256 values are added modulo this in :func:`content_identity`.
_MODULUS = 2**256


def releases_table(schema: str | None) -> sa.Table:
    """The registry's definition in ``schema`` (``None``: the connection's default schema)."""
    from sqlalchemy.dialects import mysql

    name_type = sa.String(255).with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    return sa.Table(
        RELEASES_TABLE,
        sa.MetaData(),
        sa.Column("name", name_type, primary_key=True),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("identity", sa.Text(), nullable=False),
        sa.Column("published_at", sa.DateTime(), nullable=False),
        schema=schema,
        mysql_engine="InnoDB",
    )


def recorded(connection: Connection, home: TableName) -> tuple[str, str] | None:
    """``(run_id, identity)`` that the registry of ``home``'s schema records for ``home``'s
    name, or ``None`` (no registry there, or no row)."""
    if not sa.inspect(connection).has_table(RELEASES_TABLE, schema=home.schema):
        return None
    table = releases_table(home.schema)
    row = connection.execute(
        sa.select(table.c.run_id, table.c.identity).where(table.c.name == home.name)
    ).first()
    return (str(row[0]), str(row[1])) if row is not None else None


def release_problem(
    connection: Connection,
    home: TableName,
    identity: str | None,
    marked_run: str | None,
    *,
    marks: bool = True,
) -> str | None:
    """Why table ``home`` (schema and name as the database stores them), whose identity is now
    ``identity`` (``None``: it has none a release can have) and which carries the mark of run
    ``marked_run`` (``None``: no mark), is not a release tclose published; ``None`` when it is
    one. A release is recorded by the registry of its schema, carries the mark of the run the
    registry records (unless the database can mark no table: ``marks`` false) and has the
    identity recorded: a registry's row alone never makes a table a release."""
    found = recorded(connection, home)
    if found is None:
        where = f"{home.schema}.{RELEASES_TABLE}" if home.schema else RELEASES_TABLE
        return f"{NO_RECORD} (no row for it in {where})"
    run_id, identity_then = found
    if marks and marked_run != run_id:
        carried = f"the mark of run {marked_run}" if marked_run else "no mark of a run"
        return (
            f"the registry records it as run {run_id}'s release, but the table carries "
            f"{carried} (its comment, which only who may alter the table can set): the record "
            f"is not tclose's"
        )
    if identity is None or identity != identity_then:
        return (
            f"it is not the table run {run_id} published under that name: it was dropped and "
            f"made again, renamed into its place, or changed since (its rows, its columns or "
            f"its definition)"
        )
    return None


def marked_run(comment: str | None) -> str | None:
    """The run id a table's mark (its comment ``tclose run <id>``) names, else ``None``."""
    if comment and comment.startswith(MARK_PREFIX):
        return comment.removeprefix(MARK_PREFIX).strip() or None
    return None


def record_release(connection: Connection, home: TableName, run_id: str, identity: str) -> None:
    """Record table ``home`` as the release of run ``run_id``, with ``identity``, in the
    registry of its schema (which exists), in the connection's transaction; the row of an
    earlier release of that name is replaced."""
    table = releases_table(home.schema)
    connection.execute(sa.delete(table).where(table.c.name == home.name))
    connection.execute(
        sa.insert(table).values(
            name=home.name,
            run_id=run_id,
            identity=identity,
            published_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
        )
    )


def content_identity(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The identity of a table by its content, where the database gives a table no lasting
    identity of its own: the column names, the row count and the sum (modulo ``2**256``, so
    in any row order) of the SHA-256 of each row's values (``repr`` of the driver's values;
    bytes for a ``memoryview``)."""
    total, count = 0, 0
    for row in rows:
        values = tuple(bytes(v) if isinstance(v, (memoryview, bytearray)) else v for v in row)
        total += int.from_bytes(hashlib.sha256(repr(values).encode()).digest(), "big")
        count += 1
    names = hashlib.sha256(repr(list(columns)).encode()).hexdigest()[:16]
    return f"content {count} rows, columns {names}, sha256 sum {total % _MODULUS:064x}"
