"""PostgreSQL's fast bulk paths give exactly what the generic paths give.

- Reads: ``PostgreSQLSession.read`` runs the key-ordered ``SELECT`` as a binary ``COPY`` and
  cuts fixed-width columns (``smallint``, ``integer``, ``bigint``, ``real``, ``double
  precision``) with NumPy; every other result, and every chunk holding a NULL, goes through the
  tuples psycopg returns. Each test compares the frames, chunk by chunk, with those of the
  generic path (``Session.read``: a server-side cursor, ``DataFrame.from_records``), values
  bit for bit (NaN, infinities, negative zero, the int8 extremes) and dtypes.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from tclose.connectors import postgresql as pgconnector
from tclose.connectors.postgresql import PostgreSQLDatabase
from tclose.connectors.sql import Session
from tclose.naming import TableName

pytestmark = pytest.mark.postgres

BIG = 2**63 - 1
SPECIAL_FLOATS = [
    0.0,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    5e-324,
    1.7976931348623157e308,
]


def _frames_equal(fast: list[pd.DataFrame], slow: list[pd.DataFrame]) -> None:
    """Same chunks, same columns and dtypes, same values bit for bit (NaN and -0.0 included)."""
    assert [len(f) for f in fast] == [len(f) for f in slow]
    for a, b in zip(fast, slow, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert list(a.dtypes) == list(b.dtypes)
        for column in a.columns:
            x, y = a[column].to_numpy(), b[column].to_numpy()
            if x.dtype.kind == "f" and y.dtype.kind == "f":
                assert x.view(np.uint64).tolist() == y.view(np.uint64).tolist() or (
                    np.array_equal(np.isnan(x), np.isnan(y))
                    and x[~np.isnan(x)].view(np.uint64).tolist()
                    == y[~np.isnan(y)].view(np.uint64).tolist()
                ), column
            else:
                assert [repr(v) for v in x.tolist()] == [repr(v) for v in y.tolist()], column


def _both(database, name: str, columns: list[str], key: str | None = None, chunk_size=7):
    """(fast frames, generic frames, whether the fast path applied) in one session."""
    with database.session(read_only=True) as session:
        statement, _ = session.read_statement(TableName(None, name), columns, key, True)
        sql = str(statement.compile(dialect=database.engine.dialect)).replace("%%", "%")
        applies = session.fixed_width_formats(sql) is not None
        fast = list(session.read(TableName(None, name), columns, key, chunk_size))
        slow = list(Session.read(session, TableName(None, name), columns, key, chunk_size))
    return fast, slow, applies


@pytest.fixture
def numbers(pg):
    """A table of every fixed-width type: 30 rows without NULLs (ids 1..30), then 10 rows with
    NULLs here and there (ids 31..40), so that chunks of 7 are full, mixed, and null-free."""
    name = pg.name("numbers")
    columns = [
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("small", sa.SmallInteger),
        sa.Column("medium", sa.Integer),
        sa.Column("big", sa.BigInteger),
        sa.Column("single", sa.REAL),
        sa.Column("double", sa.Double),
        sa.Column("odd % name", sa.Double),
    ]
    rows = []
    for i in range(1, 41):
        special = SPECIAL_FLOATS[i % len(SPECIAL_FLOATS)]
        row = {
            "id": i if i % 2 else -i * 10**15,
            "small": [-(2**15), 2**15 - 1, 0][i % 3],
            "medium": [-(2**31), 2**31 - 1, i][i % 3],
            "big": [-BIG - 1, BIG, 2**53 + 1, -(2**53) - 1][i % 4],
            "single": [0.1, -0.0, float("nan"), float("inf"), 3.4028234663852886e38][i % 5],
            "double": special,
            "odd % name": i / 3,
        }
        if i > 30:
            row[["small", "medium", "big", "single", "double", "odd % name"][i % 6]] = None
        rows.append(row)
    pg.create(name, columns, rows)
    return name


def test_fixed_width_reads_equal_the_generic_path(pg, numbers):
    database = PostgreSQLDatabase(pg.url)
    columns = ["small", "medium", "big", "single", "double", "odd % name"]
    fast, slow, applies = _both(database, numbers, columns, key="id")
    assert applies
    _frames_equal(fast, slow)
    whole = pd.concat(fast, ignore_index=True)
    assert whole["__key__"].tolist() == sorted(whole["__key__"].tolist())  # key order
    assert len(whole) == 40
    exact = pd.concat([f for f in fast if str(f["big"].dtype) == "int64"])  # null-free chunks
    assert len(exact) >= 14
    assert {BIG, -BIG - 1, 2**53 + 1} <= set(exact["big"].tolist())  # int8 exact
    assert {str(t) for t in exact.dtypes} == {"int64", "float64"}
    assert np.signbit(exact["double"].to_numpy()).any()  # -0.0 kept


def test_null_chunks_and_null_free_chunks_are_built_alike(pg, numbers, monkeypatch):
    """Chunks with a NULL are decoded row by row, the others by NumPy: both were taken, and
    both give what the generic path gives (an int column with a NULL: float64 or object)."""
    taken = {"numpy": 0, "rows": 0}
    decode = pgconnector._decode_row

    def counting(row, formats):
        taken["rows"] += 1
        return decode(row, formats)

    monkeypatch.setattr(pgconnector, "_decode_row", counting)
    database = PostgreSQLDatabase(pg.url)
    fast, slow, applies = _both(database, numbers, ["small", "big", "double"], "id", 6)
    assert applies
    _frames_equal(fast, slow)
    assert 0 < taken["rows"] < 40  # the chunks with NULLs only
    assert {str(f["big"].dtype) for f in fast} != {"int64"}  # a NULL changed a chunk's dtype


def test_other_types_read_through_the_cursor(pg):
    """NUMERIC with many digits, text, timestamps, a text key: the generic path (no COPY), the
    same frames, Decimal exact. A domain over integer is described as integer: the COPY path,
    NULL included."""
    name = pg.name("mixed")
    pg.execute(f"CREATE DOMAIN {pg.name('positive')} AS integer CHECK (VALUE > 0)")
    try:
        pg.execute(
            f"CREATE TABLE {name} (id text PRIMARY KEY, n numeric(40, 20), i integer, "
            f"t timestamp, d {pg.name('positive')})"
        )
        pg.execute(
            f"INSERT INTO {name} VALUES ('a', 12345678901234567890.12345678901234567890, 1, "
            f"'2020-01-02 03:04:05.678901', 5), ('b', NULL, NULL, NULL, NULL), "
            f"('c', -0.00000000000000000001, 3, '1999-12-31 23:59:59', 7)"
        )
        database = PostgreSQLDatabase(pg.url)
        for key, columns in [
            ("id", ["n", "i"]),
            ("id", ["i"]),  # text key
            ("id", ["t"]),
            ("id", ["d"]),  # text key
        ]:
            fast, slow, applies = _both(database, name, columns, key)
            assert not applies, columns
            _frames_equal(fast, slow)
        fast, _, _ = _both(database, name, ["n"], "id")
        assert fast[0]["n"].tolist()[0] == Decimal("12345678901234567890.12345678901234567890")
        pg.execute(f"CREATE TABLE {name}_2 (id integer PRIMARY KEY, d {pg.name('positive')})")
        pg.execute(f"INSERT INTO {name}_2 VALUES (1, 3), (2, NULL)")
        fast, slow, applies = _both(database, f"{name}_2", ["d"], "id")
        assert applies
        _frames_equal(fast, slow)
    finally:
        pg.execute(f"DROP TABLE IF EXISTS {name}, {name}_2")
        pg.execute(f"DROP DOMAIN IF EXISTS {pg.name('positive')}")


def test_empty_table_and_without_key(pg):
    name = pg.name("empty")
    pg.create(
        name,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("x", sa.Double),
        ],
        [],
    )
    database = PostgreSQLDatabase(pg.url)
    fast, slow, applies = _both(database, name, ["x"], "id")
    assert applies and fast == [] and slow == []
    pg.execute(f"INSERT INTO {name} VALUES (2, 0.5), (1, '-0'), (3, 'NaN')")
    with database.session(read_only=True) as session:
        fast = list(session.read(TableName(None, name), ["x"], "id", with_key=False))
        slow = list(Session.read(session, TableName(None, name), ["x"], "id", with_key=False))
    _frames_equal(fast, slow)
    assert list(fast[0].columns) == ["x"]
    assert np.signbit(fast[0]["x"].to_numpy()[0])  # id 1 first: -0.0


def test_a_read_left_early_keeps_the_transaction(pg, numbers):
    """Closing the frames' generator after one chunk must not cancel the COPY (which would
    abort the session's transaction): the session goes on reading in its snapshot."""
    database = PostgreSQLDatabase(pg.url)
    with database.session(read_only=True) as session:
        frames = session.read(TableName(None, numbers), ["big"], "id", chunk_size=5)
        first = next(frames)
        frames.close()
        again = list(session.read(TableName(None, numbers), ["big"], "id", chunk_size=5))
    assert len(first) == 5
    pd.testing.assert_frame_equal(first, again[0])
    assert sum(len(f) for f in again) == 40


