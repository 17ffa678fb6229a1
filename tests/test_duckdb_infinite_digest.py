"""Adversarial: DuckDB's infinite dates and timestamps in the content digest.

DuckDB's Python client reads ``'infinity'`` as the last date Python holds (``9999-12-31``,
``9999-12-31 23:59:59.999999``) and ``'-infinity'`` as the first (``0001-01-01``). The content
digest hashes an infinite value as itself, so a published table whose ``infinity`` is changed
into ``9999-12-31`` (or back) fails ``tclose verify --report``.
"""

from __future__ import annotations

import json

import pytest

from tclose.app.cli import main
from tclose.base.config import parse_config
from tclose.base.digests import ORDERED_DIGEST_ALGORITHM, ContentDigest
from tclose.core.runner import verify_published

pytestmark = pytest.mark.duckdb

ROWS = 30

#: type → (an infinite value, the finite value DuckDB's client reads it as). A ``TIMESTAMPTZ``
#: infinity reads as a naive ``datetime.max``, its finite values as aware ones: no collision.
LOOK_ALIKES = [
    ("DATE", "infinity", "9999-12-31"),
    ("DATE", "-infinity", "0001-01-01"),
    ("TIMESTAMP", "infinity", "9999-12-31 23:59:59.999999"),
    ("TIMESTAMP", "-infinity", "0001-01-01 00:00:00"),
    ("TIMESTAMP_MS", "-infinity", "0001-01-01 00:00:00"),
]


def _create(db, table: str, sql_type: str, special: str, published: bool) -> None:
    """``table``: key ``id`` (``tclose_row`` when ``published``), QIs ``a`` and ``b``,
    confidential ``c`` and pass-through ``extra`` of ``sql_type``: ``special`` in row 1, a
    finite date in the others."""
    key = "tclose_row" if published else "id"
    name = db.quote(table)
    db.execute(
        f"CREATE TABLE {name} ({key} BIGINT PRIMARY KEY, a INTEGER, b INTEGER, c DOUBLE, "
        f"extra {sql_type})"
    )
    db.execute(
        f"INSERT INTO {name} SELECT i, i % 6, (i * 3) % 5, CAST((i * 7) % 11 AS DOUBLE), "
        f"CASE WHEN i = 1 THEN CAST('{special}' AS {sql_type}) "
        f"ELSE CAST('2024-01-01' AS {sql_type}) + (i * INTERVAL 1 DAY) END "
        f"FROM range(1, {ROWS + 1}) t(i)"
    )


def _document(db, source: str, target: str) -> dict:
    return {
        "source": {"url": db.url, "table": source, "key": "id"},
        "target": {"table": target, "if_exists": "fail"},
        "attributes": {
            "a": {"role": "quasi_identifier", "type": "numeric"},
            "b": {"role": "quasi_identifier", "type": "numeric"},
            "c": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
            "extra": {"role": "other", "allow_unique": True},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {}},
    }


def _digest(db, table: str) -> str:
    """The content digest ``tclose verify`` computes for published table ``table``."""
    config = parse_config(_document(db, "unused", table))
    return verify_published(config).content_digest["sha256"]


@pytest.mark.parametrize(("sql_type", "infinite", "finite"), LOOK_ALIKES)
def test_infinity_and_its_look_alike_have_different_digests(duckdb_db, sql_type, infinite, finite):
    first, second = duckdb_db.name("inf"), duckdb_db.name("fin")
    _create(duckdb_db, first, sql_type, infinite, published=True)
    _create(duckdb_db, second, sql_type, finite, published=True)
    quoted = [duckdb_db.quote(t) for t in (first, second)]
    # the guard of the test: the client reads both tables alike
    assert duckdb_db.rows(first, order="tclose_row") == duckdb_db.rows(second, order="tclose_row")
    assert duckdb_db.execute(f"SELECT count(*) FROM {quoted[0]} WHERE isinf(extra)") == [(1,)]
    assert _digest(duckdb_db, first) != _digest(duckdb_db, second)


def test_a_finite_table_keeps_its_digest(duckdb_db):
    """A table without an infinite value: its values are hashed as they always were (the
    digest of a table with one is not), rows chained in ``tclose_row`` order."""
    table = duckdb_db.name("fin")
    _create(duckdb_db, table, "DATE", "9999-12-31", published=True)
    columns = ["a", "b", "c", "extra", "tclose_row"]  # the digest's order: by name
    as_read = duckdb_db.rows(table, ", ".join(columns), order="tclose_row")
    digest = ContentDigest(columns, ORDERED_DIGEST_ALGORITHM)
    digest.update(as_read)
    assert _digest(duckdb_db, table) == digest.as_dict()["sha256"]


def test_a_run_and_verify_agree_and_an_altered_infinity_fails(duckdb_db, capsys):
    """Same database: the pass-through ``extra`` is copied inside DuckDB, its ``infinity`` kept. The
    run's digest and ``tclose verify --report``'s agree; changing the published ``infinity`` into
    ``9999-12-31`` fails the digest check."""
    source, target = duckdb_db.name("src"), duckdb_db.name("anon")
    _create(duckdb_db, source, "DATE", "infinity", published=False)
    document = _document(duckdb_db, source, target)
    report = duckdb_db.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    config = str(duckdb_db.write_config(document))
    assert main(["-q", "run", config]) == 0, capsys.readouterr().err
    quoted = duckdb_db.quote(target)
    assert duckdb_db.execute(f"SELECT count(*) FROM {quoted} WHERE isinf(extra)") == [(1,)]
    assert json.loads(report.read_text())["verification"]["passed"] is True
    capsys.readouterr()
    assert main(["-q", "verify", config, "--report", str(report)]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out
    duckdb_db.execute(f"UPDATE {quoted} SET extra = DATE '9999-12-31' WHERE isinf(extra)")
    assert main(["-q", "verify", config, "--report", str(report)]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out


def test_an_infinite_value_is_used_as_the_date_it_reads_as():
    """Everything but the digest sees the value DuckDB's client gives (the verifier's classes, the
    multiset check, pickling to a worker)."""
    import datetime as dt
    import pickle

    from tclose.connectors.duckdb import InfiniteDate, InfiniteDatetime

    last, first = InfiniteDate(9999, 12, 31), InfiniteDatetime(1, 1, 1)
    assert last == dt.date.max and hash(last) == hash(dt.date.max) and str(last) == "9999-12-31"
    assert first == dt.datetime.min
    assert repr(last) == "InfiniteDate('infinity')" != repr(dt.date.max)
    assert repr(first) == "InfiniteDatetime('-infinity')"
    assert repr(pickle.loads(pickle.dumps(last))) == repr(last)
