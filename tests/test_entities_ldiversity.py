"""k distinct entities (``source.entity``) and l-diversity (``privacy.l``): enforced after every
algorithm, checked by the criterion plugins, and confirmed by an independent check in plain
pandas that shares no code with tclose (classes rebuilt from the published values, entities
joined through the source key kept in the release or the API's row order)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import tclose
from tclose.base.config import criterion_keys, parse_config
from tclose.base.registry import PLUGINS_ENV, load_registry
from tclose.core.runner import run, verify_published
from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl
from tclose.interfaces import Check, Option
from tclose.kernels.diversity import Requirement, merge_until_met, unmet_by_table

ALGORITHMS = ["merge", "k-first", "t-first", "mdav", "auto"]


@pytest.fixture(autouse=True)
def diversity_plugin(monkeypatch):
    """The criteria come from their entry point (``diversity``), as a third party's would."""
    monkeypatch.setenv(PLUGINS_ENV, "diversity")


def panel(
    persons: int = 60, per_person: int = 6, seed: int = 0, shares=(0.8, 0.15, 0.05)
) -> pd.DataFrame:
    """A panel: several rows per person, QIs that vary little within a person (so an
    algorithm left alone puts one person's rows together), a skewed confidential attribute."""
    rng = np.random.default_rng(seed)
    nr = np.repeat([f"person-{i:03d}-x" for i in range(persons)], per_person)
    base = np.repeat(rng.integers(20, 70, persons), per_person)
    return pd.DataFrame(
        {
            "id": np.arange(len(nr)),
            "nr": nr,
            "age": base + np.tile(np.arange(per_person), persons),
            "wage": np.repeat(rng.normal(10, 3, persons), per_person).round(2),
            "health": rng.choice(["good", "fair", "poor"], len(nr), p=list(shares)),
        }
    )


# --- the independent check: plain pandas, no tclose code ------------------------------------


def oracle(published: pd.DataFrame, qis: list[str], entities: pd.Series, confidential: str):
    """Per class of equal published QI values: distinct entities and distinct values."""
    frame = published[qis].copy()
    frame["_entity"] = entities.to_numpy()
    frame["_value"] = published[confidential].to_numpy()
    grouped = frame.groupby(qis, dropna=False)
    return grouped["_entity"].nunique().min(), grouped["_value"].nunique().min(), grouped.size()


def entropy_min(published: pd.DataFrame, qis: list[str], confidential: str) -> float:
    """The lowest entropy (natural log) of the confidential values of any class."""
    lowest = math.inf
    for _, group in published.groupby(qis, dropna=False):
        p = group[confidential].value_counts(normalize=True).to_numpy()
        lowest = min(lowest, float(-(p * np.log(p)).sum()))
    return lowest


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_api_every_class_holds_k_entities_and_l_values(algorithm):
    df = panel()
    t = None if algorithm == "mdav" else 0.4
    result = tclose.anonymize(
        df.drop(columns=["id"]),
        ["age", "wage"],
        {"health": "nominal"},
        k=4,
        t=t,
        algorithm=algorithm,
        entity="nr",
        l=2,
        keep_order=True,
    )
    assert "nr" not in result.data.columns
    entities, values, sizes = oracle(result.data, ["age", "wage"], df["nr"], "health")
    assert entities >= 4 and values >= 2 and sizes.min() >= 4
    checks = {c["name"]: c for c in result.report["verification"]["checks"]}
    assert checks["k_entities"]["passed"] and checks["k_entities"]["actual"] == entities
    assert checks["l_diversity:health"]["passed"]


@pytest.mark.parametrize("algorithm", ["t-first", "merge"])
def test_blocks_and_refinement_then_entities_and_l(algorithm):
    """The step follows the framework's blocks and refinement."""
    df = panel(persons=80).drop(columns=["id"])
    result = tclose.anonymize(
        df,
        ["age", "wage"],
        {"health": "nominal"},
        k=3,
        t=0.4,
        algorithm=algorithm,
        entity="nr",
        l=2,
        keep_order=True,
        blocks=3,
        workers=1,
        refine=True,
    )
    assert "blocks" in json.dumps(result.report["algorithm"]["info"])
    entities, values, sizes = oracle(result.data, ["age", "wage"], df["nr"], "health")
    assert entities >= 3 and values >= 2 and sizes.min() >= 3


