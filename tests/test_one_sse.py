"""One SSE, and clusters told from classes.

A reader sees one SSE per run, and is told why clusters and classes differ in count. The rule:
every figure called SSE is the report's ``utility.sse`` (docs/guide.md, Definitions); what the
algorithms minimise is named for what it is (``wcss``, the within-cluster sum of squares of
their standardized matrix); and wherever clusters and classes both appear, the difference is
said.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.app.cli import main
from tclose.app.demo import discharge_table


def _frame() -> pd.DataFrame:
    frame = discharge_table(300, seed=3)[["age", "zip", "ward", "charge"]].copy()
    return frame


def _keys_and_texts(value, path=()):
    """Every (path, key) and (path, text) of a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key), key
            yield from _keys_and_texts(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from _keys_and_texts(item, path)
    elif isinstance(value, str):
        yield path, value


@pytest.mark.parametrize("algorithm", ["auto", "t-first"])
def test_no_figure_is_called_sse_but_the_reports(algorithm):
    """With a nominal QI the algorithms' within-cluster sum of squares differs from the SSE of
    the published values (a cluster publishes its most frequent ward, not a mean of one-hot
    vectors): no other figure of the report may be called SSE."""
    options = {"refine": True} if algorithm == "t-first" else {}
    result = tclose.anonymize(
        _frame(),
        quasi_identifiers={"age": "numeric", "zip": "numeric", "ward": "nominal"},
        confidential=["charge"],
        k=3,
        t=0.25,
        algorithm=algorithm,
        **options,
    )
    report = result.report
    outside = {k: v for k, v in report.items() if k != "utility"}
    for path, text in _keys_and_texts(outside):
        assert not re.search(r"(?<![a-z])sse(?![a-z])", text.lower()), (path, text)
    info = report["algorithm"]["info"]
    if algorithm == "auto":
        winner = next(c for c in info["candidates"] if c["name"] == info["winner"])
        assert winner["wcss"] <= winner["wcss_unrefined"] + 1e-12
        assert winner["loss"] == report["utility"]["sse"]  # ranked by the release's loss
        assert winner["wcss"] != pytest.approx(report["utility"]["sse"], rel=1e-3)
    else:
        assert info["refine"]["wcss_after"] <= info["refine"]["wcss_before"]


def test_auto_wcss_is_the_sse_when_every_qi_is_numeric_and_weighs_one():
    """Where the two definitions coincide (numeric QIs, weight 1, not rounded: the published
    value is the cluster mean), the figures are equal, as the docs say."""
    result = tclose.anonymize(
        _frame(), quasi_identifiers=["age", "zip"], confidential=["charge"], other=["ward"],
        k=3, t=0.25, algorithm="auto",
    )  # fmt: skip
    info = result.report["algorithm"]["info"]
    winner = next(c for c in info["candidates"] if c["name"] == info["winner"])
    assert winner["wcss"] == pytest.approx(result.report["utility"]["sse"], rel=1e-6)


@pytest.fixture
def ward_config(sqlite_run):
    """A run whose clusters share published QI values: the only QI is the ward (few values),
    so many clusters of k rows publish the same ward and make one class."""
    document = sqlite_run.config(algorithm={"name": "mdav", "options": {}})
    document["privacy"] = {"k": 3}
    document["attributes"].update(
        age={"role": "other", "allow_unique": True},
        zip={"role": "other", "allow_unique": True},
        length_of_stay={"role": "other", "allow_unique": True},
        ward={"role": "quasi_identifier", "type": "nominal"},
    )
    return sqlite_run.write(document)


def test_run_and_verify_say_what_clusters_and_classes_are(ward_config, tmp_path, capsys):
    report = tmp_path / "report.json"
    assert main(["run", str(ward_config), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    written = json.loads(report.read_text())
    clusters = written["clusters"]["count"]
    check = next(c for c in written["verification"]["checks"] if c["name"] == "k_anonymity")
    classes = check["classes"]
    assert clusters > classes  # the case the explanation is for
    assert f"clusters:  {clusters} " in out and "the algorithm's groups of rows" in out, out
    assert f"classes:   {classes} equivalence classes" in out, out
    assert "clusters whose published quasi-identifier values coincide form one class" in flat
    assert "k and t are checked on the classes" in flat
    sse_lines = [line for line in out.splitlines() if "SSE" in line]
    assert len(sse_lines) == 1 and "utility.sse" in sse_lines[0], out

    assert main(["verify", str(ward_config)]) == 0
    out = capsys.readouterr().out
    assert f"rows, {classes} classes\n" in out
    flat = " ".join(out.split())
    assert "clusters whose published quasi-identifier values coincide form one class" in flat


def test_compare_shows_the_reports_sse_and_explains_clusters_and_classes(
    ward_config, tmp_path, capsys
):
    report = tmp_path / "report.json"
    assert main(["-q", "run", str(ward_config), "--report", str(report)]) == 0
    capsys.readouterr()
    sse = json.loads(report.read_text())["utility"]["sse"]
    assert main(["compare", str(ward_config), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["runs"]
    assert row["sse"] == pytest.approx(sse, rel=1e-12)
    assert row["classes"] < row["clusters"]
    assert main(["compare", str(ward_config)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert "SSE" in header and "clusters" in header and "classes" in header
    assert "utility.sse" in out and "form one class" in " ".join(out.split())
    assert np.isfinite(sse)
