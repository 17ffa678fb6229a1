"""PostgreSQL verifies content in the database: the content digest is the SHA-256 of the
table's binary COPY (an auditor recomputes it with psql), and the linkage check's value
comparisons are SQL ``GROUP BY``. A digest a database cannot compute fails the check."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from collections import Counter

import pytest
import sqlalchemy as sa

import tclose.connectors.postgresql.binary_copy as binary_copy
from tclose.app.cli import main
from tclose.base.digests import COPY_DIGEST_ALGORITHM, ORDERED_DIGEST_ALGORITHM
from tclose.base.registry import load_registry
from tclose.errors import DataError
from tclose.naming import TableName


def _cli(*args: str) -> tuple[int, str]:
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        code = main(["-q", *args])
    return code, capture.getvalue()


def _published(db, tmp_path, rows: int = 120):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=rows)
    document = db.config(source, target)
    document["report"] = {"json": str(tmp_path / "report.json")}
    config = db.write_config(document)
    code, out = _cli("run", str(config))
    assert code == 0, out
    return config, target, json.loads((tmp_path / "report.json").read_text())


def _one_pass_chunks(monkeypatch) -> list[int]:
    """The sizes of the chunks the verification's one pass cuts (``read_with_digest``)."""
    chunks: list[int] = []
    join = binary_copy._copy_chunk

    def counting(messages, sha256):
        rows, ended = join(messages, sha256)
        if sha256 is not None and rows is not None:  # the one pass: it hashes as it cuts
            chunks.append(len(rows[1]))
        return rows, ended

    monkeypatch.setattr(binary_copy, "_copy_chunk", counting)
    return chunks


def test_the_report_records_the_copy_digest_and_psql_recomputes_it(
    pg, tmp_path, monkeypatch, psql_sha256
):
    chunks = _one_pass_chunks(monkeypatch)
    config, target, report = _published(pg, tmp_path)
    assert sum(chunks) == 120  # the staging table was read once: its digest's COPY
    digest = report["target"]["content_digest"]
    assert digest["algorithm"] == COPY_DIGEST_ALGORITHM
    assert digest["rows"] == 120
    assert digest["columns"] == sorted(digest["columns"]) and "tclose_row" in digest["columns"]
    assert 'ORDER BY "tclose_row"' in digest["statement"]
    assert psql_sha256(pg.url, digest["statement"]) == digest["sha256"]
    database = load_registry().connector_for("postgresql").connect(pg.url)
    with database.session(read_only=True) as session:
        table = session.table(TableName.parse(target))
        assert session.content_digest(table)["sha256"] == digest["sha256"]


def test_verify_report_fails_on_one_changed_value_and_passes_once_restored(pg, tmp_path):
    config, target, report = _published(pg, tmp_path)
    report_path = tmp_path / "report.json"
    code, out = _cli("verify", str(config), "--report", str(report_path))
    assert code == 0 and "PASS  content_digest" in out, out

    (row,) = pg.rows(target, "tclose_row, note", order="tclose_row LIMIT 1")
    pg.execute(
        f"UPDATE {pg.quote(target)} SET note = 'changed' WHERE tclose_row = :r", {"r": row[0]}
    )
    code, out = _cli("verify", str(config), "--report", str(report_path))
    assert code == 1 and "FAIL  content_digest" in out, out

    pg.execute(
        f"UPDATE {pg.quote(target)} SET note = :n WHERE tclose_row = :r", {"n": row[1], "r": row[0]}
    )
    code, out = _cli("verify", str(config), "--report", str(report_path))
    assert code == 0 and "PASS  content_digest" in out, out


def test_a_copy_digest_cannot_be_claimed_where_it_cannot_be_computed(tmp_path, lite):
    config, target, report = _published(lite, tmp_path)
    assert report["target"]["content_digest"]["algorithm"] == ORDERED_DIGEST_ALGORITHM
    forged = copy.deepcopy(report)
    forged["target"]["content_digest"]["algorithm"] = COPY_DIGEST_ALGORITHM
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    code, out = _cli("verify", str(config), "--report", str(path))
    assert code == 1 and "FAIL  content_digest" in out and "cannot compute" in out, out


