"""The audit report: its lineage and aggregate fields, the HTML page, and what they never hold."""

from __future__ import annotations

import doctest
import json
import re
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tclose.core.report
from tclose.app.cli import main
from tclose.app.demo import discharge_table
from tclose.app.html_report import render_html
from tclose.base.attributes import encode_table
from tclose.base.config import AttributeSpec, load_config, parse_config
from tclose.core.report import (
    bin_counts,
    distributions,
    holds_one_value,
    nice_edges,
    redacted_document,
)

QIS = ["age", "zip", "length_of_stay"]


@pytest.fixture
def published(sqlite_run, tmp_path):
    """A published run of the shared config with JSON and HTML reports; returns (json, html)."""
    document = sqlite_run.config()
    document["report"] = {"json": str(tmp_path / "r.json"), "html": str(tmp_path / "r.html")}
    assert main(["run", str(sqlite_run.write(document))]) == 0
    return json.loads((tmp_path / "r.json").read_text()), (tmp_path / "r.html").read_text()


def test_report_holds_the_lineage(published):
    report, _ = published
    assert re.fullmatch(r"[0-9a-f]{32}", report["run"]["id"])
    assert report["run"]["published"] is True and report["run"]["python"]
    assert report["run"]["host"] and report["run"]["finished"] >= report["run"]["started"]
    assert report["source"] == {
        **report["source"],
        "rows": 400,
        "rows_set_aside": 0,
        "table": "discharges",
    }
    assert report["target"]["columns"][0] == "tclose_row"
    assert "name" not in report["target"]["columns"]
    assert "patient_id" not in report["target"]["columns"]
    assert {"age", "charge", "ward"} <= set(report["target"]["columns"])
    assert report["config"]["privacy"] == {"k": 3, "t": 0.2}
    assert report["plugins"]["connector:sqlite"].startswith("tclose ")
    assert set(report["timings"]) >= {"read", "kernel", "write", "verify", "publish", "total"}


def test_report_aggregates_are_consistent(published):
    report, _ = published
    per_attribute = report["utility"]["sse_per_attribute"]
    assert list(per_attribute) == QIS
    assert np.mean(list(per_attribute.values())) == pytest.approx(report["utility"]["sse"])
    for column in QIS:
        histogram = report["distributions"][column]
        assert sum(histogram["original"]) == sum(histogram["anonymized"]) == 400
        assert len(histogram["edges"]) == len(histogram["original"]) + 1
    emd = report["privacy"]["emd_histogram"]["charge"]
    k_check = next(c for c in report["verification"]["checks"] if c["name"] == "k_anonymity")
    assert sum(emd["counts"]) == emd["classes"] == k_check["classes"]
    assert emd["classes_above_t"] == 0
    assert emd["edges"][0] == 0 and emd["edges"][-1] >= 0.2


def test_report_and_page_hold_no_row_values(published, sqlite_run):
    report, html = published
    text = json.dumps(report)
    source = discharge_table(400, seed=1)
    for name in source["name"].unique():
        assert name not in text and name not in html
    for charge in source["charge"]:
        assert f"{charge}" not in text, "a confidential value leaked into the report"


def test_html_page_is_self_contained_with_the_plots(published):
    _, html = published
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html and "<link" not in html and " src=" not in html
    assert re.findall(r"https?://[^\"' ]+", html) == ["http://www.w3.org/2000/svg"] * 7
    # cluster sizes, EMD of charge, shares at risk, SSE per attribute, one distribution per QI
    assert html.count("<svg") == 7
    assert "t = 0.2" in html and "Verified and published as discharges_anon." in html
    for column in QIS:
        assert f"<h3>{column}</h3>" in html


def test_failed_verification_page_says_nothing_was_published(
    sqlite_run, tmp_path, singletons_registry
):
    from tclose.core.runner import run
    from tclose.errors import VerificationError

    document = sqlite_run.config()
    document["algorithm"] = {"name": "singletons"}
    document["report"] = {"json": str(tmp_path / "f.json"), "html": str(tmp_path / "f.html")}
    registry = singletons_registry
    with pytest.raises(VerificationError):
        run(load_config(sqlite_run.write(document)), registry=registry)
    assert "Verification FAILED" in (tmp_path / "f.html").read_text()
    assert json.loads((tmp_path / "f.json").read_text())["verification"]["passed"] is False


def test_report_command_renders_a_json(published, tmp_path, capsys):
    report, _ = published
    source = tmp_path / "copy.json"
    source.write_text(json.dumps(report))
    assert main(["report", str(source)]) == 0
    assert (tmp_path / "copy.html").read_text() == render_html(report)
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["report", str(tmp_path / "bad.json")]) == 2
    assert "not an audit report" in capsys.readouterr().err


