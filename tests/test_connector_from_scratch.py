"""A connector written from scratch against the Protocols of tclose.connector (nothing inherited
from the SQL connectors): tables held in Python memory. It passes check_connector, and a run
publishes through it, so the contract is the whole of what the runner needs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pandas as pd
import sqlalchemy as sa

from tclose.connector import Connector, Database, Session
from tclose.connectors.sql import ROW_COLUMN, TableName
from tclose.errors import ConfigError, DataError
from tclose.testing import check_connector

#: Committed tables of every memory:// database: url -> table name -> (definition, rows).
STORE: dict[str, dict[str, tuple[sa.Table, list[tuple]]]] = {}


class MemorySession:
    """Reads committed tables; its staging table is private until publish."""

    def __init__(self, database: MemoryDatabase, staging: sa.Table | None) -> None:
        self.database = database
        self.own: dict[str, tuple[sa.Table, list[tuple]]] = {}
        if staging is not None:
            self.own[str(TableName(staging.schema, staging.name))] = (staging, [])

    def _get(self, name: TableName) -> tuple[sa.Table, list[tuple]]:
        found = self.own.get(str(name)) or self.database.tables.get(str(name))
        if found is None:
            raise DataError(f"Table {name} does not exist in {self.database.redacted_url}.")
        return found

    def table(self, name: TableName) -> sa.Table:
        return self._get(name)[0]

    def read_rows(self, name, columns, key=None, chunk_size=50_000, with_key=True):
        table, rows = self._get(name)
        missing = [c for c in columns if c not in table.c]
        if missing:
            raise DataError(f"Column {missing[0]!r} does not exist in table {name}.")
        order = list(table.c.keys())
        key_at = order.index(self.database.row_key(table, key).name)
        picked = [order.index(c) for c in columns]
        ordered = sorted(rows, key=lambda row: row[key_at])
        out = [((r[key_at],) if with_key else ()) + tuple(r[i] for i in picked) for r in ordered]
        for start in range(0, len(out), chunk_size):
            yield out[start : start + chunk_size]

    def read(self, name, columns, key=None, chunk_size=50_000, with_key=True):
        names = (["__key__"] if with_key else []) + list(columns)
        for rows in self.read_rows(name, columns, key, chunk_size, with_key):
            yield pd.DataFrame.from_records(rows, columns=names)

    def fill_streamed(self, staging, chunks) -> int:
        """The rows numbered 1..n in their content order (here: by their values' repr)."""
        rows = self._get(TableName(staging.schema, staging.name))[1]
        arrived = [tuple(r) for chunk in chunks for r in chunk]
        rows.extend((i, *row) for i, row in enumerate(sorted(arrived, key=repr), start=1))
        return len(arrived)

    def publish(self, staging, target, replace, before_commit=None) -> None:
        if self.database.exists(target) and not replace:
            raise DataError(f"The target table {target} already exists. Nothing was published.")
        definition, rows = self.own.pop(str(staging))
        renamed = sa.Table(
            target.name,
            sa.MetaData(),
            *[sa.Column(c.name, c.type, primary_key=c.primary_key) for c in definition.columns],
        )
        if before_commit is not None:
            before_commit(None)
        self.database.tables[str(target)] = (renamed, rows)

    def close(self) -> None:
        self.own.clear()


class MemoryDatabase:
    dialect = "memory"

    def __init__(self, url: str) -> None:
        self.redacted_url = url
        self.tables = STORE.setdefault(url, {})

    def table(self, name: TableName) -> sa.Table:
        return MemorySession(self, None).table(name)

    def exists(self, name: TableName) -> bool:
        return str(name) in self.tables

    def row_key(self, table: sa.Table, key: str | None) -> sa.ColumnElement:
        if key is not None:
            return table.c[key]
        primary = list(table.primary_key.columns)
        if len(primary) != 1:
            raise ConfigError(f"Table {table.name} has no single-column primary key.")
        return primary[0]

    def check_table_name(self, name: TableName, path: str = "target.table") -> None:
        return None

    def owned_name(self, target: TableName, mark: str, run_id: str) -> TableName:
        return TableName(target.schema, target.name + mark + run_id[:12])

    def staging_table(
        self, name, source, output_columns, aggregated, rounded=(), source_dialect=None
    ):
        columns = [sa.Column(ROW_COLUMN, sa.BigInteger(), primary_key=True)]
        for column in output_columns:
            kept = source.c[column].type
            if column in aggregated and column not in rounded:
                kept = sa.Double()
            columns.append(sa.Column(column, kept))
        return sa.Table(name.name, sa.MetaData(), *columns)

    @contextlib.contextmanager
    def session(self, staging=None, *, read_only=False) -> Iterator[MemorySession]:
        session = MemorySession(self, staging)
        try:
            yield session
        finally:
            session.close()

    def read(self, name, columns, key=None, chunk_size=50_000, with_key=True):
        with self.session(read_only=True) as session:
            yield from session.read(name, columns, key, chunk_size, with_key)


class MemoryConnector:
    name = "memory"
    dialects = ("memory",)

    def connect(self, url: str, password_file: str | None = None) -> MemoryDatabase:
        return MemoryDatabase(url)


def test_the_protocols_type_the_from_scratch_connector() -> None:
    connector: Connector = MemoryConnector()
    database: Database = connector.connect("memory://typed")
    with database.session() as session:
        typed: Session = session
        assert typed is session


def test_a_connector_from_scratch_passes_check_connector() -> None:
    url = "memory://check"
    check_connector(MemoryConnector(), url, drop=lambda name: STORE[url].pop(str(name)))
    assert STORE[url] == {}


def _problems(session_class: type[MemorySession], url: str) -> str:
    """The problems check_connector finds in the memory connector with ``session_class``."""

    class Database(MemoryDatabase):
        @contextlib.contextmanager
        def session(self, staging=None, *, read_only=False):
            yield session_class(self, staging)

    class Connector(MemoryConnector):
        def connect(self, url, password_file=None):
            return Database(url)

    try:
        check_connector(Connector(), url, drop=lambda name: STORE[url].pop(str(name)))
    except AssertionError as error:
        return str(error)
    return ""


def test_check_connector_catches_a_publish_that_drops_the_last_row() -> None:
    class Lossy(MemorySession):
        def publish(self, staging, target, replace, before_commit=None) -> None:
            self.own[str(staging)][1].pop()
            super().publish(staging, target, replace, before_commit)

    problems = _problems(Lossy, "memory://lossy")
    assert problems, "check_connector accepted a publish that loses a row"
    assert "the published fixture: 22 rows, not 23" in problems
    assert "the published table: 21 rows, not 22" in problems


def test_check_connector_catches_rows_numbered_in_the_order_they_arrive() -> None:
    """Rule R4 for third-party connectors: numbering the rows as they come (the source's
    order) is a failed check."""

    class InArrivalOrder(MemorySession):
        def fill_streamed(self, staging, chunks) -> int:
            rows = self._get(TableName(staging.schema, staging.name))[1]
            arrived = [tuple(r) for chunk in chunks for r in chunk]
            rows.extend((i, *row) for i, row in enumerate(arrived, start=1))
            return len(arrived)

    problems = _problems(InArrivalOrder, "memory://arrival")
    assert "numbers the rows by the order they arrive in" in problems


def test_a_run_publishes_through_the_connector_from_scratch(tmp_path) -> None:
    import yaml

    import tclose
    from tclose.app.demo import discharge_table
    from tclose.base.config import load_config
    from tclose.base.registry import load_registry
    from tclose.core.runner import run

    frame = discharge_table(300, seed=3)
    columns = [sa.Column("patient_id", sa.BigInteger(), primary_key=True)]
    kinds = {"i": sa.BigInteger(), "f": sa.Double()}
    columns += [sa.Column(c, kinds.get(frame[c].dtype.kind, sa.Text())) for c in frame.columns[1:]]
    rows = [tuple(r) for r in frame.astype(object).itertuples(index=False)]
    STORE["memory://run"] = {"patients": (sa.Table("patients", sa.MetaData(), *columns), rows)}

    class Plugin:
        @tclose.hookimpl
        def register_connectors(self, register):
            register(MemoryConnector())

    # together they single out every row: not what this test is about
    attributes = {c: {"role": "other", "allow_unique": True} for c in frame.columns[1:]}
    attributes.update(
        name={"role": "identifier"},
        age={"role": "quasi_identifier", "type": "numeric"},
        zip={"role": "quasi_identifier", "type": "numeric"},
        length_of_stay={"role": "quasi_identifier", "type": "numeric"},
        charge={"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
    )
    document = {
        "source": {"url": "memory://run", "table": "patients", "key": "patient_id"},
        "target": {"table": "patients_anon", "if_exists": "fail"},
        "attributes": attributes,
        "privacy": {"k": 5, "t": 0.3},
        "algorithm": {"name": "t-first", "options": {}},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    registry = load_registry(extra_plugins=[Plugin()], entry_points=False)
    result = run(load_config(path), registry=registry, report_path=str(tmp_path / "r.json"))
    assert result.published and result.verification.passed
    published, written = STORE["memory://run"]["patients_anon"]
    assert len(written) == 300 and "name" not in published.c
    assert sorted(STORE["memory://run"]) == ["patients", "patients_anon"]