def test_a_third_party_algorithm_gets_entities_and_l(monkeypatch, require_example):
    require_example("tclose-sortagg", "plugin")
    monkeypatch.setenv(PLUGINS_ENV, "sortagg,diversity")
    df = panel().drop(columns=["id"])
    result = tclose.anonymize(
        df,
        ["age", "wage"],
        {"health": "nominal"},
        k=4,
        t=0.4,
        algorithm="principal-sort",
        entity="nr",
        l=2,
        keep_order=True,
    )
    entities, values, _sizes = oracle(result.data, ["age", "wage"], df["nr"], "health")
    assert entities >= 4 and values >= 2


def test_without_entity_a_class_holds_one_person_only():
    """The case the criterion exists for: with rows per person this alike, k rows are one
    person's rows; the same run with ``entity`` is not."""
    df = panel(per_person=8).drop(columns=["id", "health"])
    plain = tclose.anonymize(
        df, ["age", "wage"], [], k=4, algorithm="mdav", identifiers=["nr"], keep_order=True
    )
    assert oracle(plain.data.assign(health=0), ["age", "wage"], df["nr"], "health")[0] == 1
    kept = tclose.anonymize(
        df, ["age", "wage"], [], k=4, algorithm="mdav", entity="nr", identifiers=[], keep_order=True
    )
    assert oracle(kept.data.assign(health=0), ["age", "wage"], df["nr"], "health")[0] >= 4


def test_entropy_l_diversity():
    df = panel(seed=3, shares=(0.5, 0.3, 0.2)).drop(columns=["id"])
    result = tclose.anonymize(
        df,
        ["age", "wage"],
        {"health": "nominal"},
        k=3,
        t=0.5,
        entity="nr",
        l=2,
        l_kind="entropy",
        keep_order=True,
    )
    assert entropy_min(result.data, ["age", "wage"], "health") >= math.log(2) - 1e-9
    check = {c["name"]: c for c in result.report["verification"]["checks"]}["l_diversity:health"]
    assert check["passed"] and check["kind"] == "entropy" and check["actual"] >= 2 - 1e-9


