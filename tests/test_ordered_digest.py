"""The chained content digest (``ORDERED_DIGEST_ALGORITHM``) of the databases without a
binary-``COPY`` digest (SQLite, DuckDB, MariaDB/MySQL): the SHA-256 of their rows' hashes chained
in ``tclose_row`` order, which no choice of rows can match short of breaking SHA-256. A report
naming any other digest (a sum of the row hashes, say, which chosen rows can match) fails the
``content_digest`` check: ``tclose verify --report`` computes only the database's own digest.
"""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from tclose.app.cli import main
from tclose.base.digests import (
    MYSQL_ORDERED_DIGEST_ALGORITHM,
    ORDERED_DIGEST_ALGORITHM,
    ContentDigest,
)

ROWS = [(1, "a", 2.5), (2, "b", None), (3, "ü", -0.0)]


def _chained(columns, rows) -> str:
    """The chained digest, written out independently."""
    chain = hashlib.sha256()
    for row in rows:
        chain.update(hashlib.sha256(repr(row).encode("utf-8", "surrogatepass")).digest())
    summary = repr((list(columns), len(rows), chain.hexdigest())).encode()
    return hashlib.sha256(summary).hexdigest()


@pytest.mark.parametrize("chunks", [[3], [1, 2], [1, 1, 1]])
def test_the_chained_digest_is_the_sha256_of_the_row_hashes_in_order(chunks):
    digest, start = ContentDigest(["tclose_row", "b", "c"], ORDERED_DIGEST_ALGORITHM), 0
    for size in chunks:
        digest.update(ROWS[start : start + size])
        start += size
    found = digest.as_dict()
    assert found["algorithm"] == ORDERED_DIGEST_ALGORITHM and found["rows"] == 3
    assert found["sha256"] == _chained(["tclose_row", "b", "c"], ROWS)


def test_the_chained_digest_depends_on_the_order_of_the_rows_and_on_every_value():
    def of(algorithm, rows):
        digest = ContentDigest(["tclose_row", "b", "c"], algorithm)
        digest.update(rows)
        return digest.as_dict()["sha256"]

    swapped = [ROWS[1], ROWS[0], ROWS[2]]
    assert of(ORDERED_DIGEST_ALGORITHM, ROWS) != of(ORDERED_DIGEST_ALGORITHM, swapped)
    changed = [ROWS[0], ROWS[1], (3, "ü", 0.0)]  # -0.0 and 0.0 hash apart
    assert of(ORDERED_DIGEST_ALGORITHM, ROWS) != of(ORDERED_DIGEST_ALGORITHM, changed)
    # The MariaDB/MySQL name says whose values were hashed; the hashing is the same.
    assert of(MYSQL_ORDERED_DIGEST_ALGORITHM, ROWS) == of(ORDERED_DIGEST_ALGORITHM, ROWS)


#: The algorithm of a digest that adds the row hashes modulo 2**256 (chosen rows can match such
#: a sum): no database computes it.
SUMMED = "sha256 of (sorted column names, row count, sum mod 2^256 of sha256(row))"


def _summed(columns, rows) -> str:
    """The summed digest of ``rows``, written out: what a report naming :data:`SUMMED` holds."""
    total = sum(
        int.from_bytes(hashlib.sha256(repr(r).encode("utf-8", "surrogatepass")).digest(), "big")
        for r in rows
    )
    summary = repr((list(columns), len(rows), f"{total % 2**256:064x}")).encode()
    return hashlib.sha256(summary).hexdigest()


def _published(db, tmp_path):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=60)
    document = db.config(source, target)
    document["report"] = {"json": str(tmp_path / "report.json")}
    config = db.write_config(document)
    assert main(["-q", "run", str(config)]) == 0
    return config, target, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize(
    "db",
    [
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("duckdb", marks=pytest.mark.duckdb),
    ],
    indirect=True,
)
def test_a_report_naming_a_digest_the_database_does_not_compute_fails_verification(
    db, tmp_path, capsys
):
    """A run records its database's digest, which verifies; the same report with the summed
    digest of the same rows in its place (algorithm, columns, rows and sha256 all consistent)
    is not verified (exit 1): the check fails, naming ``target.content_digest.algorithm``."""
    config, target, report = _published(db, tmp_path)
    recorded = report["target"]["content_digest"]
    assert recorded["algorithm"] != SUMMED
    capsys.readouterr()
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "report.json")]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out

    columns = recorded["columns"]
    rows = db.rows(target, ", ".join(db.quote(c) for c in columns), order="tclose_row")
    summed = copy.deepcopy(report)
    summed["target"]["content_digest"] = {
        "algorithm": SUMMED,
        "columns": columns,
        "rows": len(rows),
        "sha256": _summed(columns, [tuple(r) for r in rows]),
    }
    (tmp_path / "summed.json").write_text(json.dumps(summed))
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "summed.json")]) == 1
    out = capsys.readouterr().out
    assert "FAIL  content_digest" in out and "verdict: NOT verified" in out, out
    assert "cannot compute the digest that the report's target.content_digest.algorithm" in out


@pytest.mark.parametrize(
    "db",
    [
        "sqlite",
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("duckdb", marks=pytest.mark.duckdb),
    ],
    indirect=True,
)
def test_a_run_records_the_chained_digest_and_a_changed_value_fails_it(db, tmp_path, capsys):
    config, target, report = _published(db, tmp_path)
    recorded = report["target"]["content_digest"]
    chained = MYSQL_ORDERED_DIGEST_ALGORITHM if db.dialect == "mysql" else ORDERED_DIGEST_ALGORITHM
    assert recorded["algorithm"] == chained
    capsys.readouterr()
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "report.json")]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out

    db.execute(f"UPDATE {db.quote(target)} SET {db.quote('code')} = 'x' WHERE tclose_row = 1")
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "report.json")]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out


def test_the_auditors_recipe_in_the_docs_recomputes_a_sqlite_digest(sqlite_run):
    """docs/reports.md gives a standard-library function that recomputes a SQLite table's
    chained digest without tclose; run it on a published table and compare with the report."""
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "reports.md").read_text("utf-8")
    after = docs.split("recompute a SQLite\n    table's digest without tclose", 1)[1]
    block = after.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(
        compile("\n".join(line[4:] for line in block.splitlines()), "reports.md", "exec"), namespace
    )

    report_path = sqlite_run.tmp_path / "report.json"
    document = sqlite_run.config(report={"json": str(report_path)})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    report = json.loads(report_path.read_text())
    recorded = report["target"]["content_digest"]
    assert recorded["algorithm"] == ORDERED_DIGEST_ALGORITHM
    found = namespace["content_digest"](str(sqlite_run.db), document["target"]["table"])
    assert found == recorded["sha256"]
