"""The content digest of published rows: what a report records of the published table, so that
``tclose verify --report`` can tell it unchanged, and how each database's values are hashed.

Three definitions (the report's ``target.content_digest.algorithm`` says which;
``tclose verify --report`` recomputes the one the report names, and fails the check when the
database cannot compute it):

- :data:`COPY_DIGEST_ALGORITHM`, on PostgreSQL (sessions with ``content_digest``): the SHA-256 of
  the table's binary ``COPY`` — every column in name order, ``tclose_row`` included, rows in
  ``tclose_row`` order, client encoding UTF-8. The database encodes the values; the bytes are
  hashed at C speed as they arrive (and, when the session can, the QI and confidential columns
  are cut from the same bytes: one pass), and an auditor recomputes it with ``psql -c "COPY
  ..." | sha256sum`` (the report records the statement).
- :data:`MYSQL_ORDERED_DIGEST_ALGORITHM`, on MariaDB/MySQL: :data:`ORDERED_DIGEST_ALGORITHM` of
  the values every driver reads alike (``FLOAT`` as its exact double, ``BIT`` as an integer,
  ``DATE``/``DATETIME``/``TIMESTAMP`` from their text, ``TIMESTAMP`` in UTC;
  ``MySQLSession.read_expression``), so that a report verifies through any driver.
- :data:`ORDERED_DIGEST_ALGORITHM`, elsewhere: every published row (all its columns,
  ``tclose_row`` included, in column-name order) is encoded canonically (``repr`` of the values
  as the session reads them to publish; aware datetimes in UTC, binary as bytes; DuckDB's
  infinite dates and timestamps as ``InfiniteDate('infinity')`` and so on, not as the finite
  dates its client reads them as: ``tclose.connectors.duckdb.DuckDBSession.read_rows``) and
  hashed with SHA-256; the row hashes, in ``tclose_row`` order, are hashed in turn by one
  SHA-256. The digest is the SHA-256 of the column names, the row count and that chained hash.
  The report records it (``target.content_digest``) and ``tclose verify --report`` recomputes
  it: any changed, added, removed or moved value fails the check. The row hashes are chained,
  not added: a sum of 256-bit hashes yields to a forger (Wagner's generalized birthday
  algorithm, about 2^31 hashes for some 2^15 chosen rows), a chain to no
  choice of rows short of breaking SHA-256.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from tclose.connector import DEFAULT_DIGEST_ALGORITHM

#: The digest of every published row (see the module documentation) on the databases that have no
#: :data:`COPY_DIGEST_ALGORITHM`: the row hashes chained in ``tclose_row`` order by one SHA-256.
ORDERED_DIGEST_ALGORITHM = DEFAULT_DIGEST_ALGORITHM
_MYSQL_VALUES = (
    " of MariaDB/MySQL values read alike by every driver (FLOAT as DOUBLE, "
    "BIT as UNSIGNED, DATE, DATETIME and TIMESTAMP from their text, TIMESTAMP in UTC)"
)
#: :data:`ORDERED_DIGEST_ALGORITHM` on MariaDB/MySQL values read alike through every driver.
MYSQL_ORDERED_DIGEST_ALGORITHM = ORDERED_DIGEST_ALGORITHM + _MYSQL_VALUES
COPY_DIGEST_ALGORITHM = (
    "sha256 of PostgreSQL COPY (SELECT <columns in name order> FROM <table> ORDER BY "
    "tclose_row) TO STDOUT (FORMAT binary), client encoding UTF8"
)


def _first_values(rows: Sequence[tuple]) -> dict[int, Any]:
    """The first non-null value of every column, by column position (a database column holds
    one type)."""
    if not rows:
        return {}
    found: dict[int, Any] = {}
    missing = set(range(len(rows[0])))
    for row in rows:
        for i in [i for i in missing if row[i] is not None]:
            found[i] = row[i]
            missing.discard(i)
        if not missing:
            break
    return found


def _needs_canonical(value: Any) -> bool:
    """Whether values of this one's type may need :func:`canonical` (a representative value
    per type is checked; any ``datetime`` type triggers the check of every value)."""
    return isinstance(value, (dt.datetime, memoryview, np.generic))


def canonical(value: Any) -> Any:
    """``value`` as the digest and the linkage check compare it: an aware date-time in UTC
    (tagged), a ``memoryview`` as ``bytes``, a NumPy scalar as its Python value."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return ("utc", value.astimezone(dt.timezone.utc).replace(tzinfo=None))
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def canonical_rows(rows: Sequence[tuple]) -> Sequence[tuple]:
    """``rows`` with the values of the columns that need it :func:`canonical` (only those
    columns: one timestamp column of twenty, say)."""
    positions = [i for i, v in _first_values(rows).items() if _needs_canonical(v)]
    if not positions:
        return rows
    columns = list(zip(*rows))
    for i in positions:
        columns[i] = tuple(map(canonical, columns[i]))
    return list(zip(*columns))


class ContentDigest:
    """Digest of rows given as tuples in the order of ``columns``, in ``tclose_row`` order: their
    hashes are chained (:data:`ORDERED_DIGEST_ALGORITHM`). ``algorithm`` is the name recorded
    with it, which says whose values were hashed (:data:`MYSQL_ORDERED_DIGEST_ALGORITHM`: a
    MariaDB/MySQL session's)."""

    def __init__(self, columns: Sequence[str], algorithm: str = ORDERED_DIGEST_ALGORITHM) -> None:
        self.columns = list(columns)
        self.algorithm = algorithm
        self.rows = 0
        self.chain = hashlib.sha256()

    def update(self, rows: Sequence[tuple]) -> None:
        """Add rows (tuples of values, in the order of ``columns``), next in ``tclose_row``
        order."""
        rows = canonical_rows(rows)
        sha256 = hashlib.sha256
        hashes = [sha256(repr(row).encode("utf-8", "surrogatepass")).digest() for row in rows]
        self.rows += len(rows)
        self.chain.update(b"".join(hashes))

    def as_dict(self) -> dict[str, Any]:
        """``{"algorithm", "columns", "rows", "sha256"}`` as recorded in the report."""
        summary = repr((self.columns, self.rows, self.chain.hexdigest())).encode()
        return {
            "algorithm": self.algorithm,
            "columns": self.columns,
            "rows": self.rows,
            "sha256": hashlib.sha256(summary).hexdigest(),
        }
