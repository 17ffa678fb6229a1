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

from tclose.connectors.postgresql import PostgreSQLDatabase
from tclose.connectors.postgresql import binary_copy as pgconnector
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
    """Chunks with a NULL are decoded row by row, the others by NumPy: both paths are taken, and
    both give what the generic path gives (an int column with a NULL: float64 or object)."""
    taken = {"numpy": 0, "rows": 0}
    build = pgconnector._fields_frame

    def counting(fields, names, formats):
        if any(null.any() for _, null in fields):  # built from tuples of Python values
            taken["rows"] += len(fields[0][1])
        return build(fields, names, formats)

    monkeypatch.setattr(pgconnector, "_fields_frame", counting)
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
    from tclose.app.cli import main
    from tclose.connectors.postgresql import PostgreSQLSession

    source = pg.name("patients")
    pg.create_patients(source)
    document = pg.config(source, pg.name("fast"))
    assert main(["run", str(pg.write_config(document, "fast.yaml")), "-q"]) == 0
    fast = _published(pg, pg.name("fast"))

    monkeypatch.setattr(PostgreSQLSession, "insert_joined", Session.insert_joined)
    document = pg.config(source, pg.name("slow"))
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


# --- the verification's one pass: frames and digest from the digest's own COPY ----------------


def _one_pass_and_two(database, name: str, columns: list[str], chunk_size: int):
    """(one-pass frames, its digest, two-pass frames, their digest) in one session: the
    one-pass ``read_with_digest`` against ``read`` then ``content_digest``."""
    table = TableName(None, name)
    with database.session(read_only=True) as session:
        digest: dict = {}
        one = list(session.read_with_digest(table, columns, digest, chunk_size, table))
        two = list(session.read(table, columns, "tclose_row", chunk_size, with_key=False))
        reference = session.content_digest(session.table(table), table)
    return one, digest, two, reference


@pytest.fixture
def staged(pg):
    """A table shaped like a staging table (``tclose_row`` key) whose wanted columns are every
    fixed-width type (NULLs in some chunks, the special floats, the int8 extremes) between
    unwanted columns of every width: text (empty, long, multibyte, NULL), numeric, timestamp,
    bytea (empty, and bytes that look like the COPY trailer and like a NULL length), json,
    boolean, and fixed-width ones with NULLs."""
    name = pg.name("staged")
    pg.execute(
        f'CREATE TABLE {name} (tclose_row bigint PRIMARY KEY, "a text" text, b_int2 smallint, '
        f"c_bytes bytea, d_int4 integer, e_json json, f_int8 bigint, g_num numeric(30, 10), "
        f'h_real real, i_ts timestamp, j_double double precision, "k % odd" double precision, '
        f"l_bool boolean, m_int4 integer, n_text varchar(300))"
    )
    rows = []
    for i in range(1, 61):
        null = i > 30 and i % 4 == 0  # NULLs among the wanted columns after row 30
        rows.append(
            {
                "r": i,
                "a": ["", "x" * (i * 7), "é€😀" * (i % 5), None][i % 4],
                "b": None if null and i % 8 == 0 else [-(2**15), 2**15 - 1, 0][i % 3],
                "c": [b"", b"\xff\xff", b"\xff\xff\xff\xff" * i, None][i % 4],
                "d": [-(2**31), 2**31 - 1, i][i % 3],
                "e": [None, '{"k": [1, 2]}', '"' + "y" * i + '"'][i % 3],
                "f": None if null and i % 8 == 4 else [-BIG - 1, BIG, 2**53 + 1, -i][i % 4],
                "g": [None, "12345678901234567890.0123456789", f"-{i}.5"][i % 3],
                "h": [0.1, -0.0, float("nan"), float("inf"), 3.4028234663852886e38][i % 5],
                "i": [None, f"2020-01-{i % 28 + 1:02d} 03:04:05.678901"][i % 2],
                "j": SPECIAL_FLOATS[i % len(SPECIAL_FLOATS)],
                "k": None if i == 59 else i / 3,
                "l": [None, True, False][i % 3],
                "m": None if i % 5 == 0 else i,
                "n": "z" * (i * 5),
            }
        )
    pg.execute(
        f"INSERT INTO {name} VALUES (:r, :a, :b, :c, :d, :e, :f, :g, :h, :i, :j, :k, :l, :m, :n)",
        rows,
    )
    return name


WANTED = ["j_double", "b_int2", "f_int8", "h_real", "d_int4", "k % odd"]  # not in name order


def _copy_fields_calls(monkeypatch) -> list[int]:
    """Count the rows of each chunk the one pass cuts (the only reader that hashes as it
    cuts: ``_copy_chunk`` gets its SHA-256)."""
    calls: list[int] = []
    join = pgconnector._copy_chunk

    def counting(messages, sha256):
        rows, ended = join(messages, sha256)
        if sha256 is not None and rows is not None:
            calls.append(len(rows[1]))
        return rows, ended

    monkeypatch.setattr(pgconnector, "_copy_chunk", counting)
    return calls