def _run_on(database, table: str, **privacy) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Create the panel in ``database``, run tclose on it keeping the key (so that the
    independent check can join the release to the source), and read both back."""
    df = panel(seed=5)
    persons = df["nr"].str.slice(7, 10).astype(int)
    df["region"] = persons % 5 + 1  # a nominal QI written into an integer column
    df["born"] = pd.Timestamp("1950-01-01") + pd.to_timedelta(persons * 97, unit="D")
    df["born"] = df["born"].dt.date
    source, target = database.name(table), database.name(f"{table}_out")
    database.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("nr", sa.String(20)),
            sa.Column("age", sa.Integer),
            sa.Column("wage", sa.Double),
            sa.Column("health", sa.String(10)),
            sa.Column("region", sa.Integer),
            sa.Column("born", sa.Date),
        ],
        df.to_dict("records"),
    )
    document = {
        "source": {"url": database.url, "table": source, "key": "id", "entity": "nr"},
        "target": {"table": target},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "wage": {"role": "quasi_identifier", "type": "numeric", "round": True},
            "region": {"role": "quasi_identifier", "type": "nominal"},
            "born": {"role": "quasi_identifier", "type": "date"},
            "health": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 4, "t": 0.4, **privacy},
        "algorithm": {"name": "t-first"},
        "output": {"keep_key": True},
        "report": {"html": str(database.tmp_path / f"{table}.html")},
    }
    config = parse_config(document)
    result = run(config)
    with database.engine.connect() as connection:
        published = pd.read_sql(sa.text(f"SELECT * FROM {database.quote(target)}"), connection)
    return result.report, published, df, config


@pytest.mark.parametrize("fixture", ["lite", pytest.param("pg", marks=pytest.mark.postgres)])
def test_run_on_a_database_holds_k_entities_and_l(fixture, request):
    database = request.getfixturevalue(fixture)
    report, published, df, config = _run_on(database, "panel", l=2)
    assert "nr" not in published.columns
    joined = published.merge(df[["id", "nr"]], on="id", validate="one_to_one")
    qis = ["age", "wage", "region", "born"]
    entities, values, sizes = oracle(joined, qis, joined["nr"], "health")
    assert entities >= 4 and values >= 2 and sizes.min() >= 4 and len(joined) == len(df)
    checks = {c["name"]: c for c in report["verification"]["checks"]}
    assert checks["k_entities"]["passed"] and checks["k_entities"]["actual"] == entities
    assert checks["l_diversity:health"]["passed"]
    assert checks["l_diversity:health"]["actual"] == values
    audit = verify_published(config, against_source=True)  # joined by the kept key
    again = {c.name: c for c in audit.results}
    assert again["k_entities"].passed and again["k_entities"].actual == entities
    assert again["l_diversity:health"].passed
    page = (database.tmp_path / "panel.html").read_text("utf-8")
    assert "k_entities" in page and "l_diversity:health" in page
    for text in (json.dumps(report), page):
        assert not any(value in text for value in df["nr"])  # no entity value in the report


# --- adversarial cases -------------------------------------------------------------------------


def test_null_entity_is_refused_naming_column_and_rows():
    df = panel().drop(columns=["id"])
    df.loc[[3, 7], "nr"] = None
    with pytest.raises(DataError, match=r"'nr'.*NULL in 2 row\(s\) \(rows 3, 7\)"):
        tclose.anonymize(df, ["age", "wage"], {"health": "nominal"}, k=4, t=0.4, entity="nr")


def test_null_entity_in_a_database_names_the_rows_by_key(lite):
    df = panel()
    df.loc[df["id"] == 11, "nr"] = None
    source = lite.name("nulls")
    lite.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("nr", sa.String(20)),
            sa.Column("age", sa.Integer),
            sa.Column("wage", sa.Double),
            sa.Column("health", sa.String(10)),
        ],
        df.to_dict("records"),
    )
    document = {
        "source": {"url": lite.url, "table": source, "key": "id", "entity": "nr"},
        "target": {"table": lite.name("out")},
        "attributes": {
            "age": {"role": "quasi_identifier"},
            "wage": {"role": "quasi_identifier"},
            "health": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 4, "t": 0.4},
    }
    with pytest.raises(DataError, match=r"'nr'.*NULL in 1 row\(s\) \(rows 11\)"):
        run(parse_config(document))
    assert lite.name("out") not in sa.inspect(lite.engine).get_table_names()


def test_entity_that_is_a_quasi_identifier_is_refused():
    df = panel().drop(columns=["id"])
    with pytest.raises(ConfigError, match="entity.*never published"):
        tclose.anonymize(df, ["age", "wage", "nr"], {"health": "nominal"}, k=4, t=0.4, entity="nr")


def test_l_above_the_distinct_values_is_refused_before_anything_is_written(lite):
    df = panel().drop(columns=["id"])
    with pytest.raises(ConfigError, match="3 distinct values of health.*lower privacy.l"):
        tclose.anonymize(df, ["age", "wage"], {"health": "nominal"}, k=4, t=0.4, entity="nr", l=4)
    with pytest.raises(ConfigError, match="distinct entities.*lower privacy.k"):
        tclose.anonymize(
            df.head(12), ["age", "wage"], {"health": "nominal"}, k=3, t=0.9, entity="nr"
        )
    with pytest.raises(ConfigError, match="privacy.l"):
        _run_on(lite, "many", l=5)
    assert not [t for t in sa.inspect(lite.engine).get_table_names() if t.endswith("_out")]


def test_entity_spelled_in_another_case_is_refused_with_the_column_named(lite):
    df = panel().drop(columns=["id"])
    with pytest.raises(ConfigError, match="'NR'.*Did you mean 'nr'"):
        tclose.anonymize(df, ["age", "wage"], {"health": "nominal"}, k=4, t=0.4, entity="NR")
    source = lite.name("cased")
    lite.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("nr", sa.Text),
            sa.Column("age", sa.Integer),
        ],
        [{"id": 1, "nr": "a", "age": 3}],
    )
    document = {
        "source": {"url": lite.url, "table": source, "entity": "Nr"},
        "target": {"table": lite.name("out")},
        "attributes": {"age": {"role": "quasi_identifier"}},
        "privacy": {"k": 1},
        "algorithm": {"name": "mdav"},
    }
    with pytest.raises(ConfigError, match="'Nr'.*Did you mean 'nr'"):
        run(parse_config(document))


def test_bad_values_of_the_keys_are_refused_at_their_place():
    base = {
        "source": {"url": "sqlite:///x.db", "table": "t"},
        "target": {"table": "u"},
        "attributes": {"a": {"role": "quasi_identifier"}, "c": {"role": "confidential"}},
        "privacy": {"k": 2, "t": 0.5},
    }
    for privacy, message in [
        ({"l": 0}, "must be in"),
        ({"l": "2"}, "type int"),
        ({"l": 2, "l_kind": "recursive"}, "must be one of"),
        ({"l_kind": "entropy"}, "needs privacy.l"),
    ]:
        document = {**base, "privacy": {**base["privacy"], **privacy}}
        with pytest.raises(ConfigError, match=message) as caught:
            parse_config(document)
        assert caught.value.path[0] == "privacy"
    config = parse_config({**base, "privacy": {"k": 2, "t": 0.5, "l": 2}})
    assert config.l_diversity == (2, "distinct") and config.entity is None


# --- the rule: a registered criterion's keys parse, in the config and the API -----------------


class _CCriterion:
    """A third party's criterion with its own keys."""

    name = "c_model"
    config_keys = ("privacy.c", "report.c_note")
    config_options = {"privacy.c": Option(float, None, "c", min=0.0)}

    def check(self, evidence):
        c = evidence.config.criteria.get("privacy.c")
        return None if c is None else Check(self.name, True, c, c)


