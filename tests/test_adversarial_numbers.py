"""Adversarial: values that overflow the column they are written to, and a full disk.

A rounded BIGINT QI near 2^63 has cluster means that round to 2^63, which no BIGINT holds: the
run must refuse (exit 3, naming the column and rows), never publish the wrapped-around value.
A report that cannot be written (disk full) must not leave a truncated file.
"""

from __future__ import annotations

import errno
import json

import sqlalchemy as sa

from tclose.app.cli import main


def _rounded_qi_table(db, column_type, value):
    """(source, target, rows, config path): 30 rows whose QI ``q`` (``column_type``, row ``i``
    holding ``value(i)``) is declared ``round: true``, and a numeric confidential ``c``."""
    source, target = db.name("big"), db.name("anon")
    rows = [{"id": i, "q": value(i), "c": float(i % 4)} for i in range(1, 31)]
    db.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("q", column_type),
            sa.Column("c", sa.Double),
        ],
        rows,
    )
    document = db.config(source, target)
    document["source"]["key"] = "id"
    document["attributes"] = {
        "q": {"role": "quasi_identifier", "type": "numeric", "round": True},
        "c": {"role": "confidential", "type": "numeric"},
    }
    return source, target, rows, str(db.write_config(document))


def test_a_rounded_double_beyond_2_63_is_refused_not_wrapped(db, capsys):
    """A rounded QI of a floating-point column whose means round to 2**63 or more does not fit
    the BIGINT it is written as: refused, never wrapped."""
    source, target, _, config = _rounded_qi_table(db, sa.Double, lambda i: 2.0**63 + 2048.0 * i)
    assert main(["-q", "run", config]) == 3
    err = capsys.readouterr().err
    assert "The quasi-identifier 'q' would be published out of range" in err
    assert "(rows 1, 2, 3, 4, 5, ...)" in err
    assert db.tables() == {source}


def test_a_rounded_bigint_near_2_63_publishes_exact_means(db, capsys):
    """A rounded QI of a BIGINT column near 2**63 - 1: each class gets its members' exact mean
    rounded half to even, computed in integers (through float64 it became 2**63, refused)."""
    _, target, rows, config = _rounded_qi_table(db, sa.BigInteger, lambda i: 2**63 - 1 - 3 * i)
    assert main(["-q", "run", config]) == 0, capsys.readouterr().err
    published = [int(q) for (q,) in db.rows(target, db.quote("q"))]
    originals = [row["q"] for row in rows]
    assert min(originals) <= min(published) and max(published) <= max(originals)
    assert abs(sum(published) - sum(originals)) <= len(published)  # each class: its mean


def test_a_full_disk_leaves_no_truncated_report(sqlite_run, tmp_path, monkeypatch, capsys):
    import tclose.base.atomic

    report = tmp_path / "report.json"
    document = sqlite_run.config()
    document["target"]["if_exists"] = "replace"
    config = str(sqlite_run.write(document))
    assert main(["-q", "run", config, "--report", str(report)]) == 0
    previous = report.read_text()

    def full(_descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tclose.base.atomic.os, "fsync", full)
    assert main(["-q", "run", config, "--report", str(report)]) == 3
    err = capsys.readouterr().err
    assert "No space left on device" in err and "The table WAS published" in err
    assert report.read_text() == previous  # the previous report, whole
    assert json.loads(previous)["run"]["published"] is True
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []


def _qi_table(db, values: list[float]) -> tuple[str, str, dict]:
    """(source, target, config): table ``q`` (key ``id``, QI ``q`` of ``values``, confidential
    ``c``) in ``db``."""
    source, target = db.name("q"), db.name("anon")
    rows = [{"id": i + 1, "q": v, "c": float(i % 3)} for i, v in enumerate(values)]
    db.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("q", sa.Double),
            sa.Column("c", sa.Double),
        ],
        rows,
    )
    document = db.config(source, target)
    document["source"]["key"] = "id"
    document["attributes"] = {
        "q": {"role": "quasi_identifier", "type": "numeric"},
        "c": {"role": "confidential", "type": "numeric"},
    }
    document["privacy"] = {"k": 2, "t": 0.9}
    return source, target, document


def test_a_qi_of_subnormal_values_has_a_histogram(db, capsys):
    """QI values a few subnormals apart (0 and 1e-322: a histogram step of 5e-324, whose power
    of ten underflows to 0): the report's histogram holds every row in one bin, never an
    internal error (``StopIteration`` from the search for a round step)."""
    values = [0.0 if i % 2 else 1e-322 for i in range(20)]
    source, target, document = _qi_table(db, values)
    report = db.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    assert main(["-q", "run", str(db.write_config(document))]) == 0, capsys.readouterr().err
    histogram = json.loads(report.read_text())["distributions"]["q"]
    assert sum(histogram["original"]) == sum(histogram["anonymized"]) == 20
    assert histogram["edges"][0] <= 0.0 and histogram["edges"][-1] >= 1e-322
    assert db.tables() == {source, target}


def test_an_empty_source_table_is_a_data_error(db, capsys):
    """An empty table (or one whose rows are all set aside) has fewer rows than k: exit 3
    saying so, not an internal error from standardizing no values."""
    source, _target, document = _qi_table(db, [])
    assert main(["-q", "run", str(db.write_config(document))]) == 3
    err = capsys.readouterr().err
    assert "The table has 0 rows, fewer than k = 2" in err and "internal error" not in err
    assert db.tables() == {source}
