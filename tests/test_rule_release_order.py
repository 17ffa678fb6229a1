"""Rule R4: the order of a release is a function of its content only.

``tclose_row`` numbers the published rows in their content order, the rows are stored in that
order on every target, and no seed or permutation exists anywhere (config, API, report, audit
table). So a release says nothing about the order of its source: identical content and
configuration give byte-identical releases and content digests, whatever the source's physical
order or key values, and the order a reader sees (``tclose_row``, or the rows as stored) is
recomputed here, independently, from the published values alone.

The content order (docs/guide.md, "Guarantees"): rows sorted by their values column by column in
the table's column order, NULL first, numbers by value, text by its bytes whatever the column's
collation, values that the type's order calls equal although they differ by how they differ.
The tables here publish integers and text (rounded QIs), so the expected order is computed in
Python without asking the database. The text column holds values that case-insensitive,
pad-space and accent-blind comparisons (MariaDB's default collation) call equal.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tclose
from tclose.app.cli import main
from tclose.errors import ConfigError

ROWS = 60
#: Pass-through text that a case-insensitive, pad-space or accent-blind comparison calls equal.
TAGS = ["x", "X", "x ", "y", "Y", "é"]
NOTES = [None, "n1", "n2", "N1", "n1 ", None]


def _content(n: int = ROWS) -> list[dict]:
    """The rows' content, without a key: every (tag, note) pair twice (never unique), the QIs
    and the confidential value drawn from a fixed generator."""
    rng = random.Random(28)
    pairs = [(tag, note) for tag in TAGS for note in NOTES[:5]] * 2
    rows = []
    for i in range(n):
        tag, note = pairs[i % len(pairs)]
        rows.append(
            {
                "a": rng.randrange(20, 80),
                "b": rng.randrange(0, 5),
                "c": rng.randrange(0, 4),
                "tag": tag,
                "note": note,
            }
        )
    return rows


def _keyed(content: list[dict], keys: list[int], order: list[int]) -> list[dict]:
    """``content[i]`` with key ``keys[i]``, inserted in the order ``order``."""
    return [{"id": keys[i], **content[i]} for i in order]


def _columns() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("a", sa.Integer),
        sa.Column("tag", sa.String(20)),
        sa.Column("b", sa.Integer),
        sa.Column("c", sa.Integer),
        sa.Column("note", sa.String(20)),
    ]


def _config(source_url: str, source: str, target_url: str, target: str, report) -> dict:
    return {
        "source": {"url": source_url, "table": source, "key": "id"},
        "target": {"url": target_url, "table": target, "if_exists": "replace"},
        "attributes": {
            "id": {"role": "identifier"},
            "a": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "b": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "c": {"role": "confidential", "type": "numeric"},
            "tag": {"role": "other"},
            "note": {"role": "other"},
        },
        "privacy": {"k": 3, "t": 0.6},
        "algorithm": {"name": "t-first"},
        "report": {"json": str(report)},
    }


def _python_key(row: tuple) -> tuple:
    """The documented content order of a row of integers and text, computed in Python: NULL
    first, integers by value, text by its UTF-8 bytes."""
    return tuple(
        (0, 0, b"") if v is None else (1, v, b"") if isinstance(v, int) else (2, 0, v.encode())
        for v in row
    )


def _rows(frame: pd.DataFrame) -> list[tuple]:
    """The rows of ``frame`` without ``tclose_row``, NULL as ``None``."""
    columns = [c for c in frame.columns if c != "tclose_row"]
    return [tuple(None if pd.isna(v) else v for v in r) for r in frame[columns].itertuples(False)]


def _assert_content_order(database, table: str) -> list[tuple]:
    """The release is numbered 1..n in content order and stored in that order (read without
    ``ORDER BY``); its rows in ``tclose_row`` order."""
    frame = database.frame(table)
    stored = [int(v) for v in frame["tclose_row"]]
    rows = _rows(frame.sort_values("tclose_row"))
    assert stored == list(range(1, len(rows) + 1)), "stored order is not tclose_row order"
    keys = [_python_key(r) for r in rows]
    assert keys == sorted(keys), "tclose_row does not follow the content order"
    for (k1, r1), (k2, r2) in zip(zip(keys, rows), zip(keys[1:], rows[1:])):
        assert k1 != k2 or r1 == r2, "two rows of the same key differ"
    return rows


def _publish(source_db, target_db, rows: list[dict], tmp_path, tag: str) -> tuple[list, dict]:
    """Create a source of ``rows`` in ``source_db``, publish it into ``target_db``; the release
    (rows in tclose_row order) and the report."""
    source, target = source_db.name(f"src_{tag}"), target_db.name("anon")
    source_db.create(source, _columns(), rows)
    target_db.execute("SELECT 1")  # a SQLite target's file exists
    report = tmp_path / f"report_{tag}.json"
    config = source_db.write_config(
        _config(source_db.url, source, target_db.url, target, report), f"run_{tag}.yaml"
    )
    assert main(["-q", "run", str(config)]) == 0
    assert main(["-q", "verify", str(config), "--report", str(report)]) == 0
    return _assert_content_order(target_db, target), json.loads(report.read_text())


@pytest.mark.parametrize("path", ["joined", "streamed"])
def test_same_content_gives_the_same_release_whatever_the_source_order(db, lite, tmp_path, path):
    """Sources with the same content: as generated (twice), inserted in reverse (same keys),
    and under other key values of the same order: one release, one digest. (Streamed: as
    generated, and in reverse under other keys.)"""
    source_db = db if path == "joined" else lite
    content = _content()
    keys = list(range(1, ROWS + 1))
    shuffled = random.Random(5).sample(range(ROWS), ROWS)  # the key order is not the content's
    variants = {
        "plain": _keyed(content, [keys[shuffled[i]] for i in range(ROWS)], list(range(ROWS))),
        "reversed": _keyed(
            content, [keys[shuffled[i]] for i in range(ROWS)], list(range(ROWS))[::-1]
        ),
        "rekeyed": _keyed(
            content, [7 * keys[shuffled[i]] + 1000 for i in range(ROWS)], list(range(ROWS))
        ),
    }
    variants["again"] = variants["plain"]
    if path == "streamed":  # the target session numbers the rows as on the joined path
        variants = {
            "plain": variants["plain"],
            "reversed": _keyed(
                content,
                [7 * keys[shuffled[i]] + 1000 for i in range(ROWS)],
                list(range(ROWS))[::-1],
            ),
        }
    releases, digests = [], []
    for name, rows in variants.items():
        release, report = _publish(source_db, db, rows, tmp_path, name)
        releases.append(release)
        digests.append(report["target"]["content_digest"]["sha256"])
        assert "seed" not in json.dumps(report)
    assert all(r == releases[0] for r in releases)
    assert len(set(digests)) == 1


def test_a_streamed_release_is_not_stored_in_source_key_order(duckdb_db, lite, tmp_path):
    """A DuckDB target fed from another database: an attacker who reads the rows as stored
    must not get the source's key order back. ``code`` (unique, allowed) tells which source
    row each published row is; the stored order must be the content order recomputed here, and
    so match the source key order no more than that order does."""
    content = _content()
    order = random.Random(9).sample(range(ROWS), ROWS)
    rows = [{"id": i + 1, **content[order[i]]} for i in range(ROWS)]
    for row in rows:
        row["note"] = f"k{row['id']:04d}"  # the source key, spelled: a linking column
    source, target = lite.name("src"), duckdb_db.name("anon")
    lite.create(source, _columns(), rows)
    document = _config(lite.url, source, duckdb_db.url, target, tmp_path / "r.json")
    document["attributes"]["note"]["allow_unique"] = True
    assert main(["-q", "run", str(lite.write_config(document))]) == 0
    stored = duckdb_db.frame(target)  # as stored: no ORDER BY
    columns = [c for c in stored.columns if c != "tclose_row"]
    as_stored = _rows(stored)
    expected = sorted(as_stored, key=_python_key)
    assert as_stored == expected
    source_rank = [int(v[1:]) for v in stored["note"]]
    in_place = sum(rank == i + 1 for i, rank in enumerate(source_rank))
    expected_in_place = sum(
        int(r[columns.index("note")][1:]) == i + 1 for i, r in enumerate(expected)
    )
    assert in_place == expected_in_place < ROWS // 4


def test_values_the_database_calls_equal_are_ordered_by_what_they_hold(db, tmp_path):
    """Rows that differ only in pass-through values the database's own comparison calls equal
    or compares in part: text in another case or with trailing spaces (MariaDB's default
    collation), text equal in its first 2,000 bytes (MariaDB compares 1,024 by default),
    ``-0.0`` and ``0.0`` (where the database keeps the sign). The same rows inserted in
    opposite orders under opposite keys give one release: nothing of the input order breaks
    their ties."""
    long = "z" * 2000
    content = [
        {"a": 30, "c": 1, "tag": tag, "memo": long + end, "ratio": ratio}
        for tag in ("a", "A", "a ", "a  ")
        for end in ("x", "y")
        for ratio in (0.0, -0.0)
    ]

    def columns() -> list[sa.Column]:
        return [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("a", sa.Integer),
            sa.Column("c", sa.Integer),
            sa.Column("tag", sa.String(10)),
            sa.Column("memo", sa.Text),
            sa.Column("ratio", sa.Double),
        ]

    releases, digests = [], []
    for name, rows in (
        ("forward", [{"id": i + 1, **r} for i, r in enumerate(content)]),
        ("backward", [{"id": i + 1, **r} for i, r in enumerate(content[::-1])]),
    ):
        source = db.name(f"src_{name}")
        db.create(source, columns(), rows)
        report = tmp_path / f"{name}.json"
        document = _config(db.url, source, db.url, db.name("anon"), report)
        document["attributes"] = {
            "id": {"role": "identifier"},
            "a": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "c": {"role": "confidential", "type": "numeric"},
            **{c: {"role": "other", "allow_unique": True} for c in ("tag", "memo", "ratio")},
        }
        assert main(["-q", "run", str(db.write_config(document, f"{name}.yaml"))]) == 0
        frame = db.frame(db.name("anon")).sort_values("tclose_row")
        releases.append([tuple(map(repr, r)) for r in frame.itertuples(False)])
        digests.append(json.loads(report.read_text())["target"]["content_digest"]["sha256"])
    assert releases[0] == releases[1]
    assert digests[0] == digests[1]


def test_a_seed_left_in_a_config_publishes_nothing(sqlite_run):
    """An attacker who knows ``output.seed`` and the row count could rebuild the permutation that
    numbered the rows: such a config is refused before any work, so no release of it exists."""
    document = sqlite_run.config(output={"seed": 42})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "discharges_anon" not in sqlite_run.tables()


def test_an_old_seed_is_refused_with_its_remedy(sqlite_run, capsys):
    document = sqlite_run.config(output={"seed": 42, "keep_key": False})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    err = capsys.readouterr().err
    assert "output.seed" in err or "At key: seed" in err
    assert "content" in err and "remove" in err.lower()


def test_the_audit_table_and_report_hold_no_order_secret(sqlite_run):
    """No seed, permutation or source position is recorded: the report and the audit row of
    a run name nothing that orders the rows."""
    report = sqlite_run.tmp_path / "r.json"
    document = sqlite_run.config(report={"json": str(report), "table": "audit_runs"})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    (row,) = sqlite_run.rows("audit_runs")
    text = json.dumps(row, default=str) + report.read_text()
    for word in ("seed", "permutation", "shuffle"):
        assert word not in text.lower()


def test_an_audit_table_with_a_seed_column_still_takes_rows(sqlite_run):
    """An audit table made by an earlier version with an extra (nullable) ``seed`` column
    keeps taking rows (NULL there)."""
    import sqlite3

    from tclose.plugins.audit_table import audit_table

    engine = sa.create_engine(f"sqlite:///{sqlite_run.db}")
    table = audit_table("audit_runs")
    table.append_column(sa.Column("seed", sa.BigInteger))
    table.create(engine)
    engine.dispose()
    document = sqlite_run.config(report={"table": "audit_runs"})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    with sqlite3.connect(sqlite_run.db) as connection:
        assert connection.execute("SELECT count(*), max(seed) FROM audit_runs").fetchone() == (
            1,
            None,
        )


# --- the Python API --------------------------------------------------------------------------


def _frame(n: int = ROWS) -> pd.DataFrame:
    frame = pd.DataFrame(_content(n))
    frame["tag"] = frame["tag"].astype(object)
    frame["note"] = frame["note"].astype(object)
    return frame


def _api(frame: pd.DataFrame) -> pd.DataFrame:
    return tclose.anonymize(
        frame,
        {"a": {"type": "numeric", "round": True}, "b": {"type": "numeric", "round": True}},
        ["c"],
        k=3,
        t=0.6,
        other=["tag", "note"],
    ).data


def test_the_api_gives_the_same_release_twice_and_a_fresh_index():
    first, second = _api(_frame()), _api(_frame())
    pd.testing.assert_frame_equal(first, second)
    assert first.index.equals(pd.RangeIndex(ROWS))


def test_the_api_release_order_is_a_function_of_its_rows():
    """The release's order is recomputed from its rows alone: the same rows in any order, or
    under another index, put in content order, give the release back."""
    from tclose.core.api import in_content_order

    release = _api(_frame())
    for seed in range(3):
        mixed = release.sample(frac=1, random_state=seed)
        mixed.index = np.arange(100, 100 + len(mixed))
        pd.testing.assert_frame_equal(in_content_order(mixed), release)


def test_the_api_order_tells_apart_values_python_calls_equal():
    """Rows that differ only in values that compare equal (1 and 1.0 and True, 0.0 and -0.0,
    NaN and None) are still ordered by what they hold, whichever comes first."""
    from tclose.core.api import in_content_order

    frame = pd.DataFrame(
        {"v": pd.Series([1, 1.0, True, 0.0, -0.0, float("nan"), None, "1"], dtype=object)}
    )
    results = set()
    for seed in range(6):
        mixed = frame.sample(frac=1, random_state=seed).reset_index(drop=True)
        results.add(tuple(repr(v) for v in in_content_order(mixed)["v"]))
    assert len(results) == 1


def test_the_api_takes_no_seed():
    with pytest.raises(ConfigError, match="seed"):
        tclose.anonymize(_frame(), ["a", "b"], ["c"], k=3, other=["tag", "note"], seed=42)
