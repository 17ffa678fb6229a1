"""Connector plugin ``postgresql``: PostgreSQL through psycopg 3.

- Snapshot: one ``REPEATABLE READ`` transaction holds the whole run on a same-database target —
  pass-1 read, staging table, helper tables, ``INSERT ... SELECT``, verification read-back and
  the swap — so the staging table is never visible to anyone else, and a killed run leaves
  nothing (the server rolls the transaction back). A source read for another database is a
  ``REPEATABLE READ, READ ONLY`` transaction.
- Reads: frames (``read``) of ``smallint``/``integer``/``bigint``/``real``/``double precision``
  columns come from ``COPY (SELECT ...) TO STDOUT (FORMAT BINARY)``, cut by NumPy (chunks with a
  NULL built from psycopg's values); everything else (and ``read_rows``) through
  psycopg server-side (named) cursors in binary format. All in the session's transaction.
- Verification (``read_with_digest``): the content digest's binary ``COPY`` of every column is
  hashed and, in the same pass, cut by NumPy into the frames of the QI and confidential columns
  when they are all fixed-width numbers (else a ``read`` of them, then the digest's ``COPY``).
- Bulk writes: ``COPY ... FROM STDIN``; helper tables of integers and doubles are sent in COPY's
  binary format, built by NumPy in one pass. The join's ``INSERT ... SELECT`` fills the staging
  table without its primary key, added back (same name) after it.
- Runs on one target exclude each other through an advisory lock taken before the run's
  transaction begins, so that its snapshot sees what a run it waited for published.
"""

from __future__ import annotations

from tclose.connectors.postgresql.database import (
    PostgreSQLConnector,
    PostgreSQLDatabase,
    register_connectors,
)
from tclose.connectors.postgresql.session import LOCK_WAIT_SECONDS, PostgreSQLSession, run_lock_key

__all__ = [
    "LOCK_WAIT_SECONDS",
    "PostgreSQLConnector",
    "PostgreSQLDatabase",
    "PostgreSQLSession",
    "register_connectors",
    "run_lock_key",
]
