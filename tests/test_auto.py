"""Algorithm ``auto``: the best refined candidate, with the reasons in the report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.app.demo import QI_COLUMNS, discharge_table
from tclose.errors import ConfigError


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    columns = [*QI_COLUMNS[:3], "charge", "procedures", "name"]
    return discharge_table(400, seed=7)[columns]


def run(table, **options):
    return tclose.anonymize(
        table,
        quasi_identifiers=list(QI_COLUMNS[:3]),
        confidential=["charge", "procedures"],
        k=3,
        t=0.2,
        algorithm="auto",
        identifiers=["name"],
        **options,
    )


def test_auto_publishes_the_lowest_sse_and_says_why(table):
    result = run(table)
    info = result.report["algorithm"]["info"]
    ran = [c for c in info["candidates"] if c["status"] == "ran"]
    assert [c["name"] for c in info["candidates"]] == ["t-first", "merge", "merge-gain", "k-first"]
    assert len(ran) == 4
    best = min(ran, key=lambda c: c["loss"])
    assert (
        info["winner"] == best["name"] and "lowest information loss of the release" in info["why"]
    )
    assert info["ranked_by"] == "loss"
    for candidate in ran:
        assert candidate["loss"] == min(candidate["loss_unrefined"], candidate["loss_refined"])
        assert candidate["wcss"] <= candidate["wcss_unrefined"] + 1e-12
        assert candidate["seconds"] >= candidate["seconds_refine"] >= 0
    assert sum(c["refine_passes"] > 1 for c in ran) <= 1  # only the best gets more passes
    assert result.report["verification"]["passed"]
    assert np.bincount(result.labels).min() >= 3
    assert max(result.report["privacy"]["t_achieved"].values()) <= 0.2 + 1e-9
    assert result.report["utility"]["sse"] == best["loss"]


def test_auto_beats_or_equals_every_paper_algorithm(table):
    sse = {
        name: tclose.anonymize(
            table,
            quasi_identifiers=list(QI_COLUMNS[:3]),
            confidential=["charge", "procedures"],
            k=3,
            t=0.2,
            algorithm=name,
            identifiers=["name"],
        ).report["utility"]["sse"]
        for name in ("t-first", "merge", "k-first")
    }
    assert run(table).report["utility"]["sse"] <= min(sse.values()) + 1e-12


def test_auto_skips_k_first_on_large_tables(table):
    info = run(table, k_first_max_rows=100).report["algorithm"]["info"]
    skipped = {c["name"]: c for c in info["candidates"] if c["status"] == "skipped"}
    assert "k_first_max_rows" in skipped["k-first"]["why"]


def test_auto_without_refinement_publishes_a_built_candidate(table):
    info = run(table, refine_passes=0).report["algorithm"]["info"]
    assert not info["refined"]
    assert all(c["refine_passes"] == 0 for c in info["candidates"])


def test_auto_without_screening_refines_the_best_built_candidate_only(table):
    info = run(table, screen_passes=0).report["algorithm"]["info"]
    refined = [c for c in info["candidates"] if "loss_refined" in c]
    assert len(refined) == 1
    built = min(info["candidates"], key=lambda c: c["loss_unrefined"])
    assert refined[0]["name"] == built["name"]


def test_auto_requires_t(table):
    with pytest.raises(ConfigError, match="needs t"):
        tclose.anonymize(
            table[["age", "charge"]],
            quasi_identifiers=["age"],
            confidential=["charge"],
            k=3,
            algorithm="auto",
        )
