"""Connector plugin ``duckdb``: DuckDB database files through ``duckdb-engine`` (extra ``[duckdb]``).

URLs: ``duckdb:///relative/path.duckdb``, ``duckdb:////absolute/path.duckdb``. tclose never
creates a database file (as for SQLite); ``duckdb:///:memory:`` is a fresh, empty database.

What DuckDB gives, and so what a run gets:

- Snapshot: a writing session is one transaction for the whole run — pass-1 read, staging table,
  helper tables, ``INSERT ... SELECT ... JOIN``, verification read-back, ``DROP`` + ``ALTER TABLE
  ... RENAME`` — committed at publish. DuckDB's MVCC gives the transaction a snapshot taken at its
  start and its DDL is transactional: the staging table is never visible to another connection,
  and a killed run leaves nothing (DuckDB's write-ahead log holds no uncommitted change).
- Run lock: a DuckDB file opened for writing is locked by the operating system for the whole
  process, so a run in another process fails at once with "could not set lock" (no waiting).
  Two runs in one process share the database: DuckDB's optimistic concurrency then lets one of
  two conflicting publications fail at commit ("Transaction conflict"), and nothing of the loser
  is published.
- Reads: results stream from DuckDB in chunks, in key order: the frames of the
  quasi-identifiers and confidential attributes (integers, ``FLOAT``, ``DOUBLE``) as NumPy
  vectors (``fetch_df_chunk``), other columns as Python values (``fetchmany``).
- Bulk writes: rows are handed to DuckDB as a pandas DataFrame it scans in place (``INSERT ...
  SELECT`` from the registered frame), never row by row (``executemany`` is slow in DuckDB).
- Types: read from DuckDB's own catalog (``duckdb_columns()``), so a type is published exactly
  as the source declares it: ``DOUBLE`` stays ``DOUBLE``, ``DECIMAL(p,s)``, ``TIMESTAMP``,
  ``TIMESTAMP WITH TIME ZONE``, ``HUGEINT``, lists and structs included (a type without a
  generic SQLAlchemy equivalent can be published only into DuckDB).

Parquet and CSV files are read and written through the same machinery by
:mod:`tclose.connectors.files`.
"""

from __future__ import annotations

from tclose.connectors.duckdb.catalog import KNOWN_TABLE_FUNCTIONS
from tclose.connectors.duckdb.database import DuckDBConnector, DuckDBDatabase, register_connectors
from tclose.connectors.duckdb.dialect import DRIVER, duckdb_engine
from tclose.connectors.duckdb.session import DuckDBSession
from tclose.connectors.duckdb.types import (
    WIDEST_DECIMAL,
    InfiniteDate,
    InfiniteDatetime,
    duckdb_type,
)

__all__ = [
    "DRIVER",
    "DuckDBConnector",
    "DuckDBDatabase",
    "DuckDBSession",
    "InfiniteDate",
    "InfiniteDatetime",
    "KNOWN_TABLE_FUNCTIONS",
    "WIDEST_DECIMAL",
    "duckdb_engine",
    "duckdb_type",
    "register_connectors",
]
