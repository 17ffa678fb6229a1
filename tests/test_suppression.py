"""Suppression of outliers (``privacy.max_suppressed``): the rule, the release, the verifier.

Every release below is checked by plain pandas/NumPy code that shares nothing with tclose:
the suppressed share is at most the bound, k holds on the published rows (classes rebuilt from
the written QI values), t holds against the distribution of the published rows (the ordered
EMD written out here), and the published confidential values are exactly those of the rows
that were not suppressed. The verifier must refuse a release missing rows that were not
declared suppressed, or more rows than the bound allows.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

import tclose
from tclose.app.cli import main
from tclose.core.criteria import built_in_criteria
from tclose.core.suppression import suppressed_count, suppressed_rows
from tclose.core.verify import gather_evidence, verify
from tclose.errors import ConfigError
from tclose.interfaces import SuppressionFacts
from tests.conftest import make_database


def outlier_table(n: int = 300, outliers: int = 12, seed: int = 0) -> pd.DataFrame:
    """Two numeric QIs around (40, 50 000) with ``outliers`` rows far out, a nominal QI with a
    few rare values, and a skewed numeric confidential attribute."""
    rng = np.random.default_rng(seed)
    age = rng.normal(40, 8, n).round()
    income = rng.normal(50_000, 8_000, n).round()
    where = rng.choice(n, outliers, replace=False)
    income[where] = rng.uniform(400_000, 900_000, outliers).round()
    age[where[: outliers // 2]] = rng.uniform(95, 110, outliers // 2).round()
    region = rng.choice(["north", "south", "east"], n, p=[0.5, 0.3, 0.2]).astype(object)
    region[rng.choice(n, 4, replace=False)] = "island"
    charge = rng.lognormal(7, 1, n).round(2)
    return pd.DataFrame({"age": age, "income": income, "region": region, "charge": charge})


def ordered_emd(class_values: np.ndarray, table_values: np.ndarray) -> float:
    """EMD between a class's values and the table's, over the table's ordered distinct values:
    ``1/(m-1) * sum_i |sum_{j<=i} (p_j - q_j)|``."""
    domain = np.unique(table_values)
    if len(domain) == 1:
        return 0.0
    p = pd.Series(class_values).value_counts(normalize=True).reindex(domain, fill_value=0.0)
    q = pd.Series(table_values).value_counts(normalize=True).reindex(domain, fill_value=0.0)
    return float(np.abs(np.cumsum(p.to_numpy() - q.to_numpy())).sum() / (len(domain) - 1))


def independent_check(df, result, qis, k, t, bound) -> int:
    """The properties every release with suppression must have; returns the rows left out."""
    data, labels = result.data, result.labels
    left_out = labels == -1
    suppressed = int(left_out.sum())
    assert suppressed <= math.floor(bound * len(df))
    assert len(data) == len(df) - suppressed
    assert suppressed == result.report["privacy"]["suppression"]["rows"]
    sizes = data.groupby(qis, dropna=False).size()
    assert sizes.min() >= k
    assert sorted(data["charge"]) == sorted(df.loc[~left_out, "charge"])
    if t is not None:
        table = data["charge"].to_numpy()
        worst = max(
            ordered_emd(group["charge"].to_numpy(), table) for _, group in data.groupby(qis)
        )
        assert worst <= t + 1e-9
    return suppressed


def test_the_count_is_the_share_floored_and_never_leaves_fewer_than_k_rows():
    assert suppressed_count(1000, 5, 0.02) == 20
    assert suppressed_count(999, 5, 0.02) == 19  # floor(19.98)
    assert suppressed_count(1000, 5, 0.0) == 0
    assert suppressed_count(10, 5, 0.49) == 4
    assert suppressed_count(6, 5, 0.4) == 1  # floor(2.4) would leave 4 < k rows
    assert suppressed_count(5, 5, 0.4) == 0
    assert suppressed_count(3, 5, 0.4) == 0  # fewer rows than k: the run refuses them anyway
    assert suppressed_count(0, 1, 0.3) == 0


def test_the_suppressed_rows_are_the_farthest_from_the_centroid_ties_by_position():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 3))
    mask = suppressed_rows(x, 7)
    distance = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    assert set(np.flatnonzero(mask)) == set(np.argsort(-distance)[:7])
    tied = np.array([[0.0], [2.0], [-2.0], [2.0], [0.0]])  # rows 1, 2, 3 equally far
    assert np.flatnonzero(suppressed_rows(tied, 2)).tolist() == [1, 2]
    assert not suppressed_rows(x, 0).any()


@pytest.mark.parametrize(
    "algorithm, t, options",
    [
        ("t-first", 0.25, {}),
        ("merge", 0.25, {}),
        ("k-first", 0.3, {}),
        ("mdav", None, {}),
        ("t-first", 0.25, {"blocks": 3, "workers": 1}),
        ("mdav", None, {"blocks": 2, "workers": 1}),
    ],
)
def test_a_release_with_suppression_holds_k_and_t_on_what_is_published(algorithm, t, options):
    df = outlier_table()
    qis = {"age": "numeric", "income": "numeric", "region": "nominal"}
    k, bound = 4, 0.04
    result = tclose.anonymize(
        df, qis, ["charge"], k=k, t=t, algorithm=algorithm, max_suppressed=bound, **options
    )
    suppressed = independent_check(df, result, list(qis), k, t, bound)
    assert suppressed == math.floor(bound * len(df))
    report = result.report
    assert report["source"]["rows_suppressed"] == suppressed
    assert report["privacy"]["suppression"]["max_suppressed"] == bound
    checks = {c["name"]: c for c in report["verification"]["checks"]}
    assert checks["suppression"]["passed"] and checks["suppression"]["actual"] == suppressed
    assert checks["row_count"]["expected"] == len(df) - suppressed


def test_the_planted_outliers_are_suppressed_and_the_sse_of_the_published_rows_falls():
    df = outlier_table(outliers=12).drop(columns="region")
    qis = ["age", "income"]
    plain = tclose.anonymize(df, qis, ["charge"], k=4, t=0.3)
    cut = tclose.anonymize(df, qis, ["charge"], k=4, t=0.3, max_suppressed=0.04)
    planted = np.flatnonzero(df["income"].to_numpy() > 300_000)
    assert set(planted) <= set(np.flatnonzero(cut.labels == -1))
    assert cut.report["utility"]["sse"] < 0.5 * plain.report["utility"]["sse"]
    # The full-table figure counts each suppressed row at its distance to the table's mean.
    z = (df[qis] - df[qis].mean()) / df[qis].std(ddof=0)
    gone = cut.labels == -1
    published = cut.report["utility"]["sse_per_attribute"]
    full = np.mean(
        [(published[q] * (~gone).sum() + (z.loc[gone, q] ** 2).sum()) / len(df) for q in qis]
    )
    assert cut.report["utility"]["sse_full_table"] == pytest.approx(full, rel=1e-9)
    assert plain.report["utility"]["sse_full_table"] == plain.report["utility"]["sse"]


def test_suppression_is_deterministic():
    df = outlier_table(seed=5).drop(columns="region")
    runs = [
        tclose.anonymize(df, ["age", "income"], ["charge"], k=3, t=0.3, max_suppressed=0.05)
        for _ in range(2)
    ]
    assert np.array_equal(runs[0].labels, runs[1].labels)
    pd.testing.assert_frame_equal(runs[0].data, runs[1].data)


def test_bound_zero_suppresses_nothing_and_adds_no_check():
    df = outlier_table().drop(columns="region")
    result = tclose.anonymize(df, ["age", "income"], ["charge"], k=3, t=0.3)
    assert len(result.data) == len(df) and (result.labels >= 0).all()
    assert result.report["privacy"]["suppression"]["rows"] == 0
    assert "suppression" not in {c["name"] for c in result.report["verification"]["checks"]}


def test_a_bound_that_would_leave_fewer_than_k_rows_leaves_k():
    df = outlier_table(n=7, outliers=2).drop(columns="region")
    result = tclose.anonymize(df, ["age", "income"], ["charge"], k=5, max_suppressed=0.45)
    assert (result.labels == -1).sum() == 2 and len(result.data) == 5
    independent_check(df, result, ["age", "income"], 5, None, 0.45)


@pytest.mark.parametrize("bound", [0.5, 0.7, -0.01, True, "0.1", float("nan")])
def test_a_bound_outside_zero_to_one_half_is_refused(bound):
    with pytest.raises(ConfigError, match="max_suppressed"):
        tclose.anonymize(
            outlier_table(),
            ["age"],
            ["charge"],
            k=3,
            max_suppressed=bound,
            other=["income"],
            identifiers=["region"],
        )


def test_missing_rows_set_aside_and_suppressed_rows_are_counted_apart():
    df = outlier_table().drop(columns="region")
    df.loc[[3, 4], "age"] = np.nan
    result = tclose.anonymize(
        df,
        {"age": {"type": "numeric", "missing": "exclude-rows"}, "income": "numeric"},
        ["charge"],
        k=3,
        t=0.3,
        max_suppressed=0.03,
    )
    report = result.report
    assert report["source"]["rows_set_aside"] == 2
    assert report["privacy"]["suppression"]["rows_considered"] == len(df) - 2
    assert report["privacy"]["suppression"]["rows"] == math.floor(0.03 * (len(df) - 2))
    assert len(result.data) == len(df) - 2 - report["privacy"]["suppression"]["rows"]
    assert (result.labels[[3, 4]] == -1).all()


# --- the criteria on evidence -------------------------------------------------------------------


class _Config:
    def __init__(self, max_suppressed: float) -> None:
        self.max_suppressed = max_suppressed


def _checks(rows: int, facts: SuppressionFacts | None, bound: float) -> dict:
    frame = pd.DataFrame({"q": np.repeat(np.arange(rows // 2), 2)[:rows]})
    evidence = gather_evidence(frame, ["q"], {}, 2, None, suppression=facts, config=_Config(bound))
    return {c.name: c for c in verify(evidence, built_in_criteria([])).results}


def test_row_count_accepts_exactly_the_declared_suppressed_rows():
    assert _checks(96, SuppressionFacts(4, 100), 0.05)["row_count"].passed
    assert not _checks(94, SuppressionFacts(4, 100), 0.05)["row_count"].passed  # 2 more missing
    assert not _checks(98, SuppressionFacts(4, 100), 0.05)["row_count"].passed  # 2 not removed


def test_row_count_needs_every_known_count_to_hold():
    """A count known otherwise (a report's ``target.rows``, the run's rows) that disagrees with
    the rows considered less the rows suppressed fails, whichever of the two the table holds."""
    frame = pd.DataFrame({"q": np.repeat(np.arange(48), 2)})  # 96 rows

    def row_count(expected_rows: int) -> Any:
        evidence = gather_evidence(
            frame,
            ["q"],
            {},
            2,
            None,
            expected_rows=expected_rows,
            suppression=SuppressionFacts(4, 100),
            config=_Config(0.05),
        )
        return {c.name: c for c in verify(evidence, built_in_criteria([])).results}["row_count"]

    assert row_count(96).passed
    assert not row_count(95).passed
    assert row_count(95).details["rows_expected_otherwise"] == 95
    assert not row_count(100).passed


def test_the_suppression_check_fails_beyond_the_bound_or_without_one():
    assert _checks(96, SuppressionFacts(4, 100), 0.04)["suppression"].passed
    assert not _checks(94, SuppressionFacts(6, 100), 0.05)["suppression"].passed
    assert not _checks(96, SuppressionFacts(4, 100), 0.0)["suppression"].passed
    assert "suppression" not in _checks(100, SuppressionFacts(0, 100), 0.0)


def test_a_report_that_declares_other_rows_than_the_rule_chooses_fails():
    checks = _checks(96, SuppressionFacts(4, 100, declared=6), 0.1)
    assert not checks["suppression"].passed
    assert checks["suppression"].details["rows_declared"] == 6


# --- databases: tclose run, tclose verify ---------------------------------------------------------


@pytest.fixture(
    params=[pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def database(request, tmp_path):
    (tmp_path / request.param).mkdir()
    db = make_database(request.param, tmp_path / request.param)
    yield db
    db.drop_all()


def _source(db, n: int = 240) -> tuple[str, pd.DataFrame]:
    df = outlier_table(n=n, outliers=10, seed=2)
    df.insert(0, "id", np.arange(n))
    name = db.name("people")
    columns = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("age", sa.Double),
        sa.Column("income", sa.Double),
        sa.Column("region", sa.String(20)),
        sa.Column("charge", sa.Double),
    ]
    rows = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
        for r in df.to_dict("records")
    ]
    db.create(name, columns, rows)
    return name, df


def _document(db, source: str, target: str, report, bound: float) -> dict:
    return {
        "source": {"url": db.url, "table": source, "key": "id"},
        "target": {"table": target, "if_exists": "replace"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "income": {"role": "quasi_identifier", "type": "numeric"},
            "region": {"role": "quasi_identifier", "type": "nominal"},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 4, "t": 0.3, "max_suppressed": bound},
        "algorithm": {"name": "t-first"},
        "report": {"json": str(report)},
    }


def test_round_trip_publishes_the_rows_left_and_verify_recomputes_the_suppression(
    database, tmp_path, capsys
):
    source, df = _source(database)
    target = database.name("people_anon")
    report_path = tmp_path / "run.json"
    path = database.write_config(_document(database, source, target, report_path, 0.05))
    assert main(["run", str(path)]) == 0
    report = json.loads(report_path.read_text())
    suppressed = report["privacy"]["suppression"]["rows"]
    assert suppressed == math.floor(0.05 * len(df))
    summary = capsys.readouterr().out
    assert f"{len(df) - suppressed} written, {suppressed} suppressed as outliers" in summary
    assert "utility.sse_full_table" in summary
    out = database.frame(target)
    assert len(out) == len(df) - suppressed == report["target"]["rows"]
    assert out.groupby(["age", "income", "region"]).size().min() >= 4
    # the rows missing are outliers: the planted incomes are among them
    missing = sorted(set(df["charge"]) - set(out["charge"]))
    assert len(missing) == suppressed
    assert set(df.loc[df["income"] > 300_000, "charge"]) <= set(missing)
    assert main(["-q", "verify", str(path), "--report", str(report_path)]) == 0
    assert main(["-q", "verify", str(path), "--source"]) == 0


def test_a_target_missing_a_row_that_was_not_suppressed_fails_verification(database, tmp_path):
    source, df = _source(database)
    target = database.name("people_anon")
    report_path = tmp_path / "run.json"
    path = database.write_config(_document(database, source, target, report_path, 0.05))
    assert main(["-q", "run", str(path)]) == 0
    # One more row gone than the run suppressed: the source's rule, recomputed, and the
    # report's declared count both expect it.
    smallest = database.rows(target, "min(tclose_row)")[0][0]
    database.execute(
        f"DELETE FROM {database.quote(target)} WHERE tclose_row = :row", {"row": smallest}
    )
    assert main(["-q", "verify", str(path), "--source"]) == 1
    # The report declares the run's count; the table now holds one row fewer.
    assert main(["-q", "verify", str(path), "--report", str(report_path)]) == 1


def test_a_report_declaring_more_suppressed_rows_than_the_bound_fails(database, tmp_path):
    source, df = _source(database)
    target = database.name("people_anon")
    report_path = tmp_path / "run.json"
    path = database.write_config(_document(database, source, target, report_path, 0.05))
    assert main(["-q", "run", str(path)]) == 0
    report = json.loads(report_path.read_text())
    report["privacy"]["suppression"]["rows"] += 5
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(report))
    assert main(["-q", "verify", str(path), "--source", "--report", str(forged)]) == 1


# --- the configuration and tclose compare ---------------------------------------------------------


def _yaml_document(bound) -> dict:
    return {
        "source": {"url": "sqlite:///x.db", "table": "people"},
        "target": {"table": "people_anon"},
        "attributes": {"age": {"role": "quasi_identifier"}, "charge": {"role": "confidential"}},
        "privacy": {"k": 3, "t": 0.3, "max_suppressed": bound},
    }


def test_the_yaml_key_is_read_and_a_bad_one_names_its_path():
    from tclose.base.config import parse_config

    assert parse_config(_yaml_document(0.02)).max_suppressed == 0.02
    document = _yaml_document(0.0)
    del document["privacy"]["max_suppressed"]
    config = parse_config(document)
    assert config.max_suppressed == 0.0 and config.sampling_fraction == 0.01
    document["report"] = {"sampling_fraction": 0.2}
    assert parse_config(document).sampling_fraction == 0.2
    for bad in (0.5, -1, "2%", None):
        with pytest.raises(ConfigError, match="max_suppressed"):
            parse_config(_yaml_document(bad))
    document["report"] = {"sampling_fraction": 0}
    with pytest.raises(ConfigError, match="sampling_fraction"):
        parse_config(document)


def test_compare_leaves_out_each_settings_outliers_and_verifies_them(lite, tmp_path):
    from tclose.app.compare import compare
    from tclose.base.config import parse_config

    source, df = _source(lite)
    document = _document(lite, source, lite.name("unused"), tmp_path / "r.json", 0.05)
    result = compare(parse_config(document), ["t-first", "mdav"], [4], [0.3])
    plain = dict(document, privacy={"k": 4, "t": 0.3})
    without = compare(parse_config(plain), ["t-first", "mdav"], [4], [0.3])
    for cut, whole in zip(result["runs"], without["runs"]):
        assert cut["verified"] and whole["verified"]
        assert cut["sse"] < whole["sse"]


def test_a_release_checked_against_a_smaller_bound_fails(lite, tmp_path):
    source, df = _source(lite)
    target = lite.name("people_anon")
    document = _document(lite, source, target, tmp_path / "run.json", 0.05)
    assert main(["-q", "run", str(lite.write_config(document))]) == 0
    document["privacy"]["max_suppressed"] = 0.02  # a smaller bound: the rule leaves out fewer rows
    assert main(["-q", "verify", str(lite.write_config(document, "other.yaml")), "--source"]) == 1
    document["privacy"]["max_suppressed"] = 0.0
    assert main(["-q", "verify", str(lite.write_config(document, "none.yaml")), "--source"]) == 1