def test_unwritable_report_path_fails_before_any_work(sqlite_run, tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    document = sqlite_run.config()
    document["report"] = {"html": str(tmp_path / "a_file" / "r.html")}
    assert main(["run", str(sqlite_run.write(document))]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert sqlite_run.tables() == {"discharges"}


def test_report_table_key_is_validated(sqlite_run):
    from tclose.errors import ConfigError

    document = sqlite_run.config()
    document["report"] = {"table": 5}
    with pytest.raises(ConfigError, match="report ==> At key: table"):
        parse_config(document)


def test_nice_edges_hide_the_extremes_and_cover_the_data():
    edges = nice_edges(17.0, 93.0, bins=10)
    assert edges[0] < 17.0 and edges[-1] > 93.0
    assert np.allclose(np.diff(edges), 10.0)
    assert np.diff(nice_edges(0, 3, bins=20, integer=True)).min() >= 1
    assert len(nice_edges(5.0, 5.0)) >= 2
    assert doctest.testmod(tclose.core.report).failed == 0


def test_distribution_and_sse_helpers():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [10.0] * 4})
    encoded = encode_table(
        frame, [AttributeSpec("a", "quasi_identifier"), AttributeSpec("b", "quasi_identifier")]
    )
    published = {"a": np.array([1.5, 1.5, 3.5, 3.5]), "b": np.full(4, 10.0)}
    sse = encoded.information_loss(published)["sse_per_attribute"]
    assert sse["a"] == pytest.approx(0.25 / frame["a"].std(ddof=0) ** 2) and sse["b"] == 0.0
    histograms = distributions(encoded, published)
    assert sum(histograms["a"]["original"]) == sum(histograms["a"]["anonymized"]) == 4


def test_redacted_document_removes_url_passwords():
    document = {
        "source": {"url": "postgresql://u:s3cret@h/db", "table": "t"},
        "target": {"url": "mysql+pymysql://root:pw@h/db"},
    }
    text = json.dumps(redacted_document(document))
    assert "s3cret" not in text and ":pw@" not in text and "***" in text


@pytest.mark.parametrize(
    "values",
    [
        np.array([1.5, 1.5, 1.5]),
        np.array([np.nan, np.nan]),
        np.array([0.0, -0.0, 0.0]),
        np.array([1.5, np.nan]),
        np.array([np.nan, 1.5]),
        np.array([3, 3, 4]),
        np.array([7, 7]),
        np.array([True, True]),
        np.array(["2020-01-01", "2020-01-01"], dtype="datetime64[ns]"),
        np.array(["NaT", "NaT"], dtype="datetime64[ns]"),
        np.array(["NaT", "2020-01-01"], dtype="datetime64[ns]"),
        np.array(["a", "a"], dtype=object),
        np.array(["a", "b"], dtype=object),
        np.array([None, None], dtype=object),
        np.array([Decimal("1.0"), Decimal("1.00")], dtype=object),
    ],
)
def test_holds_one_value_counts_values_as_pandas_unique_does(values):
    assert holds_one_value(values) == (len(pd.unique(values.astype(object))) == 1)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(
        st.one_of(finite, st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308])),
        max_size=60,
    ),
    bounds=st.tuples(finite, finite),
    bins=st.integers(1, 25),
    on_edges=st.integers(0, 20),
)
def test_bin_counts_equal_numpy_histogram(values, bounds, bins, on_edges):
    """:func:`bin_counts` is ``np.histogram(values, edges)[0]``: on the edges of
    :func:`nice_edges` over any range (down to subnormal and up to 1e308 spans), with values on
    the edges themselves, outside them, NaN and infinities."""
    low, high = sorted(bounds)
    edges = nice_edges(low, high, bins)
    data = np.array(values + list(edges[:on_edges]), dtype=np.float64)
    expected = np.histogram(data[np.isfinite(data)], edges)[0]
    assert bin_counts(data, edges).tolist() == expected.tolist()


def test_bin_counts_on_uneven_edges():
    edges = np.array([0.0, 0.1, 5.0, 5.5, 100.0])
    data = np.random.default_rng(3).uniform(-10, 110, 10_000)
    data[:5] = edges
    assert bin_counts(data, edges).tolist() == np.histogram(data, edges)[0].tolist()


@settings(max_examples=500, deadline=None)
@given(bounds=st.tuples(finite, finite), bins=st.integers(1, 25), integer=st.booleans())
def test_nice_edges_cover_any_finite_range(bounds, bins, integer):
    """Finite, strictly increasing edges around ``[low, high]``, for any finite range: tiny
    steps are not rounded to one edge (values of 1e-14 had 21 edges of 0.0 and empty bins), a
    subnormal span and a span rounded past the largest float do not raise."""
    low, high = sorted(bounds)
    if integer:
        low, high = float(np.floor(low)), float(np.ceil(high))
    edges = nice_edges(low, high, bins, integer)
    assert np.all(np.isfinite(edges)) and np.all(np.diff(edges) > 0)
    assert edges[0] <= low and edges[-1] >= high
