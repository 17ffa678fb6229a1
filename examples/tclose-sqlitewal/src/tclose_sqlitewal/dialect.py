"""The SQLAlchemy dialect ``sqlitewal``: pysqlite, with every connection in WAL journal mode."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite


class WALDialect(SQLiteDialect_pysqlite):
    """SQLite through ``sqlite3``; each new connection turns on ``journal_mode=WAL``, in which
    readers never block the writer nor the writer the readers."""

    name = "sqlitewal"
    supports_statement_cache = True

    def on_connect(self) -> Any:
        base = super().on_connect()

        def connect(connection: Any) -> None:
            if base is not None:
                base(connection)
            connection.execute("PRAGMA journal_mode=WAL")

        return connect
