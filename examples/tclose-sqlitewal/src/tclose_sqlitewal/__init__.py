"""tclose-sqlitewal: an example third-party tclose connector (SQLite files in WAL mode)."""

from .connector import WALConnector, WALDatabase

__all__ = ["WALConnector", "WALDatabase"]