@pytest.mark.parametrize("chunk_size", [1, 4, 7, 60, 1000])
def test_one_pass_equals_read_then_digest(pg, staged, monkeypatch, chunk_size):
    calls = _copy_fields_calls(monkeypatch)
    database = PostgreSQLDatabase(pg.url)
    one, digest, two, reference = _one_pass_and_two(database, staged, WANTED, chunk_size)
    _frames_equal(one, two)
    assert digest == reference
    assert sum(calls) == 60 and max(calls) == min(chunk_size, 60)  # the one pass cut them all
    dtypes = {str(t) for f in one for t in f.dtypes}
    assert "int64" in dtypes and "float64" in dtypes
    if chunk_size < 30:  # chunks with a NULL in a wanted integer column and chunks without
        kinds = {str(f["f_int8"].dtype) for f in one}  # float64, or object for all NULL
        assert "int64" in kinds and len(kinds) >= 2
        exact = pd.concat([f for f in one if str(f["f_int8"].dtype) == "int64"])
        assert {BIG, -BIG - 1, 2**53 + 1} <= set(exact["f_int8"].tolist())  # int8 exact
    whole = pd.concat(one, ignore_index=True)
    assert len(whole) == 60 and list(whole.columns) == WANTED
    assert np.signbit(whole["h_real"].to_numpy()).any()  # -0.0 kept


def test_the_one_pass_digest_is_the_one_psql_computes(pg, staged, monkeypatch, psql_sha256):
    """The digest is the SHA-256 of the bytes of the statement it records, as ``psql`` gets
    them; also with the session's client encoding not UTF-8 (switched for the COPY and back)."""

    database = PostgreSQLDatabase(pg.url)
    table = TableName(None, staged)
    with database.session(read_only=True) as session:
        session.execute("SET LOCAL client_encoding = 'LATIN9'")
        digest: dict = {}
        frames = list(session.read_with_digest(table, WANTED, digest, 16))
        assert session.execute("SHOW client_encoding")[0][0] == "LATIN9"
    one, utf8_digest, _, _ = _one_pass_and_two(database, staged, WANTED, 16)
    _frames_equal(frames, one)
    assert digest["sha256"] == utf8_digest["sha256"]
    assert digest["statement"].startswith('COPY (SELECT "a text", "b_int2", ')
    assert psql_sha256(pg.url, digest["statement"]) == digest["sha256"]


def test_one_pass_on_an_empty_table(pg, staged, monkeypatch):
    calls = _copy_fields_calls(monkeypatch)
    pg.execute(f"DELETE FROM {staged}")
    database = PostgreSQLDatabase(pg.url)
    one, digest, two, reference = _one_pass_and_two(database, staged, WANTED, 7)
    assert one == [] and two == [] and calls == []
    assert digest == reference and digest["sha256"]


@pytest.mark.parametrize("column", ["g_num", "a text", "i_ts", "l_bool"])
def test_a_wanted_column_of_another_type_reads_twice(pg, staged, monkeypatch, column):
    """A wanted column that is not fixed-width: ``read`` then ``content_digest``, the same
    frames and digest (NULLs and all)."""
    calls = _copy_fields_calls(monkeypatch)
    database = PostgreSQLDatabase(pg.url)
    one, digest, two, reference = _one_pass_and_two(database, staged, ["d_int4", column], 7)
    assert calls == []
    _frames_equal(one, two)
    assert digest == reference


def test_a_one_pass_left_early_keeps_the_transaction_and_gives_no_digest(pg, staged):
    database = PostgreSQLDatabase(pg.url)
    table = TableName(None, staged)
    with database.session(read_only=True) as session:
        digest: dict = {}
        frames = session.read_with_digest(table, WANTED, digest, 5)
        first = next(frames)
        frames.close()
        assert digest == {}
        again = list(session.read(table, WANTED, "tclose_row", 5, with_key=False))
    pd.testing.assert_frame_equal(first, again[0])
    assert sum(len(f) for f in again) == 60


def test_a_one_pass_of_a_missing_column_is_a_data_error(pg, staged):
    from tclose.errors import DataError

    database = PostgreSQLDatabase(pg.url)
    with database.session(read_only=True) as session, pytest.raises(DataError, match="nope"):
        list(session.read_with_digest(TableName(None, staged), ["nope"], {}))


def _rows(*rows: list[bytes | None]) -> list[bytes]:
    """Binary COPY row messages of the given fields (``None``: NULL)."""
    import struct

    out = []
    for fields in rows:
        data = struct.pack(">h", len(fields))
        for field in fields:
            data += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field))
            data += field or b""
        out.append(data)
    return out


def test_malformed_copy_rows_are_data_errors():
    """A field count, length or row size that does not fit is a DataError, never a value."""
    import hashlib
    import struct

    from tclose.errors import DataError

    eight = struct.pack(">d", 1.5)
    good = _rows([b"abc", eight], [None, eight], [b"", None])
    (buffer, starts, ends), ended = pgconnector._copy_chunk(good, hashlib.sha256())
    assert not ended
    values, null = pgconnector._copy_fields(buffer, starts, ends, 2, [(1, ">f8")])[0]
    assert values[:2].tolist() == [1.5, 1.5] and null.tolist() == [False, False, True]
    for bad, match in [
        (_rows([b"abc", eight, b""]), "field count"),
        (_rows([b"abc", b"1234"]), "field size"),  # a wanted double of 4 bytes
        ([good[0][:-1]], "row size"),  # a short row
        ([good[0] + b"x"], "row size"),  # a long row
        ([good[0][:2] + struct.pack(">i", 10**6) + good[0][6:]], "row size"),  # past the end
        ([good[0][:2] + struct.pack(">i", -3) + good[0][6:]], "field size|row size"),
    ]:
        (buffer, starts, ends), _ = pgconnector._copy_chunk(bad, hashlib.sha256())
        with pytest.raises(DataError, match=match):
            pgconnector._copy_fields(buffer, starts, ends, 2, [(1, ">f8")])
    with pytest.raises(DataError, match="trailer"):
        pgconnector._copy_chunk([b"\xff\xfe"], hashlib.sha256())
    assert pgconnector._copy_chunk([b"\xff\xff"], hashlib.sha256()) == (None, True)
