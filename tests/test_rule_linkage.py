"""Rule R5: linkage is judged on all pass-through columns together.

A release row whose tuple of pass-through values (``role: other``, without ``allow_unique``)
no other row holds links to its source row: whoever knows those values of a person finds the
person's row. Verification fails when there is one such row, naming the columns and the count
(exit 1, nothing published); ``allow_unique: true`` takes a column out of the tuple. NULL is a
value (equal to NULL), text is compared byte for byte whatever the column's collation, and a
table of one row counts none. The counts here are recomputed in Python from the source rows
(pass-through values are published unchanged), on every database: PostgreSQL counts in the
database (``GROUP BY``), the others in Python.
"""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest
import sqlalchemy as sa

import tclose
from tclose.app.cli import main
from tclose.errors import VerificationError

ROWS = 30


def _expected(rows: list[dict], columns: list[str]) -> int:
    """Rows whose tuple of ``columns`` (NULL a value) no other row holds."""
    counts = Counter(tuple(r[c] for c in columns) for r in rows)
    return sum(counts[tuple(r[c] for c in columns)] == 1 for r in rows) if len(rows) > 1 else 0


def _run(db, tmp_path, other: dict[str, list], allowed: tuple[str, ...] = ()):
    """Publish ``ROWS`` rows with pass-through columns ``other`` (name → values, text or
    integers); the exit code, the report and the error output's last line."""
    source, target = db.name("src"), db.name("anon")
    columns = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("q", sa.Integer),
        sa.Column("c", sa.Integer),
        *[
            sa.Column(
                name, sa.String(20) if any(isinstance(v, str) for v in values) else sa.Integer
            )
            for name, values in other.items()
        ],
    ]
    rows = [
        {"id": i, "q": 20 + i % 7, "c": i % 3, **{n: v[i] for n, v in other.items()}}
        for i in range(ROWS)
    ]
    db.create(source, columns, rows)
    report = tmp_path / "report.json"
    document = {
        "source": {"url": db.url, "table": source, "key": "id"},
        "target": {"table": target},
        "attributes": {
            "id": {"role": "identifier"},
            "q": {"role": "quasi_identifier", "type": "numeric"},
            "c": {"role": "confidential", "type": "numeric"},
            **{n: {"role": "other", "allow_unique": n in allowed} for n in other},
        },
        "privacy": {"k": 3},
        "algorithm": {"name": "mdav"},
        "report": {"json": str(report)},
    }
    code = main(["-q", "run", str(db.write_config(document))])
    published = target in db.tables()
    assert published == (code == 0)
    return code, json.loads(report.read_text()), rows


def _linkage(report: dict) -> dict:
    return next(c for c in report["verification"]["checks"] if c["name"] == "linkage")


def _fails(db, tmp_path, other, allowed=(), capsys=None) -> dict:
    code, report, rows = _run(db, tmp_path, other, allowed)
    checked = [c for c in other if c not in allowed]
    expected = _expected(rows, checked)
    assert expected > 0
    assert code == 1
    check = _linkage(report)
    assert not check["passed"] and check["linkable_rows"] == expected
    assert check["linking_columns"] == checked
    assert report["verification"]["linkable_rows"] == expected
    assert f"{expected} row(s) unique on ({', '.join(checked)})" in check["actual"]
    return report


def _passes(db, tmp_path, other, allowed=()) -> dict:
    code, report, rows = _run(db, tmp_path, other, allowed)
    assert _expected(rows, [c for c in other if c not in allowed]) == 0
    assert code == 0, report["verification"]
    check = _linkage(report)
    assert check["passed"] and check["linkable_rows"] == 0 and check["linking_columns"] == []
    return report


# --- known cases ----------------------------------------------------------------------------------