class _CPlugin:
    @hookimpl
    def register_criteria(self, register):
        register(_CCriterion())


def test_a_third_party_criterion_declares_keys_the_config_and_api_accept():
    registry = load_registry(extra_plugins=[_CPlugin()])
    keys = criterion_keys(registry)
    assert {"privacy.c", "report.c_note", "privacy.l", "source.entity"} <= set(keys)
    document = {
        "source": {"url": "sqlite:///x.db", "table": "t"},
        "target": {"table": "u"},
        "attributes": {"a": {"role": "quasi_identifier"}},
        "privacy": {"k": 2, "c": 1.5},
        "report": {"c_note": "anything"},
    }
    config = parse_config(document, keys=keys)
    assert config.criteria == {"privacy.c": 1.5, "report.c_note": "anything"}
    with pytest.raises(ConfigError, match="Unknown key 'c'"):
        parse_config(document, keys=criterion_keys(load_registry()))
    with pytest.raises(ConfigError, match="must be in"):
        parse_config({**document, "privacy": {"k": 2, "c": -1.0}}, keys=keys)
    df = pd.DataFrame({"a": np.arange(10.0)})
    result = tclose.anonymize(df, ["a"], k=2, c=0.5, registry=registry)
    checks = {c["name"]: c for c in result.report["verification"]["checks"]}
    assert checks["c_model"]["expected"] == 0.5


# --- the kernel: a hypothesis property ---------------------------------------------------------


def _emds(codes: np.ndarray, labels: np.ndarray, m: int) -> np.ndarray:
    """The ordered EMD of every cluster to the whole column, written out from the paper
    (``1/(m-1) * sum_i |sum_{j<=i} (p_j - q_j)|``), apart from tclose's EMD code."""
    whole = np.bincount(codes, minlength=m) / len(codes)
    out = []
    for label in np.unique(labels):
        mine = codes[labels == label]
        p = np.bincount(mine, minlength=m) / len(mine)
        cumulative = np.cumsum(p - whole)
        out.append(np.abs(cumulative).sum() / (m - 1) if m > 1 else 0.0)
    return np.array(out)


@st.composite
def partitions(draw):
    n = draw(st.integers(6, 80))
    k = draw(st.integers(1, 5).filter(lambda v: v <= n))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, draw(st.integers(1, 3))))
    entities = rng.integers(0, draw(st.integers(1, n)), n)
    values = rng.integers(0, draw(st.integers(1, 5)), n)
    order = rng.permutation(n)
    clusters = max(1, n // k)
    labels = np.empty(n, dtype=np.int64)
    labels[order] = np.arange(n) % clusters  # every cluster >= k rows
    l_value = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["distinct", "entropy"]))
    return x, labels, k, entities, values, l_value, kind


