"""``auto`` ranks by the report's SSE, and so is never worse than the paper's algorithms it runs.

The report's ``utility.sse`` of a release with a nominal, an ordinal or a rounded QI is not the
within-cluster sum of squares the algorithms lower (a nominal QI publishes its cluster's most
frequent value): ``auto`` must rank by the former. Its SSE is then at most the SSE of ``t-first``,
``merge`` and ``k-first`` on any table where all three are among its candidates.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose
from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.interfaces import Problem
from tclose.kernels.emd import OrderedEMD

PAPER = ("t-first", "merge", "k-first")


def anonymize(frame: pd.DataFrame, qis: dict, k: int, t: float, algorithm: str, **options):
    return tclose.anonymize(
        frame,
        quasi_identifiers=qis,
        confidential=["spend"],
        k=k,
        t=t,
        algorithm=algorithm,
        **options,
    )


def mixed_table(n: int, seed: int) -> tuple[pd.DataFrame, dict[str, object]]:
    """Nominal, ordinal, rounded numeric and plain numeric QIs; a zero-heavy ``spend``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "region": rng.choice(["a", "b", "c", "d"], size=n, p=[0.4, 0.3, 0.2, 0.1]),
            "level": rng.choice(["low", "mid", "high"], size=n),
            "rooms": rng.integers(1, 9, size=n).astype(float),
            "income": np.round(rng.lognormal(8, 1, size=n), 2),
            "spend": np.where(rng.random(n) < 0.6, 0.0, rng.integers(1, 500, size=n)),
        }
    )
    qis = {
        "region": "nominal",
        "level": {"type": "ordinal", "categories": ["low", "mid", "high"]},
        "rooms": {"type": "numeric", "round": True},
        "income": "numeric",
    }
    return frame, qis


@pytest.mark.parametrize(("k", "t"), [(3, 0.1), (5, 0.3)])
def test_the_chosen_sse_is_the_reports(k, t):
    frame, qis = mixed_table(600, seed=k)
    result = anonymize(frame, qis, k, t, "auto")
    info = result.report["algorithm"]["info"]
    assert info["ranked_by"] == "loss"
    ran = [c for c in info["candidates"] if c["status"] == "ran"]
    winner = next(c for c in ran if c["name"] == info["winner"])
    assert result.report["utility"]["sse"] == winner["loss"] == min(c["loss"] for c in ran)
    # With a nominal QI the wcss is another quantity: ranking by it could pick another winner.
    assert all(c["loss"] != c["wcss"] for c in ran)


def test_every_candidate_sse_is_the_report_of_that_candidate_alone():
    """The unrefined SSE ``auto`` records for t-first, merge and k-first is the report's SSE of
    that algorithm run alone: the candidates are the paper's algorithms, exactly."""
    frame, qis = mixed_table(500, seed=3)
    info = anonymize(frame, qis, 4, 0.2, "auto").report["algorithm"]["info"]
    recorded = {c["name"]: c["loss_unrefined"] for c in info["candidates"]}
    for name in PAPER:
        assert recorded[name] == anonymize(frame, qis, 4, 0.2, name).report["utility"]["sse"]


def test_without_the_reports_sse_auto_ranks_by_wcss():
    """Outside a run of the framework (no ``Problem.release_sse``) the ranking is the wcss."""
    registry = load_registry(entry_points=False)
    algorithm = registry.algorithms["auto"].obj
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 2))
    fitted = [OrderedEMD.fit(rng.integers(0, 20, size=300).astype(float))]
    options = {name: option.default for name, option in options_schema(algorithm).items()}
    table = {name: provided.obj for name, provided in registry.algorithms.items()}
    partition = run_algorithm(algorithm, Problem(x, fitted, 3, 0.2, options), table)
    info = partition.info
    assert info["ranked_by"] == "wcss"
    ran = [c for c in info["candidates"] if c["status"] == "ran"]
    assert (
        min(c["wcss"] for c in ran) == next(c for c in ran if c["name"] == info["winner"])["wcss"]
    )


@st.composite
def small_tables(draw):
    n = draw(st.integers(6, 70))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    categories = draw(st.integers(1, 4))
    zeros = draw(st.sampled_from([0.0, 0.5, 0.9]))
    frame = pd.DataFrame(
        {
            "region": rng.choice([f"r{i}" for i in range(categories)], size=n),
            "age": rng.integers(18, 30, size=n).astype(float),
            "income": np.round(rng.lognormal(3, 1, size=n), 1),
            "spend": np.where(rng.random(n) < zeros, 0.0, rng.integers(1, 9, size=n)),
        }
    )
    qis = {"region": "nominal", "age": "numeric", "income": "numeric"}
    k = draw(st.integers(1, 5))
    t = draw(st.sampled_from([0.05, 0.15, 0.3, 0.6]))
    return frame, qis, min(k, n), t


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_tables())
def test_auto_is_never_worse_than_the_papers_algorithms(case):
    frame, qis, k, t = case
    result = anonymize(frame, qis, k, t, "auto")
    sse = {name: anonymize(frame, qis, k, t, name).report["utility"]["sse"] for name in PAPER}
    assert result.report["utility"]["sse"] <= min(sse.values())
    assert result.report["verification"]["passed"]


def test_a_database_run_ranks_by_the_reports_sse(sqlite_run, tmp_path):
    """``tclose run`` hands ``auto`` the report's SSE too: the winner's loss is the report's."""
    document = sqlite_run.config(algorithm={"name": "auto", "options": {}})
    document["attributes"]["ward"] = {"role": "quasi_identifier", "type": "nominal"}
    report = tmp_path / "report.json"
    assert main(["run", str(sqlite_run.write(document)), "--report", str(report)]) == 0
    produced = json.loads(report.read_text())
    info = produced["algorithm"]["info"]
    winner = next(c for c in info["candidates"] if c["name"] == info["winner"])
    assert info["ranked_by"] == "loss"
    assert winner["loss"] == produced["utility"]["sse"]