def test_two_columns_that_repeat_apart_but_not_together_fail(db, tmp_path, capsys):
    """``id // 6`` and ``id % 6`` each repeat, and together give every source id back."""
    _fails(
        db, tmp_path, {"high": [i // 6 for i in range(ROWS)], "low": [i % 6 for i in range(ROWS)]}
    )
    err = capsys.readouterr().err
    assert "high, low" in err and f"{ROWS} row(s)" in err


def test_a_column_unique_but_for_one_repeated_value_fails(db, tmp_path):
    """All distinct but one value held twice: 28 of 30 rows single themselves out."""
    values = [f"v{i}" for i in range(ROWS - 1)] + ["v0"]
    report = _fails(db, tmp_path, {"almost": values})
    assert report["verification"]["linkable_rows"] == ROWS - 2


# --- the rule, on other columns -----------------------------------------------------------------


def test_three_columns_every_pair_of_which_repeats(db, tmp_path):
    """Every value of each column, and every pair of columns, repeats; only the triples
    single rows out (3 of the 27 triples are held twice)."""
    triples = [
        (a, b, (a + b * 2 + i // 9) % 3) for i in range(27) for a, b in [(i % 3, i // 3 % 3)]
    ]
    assert len(set(triples)) == 27
    triples += triples[:3]
    columns = {name: [t[j] for t in triples] for j, name in enumerate(("x", "y", "z"))}
    for pair in (("x", "y"), ("x", "z"), ("y", "z")):
        assert _expected([dict(zip(columns, t, strict=True)) for t in triples], list(pair)) == 0
    report = _fails(db, tmp_path, columns)
    assert report["verification"]["linkable_rows"] == 24


def test_null_is_a_value_equal_to_null(db, tmp_path):
    """``(NULL, 'a')`` twice links nothing; ``(NULL, 'b')`` once links its row; a column of
    NULL only (or NULL and one repeated value) links nothing."""
    first = [None] * 3 + ["p", "p"] * ((ROWS - 3) // 2) + ["p"] * ((ROWS - 3) % 2)
    second = ["a", "a", "b"] + ["q"] * (ROWS - 3)
    _fails(db, tmp_path, {"first": first, "second": second})


def test_nulls_alone_and_repeated_values_pass(db, tmp_path):
    _passes(db, tmp_path, {"empty": [None] * ROWS, "pairs": [i // 2 for i in range(ROWS)]})


def test_values_a_collation_calls_equal_are_different_values(db, tmp_path):
    """``'a'``, ``'A'`` and ``'a '`` are three values (MariaDB's default collation calls them
    one): the row holding ``'a '`` is the only one."""
    values = ["a", "A"] * (ROWS // 2 - 1) + ["a", "a "]
    report = _fails(db, tmp_path, {"tag": values})
    assert report["verification"]["linkable_rows"] == 1


def test_allow_unique_takes_a_column_out_of_the_tuple(db, tmp_path):
    """The pair that singles out every row, with one column allowed: the other alone repeats,
    so the release verifies; the report lists the allowed column and the columns judged."""
    other = {"high": [i // 6 for i in range(ROWS)], "low": [i % 6 for i in range(ROWS)]}
    report = _passes(db, tmp_path, other, allowed=("low",))
    assert report["verification"]["allowed_unique"] == ["low"]
    assert report["verification"]["linkage_columns"] == ["high"]


def test_every_column_allowed_judges_nothing(db, tmp_path):
    other = {"code": [f"c{i}" for i in range(ROWS)]}
    report = _passes(db, tmp_path, other, allowed=("code",))
    assert report["verification"]["linkage_columns"] == []


# --- the Python API -----------------------------------------------------------------------------


def _frame(**other) -> pd.DataFrame:
    return pd.DataFrame(
        {"q": [20 + i % 7 for i in range(ROWS)], "c": [i % 3 for i in range(ROWS)], **other}
    )


def test_the_api_judges_the_columns_together():
    frame = _frame(high=[i // 6 for i in range(ROWS)], low=[i % 6 for i in range(ROWS)])
    with pytest.raises(VerificationError, match=r"single out 30 row\(s\).*high, low") as error:
        tclose.anonymize(frame, ["q"], ["c"], k=3, other=["high", "low"])
    (check,) = [c for c in error.value.checks if c["name"] == "linkage"]
    assert check["linkable_rows"] == ROWS
    result = tclose.anonymize(
        frame, ["q"], ["c"], k=3, other={"high": {}, "low": {"allow_unique": True}}
    )
    assert result.report["verification"]["linkable_rows"] == 0


def test_the_api_counts_null_nan_and_types_as_a_reader_sees_them():
    """NaN equals NaN and NULL equals NULL; ``1`` and ``'1'`` differ (an object column)."""
    values = [float("nan")] * 10 + [None] * 10 + [1] * 9 + ["1"]
    frame = _frame(mixed=pd.Series(values, dtype=object))
    with pytest.raises(VerificationError) as error:
        tclose.anonymize(frame, ["q"], ["c"], k=3, other=["mixed"])
    (check,) = [c for c in error.value.checks if c["name"] == "linkage"]
    assert check["linkable_rows"] == 1


def test_a_release_of_one_row_links_by_its_count_alone():
    """k = 1 over one row: the row is its source's by the row count, whatever it holds; the
    check counts none."""
    frame = pd.DataFrame({"q": [5], "c": [1], "note": ["only"]})
    result = tclose.anonymize(frame, ["q"], ["c"], k=1, other=["note"])
    assert result.report["verification"]["linkable_rows"] == 0