def test_a_missing_column_is_a_data_error(pg, numbers):
    from tclose.errors import DataError

    database = PostgreSQLDatabase(pg.url)
    with database.session(read_only=True) as session, pytest.raises(DataError, match="nope"):
        list(session.read(TableName(None, numbers), ["nope"], "id"))


def _published(pg, target: str) -> dict:
    """What a reader can see of a published table: rows in physical order, column types and
    nullability, its constraints and indexes."""
    table = pg.quote(target)
    return {
        "rows": pg.execute(f"SELECT * FROM {table}"),  # physical order, no ORDER BY
        "columns": pg.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable "
            "FROM information_schema.columns WHERE table_name = :t ORDER BY ordinal_position",
            {"t": target},
        ),
        "constraints": pg.execute(
            "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = to_regclass(:t) ORDER BY conname",
            {"t": table},
        ),
        "indexes": pg.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = :t", {"t": target}
        ),
    }


def test_join_write_with_the_key_added_afterwards_writes_the_same_table(pg, monkeypatch):
    """The staging table filled without its primary key (added back after the INSERT) ends
    identical to one filled with the key in place: same rows in the same physical order, same
    columns, a NOT NULL key, the primary key named ``<target>_pkey``, and the run verifies."""
    from tclose.cli import main
    from tclose.connectors.postgresql import PostgreSQLSession

    source = pg.name("patients")
    pg.create_patients(source)
    document = pg.config(source, pg.name("fast"), output={"seed": 7})
    assert main(["run", str(pg.write_config(document, "fast.yaml")), "-q"]) == 0
    fast = _published(pg, pg.name("fast"))

    monkeypatch.setattr(PostgreSQLSession, "insert_joined", Session.insert_joined)
    document = pg.config(source, pg.name("slow"), output={"seed": 7})
    assert main(["run", str(pg.write_config(document, "slow.yaml")), "-q"]) == 0
    slow = _published(pg, pg.name("slow"))

    assert fast["rows"] == slow["rows"] and len(fast["rows"]) == 400
    assert [r[0] for r in fast["rows"]] == sorted(r[0] for r in fast["rows"])  # new-key order
    assert fast["columns"] == slow["columns"]
    assert fast["columns"][0] == ("tclose_row", "bigint", 64, 0, "NO")
    rename = {pg.name("fast"): "T", pg.name("slow"): "T"}
    for kind in ("constraints", "indexes"):
        same = [tuple(_renamed(str(v), rename) for v in row) for row in fast[kind]]
        assert same == [tuple(_renamed(str(v), rename) for v in row) for row in slow[kind]]
    assert [r[:2] for r in fast["constraints"]] == [(f"{pg.name('fast')}_pkey", "p")]
    assert "PRIMARY KEY (tclose_row)" in fast["constraints"][0][2]


def _renamed(text: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        text = text.replace(old, new)
    return text
