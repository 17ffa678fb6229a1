"""Adversarial: values that overflow the column they are written to, and a full disk.

A rounded BIGINT QI near 2^63 has cluster means that round to 2^63, which no BIGINT holds: the
run must refuse (exit 3, naming the column and rows), never publish the wrapped-around value.
A report that cannot be written (disk full) must not leave a truncated file.
"""

from __future__ import annotations

import errno
import json

import sqlalchemy as sa

from tclose.cli import main


def test_a_rounded_bigint_near_2_63_is_refused_not_wrapped(db, capsys):
    source, target = db.name("big"), db.name("anon")
    top = 2**63 - 1
    rows = [{"id": i, "q": top - i, "c": float(i % 4)} for i in range(1, 31)]
    db.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("q", sa.BigInteger),
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
    assert main(["-q", "run", str(db.write_config(document))]) == 3
    err = capsys.readouterr().err
    assert "The quasi-identifier 'q' would be published out of range" in err
    assert "(rows 1, 2, 3, 4, 5, ...)" in err
    assert db.tables() == {source}


def test_a_full_disk_leaves_no_truncated_report(sqlite_run, tmp_path, monkeypatch, capsys):
    import tclose.atomic

    report = tmp_path / "report.json"
    document = sqlite_run.config()
    document["target"]["if_exists"] = "replace"
    config = str(sqlite_run.write(document))
    assert main(["-q", "run", config, "--report", str(report)]) == 0
    previous = report.read_text()

    def full(_descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tclose.atomic.os, "fsync", full)
    assert main(["-q", "run", config, "--report", str(report)]) == 3
    err = capsys.readouterr().err
    assert "No space left on device" in err and "The table WAS published" in err
    assert report.read_text() == previous  # the previous report, whole
    assert json.loads(previous)["run"]["published"] is True
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".report")) == []
