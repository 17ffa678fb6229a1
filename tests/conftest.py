"""Shared fixtures: small SQLite databases made from the demo generator, and config writers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from tclose.demo import create_demo_database


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    """A SQLite file with 400 synthetic discharges in table ``discharges``."""
    path = tmp_path / "demo.db"
    create_demo_database(path, n_rows=400, seed=1)
    return path


def _base_config(db: Path, **overrides) -> dict:
    """A valid configuration for ``demo_db``; ``overrides`` replace top-level keys."""
    document = {
        "source": {"url": f"sqlite:///{db}", "table": "discharges", "key": "patient_id"},
        "target": {"table": "discharges_anon", "if_exists": "fail"},
        "attributes": {
            "name": {"role": "identifier"},
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "zip": {"role": "quasi_identifier", "type": "numeric"},
            "length_of_stay": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
        },
        "privacy": {"k": 3, "t": 0.2},
        "algorithm": {"name": "t-first", "options": {}},
        "output": {"seed": 7},
    }
    document.update(overrides)
    return document


class SQLiteHelpers:
    """Config writing and table inspection for end-to-end tests."""

    def __init__(self, tmp_path: Path, db: Path) -> None:
        self.tmp_path = tmp_path
        self.db = db

    def config(self, **overrides) -> dict:
        return _base_config(self.db, **overrides)

    def write(self, document: dict | str, name: str = "run.yaml") -> Path:
        path = self.tmp_path / name
        text = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
        path.write_text(text, encoding="utf-8")
        return path

    def rows(self, table: str) -> list[tuple]:
        with sqlite3.connect(self.db) as connection:
            return connection.execute(f'SELECT * FROM "{table}"').fetchall()

    def columns(self, table: str) -> list[str]:
        with sqlite3.connect(self.db) as connection:
            cursor = connection.execute(f'SELECT * FROM "{table}" LIMIT 0')
            return [d[0] for d in cursor.description]

    def tables(self) -> set[str]:
        with sqlite3.connect(self.db) as connection:
            rows = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            return {r[0] for r in rows.fetchall()}


@pytest.fixture
def sqlite_run(tmp_path: Path, demo_db: Path) -> SQLiteHelpers:
    """Helpers bound to a fresh ``demo_db``."""
    return SQLiteHelpers(tmp_path, demo_db)
