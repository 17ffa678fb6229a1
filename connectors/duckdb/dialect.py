"""The SQLAlchemy dialect ``duckdb+tclose``: ``duckdb-engine``'s, quoting every identifier, without
a limit on names, reflecting columns from DuckDB's own catalog.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import registry as dialect_registry

from tclose.connectors.duckdb.types import duckdb_type

try:  # the [duckdb] extra; without it, connecting says which package to install
    import duckdb_engine
except ImportError:  # pragma: no cover - exercised only without the extra
    duckdb_engine = None  # type: ignore[assignment]

#: The SQLAlchemy driver name under which :class:`QuotingDialect` is registered.
DRIVER = "duckdb+tclose"


if duckdb_engine is not None:

    class QuotingPreparer(duckdb_engine.DuckDBIdentifierPreparer):
        """Quotes every identifier: ``duckdb-engine`` knows PostgreSQL's reserved words, not
        DuckDB's (a column named ``at`` would break a ``CREATE TABLE``)."""

        def _requires_quotes(self, value: str) -> bool:
            return True

    class QuotingDialect(duckdb_engine.Dialect):
        """``duckdb-engine``'s dialect with :class:`QuotingPreparer`, and without PostgreSQL's
        63-character limit on names (DuckDB has none)."""

        supports_statement_cache = False
        preparer = QuotingPreparer
        max_identifier_length = 1 << 16

        def _check_max_identifier_length(self, connection: Any) -> int | None:
            return None

        def get_columns(
            self, connection: Any, table_name: str, schema: str | None = None, **_kw: Any
        ) -> list[Any]:
            """The columns from DuckDB's catalog (``duckdb-engine`` asks PostgreSQL's
            ``pg_collation``, which DuckDB does not have), with :func:`duckdb_type` types."""
            rows = connection.execute(
                sa.text(
                    "SELECT column_name, data_type, is_nullable, column_default "
                    "FROM duckdb_columns() WHERE lower(schema_name) = lower(:s) "
                    "AND lower(table_name) = lower(:t) AND NOT internal ORDER BY column_index"
                ),
                {"s": schema or "main", "t": table_name},
            ).fetchall()
            return [
                {"name": n, "type": duckdb_type(t), "nullable": bool(null), "default": default}
                for n, t, null, default in rows
            ]

    dialect_registry.register("duckdb.tclose", __name__, "QuotingDialect")
