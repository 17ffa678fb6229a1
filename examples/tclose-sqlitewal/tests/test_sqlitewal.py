"""The example connector passes tclose's conformance suite for connectors."""

from __future__ import annotations

import sqlite3

from tclose_sqlitewal import WALConnector

from tclose.testing import check_connector


def test_the_connector_conforms(tmp_path):
    path = tmp_path / "check.db"
    sqlite3.connect(path).close()
    # SQLite stores NUMERIC as a 64-bit float: 15 significant digits survive.
    check_connector(WALConnector(), f"sqlitewal:///{path}", decimal_digits=15)
