"""The verdict "verified" is true of the whole release: no linking column, no silent role
loss, exact values."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import tclose
from tclose.app.cli import main
from tclose.app.html_report import render_html
from tclose.base.attributes import encode_confidential, encode_quasi_identifier
from tclose.base.config import AttributeSpec, load_config
from tclose.errors import ConfigError, VerificationError
from tclose.kernels.emd import OrderedEMD


def _people(path: Path, n: int = 60, extra: str = "", values=None) -> str:
    """``people(id INTEGER PRIMARY KEY, age, zip, salary[, extra])``; returns the URL."""
    rng = np.random.default_rng(3)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, age INTEGER, zip INTEGER, "
            f"salary INTEGER{', ' + extra + ' TEXT' if extra else ''})"
        )
        rows = []
        for i in range(n):
            row = [i + 1, int(rng.integers(20, 80)), int(rng.integers(1000, 1010)), 1000 + i * 7]
            if extra:
                row.append(values[i] if values is not None else f"x{i:05d}")
            rows.append(tuple(row))
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO people VALUES ({marks})", rows)
    return f"sqlite:///{path}"


def _document(url: str, **attributes) -> dict:
    document = {
        "source": {"url": url, "table": "people"},
        "target": {"table": "people_anon"},
        "attributes": {
            "age": {"role": "quasi_identifier"},
            "zip": {"role": "quasi_identifier"},
            "salary": {"role": "confidential"},
            **attributes,
        },
        "privacy": {"k": 4, "t": 0.4},
    }
    return document


def _write(tmp_path: Path, document: dict | str, name: str = "run.yaml") -> str:
    path = tmp_path / name
    text = document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return str(path)


def _columns(db: Path, table: str) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [d[0] for d in connection.execute(f"SELECT * FROM {table} LIMIT 0").description]


# --- 1. the key ---------------------------------------------------------------------------------


def test_primary_key_is_not_published_without_source_key(tmp_path):
    db = tmp_path / "p.db"
    config = _write(tmp_path, _document(_people(db)))
    assert main(["run", config]) == 0
    assert _columns(db, "people_anon") == ["tclose_row", "age", "zip", "salary"]


def test_keep_key_publishes_the_resolved_primary_key(tmp_path):
    db = tmp_path / "p.db"
    document = _document(_people(db))
    document["output"] = {"keep_key": True}
    assert main(["run", _write(tmp_path, document)]) == 0
    assert "id" in _columns(db, "people_anon")


def test_key_declared_with_another_role_is_a_config_error(tmp_path, capsys):
    url = _people(tmp_path / "p.db")
    document = _document(url, id={"role": "quasi_identifier"})
    assert main(["run", _write(tmp_path, document)]) == 2
    assert "'id' is the row key" in capsys.readouterr().err
    document = _document(url, id={"role": "identifier"})  # dropped anyway: allowed
    assert main(["run", _write(tmp_path, document)]) == 0


def test_rowid_stands_in_for_a_missing_key_and_cannot_be_kept(tmp_path, capsys):
    db = tmp_path / "nokey.db"
    with sqlite3.connect(db) as connection:
        connection.execute("CREATE TABLE people (age INTEGER, zip INTEGER, salary INTEGER)")
        connection.executemany(
            "INSERT INTO people VALUES (?, ?, ?)", [(20 + i % 30, i % 4, i) for i in range(40)]
        )
    document = _document(f"sqlite:///{db}")
    assert main(["run", _write(tmp_path, document)]) == 0
    assert _columns(db, "people_anon") == ["tclose_row", "age", "zip", "salary"]
    document["output"] = {"keep_key": True}
    document["target"]["if_exists"] = "replace"
    assert main(["run", _write(tmp_path, document)]) == 2
    assert "no key column to keep" in capsys.readouterr().err


def test_key_kept_and_dropped_is_a_config_error(tmp_path, capsys):
    document = _document(_people(tmp_path / "p.db"), id={"role": "identifier"})
    document["output"] = {"keep_key": True}
    assert main(["run", _write(tmp_path, document)]) == 2
    assert "cannot be kept" in capsys.readouterr().err


# --- 2. unlisted and linking columns ------------------------------------------------------------


def test_unlisted_column_is_a_config_error_naming_it(tmp_path, capsys):
    db = tmp_path / "p.db"
    assert main(["run", _write(tmp_path, _document(_people(db, extra="ssn")))]) == 2
    err = capsys.readouterr().err
    assert "no role: ssn" in err and "ssn: {role: other}" in err
    assert "people_anon" not in {
        r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")
    }


def test_linking_pass_through_column_fails_verification(tmp_path, capsys):
    db = tmp_path / "p.db"
    url = _people(db, extra="ssn")
    document = _document(url, ssn={"role": "other"})
    assert main(["run", _write(tmp_path, document)]) == 1
    err = capsys.readouterr().err
    assert "linkage" in err and "single out 60 row(s)" in err and "): ssn." in err
    document["attributes"]["ssn"]["allow_unique"] = True
    report = tmp_path / "r.json"
    assert main(["run", _write(tmp_path, document), "--report", str(report)]) == 0
    assert json.loads(report.read_text())["verification"]["allowed_unique"] == ["ssn"]
    # and tclose verify runs the same check on the published table
    del document["attributes"]["ssn"]["allow_unique"]
    assert main(["verify", _write(tmp_path, document, "v.yaml")]) == 1
    assert "FAIL  linkage" in capsys.readouterr().out


def test_repeated_pass_through_values_are_not_linking(tmp_path):
    db = tmp_path / "p.db"
    url = _people(db, extra="ward", values=[f"w{i % 5}" for i in range(60)])
    assert main(["run", _write(tmp_path, _document(url, ward={"role": "other"}))]) == 0


# --- 3. one role per column ---------------------------------------------------------------------


def test_api_column_in_two_roles_is_an_error():
    frame = pd.DataFrame({"a": range(10), "c": range(10)})
    with pytest.raises(ConfigError, match="'c' is given two roles"):
        tclose.anonymize(frame, quasi_identifiers=["a", "c"], confidential=["c"], k=2, t=0.5)


def test_yaml_duplicate_key_is_an_error_naming_both_lines(tmp_path):
    text = (
        "source: {url: 'sqlite:///x.db', table: people}\n"
        "target: {table: out}\n"
        "attributes:\n"
        "  age: {role: quasi_identifier}\n"
        "  salary: {role: quasi_identifier}\n"
        "  salary: {role: confidential}\n"
        "privacy: {k: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"'salary' appears twice .*lines 5 and 6"):
        load_config(_write(tmp_path, text))
    other_spelling = text.replace("  salary: {role: confidential}", '  "salary": {role: other}')
    with pytest.raises(ConfigError, match=r"'salary' appears twice"):
        load_config(_write(tmp_path, other_spelling))


# --- 4. exact values ----------------------------------------------------------------------------


def _exact_emd(values: list, labels: np.ndarray) -> float:
    """EMD computed with Python integers and fractions, independently of the kernels."""
    from fractions import Fraction

    distinct = sorted(set(values))
    rank = {v: i for i, v in enumerate(distinct)}
    m, n = len(distinct), len(values)
    whole = np.bincount([rank[v] for v in values], minlength=m)
    worst = Fraction(0)
    for c in np.unique(labels):
        members = [rank[v] for v, label in zip(values, labels) if label == c]
        counts = np.bincount(members, minlength=m)
        gap, total = Fraction(0), Fraction(0)
        for i in range(m - 1):
            gap += Fraction(int(counts[i]), len(members)) - Fraction(int(whole[i]), n)
            total += abs(gap)
        worst = max(worst, total / (m - 1))
    return float(worst)


def test_int64_above_2_53_is_compared_exactly():
    base = 2**62
    values = [base + 3 * i for i in range(300)]
    spec = AttributeSpec("v", "confidential")
    encoded, _ = encode_confidential(pd.Series(values), spec)
    assert len(np.unique(encoded)) == 300
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"q": rng.normal(size=300), "v": rng.permutation(values)})
    result = tclose.anonymize(frame, ["q"], ["v"], k=5, t=0.05, algorithm="k-first")
    exact = _exact_emd(frame["v"].tolist(), result.labels)
    assert result.report["privacy"]["t_achieved"]["v"] == pytest.approx(exact, abs=1e-12)
    assert exact <= 0.05 + 1e-9


def test_decimals_and_close_datetimes_stay_distinct():
    decimals = pd.Series([Decimal("1e20") + Decimal(i) for i in range(50)], dtype=object)
    encoded, _ = encode_confidential(decimals, AttributeSpec("d", "confidential"))
    assert len(np.unique(encoded)) == 50
    start = pd.Timestamp("2024-01-01 12:00:00")
    instants = pd.Series([start + pd.Timedelta(nanoseconds=i) for i in range(100)])
    encoded, _ = encode_confidential(instants, AttributeSpec("t", "confidential", "datetime"))
    assert len(np.unique(encoded)) == 100 and OrderedEMD.fit(encoded).m == 100


def test_quasi_identifier_near_1e300_is_standardized_without_overflow():
    values = pd.Series(np.linspace(-1.0, 1.0, 40) * 1.5e308)
    qi = encode_quasi_identifier(values, AttributeSpec("q", "quasi_identifier"))
    assert np.isfinite(qi.embedding).all() and np.ptp(qi.embedding) > 1
    frame = pd.DataFrame({"q": values, "v": np.arange(40)})
    result = tclose.anonymize(frame, ["q"], ["v"], k=4)
    assert np.isfinite(result.data["q"]).all()
    assert 0 < result.report["utility"]["sse"] < 1


# --- 5. the API's release -----------------------------------------------------------------------


def test_api_output_is_in_content_order_with_a_fresh_index():
    n = 200
    frame = pd.DataFrame(
        {"q": np.arange(n, dtype=float), "v": np.arange(n) % 17},
        index=pd.Index([f"ssn{i:04d}" for i in range(n)], name="ssn"),
    )
    result = tclose.anonymize(frame, ["q"], ["v"], k=4, t=0.5)
    assert result.data.index.equals(pd.RangeIndex(n))
    expected = result.data.sort_values(["q", "v"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(result.data, expected)
    assert result.labels.shape == (n,)  # aligned with the input
    assert np.bincount(result.labels).min() >= 4
    kept = tclose.anonymize(frame, ["q"], ["v"], k=4, t=0.5, keep_order=True)
    assert list(kept.data.index) == list(frame.index)


# --- 6. t asked for is t enforced ---------------------------------------------------------------


def test_t_with_mdav_is_a_config_error(tmp_path, capsys):
    db = tmp_path / "p.db"
    document = _document(_people(db))
    document["algorithm"] = {"name": "mdav"}
    assert main(["run", _write(tmp_path, document)]) == 2
    assert "does not enforce t-closeness" in capsys.readouterr().err
    frame = pd.DataFrame({"q": range(20), "v": range(20)})
    with pytest.raises(ConfigError, match="t-first"):
        tclose.anonymize(frame, ["q"], ["v"], k=2, t=0.3, algorithm="mdav")


# --- 7. the content digest ----------------------------------------------------------------------


def test_verify_report_detects_a_changed_confidential_value(tmp_path, capsys):
    db = tmp_path / "p.db"
    config = _write(tmp_path, _document(_people(db)))
    report = tmp_path / "r.json"
    assert main(["run", config, "--report", str(report)]) == 0
    assert json.loads(report.read_text())["target"]["content_digest"]["rows"] == 60
    assert main(["verify", config, "--report", str(report)]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out
    with sqlite3.connect(db) as connection:  # swap two salaries: k, t and multiset still hold
        a, b = connection.execute(
            "SELECT salary FROM people_anon ORDER BY tclose_row LIMIT 2"
        ).fetchall()
        connection.execute("UPDATE people_anon SET salary = ? WHERE tclose_row = 1", b)
        connection.execute("UPDATE people_anon SET salary = ? WHERE tclose_row = 2", a)
    assert main(["verify", config, "--report", str(report)]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out
    assert main(["verify", config]) == 1  # the registry's record of the release disagrees
    out = capsys.readouterr().out
    assert "FAIL  release" in out and "is detected only against the database's own record" in out


# --- 8. what the report says --------------------------------------------------------------------


def test_report_definitions_categories_and_constant_warning():
    rng = np.random.default_rng(1)
    n = 120
    frame = pd.DataFrame(
        {
            "age": rng.integers(20, 80, n).astype(float),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["a", "b", "c", "d"], n),
            "charge": rng.permutation(n).astype(float),
            "site": ["same"] * n,
        }
    )
    result = tclose.anonymize(
        frame,
        {"age": "numeric", "sex": "nominal"},
        {"diagnosis": "nominal", "charge": "numeric", "site": "nominal"},
        k=4,
        t=0.6,
    )
    definitions = result.report["privacy"]["emd_definitions"]
    assert "ordered" in definitions["charge"] and "ordered" not in definitions["diagnosis"]
    assert definitions["diagnosis"] != definitions["charge"]
    sex = result.report["distributions"]["sex"]
    assert sum(sex["original"]) == sum(sex["anonymized"]) == n and "categories" in sex
    assert any("site" in w and "single value" in w for w in result.report["warnings"])
    html = render_html(result.report)
    assert "nominal-ranking" in html and "single value" in html


# --- 9. the API takes what pandas users pass ----------------------------------------------------


def test_api_edges():
    rng = np.random.default_rng(2)
    n = 60
    frame = pd.DataFrame(
        {
            "q": rng.normal(size=n),
            "flag": rng.choice([True, False], n),
            "grade": pd.Categorical(
                rng.choice(["low", "mid", "high"], n),
                categories=["low", "mid", "high"],
                ordered=True,
            ),
            "kind": pd.Categorical(rng.choice(["x", "y"], n)),
            "v": rng.permutation(n),
        }
    )
    with pytest.raises(ConfigError, match="confidential"):
        tclose.anonymize(frame, ["q"], k=2, t=0.5, other=["flag", "grade", "kind", "v"])
    result = tclose.anonymize(
        frame,
        {"q": "numeric", "flag": "nominal", "grade": "ordinal", "kind": "nominal"},
        ["v"],
        k=np.int64(5),
        t=np.float64(0.5),
    )
    assert result.report["privacy"]["k"] == 5 and type(result.report["privacy"]["k"]) is int
    assert result.data["flag"].dtype == bool
    assert result.data["kind"].dtype == frame["kind"].dtype
    assert result.data["grade"].dtype == frame["grade"].dtype  # ordered, same order
    # the ordinal median follows the declared order low < mid < high, not the alphabet
    codes = frame["grade"].cat.codes.to_numpy()
    for label in np.unique(result.labels):
        members = np.sort(codes[result.labels == label])
        median = frame["grade"].cat.categories[members[(len(members) - 1) // 2]]
        assert median in set(result.data["grade"])
    defaults = tclose.anonymize(frame[["q", "v"]], ["q"], ["v"])
    assert defaults.report["algorithm"]["name"] == "mdav"
    assert defaults.report["verification"]["passed"]


def test_api_rejects_unlisted_columns():
    frame = pd.DataFrame({"q": range(10), "v": range(10), "ssn": range(10)})
    with pytest.raises(ConfigError, match="no role: 'ssn'"):
        tclose.anonymize(frame, ["q"], ["v"])
    with pytest.raises(VerificationError, match="linkage"):
        tclose.anonymize(frame, ["q"], ["v"], other=["ssn"])


# --- the same on every database: implied key, linkage check, digest stable across reads --------


def test_implied_key_and_digest_on_every_database(db, capsys):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source, n=80)
    document = db.config(source, target)
    del document["source"]["key"]  # the primary key patient_id is implied
    report = db.tmp_path / f"{db.dialect}.json"
    config = str(db.write_config(document))
    assert main(["run", config, "--report", str(report), "-q"]) == 0
    columns = list(db.frame(target).columns)
    assert "patient_id" not in columns and {"note", "code"} <= set(columns)
    data = json.loads(report.read_text())
    assert {"note", "code"} <= set(data["verification"]["allowed_unique"])
    assert main(["verify", config, "--report", str(report)]) == 0
    assert "PASS  content_digest" in capsys.readouterr().out
    db.execute(f"UPDATE {db.quote(target)} SET ward = 'changed' WHERE tclose_row = 3")
    assert main(["verify", config, "--report", str(report)]) == 1
    assert "FAIL  content_digest" in capsys.readouterr().out