@settings(max_examples=150, deadline=None)
@given(partitions())
def test_merging_keeps_k_and_t_and_meets_entities_and_l(case):
    x, labels, k, entities, values, l_value, kind = case
    m = int(values.max()) + 1
    requirements = [
        Requirement(entities, k, "distinct", "entities"),
        Requirement(values, l_value, kind, "values"),
    ]
    if unmet_by_table(requirements):
        distinct_entities, distinct_values = len(np.unique(entities)), len(np.unique(values))
        p = np.bincount(values) / len(values)
        p = p[p > 0]
        table_entropy = float(-(p * np.log(p)).sum())
        assert distinct_entities < k or (
            distinct_values < l_value
            if kind == "distinct"
            else table_entropy < math.log(l_value) - 1e-9
        )
        return
    t_before = _emds(values, labels, m).max()
    merged, _count = merge_until_met(x, labels, requirements)
    assert merged.shape == labels.shape  # every row in exactly one cluster
    frame = pd.DataFrame({"c": merged, "e": entities, "v": values})
    assert frame.groupby("c").size().min() >= k
    assert frame.groupby("c")["e"].nunique().min() >= k
    if kind == "distinct":
        assert frame.groupby("c")["v"].nunique().min() >= l_value
    else:
        for _, group in frame.groupby("c"):
            p = group["v"].value_counts(normalize=True).to_numpy()
            assert -(p * np.log(p)).sum() >= math.log(l_value) - 1e-9
    assert _emds(values, merged, m).max() <= t_before + 1e-9
    # every original cluster lies whole in one merged cluster
    assert (pd.DataFrame({"a": labels, "b": merged}).groupby("a")["b"].nunique() == 1).all()


# --- init proposes source.entity; a run without it warns --------------------------------------


def test_init_proposes_the_entity_and_a_run_without_it_warns(lite, tmp_path):
    from tclose.app.init_config import ColumnInfo, skeleton

    columns = [
        ColumnInfo("id", "INTEGER", "numeric", primary_key=True, key_type=True),
        ColumnInfo("nr", "INTEGER", "numeric", key_type=True),
        ColumnInfo("age", "INTEGER", "numeric"),
    ]
    text = skeleton("sqlite:///x.db", "panel", columns)
    assert "  entity: nr  #" in text
    document = yaml.safe_load(text)
    assert document["attributes"]["nr"]["role"] == "identifier"
    document["attributes"]["age"]["role"] = "quasi_identifier"
    document["privacy"] = {"k": 2}
    document["algorithm"] = {"name": "mdav"}
    assert parse_config(document).entity == "nr"
    plain = [
        ColumnInfo("id", "INTEGER", "numeric", primary_key=True, key_type=True),
        ColumnInfo("age", "INTEGER", "numeric"),
    ]
    assert "entity:" not in skeleton("sqlite:///x.db", "t", plain)

    df = panel()
    source = lite.name("warned")
    lite.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("nr", sa.String(20)),
            sa.Column("age", sa.Integer),
            sa.Column("wage", sa.Double),
            sa.Column("health", sa.String(10)),
        ],
        df.to_dict("records"),
    )
    document = {
        "source": {"url": lite.url, "table": source, "key": "id"},
        "target": {"table": lite.name("out")},
        "attributes": {
            "nr": {"role": "identifier"},
            "age": {"role": "quasi_identifier"},
            "wage": {"role": "quasi_identifier"},
            "health": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 4, "t": 0.4},
    }
    warnings = run(parse_config(document)).report["warnings"]
    assert any("'nr'" in w and "source.entity" in w for w in warnings)


def test_compare_enforces_and_checks_entities_and_l(lite):
    from tclose.app.compare import compare

    df = panel(per_person=8)
    source = lite.name("compared")
    lite.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("nr", sa.String(20)),
            sa.Column("age", sa.Integer),
            sa.Column("wage", sa.Double),
            sa.Column("health", sa.String(10)),
        ],
        df.to_dict("records"),
    )
    document = {
        "source": {"url": lite.url, "table": source, "key": "id", "entity": "nr"},
        "target": {"table": lite.name("out")},
        "attributes": {
            "age": {"role": "quasi_identifier"},
            "wage": {"role": "quasi_identifier"},
            "health": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 4, "t": 0.4, "l": 2},
    }
    config = parse_config(document)
    rows = compare(config, ["mdav"], [4], [None])["runs"]
    rows += compare(config, ["t-first"], [4], [0.4])["runs"]
    assert rows and all(row["verified"] for row in rows)
    plain = {**document, "source": {**document["source"]}, "privacy": {"k": 4, "t": 0.4}}
    del plain["source"]["entity"]
    plain["attributes"] = {**document["attributes"], "nr": {"role": "identifier"}}
    entity_rows = {(r["algorithm"], r["t"]): r["classes"] for r in rows}
    plain_rows = compare(parse_config(plain), ["mdav"], [4], [None])["runs"]
    assert entity_rows[("mdav", None)] < plain_rows[0]["classes"]  # merged to reach 4 people


