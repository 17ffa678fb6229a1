"""PostgreSQL's pass-through write (``tclose.connectors.pg_carried``) writes what the join writes.

A same-database run on PostgreSQL carries the pass-through columns' binary ``COPY`` bytes from
the read to one binary ``COPY`` of the staging table, instead of having the server join and sort.
Each run test publishes the same source twice with the same seed, once so and once through the
join (``PostgreSQLSession.carry`` disabled), and requires the two published tables to be equal
row for row in physical order, values compared as the server's text of each column (so
``NaN``, ``infinity``, array bounds, JSON as written, time zones, bytes are all compared), with
the log naming the write used. The kernels are checked against plain Python on any input.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.plugins.kernels.byte_rows import assemble_rows, gather_segments

CARRIED = "writing by one binary COPY, pass-through fields as read"
JOINED = "writing by a join in the database"


@st.composite
def segmented(draw):
    """A byte buffer and non-overlapping, ordered segments of it (some empty)."""
    buffer = draw(st.binary(min_size=0, max_size=200))
    cuts = sorted(draw(st.lists(st.integers(0, len(buffer)), min_size=0, max_size=30)))
    pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    return buffer, pairs


@settings(max_examples=200, deadline=None)
@given(segmented(), st.data())
def test_the_kernels_cut_and_join_bytes_as_python_does(case, data):
    buffer, pairs = case
    array = np.frombuffer(buffer, dtype=np.uint8)
    starts = np.array([s for s, _ in pairs], dtype=np.int64)
    ends = np.array([e for _, e in pairs], dtype=np.int64)
    joined, lengths = gather_segments(array, starts, ends)
    assert joined.tobytes() == b"".join(buffer[s:e] for s, e in pairs)
    assert lengths.tolist() == [e - s for s, e in pairs]

    width = data.draw(st.integers(0, 5))
    count = data.draw(st.integers(0, 12)) if pairs else 0
    rows = [data.draw(st.integers(0, len(pairs) - 1)) for _ in range(count)]
    heads = np.frombuffer(
        data.draw(st.binary(min_size=width * count, max_size=width * count)), np.uint8
    )
    heads = heads.reshape(count, width)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    out = assemble_rows(heads, joined, offsets, lengths, np.array(rows, dtype=np.int64))
    expected = b"".join(
        heads[j].tobytes() + buffer[pairs[r][0] : pairs[r][1]] for j, r in enumerate(rows)
    )
    assert out.tobytes() == expected


def test_the_kernels_refuse_segments_outside_their_buffer():
    array = np.zeros(4, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        gather_segments(array, np.array([2]), np.array([5]))
    with pytest.raises(ValueError, match="outside"):
        gather_segments(array, np.array([3]), np.array([2]))
    joined, lengths = gather_segments(array, np.array([0]), np.array([2]))
    with pytest.raises(ValueError, match="names no segment"):
        assemble_rows(np.zeros((1, 1), np.uint8), joined, np.array([0]), lengths, np.array([1]))


# --- runs on the real server -----------------------------------------------------------------

MIXED_COLUMNS = {
    "t_text": "text",
    "t_short": "varchar(12)",
    "t_num": "numeric(12,3)",
    "t_nan": "numeric",
    "t_stamp": "timestamptz",
    "t_day": "date",
    "t_jsonb": "jsonb",
    "t_json": "json",
    "t_array": "integer[]",
    "t_enum": "{enum}",
    "t_bytes": "bytea",
    "t_flag": "boolean",
    "t_uuid": "uuid",
    "t_span": "interval",
    "t_domain": "{domain}",
    "t_real": "real",
}


def _add_mixed_columns(pg, source: str, enum: str, domain: str) -> None:
    """Columns of many types, each a function of ``patient_id`` (NULL in some rows), with the
    values that break naive copies: NaN, infinity, array bounds, JSON with duplicate keys,
    non-ASCII text with tabs and quotes, NUL-free bytes of every value, negative zero."""
    table = pg.quote(source)
    pg.execute(f"CREATE TYPE {pg.quote(enum)} AS ENUM ('low', 'mid', 'high')")
    pg.execute(f"CREATE DOMAIN {pg.quote(domain)} AS integer CHECK (VALUE > 0)")
    kinds = {
        c: t.format(enum=pg.quote(enum), domain=pg.quote(domain)) for c, t in MIXED_COLUMNS.items()
    }
    pg.execute(
        f"ALTER TABLE {table} "
        + ", ".join(f"ADD COLUMN {pg.quote(c)} {t}" for c, t in kinds.items())
    )
    i = "patient_id"
    pg.execute(
        f"UPDATE {table} SET "
        f"t_text = CASE WHEN {i} % 5 = 0 THEN NULL ELSE 'ü€ ' || {i} || E'\\t\"q\\'' END, "
        f"t_short = CASE WHEN {i} % 3 = 0 THEN '' ELSE 'v' || {i} END, "
        f"t_num = {i} / 7.0, "
        f"t_nan = CASE WHEN {i} % 4 = 0 THEN 'NaN'::numeric ELSE {i} * 1.50 END, "
        f"t_stamp = '2020-02-29 23:59:59.123456+05'::timestamptz + {i} * interval '1 hour', "
        f"t_day = CASE WHEN {i} % 6 = 0 THEN 'infinity'::date ELSE date '1999-12-31' + {i} END, "
        f"t_jsonb = jsonb_build_object('id', {i}, 'x', 1.50), "
        f"t_json = ('{{\"a\": ' || {i} || ', \"a\": 2}}')::json, "
        f"t_array = CASE WHEN {i} % 2 = 0 THEN '[0:1]={{1,2}}'::integer[] "
        f"ELSE ARRAY[{i}, NULL] END, "
        f"t_enum = (ARRAY['low', 'mid', 'high'])[{i} % 3 + 1]::{pg.quote(enum)}, "
        f"t_bytes = CASE WHEN {i} % 9 = 0 THEN NULL ELSE decode(md5({i}::text), 'hex') END, "
        f"t_flag = {i} % 2 = 0, "
        f"t_uuid = md5({i}::text)::uuid, "
        f"t_span = {i} * interval '1 day 3 seconds', "
        f"t_domain = {i} + 1, "
        f"t_real = CASE WHEN {i} % 8 = 0 THEN '-0'::real ELSE {i} / 3.0 END"
    )


def _as_text(pg, target: str) -> list[tuple]:
    """The published rows in physical order, every value as the server's text."""
    columns = [
        r[0]
        for r in pg.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
            "ORDER BY ordinal_position",
            {"t": target},
        )
    ]
    texts = ", ".join(f"{pg.quote(c)}::text" for c in columns)
    return [tuple(columns)] + pg.execute(f"SELECT {texts} FROM {pg.quote(target)}")


