"""The ``sqlitewal`` connector and the hook that registers it with tclose.

It is tclose's generic SQLAlchemy connector (``tclose.connectors.sql.SQLDatabase``, which
implements the Protocols of ``tclose.connector``) with three overrides: the engine (a busy
timeout, and a missing file is an error instead of a new empty database), the error message of a
locked database, and the optional capability ``TableIdentity`` (the file's inode, so that two
spellings of one file are recognised as the same table). Everything else — streamed reads, the
staging table, exact types, the verified, atomic publish — comes from the generic connector.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

import tclose
from tclose.connectors.sql import SQLDatabase, TableName
from tclose.errors import DataError

#: Seconds a connection waits for another connection's write lock.
BUSY_TIMEOUT_SECONDS = 30


class WALDatabase(SQLDatabase):
    """A SQLite file in WAL mode (``sqlitewal:///path/to/file.db``)."""

    def create_engine(self) -> sa.Engine:
        path = Path(str(self.url.database or ""))
        if not path.is_file():
            raise DataError(f"The SQLite database file {path.absolute()} does not exist.")
        return sa.create_engine(
            self.url, poolclass=NullPool, connect_args={"timeout": BUSY_TIMEOUT_SECONDS}
        )

    def describe(self, error: BaseException | None, action: str) -> DataError:
        described = super().describe(error, action)
        if "locked" in str(error):
            return DataError(f"{described} (another connection holds the write lock)")
        return described

    def table_identity(self, name: TableName) -> tuple | None:
        """The file (device, inode) and the table name folded as SQLite compares it."""
        if not self.exists(name):
            return None
        stat = os.stat(str(self.url.database))
        return ("sqlite", stat.st_dev, stat.st_ino, name.schema or "main", name.name.lower())


class WALConnector:
    """Connector for ``sqlitewal://`` URLs."""

    name = "sqlitewal"
    dialects = ("sqlitewal",)

    def connect(self, url: str, password_file: str | None = None) -> WALDatabase:
        return WALDatabase(url, password_file)


@tclose.hookimpl
def register_connectors(register: Any) -> None:
    register(WALConnector())