def test_the_join_of_written_rows_to_entities():
    """Rows join by their published values as the database gives them back (a category label
    written as text into an integer column, a date read back as text), each value's entities
    reach the rows of that value, and rows that match nothing are a problem, not a guess."""
    import datetime as dt

    from tclose.core.entities import written_entities

    written = {
        "a": np.array([1.5, 1.5, 2.0, np.nan]),
        "c": np.array(["3", "3", "4", "4"], dtype=object),
        "d": np.array([dt.date(2000, 1, 1)] * 2 + [dt.date(2001, 1, 1)] * 2, dtype=object),
    }
    entities = np.array([10, 11, 12, 13])
    frame = pd.DataFrame(
        {
            "a": [np.nan, 2.0, 1.5, 1.5],
            "c": [4, 4, 3, 3],
            "d": ["2001-01-01", "2001-01-01", "2000-01-01", "2000-01-01"],
        }
    )
    joined, problem = written_entities(frame, ["a", "c", "d"], written, entities)
    assert problem is None and joined[0] == 13 and joined[1] == 12
    assert sorted(joined[2:]) == [10, 11]
    frame.loc[0, "c"] = 5
    joined, problem = written_entities(frame, ["a", "c", "d"], written, entities)
    assert joined is None and "1 written row(s) match no source row" in problem


# --- beside suppression: entities follow the rows left in ---------------------------------------


def _with_outliers(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a few persons far from everyone else (rows suppression leaves out first)."""
    df = df.copy()
    far = df["nr"].isin(df["nr"].unique()[:2])
    df.loc[far, "age"] += 400
    return df


def test_api_entities_and_l_hold_on_what_is_left_after_suppression():
    df = _with_outliers(panel(persons=80))
    result = tclose.anonymize(
        df.drop(columns=["id"]),
        ["age", "wage"],
        {"health": "nominal"},
        k=4,
        t=0.4,
        entity="nr",
        l=2,
        max_suppressed=0.05,
        keep_order=True,
    )
    kept = result.labels >= 0  # suppressed rows are labelled -1 and not in data
    assert 0 < (~kept).sum() <= int(0.05 * len(df))
    assert not kept[df["age"] > 400].any()  # the outliers go first
    entities, values, sizes = oracle(
        result.data, ["age", "wage"], df.loc[kept, "nr"].reset_index(drop=True), "health"
    )
    assert entities >= 4 and values >= 2 and sizes.min() >= 4
    checks = {c["name"]: c for c in result.report["verification"]["checks"]}
    assert checks["k_entities"]["passed"] and checks["k_entities"]["actual"] == entities
    assert checks["suppression"]["passed"]


@pytest.mark.parametrize("fixture", ["lite", pytest.param("pg", marks=pytest.mark.postgres)])
def test_run_entities_beside_suppression(fixture, request):
    database = request.getfixturevalue(fixture)
    report, published, df, config = _run_on(database, "panelsup", l=2, max_suppressed=0.05)
    joined = published.merge(df[["id", "nr"]], on="id", validate="one_to_one")
    assert 0 < len(df) - len(joined) <= int(0.05 * len(df))
    entities, values, _sizes = oracle(
        joined, ["age", "wage", "region", "born"], joined["nr"], "health"
    )
    assert entities >= 4 and values >= 2
    checks = {c["name"]: c for c in report["verification"]["checks"]}
    assert checks["k_entities"]["passed"] and checks["k_entities"]["actual"] == entities
    audit = {c.name: c for c in verify_published(config, against_source=True).results}
    assert audit["k_entities"].passed and audit["row_count"].passed
    assert audit["suppression"].passed
