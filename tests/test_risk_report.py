"""Risk and utility in the audit report (run, API, HTML) and ``tclose compare`` end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.app.cli import main
from tclose.app.demo import discharge_table
from tclose.app.html_report import render_html
from tclose.measures import LINK_TOLERANCE

QIS = ["age", "zip", "length_of_stay"]


def linkage_reference(source: np.ndarray, published: np.ndarray) -> float:
    total = 0.0
    for i in range(len(source)):
        distances = np.sqrt(((source[i] - published) ** 2).sum(axis=1))
        members = np.flatnonzero(distances <= distances.min() + LINK_TOLERANCE)
        total += (i in members) / len(members)
    return total / len(source)


def standardized(original: pd.DataFrame, published: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    x = original[QIS].to_numpy(float)
    mean, std = x.mean(axis=0), x.std(axis=0)
    return (x - mean) / std, (published[QIS].to_numpy(float) - mean) / std


def test_run_report_holds_risk_computed_from_the_published_rows(sqlite_run, tmp_path, capsys):
    report_path = tmp_path / "report.json"
    document = sqlite_run.config(output={"keep_key": True})
    document["report"] = {"interval_p": 0.5}
    assert main(["run", str(sqlite_run.write(document)), "--report", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    risk, utility = report["risk"], report["utility"]

    # Independent recomputation from the table as written, linked by the kept key.
    published = pd.DataFrame(
        sqlite_run.rows("discharges_anon"), columns=sqlite_run.columns("discharges_anon")
    )
    source = discharge_table(400, seed=1).set_index("patient_id")
    published = published.set_index("patient_id").loc[source.index]
    z, zp = standardized(source, published)
    assert abs(risk["record_linkage"] - linkage_reference(z, zp)) <= 1e-12
    sd = source[QIS].to_numpy(float).std(axis=0, ddof=1)
    diff = np.abs(source[QIS].to_numpy(float) - published[QIS].to_numpy(float))
    assert risk["interval_p"] == 0.5
    assert risk["interval_disclosure"] == pytest.approx(
        float((diff <= 0.5 * sd + 1e-9).all(axis=1).mean())
    )
    assert utility["il1s"] == pytest.approx(float((diff / (np.sqrt(2) * sd)).mean()), abs=1e-12)
    sizes = published.groupby(QIS).size()
    assert risk["reidentification"]["max"] == pytest.approx(1 / sizes.min())
    assert risk["reidentification"]["mean"] == pytest.approx(len(sizes) / 400)
    assert risk["attribute"]["charge"]["distinct_l"] == int(
        published.groupby(QIS)["charge"].nunique().min()
    )
    assert set(risk["attribute"]) == {"charge", "overall"}
    assert utility["correlation_max_diff"] > 0
    assert set(utility["moments"]) == set(QIS)
    assert "measures" in report["timings"]

    html = render_html(report)
    assert "Disclosure risk" in html and "Record linkage" in html
    assert "picks that person" in html and "distinct l" in html
    assert "risk:      record linkage" in capsys.readouterr().out


def test_interval_p_must_be_a_positive_number(sqlite_run, capsys):
    document = sqlite_run.config()
    document["report"] = {"interval_p": "wide"}
    assert main(["run", str(sqlite_run.write(document))]) == 2
    assert "interval_p" in capsys.readouterr().err


def test_api_report_has_the_same_figures_from_labels_not_row_order():
    frame = discharge_table(300, seed=4)[[*QIS, "charge"]]
    result = tclose.anonymize(frame, QIS, ["charge"], k=4, t=0.3, algorithm="t-first")
    risk = result.report["risk"]
    # The release rebuilt from the labels (cluster means), independent of the output's order.
    published = frame.copy()
    for column in QIS:
        published[column] = frame.groupby(result.labels)[column].transform("mean")
    z, zp = standardized(frame, published)
    assert abs(risk["record_linkage"] - linkage_reference(z, zp)) <= 1e-12
    assert risk["reidentification"]["max"] <= 1 / 4
    assert result.report["utility"]["il1s"] > 0
    assert tclose.measures.evaluate(frame, published, QIS, ["charge"])["risk"][
        "record_linkage"
    ] == pytest.approx(risk["record_linkage"], abs=1e-12)


def test_api_with_categorical_qis_reports_total_variation():
    rng = np.random.default_rng(0)
    frame = discharge_table(200, seed=2)
    frame["sex"] = rng.choice(["f", "m"], len(frame))
    frame["level"] = rng.choice(["low", "mid", "high"], len(frame))
    frame["admitted"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(
        frame["admission_day"], unit="D"
    )
    qis = {
        "age": "numeric",
        "sex": "nominal",
        "level": {"type": "ordinal", "categories": ["low", "mid", "high"]},
        "admitted": "date",
    }
    frame = frame[[*qis, "charge"]]
    result = tclose.anonymize(frame, qis, ["charge"], k=3, t=0.4, algorithm="merge")
    utility, risk = result.report["utility"], result.report["risk"]
    assert set(utility["categorical_total_variation"]) == {"sex", "level"}
    assert 0 <= utility["categorical_total_variation"]["sex"] <= 1
    assert set(utility["moments"]) == {"age"}  # dates: no relative mean change
    assert 0 <= risk["record_linkage"] <= 1 and 0 <= risk["interval_disclosure"] <= 1
    # Published unchanged (k = 1 with the identity), every record links to itself alone.
    same = tclose.measures.evaluate(frame, frame, qis, ["charge"])
    assert same["risk"]["interval_disclosure"] == 1.0 and same["utility"]["il1s"] == 0.0
    # ... each record ties with its duplicates only: the mean of 1/|duplicates| is distinct/n
    distinct = len(frame[list(qis)].drop_duplicates())
    assert same["risk"]["record_linkage"] == pytest.approx(distinct / len(frame), abs=1e-12)


# --- tclose compare -------------------------------------------------------------------------


def _compare_and_check(config_path, tmp_path, capsys) -> dict:
    html = tmp_path / "map.html"
    argv = ["compare", str(config_path), "--algorithms", "t-first,merge,mdav", "--t", "0.2,0.4"]
    assert main([*argv, "--json", "--html", str(html)]) == 0
    result = json.loads(capsys.readouterr().out)
    runs = result["runs"]
    # t-first and merge at two t each; mdav ignores t and runs once.
    assert [(r["algorithm"], r["t"]) for r in runs] == [
        ("t-first", 0.2),
        ("t-first", 0.4),
        ("merge", 0.2),
        ("merge", 0.4),
        ("mdav", None),
    ]
    for run in runs:
        assert run["verified"] and run["k_achieved"] >= 3
        assert 0 <= run["record_linkage"] <= 1 and run["sse"] > 0 and run["clusters"] > 0
        if run["t"] is not None:
            assert run["t_achieved"] <= run["t"] + 1e-9
    page = html.read_text()
    assert "<svg" in page and "risk (record linkage)" in page and page.count("<circle") == 5
    return result


def test_compare_on_sqlite_publishes_nothing(sqlite_run, tmp_path, capsys):
    config = sqlite_run.write(sqlite_run.config())
    before = sqlite_run.tables()
    result = _compare_and_check(config, tmp_path, capsys)
    assert result["source"]["rows"] == 400
    assert sqlite_run.tables() == before
    assert main(["compare", str(config), "--k", "3,5"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["algorithm", "k", "t", "SSE"]
    assert table[3].startswith("SSE: ")  # two settings, then the legend


def test_compare_rejects_bad_settings_before_reading(sqlite_run, capsys):
    config = sqlite_run.write(sqlite_run.config())
    assert main(["compare", str(config), "--algorithms", "t-first,nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["compare", str(config), "--t", "0.1,x"]) == 2
    assert main(["compare", str(config), "--t", "1.5"]) == 2


@pytest.mark.postgres
def test_compare_on_postgresql(pg, tmp_path, capsys):
    source = pg.name("patients")
    pg.create_patients(source, n=400, seed=1)
    config = pg.write_config(pg.config(source, pg.name("anon")))
    _compare_and_check(config, tmp_path, capsys)
    assert pg.tables() == {source}


# --- tclose verify --source -------------------------------------------------------------------


@pytest.mark.parametrize("keep_key", [True, False])
def test_verify_source_prints_the_measures_of_the_run(sqlite_run, tmp_path, capsys, keep_key):
    from tclose.base.config import load_config
    from tclose.core.runner import verify_published

    report_path = tmp_path / "report.json"
    config = sqlite_run.write(sqlite_run.config(output={"keep_key": keep_key}))
    assert main(["run", str(config), "--report", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    capsys.readouterr()

    measures = verify_published(load_config(config), against_source=True).measures
    risk, utility = measures["risk"], measures["utility"]
    assert risk["linked"] is keep_key
    for name in ("record_linkage", "interval_disclosure"):
        if keep_key:
            assert risk[name] == pytest.approx(report["risk"][name], abs=1e-12)
        else:
            assert risk[name] is None
    assert (utility["il1s"] is None) is not keep_key
    assert risk["reidentification"] == pytest.approx(report["risk"]["reidentification"])
    assert risk["attribute"] == report["risk"]["attribute"]
    assert utility["correlation_max_diff"] == pytest.approx(
        report["utility"]["correlation_max_diff"], abs=1e-9
    )

    assert main(["verify", str(config), "--source"]) == 0
    out = capsys.readouterr().out
    assert "risk  record linkage" in out and "utility  IL1s" in out
    assert ("need each published row's source row" in out) is not keep_key