@pytest.fixture
def linkage_table(pg):
    """Columns whose rows the linkage check tells apart differently: unique, one late repeat,
    text unique only by case, all NULL, JSON unique and repeated, NaN twice, and a repeat."""
    n = 12
    rows = [
        {
            "id": i,
            "unique_text": f"u{i}",
            "late_repeat": i if i < n - 1 else 0,
            "by_case": ("a" if i == 0 else "A") if i < 2 else f"v{i}",
            "all_null": None,
            "json_unique": {"i": i},
            "json_repeat": {"i": i % 3},
            "nan_twice": float("nan") if i < 2 else float(i),
            "repeats": i % 4,
        }
        for i in range(n)
    ]
    name = pg.name("linkage")
    table = pg.create(
        name,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("unique_text", sa.Text),
            sa.Column("late_repeat", sa.Integer),
            sa.Column("by_case", sa.String(8)),
            sa.Column("all_null", sa.Text),
            sa.Column("json_unique", sa.dialects.postgresql.JSONB),
            sa.Column("json_repeat", sa.dialects.postgresql.JSONB),
            sa.Column("nan_twice", sa.Double),
            sa.Column("repeats", sa.Integer),
        ],
        rows,
    )
    return name, [c.name for c in table.columns if c.name != "id"], rows


@pytest.mark.parametrize(
    "columns",
    [
        ["unique_text"],
        ["late_repeat"],
        ["by_case"],
        ["all_null"],
        ["json_unique"],
        ["json_repeat"],
        ["nan_twice"],
        ["repeats"],
        ["late_repeat", "repeats"],
        ["json_repeat", "repeats"],
        ["all_null", "nan_twice"],
        ["by_case", "json_repeat", "repeats"],
    ],
)
def test_the_database_counts_the_rows_their_columns_single_out(pg, linkage_table, columns):
    """The database's count is the rows whose tuple (NULL a value, NaN equal to NaN, text byte
    for byte, JSON by content) no other row holds, as counted here in Python."""
    name, _all, rows = linkage_table
    database = load_registry().connector_for("postgresql").connect(pg.url)
    with database.session(read_only=True) as session:
        found = session.unique_rows(session.table(TableName.parse(name)), columns)
    tuples = Counter(tuple(repr(r[c]) for c in columns) for r in rows)
    assert found == sum(n == 1 for n in tuples.values())


def test_a_linking_column_stops_the_run_on_postgresql(pg, tmp_path):
    source, target = pg.name("patients"), pg.name("anon")
    pg.create_patients(source, n=80)
    document = pg.config(source, target)
    document["attributes"]["code"] = {"role": "other"}  # unique per row, not allowed
    config = pg.write_config(document)
    code, out = _cli("run", str(config))
    assert code != 0
    assert target not in pg.tables()


def test_the_html_report_shows_the_digest_and_how_to_recompute_it(pg, tmp_path):
    from tclose.app.html_report import render_html

    _config, _target, report = _published(pg, tmp_path)
    html = render_html(report)
    digest = report["target"]["content_digest"]
    assert digest["sha256"] in html
    assert "sha256sum" in html and "ORDER BY &quot;tclose_row&quot;" in html


@pytest.mark.parametrize("error", [DataError, RuntimeError])
def test_a_reader_error_mid_copy_fails_the_run_and_publishes_nothing(
    pg, tmp_path, monkeypatch, capsys, error
):
    """The one pass fails on its third chunk, the COPY still streaming: the run fails with
    that error (not a driver error of the cancelled COPY), the session rolls back, no table is
    left; the next run publishes."""
    source, target = pg.name("patients"), pg.name("anon")
    pg.create_patients(source, n=200)
    document = pg.config(source, target)
    document["source"]["chunk_size"] = 40
    config = pg.write_config(document)
    chunks = _one_pass_chunks(monkeypatch)
    counting = binary_copy._copy_chunk

    def failing(messages, sha256):
        if sha256 is not None and len(chunks) == 2:
            raise error("Unexpected binary COPY row from PostgreSQL (test).")
        return counting(messages, sha256)

    monkeypatch.setattr(binary_copy, "_copy_chunk", failing)
    code = main(["run", str(config), "-q"])
    assert code == (3 if error is DataError else 4)  # a data error, or an internal error
    assert "Unexpected binary COPY row from PostgreSQL (test)." in capsys.readouterr().err
    assert chunks == [40, 40]
    assert pg.tables() == {source}

    monkeypatch.setattr(binary_copy, "_copy_chunk", counting)
    assert main(["run", str(config), "-q"]) == 0
    assert pg.tables() == {source, target} and len(pg.rows(target)) == 200
    assert chunks == [40, 40] + [40] * 5
