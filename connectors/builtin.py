"""Plugin module that registers the built-in connectors without importing them.

The connector modules (:mod:`~tclose.connectors.sqlite`, :mod:`~tclose.connectors.postgresql`,
:mod:`~tclose.connectors.mysql`, :mod:`~tclose.connectors.duckdb`, :mod:`~tclose.connectors.files`
and the generic :mod:`~tclose.connectors.sql`) import SQLAlchemy and their dialects (~0.3 s of start-up). Listing
them (``tclose plugins``) or configuring a run needs only their name and dialects, so the registry
holds a :class:`LazyConnector` per connector, which imports its module on the first
:meth:`~LazyConnector.connect`. Each connector module keeps its own ``register_connectors`` hook, for
an application that registers one module by itself.
"""

from __future__ import annotations

import importlib
from typing import Any

from tclose.hookspecs import hookimpl


class LazyConnector:
    """A connector named by ``module:cls``, imported when it first connects.

    Attributes:
        name: the connector's name (as the real class has it; a test checks they agree).
        dialects: the SQLAlchemy dialects it serves.
        target: ``"module:Class"`` of the real connector class.
    """

    def __init__(
        self, name: str, dialects: tuple[str, ...], target: str, notes: str | None = None
    ) -> None:
        self.name = name
        self.dialects = dialects
        self.target = target
        self._notes = notes
        self._real: Any = None

    def load(self) -> Any:
        """The real connector object (its module is imported on the first call)."""
        if self._real is None:
            module, cls = self.target.split(":")
            self._real = getattr(importlib.import_module(module), cls)()
        return self._real

    def connect(self, url: str, password_file: str | None = None) -> Any:
        """The real connector's ``connect(url, password_file)``."""
        return self.load().connect(url, password_file)

    def notes(self) -> list[str]:
        """What ``tclose plugins`` says under the connector (``ConnectorNotes``), from the
        light ``module:function`` given as ``notes`` (the connector module is not imported)."""
        if self._notes is None:
            return []
        module, function = self._notes.split(":")
        return list(getattr(importlib.import_module(module), function)())


#: The built-in connectors, in registration order.
BUILTIN_CONNECTORS = (
    LazyConnector("sqlite", ("sqlite",), "tclose.connectors.sqlite:SQLiteConnector"),
    LazyConnector(
        "postgresql", ("postgresql",), "tclose.connectors.postgresql:PostgreSQLConnector"
    ),
    LazyConnector(
        "mysql",
        ("mysql", "mariadb"),
        "tclose.connectors.mysql:MySQLConnector",
        notes="tclose.connectors.mysql_drivers:notes",
    ),
    LazyConnector("duckdb", ("duckdb",), "tclose.connectors.duckdb:DuckDBConnector"),
    LazyConnector("files", ("parquet", "csv"), "tclose.connectors.files:FileConnector"),
    LazyConnector("sqlalchemy", ("*",), "tclose.connectors.sql:SQLAlchemyConnector"),
)


@hookimpl
def register_connectors(register: Any) -> None:
    for connector in BUILTIN_CONNECTORS:
        register(connector)
