"""The chained content digest (``ORDERED_DIGEST_ALGORITHM``) and the summed one it replaces.

Since 2026-11-27 runs on the databases without a binary-``COPY`` digest (SQLite, DuckDB,
MariaDB/MySQL) record the SHA-256 of their rows' hashes chained in ``tclose_row`` order: a
digest no choice of rows can match short of breaking SHA-256. The sum modulo ``2**256`` of the
same hashes, recorded before, could be matched by chosen rows (Wagner's generalized birthday
algorithm), but reports made with it still verify: ``tclose verify --report`` recomputes the
algorithm a report names.
"""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.base.digests import (
    DIGEST_ALGORITHM,
    MYSQL_DIGEST_ALGORITHM,
    MYSQL_ORDERED_DIGEST_ALGORITHM,
    ORDERED_DIGEST_ALGORITHM,
    ContentDigest,
)
from tclose.base.registry import load_registry
from tclose.core.published import scan_published
from tclose.naming import TableName

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


def test_only_the_summed_digest_ignores_the_order_of_the_rows():
    def of(algorithm, rows):
        digest = ContentDigest(["tclose_row", "b", "c"], algorithm)
        digest.update(rows)
        return digest.as_dict()["sha256"]

    swapped = [ROWS[1], ROWS[0], ROWS[2]]
    assert of(DIGEST_ALGORITHM, ROWS) == of(DIGEST_ALGORITHM, swapped)
    assert of(ORDERED_DIGEST_ALGORITHM, ROWS) != of(ORDERED_DIGEST_ALGORITHM, swapped)
    assert of(ORDERED_DIGEST_ALGORITHM, ROWS) != of(DIGEST_ALGORITHM, ROWS)
    assert of(MYSQL_ORDERED_DIGEST_ALGORITHM, ROWS) == of(ORDERED_DIGEST_ALGORITHM, ROWS)
    assert of(MYSQL_DIGEST_ALGORITHM, ROWS) == of(DIGEST_ALGORITHM, ROWS)


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
        pytest.param("mysql", marks=pytest.mark.mysql),
        pytest.param("duckdb", marks=pytest.mark.duckdb),
    ],
    indirect=True,
)
def test_a_run_records_the_chained_digest_and_an_earlier_summed_report_still_verifies(
    db, tmp_path, capsys
):
    config, target, report = _published(db, tmp_path)
    recorded = report["target"]["content_digest"]
    chained = MYSQL_ORDERED_DIGEST_ALGORITHM if db.dialect == "mysql" else ORDERED_DIGEST_ALGORITHM
    assert recorded["algorithm"] == chained
    capsys.readouterr()
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "report.json")]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out

    database = load_registry().connector_for(db.dialect).connect(db.url)
    summed = {
        ORDERED_DIGEST_ALGORITHM: DIGEST_ALGORITHM,
        MYSQL_ORDERED_DIGEST_ALGORITHM: MYSQL_DIGEST_ALGORITHM,
    }[chained]
    earlier = scan_published(
        database, TableName.parse(target), load_config(config), algorithm=summed
    ).digest
    database.engine.dispose()
    assert earlier["algorithm"] == summed and earlier["sha256"] != recorded["sha256"]
    old = copy.deepcopy(report)
    old["target"]["content_digest"] = earlier
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "old.json")]) == 0
    out = capsys.readouterr().out
    assert "PASS  content_digest" in out and "adds the row hashes" in out, out
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "report.json")]) == 0
    assert "adds the row hashes" not in capsys.readouterr().out

    db.execute(f"UPDATE {db.quote(target)} SET {db.quote('code')} = 'x' WHERE tclose_row = 1")
    for path in ("report.json", "old.json"):
        assert main(["-q", "verify", str(config), "--report", str(tmp_path / path)]) == 1
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
