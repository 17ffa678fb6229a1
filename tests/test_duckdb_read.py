"""DuckDB's fast read (``DuckDBSession.read`` fetching NumPy vectors) gives the very frames of
the generic read (a Python tuple per row, ``pd.DataFrame.from_records`` per chunk): same chunks,
dtypes, values, NULLs and NaNs apart, signed zeros, extremes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

duckdb = pytest.importorskip("duckdb")

from tclose.connectors.duckdb import DuckDBConnector, DuckDBSession  # noqa: E402
from tclose.connectors.sql import Session  # noqa: E402
from tclose.naming import TableName  # noqa: E402

#: Column type → values hypothesis draws from (extremes, signed zeros, NaN, infinities).
TYPES = {
    "TINYINT": st.integers(-128, 127),
    "SMALLINT": st.integers(-(2**15), 2**15 - 1),
    "INTEGER": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "UTINYINT": st.integers(0, 2**8 - 1),
    "USMALLINT": st.integers(0, 2**16 - 1),
    "UINTEGER": st.integers(0, 2**32 - 1),
    "FLOAT": st.floats(width=32, allow_nan=True, allow_infinity=True),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True),
}
NAMES = [f"c_{t.lower()}" for t in TYPES]


def _frames(session: DuckDBSession, reader, columns, chunk_size, with_key):
    return list(reader(session, TableName(None, "t"), columns, "id", chunk_size, with_key))


def _same(fast: list[pd.DataFrame], generic: list[pd.DataFrame]) -> None:
    assert len(fast) == len(generic)
    for a, b in zip(fast, generic, strict=True):
        assert list(a.columns) == list(b.columns)
        assert a.index.equals(b.index)
        for position, name in enumerate(a.columns):
            x, y = a.iloc[:, position].to_numpy(), b.iloc[:, position].to_numpy()
            assert x.dtype == y.dtype, (name, x.dtype, y.dtype)
            if x.dtype == np.float64:
                nan = np.isnan(x)
                assert np.array_equal(nan, np.isnan(y)), name
                # Bits, not ==: -0.0 must stay -0.0.
                assert np.array_equal(x[~nan].view(np.int64), y[~nan].view(np.int64)), name
            else:
                assert x.tolist() == y.tolist(), name
                assert [type(v) for v in x.tolist()] == [type(v) for v in y.tolist()], name


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "t.duckdb"
    connection = duckdb.connect(str(path))
    columns = ", ".join(f"{n} {t}" for n, t in zip(NAMES, TYPES, strict=True))
    connection.execute(f"CREATE TABLE t (id BIGINT PRIMARY KEY, {columns})")
    connection.close()
    return path


def _fill(path, rows) -> None:
    connection = duckdb.connect(str(path))
    connection.execute("DELETE FROM t")
    marks = ", ".join("?" * (len(NAMES) + 1))
    if rows:
        connection.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    connection.close()


def _row_values():
    # None is NULL; each column draws NULLs, extremes and (floats) NaN, infinities, -0.0.
    return st.tuples(*(st.one_of(st.none(), values) for values in TYPES.values()))


def _compare(path, chunk_size: int, with_key: bool, columns=NAMES) -> None:
    database = DuckDBConnector().connect(f"duckdb:///{path}")
    with database.session(read_only=True) as session:
        fast = _frames(session, DuckDBSession.read, columns, chunk_size, with_key)
        generic = _frames(session, Session.read, columns, chunk_size, with_key)
    _same(fast, generic)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(_row_values(), max_size=40),
    chunk_size=st.sampled_from([1, 2, 3, 7, 50_000]),
    with_key=st.booleans(),
)
def test_the_fast_read_gives_the_generic_frames(database, rows, chunk_size, with_key):
    _fill(database, [(i * 7 - 100, *values) for i, values in enumerate(rows)])
    _compare(database, chunk_size, with_key)


def test_a_chunk_of_nulls_only_and_a_chunk_of_nans_only_stay_apart(database):
    """The generic path makes a chunk whose float column is all NULL an ``object`` column of
    ``None``, and one that is all NaN a ``float64`` column; the fast read, which receives both as
    NaN, must tell them apart (it does by an ``IS NULL`` flag)."""
    nan, null = float("nan"), None
    rows = [
        (i, *([null] * 7), value, value)
        for i, value in enumerate([null, null, nan, nan, null, nan, 1.0, -0.0])
    ]
    _fill(database, rows)
    _compare(database, 2, True)
    database_ = DuckDBConnector().connect(f"duckdb:///{database}")
    with database_.session(read_only=True) as session:
        frames = list(session.read(TableName(None, "t"), ["c_double"], "id", 2, False))
    assert [f["c_double"].dtype for f in frames] == [object, np.float64, np.float64, np.float64]


def test_chunks_cross_duckdb_vectors_and_fetches(database):
    """Several fetches of 8 vectors of 2,048 rows, cut into chunks that straddle them."""
    connection = duckdb.connect(str(database))
    connection.execute(
        "INSERT INTO t SELECT i, i % 100 - 50, i % 999, -i, i * 1000003, i % 7, i % 300, i, "
        "(i / 7)::FLOAT, sqrt(i) FROM range(40000) r(i) WHERE i <> 20000"
    )
    connection.execute("INSERT INTO t (id) VALUES (20000)")  # a row of NULLs mid-vector
    connection.close()
    for chunk_size in (4_999, 16_384, 50_000):
        _compare(database, chunk_size, True)


def test_an_empty_table_gives_no_frame(database):
    _fill(database, [])
    _compare(database, 10, True)
    connected = DuckDBConnector().connect(f"duckdb:///{database}")
    with connected.session(read_only=True) as session:
        assert list(session.read(TableName(None, "t"), NAMES, "id")) == []


def test_other_types_take_the_generic_path(tmp_path):
    """A decimal, a UBIGINT beyond int64, a boolean: read as the generic path reads them."""
    path = tmp_path / "o.duckdb"
    connection = duckdb.connect(str(path))
    connection.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, d DECIMAL(10,2), u UBIGINT, b BOOLEAN, x DOUBLE)"
    )
    connection.execute(
        "INSERT INTO t VALUES (1, 1.25, 18446744073709551615, true, 0.5), (2, NULL, 0, NULL, NULL)"
    )
    connection.close()
    database = DuckDBConnector().connect(f"duckdb:///{path}")
    with database.session(read_only=True) as session:
        for columns in (["d", "x"], ["u"], ["b"]):
            fast = _frames(session, DuckDBSession.read, columns, 50_000, True)
            generic = _frames(session, Session.read, columns, 50_000, True)
            _same(fast, generic)
        [frame] = _frames(session, DuckDBSession.read, ["u"], 50_000, False)
    assert frame["u"].tolist() == [18446744073709551615, 0]


def test_a_missing_column_is_named(database):
    from tclose.errors import DataError

    connected = DuckDBConnector().connect(f"duckdb:///{database}")
    with connected.session(read_only=True) as session, pytest.raises(DataError, match="'nope'"):
        list(session.read(TableName(None, "t"), ["nope"], "id"))


def test_the_vector_types_do_not_fall_back(database, monkeypatch):
    """Every type of :data:`TYPES` takes the fast path (the comparisons above would pass
    vacuously if the fast read fell back to the generic one)."""
    _fill(database, [(1, *range(7), 0.5, 0.25)])

    def generic(*args, **kwargs):
        raise AssertionError("the generic read was used")

    monkeypatch.setattr(Session, "read", generic)
    connected = DuckDBConnector().connect(f"duckdb:///{database}")
    with connected.session(read_only=True) as session:
        [frame] = list(session.read(TableName(None, "t"), NAMES, "id"))
    assert frame.iloc[0].tolist() == [1, *range(7), 0.5, 0.25]


def test_a_column_named_like_the_key_label(tmp_path):
    """A column named ``__key__`` beside the key the read labels so: two columns of one name,
    as the generic path gives them (a frame built from a dict kept only one)."""
    path = tmp_path / "k.duckdb"
    connection = duckdb.connect(str(path))
    connection.execute('CREATE TABLE t (id BIGINT PRIMARY KEY, "__key__" DOUBLE, x INTEGER)')
    connection.execute("INSERT INTO t VALUES (1, 0.5, 7), (2, NULL, 8)")
    connection.close()
    database = DuckDBConnector().connect(f"duckdb:///{path}")
    with database.session(read_only=True) as session:
        fast = _frames(session, DuckDBSession.read, ["__key__", "x"], 50_000, True)
        generic = _frames(session, Session.read, ["__key__", "x"], 50_000, True)
    _same(fast, generic)
    assert list(fast[0].columns) == ["__key__", "__key__", "x"]
    assert fast[0].iloc[:, 0].tolist() == [1, 2]