def _run(document: dict, path, capsys) -> str:
    """``tclose -v run`` of ``document`` (must publish); its log."""
    from tclose.cli import main

    capsys.readouterr()
    assert main(["-v", "run", str(path)]) == 0, capsys.readouterr().err
    return capsys.readouterr().err


def _run_both(pg, monkeypatch, capsys, document_for) -> tuple[list, list, str]:
    """Publish ``document_for(target)`` carried and joined; the two tables' text rows and the
    carried run's log."""
    from tclose.connectors.postgresql import PostgreSQLSession

    document = document_for(pg.name("carried"))
    log = _run(document, pg.write_config(document, "carried.yaml"), capsys)
    carried = _as_text(pg, pg.name("carried"))
    with monkeypatch.context() as patch:
        patch.setattr(PostgreSQLSession, "carry", lambda self, name, columns: None)
        document = document_for(pg.name("joined"))
        joined_log = _run(document, pg.write_config(document, "joined.yaml"), capsys)
    assert JOINED in joined_log and CARRIED not in joined_log
    return carried, _as_text(pg, pg.name("joined")), log


@pytest.mark.postgres
def test_pass_through_columns_of_every_kind_are_written_as_the_join_writes_them(
    pg, monkeypatch, capsys
):
    source = pg.name("patients")
    enum, domain = pg.name("mood"), pg.name("positive")
    pg.create_patients(source, n=300)
    try:
        _add_mixed_columns(pg, source, enum, domain)

        def document_for(target):
            document = pg.config(source, target, output={"seed": 11})
            for column in MIXED_COLUMNS:
                document["attributes"][column] = {"role": "other", "allow_unique": True}
            return document

        carried, joined, log = _run_both(pg, monkeypatch, capsys, document_for)
        assert CARRIED in log and JOINED not in log
        assert carried == joined
        assert len(carried) == 301 and carried[0][0] == "tclose_row"
        assert [int(r[0]) for r in carried[1:]] == list(range(1, 301))  # new-key order
        assert any(r[carried[0].index("t_day")] == "infinity" for r in carried[1:])
        assert any(r[carried[0].index("t_array")] == "[0:1]={1,2}" for r in carried[1:])
        # and the carried rows belong to their own source rows: code and t_uuid both follow
        # patient_id, which the run drops
        code, uuid = carried[0].index("code"), carried[0].index("t_uuid")
        pairs = {(r[code], r[uuid]) for r in carried[1:]}
        expected = pg.execute(
            f"SELECT code::text, md5(patient_id::text)::uuid::text FROM {pg.quote(source)}"
        )
        assert pairs == set(expected)
    finally:
        pg.drop_all()
        pg.execute(f"DROP TYPE IF EXISTS {pg.quote(enum)}")
        pg.execute(f"DROP DOMAIN IF EXISTS {pg.quote(domain)}")


@pytest.mark.postgres
def test_rows_set_aside_and_rounded_values_are_written_as_the_join_writes_them(
    pg, monkeypatch, capsys
):
    """``missing: exclude-rows`` leaves rows out of the write (the carried write must skip
    their bytes), and a rounded QI keeps its integer type (written as ``integer``)."""
    source = pg.name("patients")
    pg.create_patients(source, n=250)
    pg.execute(f"UPDATE {pg.quote(source)} SET age = NULL WHERE patient_id % 11 = 0")

    def document_for(target):
        document = pg.config(source, target, output={"seed": 3})
        document["attributes"]["age"].update(missing="exclude-rows", round=True)
        return document

    carried, joined, log = _run_both(pg, monkeypatch, capsys, document_for)
    assert CARRIED in log
    assert carried == joined
    assert len(carried) - 1 == 250 - 250 // 11
    age = carried[0].index("age")
    assert all(r[age] is not None and "." not in r[age] for r in carried[1:])


@pytest.mark.postgres
def test_a_quasi_identifier_that_is_not_a_fixed_width_number_uses_the_join(pg, capsys):
    """A ``numeric`` QI is read through psycopg's tuples, so nothing is carried: the log says
    the join is used, and the run publishes."""
    source = pg.name("patients")
    pg.create_patients(source, n=120)
    pg.execute(f"ALTER TABLE {pg.quote(source)} ALTER COLUMN zip TYPE numeric(10,0)")
    document = pg.config(source, pg.name("out"))
    log = _run(document, pg.write_config(document), capsys)
    assert "not a fixed-width number" in log
    assert JOINED in log and CARRIED not in log
    assert pg.rows(pg.name("out"), "count(*)") == [(120,)]


@pytest.mark.postgres
def test_a_client_encoding_other_than_the_servers_uses_the_join(pg, capsys):
    """Text would be converted on the way out and back (or fail to convert): nothing is
    carried, the log says why, and the run publishes the same rows."""
    source = pg.name("patients")
    pg.create_patients(source, n=90)
    document = pg.config(source, pg.name("out"))
    document["source"]["url"] = pg.url + "?client_encoding=LATIN1"
    log = _run(document, pg.write_config(document), capsys)
    assert "client encoding LATIN1 is not the server's (UTF8)" in log
    assert JOINED in log and CARRIED not in log
    assert pg.rows(pg.name("out"), "count(*)") == [(90,)]
