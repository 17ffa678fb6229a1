"""An independent oracle for the audit report and ``tclose verify``.

Auditors trust every figure the report states. This file recomputes them from the database
alone, with plain SQL and pandas/NumPy written from the definitions of docs/reports.md,
docs/guide.md, docs/attributes.md and the paper (ordered EMD, equal and hierarchical nominal
EMD), never with tclose's own code: tclose runs only through ``tclose.app.cli.main`` (``run`` and
``verify``). From the source and the published table it rebuilds the equivalence classes, k and
t achieved, every class's EMD, the row counts (in, out, set aside), the cluster sizes, the
normalized SSE, the verification checks' actual values, and that every published QI is its
class's documented aggregate and every confidential and pass-through value its source row's.
Rows are linked through a pass-through column unique per row (``code``, ``allow_unique``).

It also tampers with a published table in ways that keep k and t and checks what ``tclose
verify`` then claims.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from sqlalchemy.pool import NullPool

from tclose.app.cli import main

MISSING = object()  # NULL as a category of its own (``missing: category``)
ORDINAL = ["lo", "mid", "hi"]  # ordinal QI ``o`` and confidential ``c3``, declared order
HIERARCHY = {"any": {"x": ["x1", "x2"], "y": ["y1", "y2"]}}  # nominal confidential ``c2``
SQL_TYPES = {
    "id": sa.Integer,
    "x": sa.Double,
    "r": sa.Integer,
    "o": sa.String(10),
    "s": sa.String(10),
    "dte": sa.Date,
    "c1": sa.Integer,
    "c2": sa.String(10),
    "c3": sa.String(10),
    "h": sa.String(10),
    "cd": sa.Date,
    "p": sa.String(10),
    "code": sa.String(10),
}
TOLERANCE = 1e-9


def _cli(*args: str) -> tuple[int, str]:
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        code = main(["-q", *args])
    return code, capture.getvalue()


# --- the source table and its configuration ---------------------------------------------------


def _create(engine: sa.Engine, name: str, frame: pd.DataFrame) -> None:
    columns = [
        sa.Column(c, SQL_TYPES[c], primary_key=c == "id", autoincrement=False) for c in frame
    ]
    table = sa.Table(name, sa.MetaData(), *columns)
    rows = [
        {k: (None if v is None or (isinstance(v, float) and math.isnan(v)) else v) for k, v in r}
        for r in (
            list(zip(frame.columns, values, strict=True)) for values in frame.itertuples(False)
        )
    ]
    with engine.begin() as connection:
        table.create(connection)
        connection.execute(table.insert(), [{k: _plain(v) for k, v in r.items()} for r in rows])


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _read(engine: sa.Engine, name: str) -> pd.DataFrame:
    """Every row of table ``name``, by plain SQL, with dates as ``datetime64``."""
    quoted = engine.dialect.identifier_preparer.quote(name)
    with engine.connect() as connection:
        result = connection.execute(sa.text(f"SELECT * FROM {quoted}"))
        frame = pd.DataFrame([tuple(r) for r in result], columns=list(result.keys()))
    for column in ("dte", "cd"):
        if column in frame:
            frame[column] = pd.to_datetime(
                frame[column].map(lambda v: None if v is None else str(v))
            )
    for column in ("x", "r", "c1"):
        if column in frame:
            frame[column] = frame[column].map(lambda v: None if v is None else _plain(v))
    return frame


# --- the oracle: each figure from its documented definition -----------------------------------


def _key(value):
    """A published or source value as a hashable key; NULL is ``MISSING``."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT:
        return MISSING
    return value


def _categories(spec: dict, values: pd.Series) -> list:
    """The category order of an ordinal or nominal attribute: declared, or natural, and NULL
    (``(missing)``) last."""
    present = [v for v in values.map(_key).unique() if v is not MISSING]
    order = list(spec.get("categories") or sorted(present))
    if spec.get("hierarchy") and not spec.get("categories"):
        order = [leaf for group in HIERARCHY["any"].values() for leaf in group]
    if (values.map(_key) == MISSING).any():
        order.append(MISSING)
    return order


def _aggregate(spec: dict, values: pd.Series, categories: list):
    """The documented published value of a cluster whose source values are ``values``."""
    kind = spec.get("type", "numeric")
    if kind == "numeric":
        exact = sum(Fraction(v) for v in values) / len(values)
        return round(exact) if spec.get("round") else float(exact)  # round(): half to even
    if kind == "date":
        days = [v.value // 86_400_000_000_000 for v in values]
        mean = Fraction(sum(days), len(days))
        return math.floor(mean + Fraction(1, 2))  # the nearest day; half a day: the later
    keys = [_key(v) for v in values]
    if kind == "ordinal":
        return sorted(keys, key=categories.index)[(len(keys) - 1) // 2]  # the lower median
    if spec.get("hierarchy"):  # the medoid: least total distance, ties first in leaf order
        ground = _ground(spec, categories)
        members = [c for c in categories if c in keys]
        total = {
            c: sum(ground[categories.index(c), categories.index(v)] for v in keys) for c in members
        }
        return min(members, key=lambda c: (total[c], categories.index(c)))
    counts = {c: keys.count(c) for c in categories}
    return max(categories, key=lambda c: (counts[c], -categories.index(c)))  # mode, first


def _qi_distance(spec: dict, a, b, categories: list, sigma: float) -> float:
    """One QI's term of the SSE between an original value ``a`` and a published value ``b``."""
    kind = spec.get("type", "numeric")
    if kind == "numeric":
        return ((a - b) / sigma) ** 2
    if kind == "date":
        return ((a.value - b.value) / sigma) ** 2
    a, b = _key(a), _key(b)
    if kind == "ordinal":
        return ((categories.index(a) - categories.index(b)) / (len(categories) - 1)) ** 2
    if spec.get("hierarchy"):
        return float(_ground(spec, categories)[categories.index(a), categories.index(b)])
    return float(a != b)


def _ground(spec: dict, categories: list) -> np.ndarray:
    """The ground distance matrix of a nominal confidential attribute (hierarchical with a
    hierarchy: NULL a leaf under the root)."""
    size = len(categories)
    if not spec.get("hierarchy"):
        return 1.0 - np.eye(size)
    parent = {leaf: group for group, leaves in HIERARCHY["any"].items() for leaf in leaves}
    height = 2
    matrix = np.zeros((size, size))
    for i, a in enumerate(categories):
        for j, b in enumerate(categories):
            if a == b:
                continue
            same_group = a in parent and b in parent and parent[a] == parent[b]
            matrix[i, j] = (height - (1 if same_group else 0)) / height
    return matrix


def _emd(spec: dict, rows: pd.Series, column: pd.Series) -> float:
    """EMD between a class's values ``rows`` and the whole published ``column``."""
    kind = spec.get("type", "numeric")
    if kind == "nominal":
        order = _categories(spec, column)
    elif kind == "ordinal":  # the distinct values present, in the declared order
        present = set(column.map(_key))
        order = [c for c in _categories(spec, column) if c in present]
    else:
        order = sorted(column.map(_key).unique())
    p = np.array([list(rows.map(_key)).count(v) for v in order], dtype=float) / len(rows)
    q = np.array([list(column.map(_key)).count(v) for v in order], dtype=float) / len(column)
    if kind != "nominal":
        m = len(order)
        return 0.0 if m == 1 else float(np.abs(np.cumsum(p - q)[:-1]).sum() / (m - 1))
    if not spec.get("hierarchy"):
        return float(np.abs(p - q).sum() / 2)
    ground, size = _ground(spec, order), len(order)
    equalities = np.zeros((2 * size, size * size))
    for i in range(size):
        equalities[i, i * size : (i + 1) * size] = 1  # flow out of i is p_i
        equalities[size + i, i::size] = 1  # flow into i is q_i
    solved = linprog(ground.ravel(), A_eq=equalities, b_eq=np.concatenate([p, q]))
    assert solved.success
    return float(solved.fun)


def _linkage(rows: pd.DataFrame, attributes: dict) -> tuple[list[str], int]:
    """The pass-through columns taken together (guide.md: role other, no ``allow_unique``) and
    the rows whose tuple of their values (NULL a value) no other row holds; none in a table of
    fewer than two rows."""
    columns = [
        c
        for c, spec in attributes.items()
        if spec["role"] == "other" and not spec.get("allow_unique")
    ]
    if not columns or len(rows) < 2:
        return columns, 0
    keys = rows[columns].map(_key).apply(tuple, axis=1)
    return columns, int((keys.map(keys.value_counts()) == 1).sum())


def oracle(source: pd.DataFrame, published: pd.DataFrame, document: dict) -> dict:
    """Every checked figure of a release, recomputed from the two tables and the config."""
    attributes = document["attributes"]
    quasi = [c for c, s in attributes.items() if s["role"] == "quasi_identifier"]
    confidential = [c for c, s in attributes.items() if s["role"] == "confidential"]
    passing = [c for c, s in attributes.items() if s["role"] == "other"]
    excluded = [c for c, s in attributes.items() if s.get("missing") == "exclude-rows"]
    null = source[excluded].map(lambda v: _key(v) is MISSING) if excluded else None
    kept = source[~null.any(axis=1)] if excluded else source
    figures: dict = {
        "rows_in": len(source),
        "rows_set_aside": len(source) - len(kept),
        "set_aside_by_column": {c: int(null[c].sum()) for c in excluded},
        "rows_out": len(published),
    }
    # Every kept source row published once, linked by its unique ``code``.
    assert sorted(published["code"]) == sorted(kept["code"]), "rows lost or duplicated"
    linked = kept.merge(published, on="code", suffixes=("", "_pub"), validate="one_to_one")
    for column in [*confidential, *passing]:
        if column == "code":
            continue
        original, shown = linked[column].map(_key), linked[f"{column}_pub"].map(_key)
        assert (original == shown).all(), f"{column}: a published value is not its row's"
    # Equivalence classes: the published rows sharing every QI value (NULL a value).
    keys = published[quasi].map(_key).apply(tuple, axis=1)
    classes = published.groupby(keys, sort=False).groups
    figures["linkage_columns"], figures["linkable_rows"] = _linkage(published, attributes)
    figures["classes"] = len(classes)
    figures["class_sizes"] = sorted(len(rows) for rows in classes.values())
    figures["k_achieved"] = min(figures["class_sizes"])
    # Each published QI is the aggregate of its class's source values.
    linked_keys = linked[[f"{c}_pub" for c in quasi]].map(_key).apply(tuple, axis=1)
    for column in quasi:
        spec, categories = attributes[column], _categories(attributes[column], kept[column])
        for key, rows in linked.groupby(linked_keys, sort=False).groups.items():
            expected = _aggregate(spec, linked.loc[rows, column], categories)
            shown = _key(key[quasi.index(column)])
            if spec.get("type") == "date":
                assert shown.value // 86_400_000_000_000 == expected, column
            elif spec.get("type", "numeric") == "numeric" and not spec.get("round"):
                assert math.isclose(shown, expected, rel_tol=1e-12, abs_tol=1e-12), column
            else:
                assert shown == expected, f"{column}: {shown!r} is not {expected!r}"
    # EMD of every class, t achieved.
    figures["emds"] = {}
    for column in confidential:
        spec = attributes[column]
        emds = [
            _emd(spec, published.loc[rows, column], published[column]) for rows in classes.values()
        ]
        figures["emds"][column] = emds
    figures["t_achieved"] = {c: max(e) for c, e in figures["emds"].items()}
    # Normalized SSE (guide.md): per QI the mean over rows of its term, sse their mean.
    per_attribute, whole = {}, {}
    for column in quasi:
        spec, categories = attributes[column], _categories(attributes[column], kept[column])
        original = kept[column]
        sigma = 1.0
        if spec.get("type", "numeric") in ("numeric", "date"):
            dates = spec.get("type") == "date"
            numbers = [v.value if dates else v for v in original]
            sigma = float(np.std(np.array(numbers, dtype=float))) or 1.0
        per_attribute[column] = float(
            np.mean(
                [
                    _qi_distance(spec, a, b, categories, sigma)
                    for a, b in zip(linked[column], linked[f"{column}_pub"], strict=True)
                ]
            )
        )
        single = _aggregate(spec, original, categories)  # one cluster holding every row
        if spec.get("type") == "date":
            single = pd.Timestamp(single * 86_400_000_000_000)
        whole[column] = float(
            np.mean([_qi_distance(spec, a, single, categories, sigma) for a in original])
        )
    figures.update(_risk_and_utility(kept, published, classes, attributes))
    figures["distributions"] = _distributions(kept, published, attributes)
    figures["sse_per_attribute"] = per_attribute
    figures["sse"] = float(np.mean(list(per_attribute.values())))
    figures["sse_raw"] = figures["sse"] * len(published) * len(quasi)
    sst = float(np.mean(list(whole.values())))
    figures["sse_sst"] = figures["sse"] / sst if sst else None
    return figures


def _shares(values: pd.Series) -> dict:
    keys = list(values.map(_key))
    return {v: keys.count(v) / len(keys) for v in set(keys)}


def _risk_and_utility(kept, published, classes, attributes) -> dict:
    """reports.md's risk figures that need no link, moments and category frequencies."""
    n, sizes = len(published), [len(rows) for rows in classes.values()]
    figures: dict = {
        "reidentification": {
            "max": 1 / min(sizes),
            "mean": len(sizes) / n,
            "records_at_max": sum(s for s in sizes if s == min(sizes)) / n,
        },
        "attribute": {},
        "moments": {},
        "categorical_total_variation": {},
    }
    for column, spec in attributes.items():
        if spec["role"] == "confidential":
            table = _shares(published[column])
            distinct, entropy, beta = [], [], 0.0
            for rows in classes.values():
                share = _shares(published.loc[rows, column])
                distinct.append(len(share))
                entropy.append(math.exp(-sum(q * math.log(q) for q in share.values())))
                gains = [(q - table[v]) / table[v] for v, q in share.items() if q > table[v]]
                beta = max([beta, *gains])
            figures["attribute"][column] = {
                "distinct_l": min(distinct),
                "entropy_l": min(entropy),
                "beta": beta,
            }
        elif spec["role"] == "quasi_identifier" and spec.get("type") in ("ordinal", "nominal"):
            before, after = _shares(kept[column]), _shares(published[column])
            values = set(before) | set(after)
            figures["categorical_total_variation"][column] = (
                sum(abs(before.get(v, 0) - after.get(v, 0)) for v in values) / 2
            )
        elif spec["role"] == "quasi_identifier" and spec.get("type", "numeric") == "numeric":
            a = np.array(kept[column], dtype=float)
            b = np.array(published[column], dtype=float)
            figures["moments"][column] = {
                "mean": (b.mean() - a.mean()) / abs(a.mean()) if a.mean() else None,
                "variance": (b.var() - a.var()) / a.var() if a.var() else None,
            }
    per_attribute = figures["attribute"].values()
    figures["attribute"]["overall"] = {
        "distinct_l": min(f["distinct_l"] for f in per_attribute),
        "entropy_l": min(f["entropy_l"] for f in per_attribute),
        "beta": max(f["beta"] for f in per_attribute),
    }
    return figures


def _same(stated, computed, where: str) -> None:
    """A stated figure (or nested mapping of figures) equals the computed one; None is None."""
    if isinstance(computed, dict):
        assert set(stated) == set(computed), where
        for key, value in computed.items():
            _same(stated[key], value, f"{where}.{key}")
    elif computed is None or stated is None:
        assert stated is computed, f"{where}: stated {stated!r}, computed {computed!r}"
    else:
        assert _close(stated, computed), f"{where}: stated {stated!r}, computed {computed!r}"


def _distributions(kept: pd.DataFrame, published: pd.DataFrame, attributes: dict) -> dict:
    """Every QI's original and published values, as the histograms count them (dates in
    nanoseconds, categories as text with NULL as ``(missing)``)."""
    found = {}
    for column, spec in attributes.items():
        if spec["role"] != "quasi_identifier":
            continue
        kind = spec.get("type", "numeric")
        if kind == "date":
            found[column] = (
                kind,
                *(np.array([v.value for v in f[column]]) for f in (kept, published)),
            )
        elif kind == "numeric":
            found[column] = (kind, *(np.array(f[column], dtype=float) for f in (kept, published)))
        else:
            text = [
                f[column].map(lambda v: "(missing)" if _key(v) is MISSING else str(v))
                for f in (kept, published)
            ]
            found[column] = (kind, *text)
    return found


def _check_distributions(stated: dict, computed: dict) -> None:
    """reports.md: binned counts of the original and the published values on the same edges
    (NumPy's convention: the last bin closed), rows per category (rare vanished ones pooled)."""
    assert set(stated) == set(computed)
    for column, (kind, original, anonymized) in computed.items():
        shown = stated[column]
        if kind in ("numeric", "date"):
            edges = np.array(shown["edges"], dtype=float)
            assert (np.diff(edges) > 0).all() and edges[0] <= original.min()
            assert edges[-1] >= original.max(), column
            for values, counts in (
                (original, shown["original"]),
                (anonymized, shown["anonymized"]),
            ):
                assert list(np.histogram(values.astype(float), bins=edges)[0]) == counts, column
            continue
        assert sum(shown["original"]) == len(original) and sum(shown["anonymized"]) == len(
            anonymized
        )
        for i, category in enumerate(shown["categories"]):
            if re.fullmatch(r"\(\d+ rare categories\)", category):
                continue
            assert shown["original"][i] == int((original == category).sum()), (column, category)
            assert shown["anonymized"][i] == int((anonymized == category).sum()), (column, category)


def _close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def check_report(figures: dict, report: dict, document: dict) -> None:
    """The JSON report states what the oracle computed."""
    k, t = document["privacy"]["k"], document["privacy"].get("t")
    assert report["source"]["rows"] == figures["rows_in"]
    assert report["source"]["rows_set_aside"] == figures["rows_set_aside"]
    assert report["source"]["rows_set_aside_by_column"] == figures["set_aside_by_column"]
    assert report["target"]["rows"] == figures["rows_out"]
    assert report["target"]["rows"] == report["source"]["rows"] - report["source"]["rows_set_aside"]
    privacy = report["privacy"]
    assert privacy["k_achieved"] == figures["k_achieved"]
    assert set(privacy["t_achieved"]) == set(figures["t_achieved"])
    for column, emds in figures["emds"].items():
        assert _close(privacy["t_achieved"][column], figures["t_achieved"][column]), column
        histogram = privacy["emd_histogram"][column]
        assert histogram["classes"] == figures["classes"] == sum(histogram["counts"])
        assert _close(histogram["mean"], float(np.mean(emds)))
        edges = np.array(histogram["edges"])
        assert (
            edges[0] == 0 and (t is None or edges[-1] >= t) and edges[-1] >= max(emds) - TOLERANCE
        )
        near = np.abs(np.subtract.outer(np.array(emds), edges)) <= TOLERANCE  # rounding only
        snapped = np.where(near.any(axis=1), edges[near.argmax(axis=1)], emds)
        assert list(np.histogram(snapped, bins=edges)[0]) == histogram["counts"], column
        if t is not None:
            assert histogram["classes_above_t"] == sum(e > t + TOLERANCE for e in emds)
    clusters = report["clusters"]
    sizes = {int(size): count for size, count in clusters["size_histogram"].items()}
    assert clusters["count"] == sum(sizes.values()) >= figures["classes"]
    assert sum(size * count for size, count in sizes.items()) == figures["rows_out"]
    assert clusters["min"] == min(sizes) and clusters["max"] == max(sizes)
    assert _close(clusters["mean"], figures["rows_out"] / clusters["count"])
    if clusters["count"] == figures["classes"]:  # no two clusters share their QI values
        assert sorted(s for s, c in sizes.items() for _ in range(c)) == figures["class_sizes"]
    assert clusters["min"] >= k or not report["verification"]["passed"]
    utility = report["utility"]
    assert _close(utility["sse"], figures["sse"])
    assert _close(utility["sse_raw"], figures["sse_raw"])
    for column, share in figures["sse_per_attribute"].items():
        assert _close(utility["sse_per_attribute"][column], share), column
    if figures["sse_sst"] is not None:
        assert _close(utility["sse_sst"], figures["sse_sst"])
    _check_distributions(report["distributions"], figures["distributions"])
    _same(report["risk"]["reidentification"], figures["reidentification"], "reidentification")
    _same(report["risk"]["attribute"], figures["attribute"], "risk.attribute")
    assert report["risk"]["classes"] == figures["classes"]
    _same(utility["moments"], figures["moments"], "utility.moments")
    _same(
        utility["categorical_total_variation"],
        figures["categorical_total_variation"],
        "utility.categorical_total_variation",
    )
    checks = {c["name"]: c for c in report["verification"]["checks"]}
    assert checks["row_count"]["actual"] == figures["rows_out"]
    assert checks["row_count"]["expected"] == figures["rows_in"] - figures["rows_set_aside"]
    assert checks["k_anonymity"]["actual"] == figures["k_achieved"]
    assert checks["k_anonymity"]["classes"] == figures["classes"]
    assert checks["k_anonymity"]["classes_below_k"] == sum(s < k for s in figures["class_sizes"])
    for column, emds in figures["emds"].items():
        if t is not None:  # a t_closeness check only with a t
            check = checks[f"t_closeness:{column}"]
            assert _close(check["actual"], figures["t_achieved"][column])
            assert check["classes_above_t"] == sum(e > t + TOLERANCE for e in emds)
        assert checks[f"confidential_multiset:{column}"]["actual"] == "identical"
    linkable = figures["linkable_rows"]
    assert report["verification"]["linkable_rows"] == checks["linkage"]["linkable_rows"] == linkable
    assert report["verification"]["linkage_columns"] == figures["linkage_columns"]
    linking = figures["linkage_columns"] if linkable else []
    assert report["verification"]["linking_columns"] == linking
    verified = (
        figures["k_achieved"] >= k
        and (t is None or all(v <= t + TOLERANCE for v in figures["t_achieved"].values()))
        and not linkable
    )
    assert report["verification"]["passed"] == verified
    assert report["run"]["published"] == verified


def check_verify_output(figures: dict, out: str) -> None:
    """``tclose verify`` prints what the oracle computed."""
    assert f"{figures['rows_out']} rows, {figures['classes']} classes" in out
    got = re.search(r"k_anonymity: expected >= \d+, got (\d+)", out)
    assert got and int(got.group(1)) == figures["k_achieved"], out
    for column, value in figures["t_achieved"].items():
        got = re.search(rf"t_closeness:{column}: expected <= \S+, got (\S+)", out)
        if got is None:  # t measured, not enforced: four decimals
            got = re.search(rf"info  t of {column} \(measured, not enforced by \S+\): (\S+)", out)
        assert got and math.isclose(float(got.group(1)), value, rel_tol=1e-5, abs_tol=5e-5), out


# --- generated releases on SQLite --------------------------------------------------------------


@st.composite
def releases(draw) -> tuple[pd.DataFrame, dict]:
    """A small source table (ties, NULLs, dates, ordinal and nominal columns) and a config."""
    n = draw(st.integers(3, 18))
    rows = range(n)
    small = st.integers(0, 3)
    frame = pd.DataFrame(
        {
            "id": list(rows),
            "x": [draw(st.sampled_from([0.5, 1.0, 2.25, -3.0, 1e6])) for _ in rows],
            "r": [draw(st.integers(-5, 9)) for _ in rows],
            "o": [draw(st.sampled_from([*ORDINAL, None])) for _ in rows],
            "s": [draw(st.sampled_from(["b", "a", "c", None])) for _ in rows],
            "dte": [pd.Timestamp("2020-02-27") + pd.Timedelta(days=draw(small) * 3) for _ in rows],
            "c1": [draw(st.one_of(small, st.just(None))) for _ in rows],
            "c2": [draw(st.sampled_from(["x1", "x2", "y1", "y2", None])) for _ in rows],
            "c3": [draw(st.sampled_from(ORDINAL)) for _ in rows],
            "h": [draw(st.sampled_from(["x1", "x2", "y1", "y2"])) for _ in rows],
            "cd": [pd.Timestamp("1999-12-31") + pd.Timedelta(days=draw(small)) for _ in rows],
            "p": [draw(st.sampled_from(["u", "v", None])) for _ in rows],
            "code": [f"k{i}" for i in rows],
        }
    )
    policy = st.sampled_from(["category", "exclude-rows", "category", "exclude-rows", "error"])
    attributes: dict = {
        "x": {"type": "numeric", "weight": draw(st.sampled_from([1, 2.5]))},
        "r": {"type": "numeric", "round": True},
        "h": {"type": "nominal", "hierarchy": HIERARCHY},
        "o": {"type": "ordinal", "categories": ORDINAL, "missing": draw(policy)},
        "s": {"type": "nominal", "missing": draw(policy)},
        "dte": {"type": "date"},
    }
    quasi = draw(st.lists(st.sampled_from(sorted(attributes)), min_size=1, unique=True))
    attributes = {c: {"role": "quasi_identifier", **attributes[c]} for c in quasi}
    confidential = {
        "c1": {"type": "numeric", "missing": "exclude-rows"},
        "c2": {"type": "nominal", "missing": draw(st.sampled_from(["category", "exclude-rows"]))},
        "c3": {"type": "ordinal", "categories": ORDINAL},
        "cd": {"type": "date"},
    }
    if draw(st.booleans()):
        confidential["c2"]["hierarchy"] = HIERARCHY
    for column in draw(st.lists(st.sampled_from(sorted(confidential)), min_size=1, unique=True)):
        attributes[column] = {"role": "confidential", **confidential[column]}
    attributes["p"] = {"role": "other", "allow_unique": draw(st.booleans())}
    attributes["code"] = {"role": "other", "allow_unique": True}
    algorithm = draw(st.sampled_from(["t-first", "merge", "k-first", "mdav"]))
    excluded = [c for c, spec in attributes.items() if spec.get("missing") == "exclude-rows"]
    kept = n - int(frame[excluded].map(_key).eq(MISSING).any(axis=1).sum()) if excluded else n
    k = draw(st.sampled_from([1, 2, 3, max(kept, 1), n]))  # k = n: all kept rows, or too many
    privacy: dict = {"k": k}
    if algorithm != "mdav":
        privacy["t"] = draw(st.sampled_from([1.0, 0.5, 0.3]))
    frame = frame[["id", *[c for c in frame if c in attributes]]]
    document = {
        "source": {"table": "src", "key": "id"},
        "target": {"table": "anon"},
        "attributes": attributes,
        "privacy": privacy,
        "algorithm": {"name": algorithm},
    }
    return frame, document


def _run(engine: sa.Engine, url: str, folder: Path, frame: pd.DataFrame, document: dict):
    """Create the source, run tclose, and return (exit code, config path, report or None)."""
    _create(engine, document["source"]["table"], frame)
    document["source"]["url"] = url
    report = folder / "report.json"
    document["report"] = {"json": str(report)}
    config = folder / "run.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    code, _ = _cli("run", str(config))
    return code, str(config), (json.loads(report.read_text()) if report.exists() else None)


def _expected_failure(frame: pd.DataFrame, document: dict) -> int | None:
    """The exit code a bad input must give (NULLs under ``missing: error``; n < k), or None."""
    attributes = document["attributes"]
    excluded = [c for c, s in attributes.items() if s.get("missing") == "exclude-rows"]
    kept = frame[~frame[excluded].map(_key).eq(MISSING).any(axis=1)] if excluded else frame
    for column, spec in attributes.items():  # a row set aside holds no NULL to refuse
        refused = spec.get("missing", "error") == "error" and spec["role"] != "other"
        if refused and kept[column].map(_key).eq(MISSING).any():
            return 3
    return 3 if len(kept) < document["privacy"]["k"] else None


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(releases())
def test_the_report_and_verify_state_what_the_tables_hold(tmp_path_factory, case):
    frame, document = case
    folder = tmp_path_factory.mktemp("oracle")
    url = f"sqlite:///{folder / 'o.db'}"
    engine = sa.create_engine(url, poolclass=NullPool)
    code, config, report = _run(engine, url, folder, frame, document)
    failure = _expected_failure(frame, document)
    if failure is not None:
        event("refused input")
        assert code == failure
        assert "anon" not in sa.inspect(engine).get_table_names()
        return
    source, published = _read(engine, "src"), _read(engine, "anon") if code == 0 else None
    assert report is not None
    if code != 0:  # only an unverified release may be refused, and then nothing is published
        event("not verified")
        assert code == 1 and not report["verification"]["passed"]
        excluded = [
            c for c, s in document["attributes"].items() if s.get("missing") == "exclude-rows"
        ]
        kept = source[~source[excluded].map(_key).eq(MISSING).any(axis=1)] if excluded else source
        # pass-through values are the source's
        columns, linkable = _linkage(kept, document["attributes"])
        assert linkable and report["verification"]["linkable_rows"] == linkable
        assert report["verification"]["linking_columns"] == columns
        assert "anon" not in sa.inspect(engine).get_table_names()
        return
    event("published")
    figures = oracle(source, published, document)
    check_report(figures, report, document)
    code, out = _cli("verify", config, "--report", str(folder / "report.json"), "--source")
    assert code == 0, out
    check_verify_output(figures, out)
    engine.dispose()


# --- fixed releases on every server -------------------------------------------------------------


def _fixed() -> tuple[pd.DataFrame, dict]:
    """30 rows with ties, NULLs (category and exclude-rows), dates, a rounded integer QI,
    ordinal and nominal QIs and three confidential attributes (one hierarchical)."""
    n = 30
    rows = range(n)
    frame = pd.DataFrame(
        {
            "id": list(rows),
            "x": [float((i * 7) % 11) / 2 for i in rows],
            "r": [(i * 5) % 9 - 3 for i in rows],
            "o": [None if i % 9 == 4 else ORDINAL[(i * 2) % 3] for i in rows],
            "s": [None if i == 17 else "abc"[i % 3] for i in rows],
            "dte": [pd.Timestamp("2021-12-30") + pd.Timedelta(days=(i * 13) % 17) for i in rows],
            "c1": [None if i == 5 else (i * 3) % 7 for i in rows],
            "c2": [None if i % 10 == 3 else ["x1", "x2", "y1", "y2"][(i * 3) % 4] for i in rows],
            "c3": [ORDINAL[(i * 5) % 3] for i in rows],
            "p": [None if i % 4 else f"p{i % 3}" for i in rows],
            "code": [f"k{i}" for i in rows],
        }
    )
    attributes = {
        "x": {"role": "quasi_identifier", "type": "numeric"},
        "r": {"role": "quasi_identifier", "type": "numeric", "round": True},
        "o": {
            "role": "quasi_identifier",
            "type": "ordinal",
            "categories": ORDINAL,
            "missing": "category",
        },
        "s": {"role": "quasi_identifier", "type": "nominal", "missing": "exclude-rows"},
        "dte": {"role": "quasi_identifier", "type": "date"},
        "c1": {"role": "confidential", "type": "numeric", "missing": "exclude-rows"},
        "c2": {
            "role": "confidential",
            "type": "nominal",
            "hierarchy": HIERARCHY,
            "missing": "category",
        },
        "c3": {"role": "confidential", "type": "ordinal", "categories": ORDINAL},
        "p": {"role": "other"},
        "code": {"role": "other", "allow_unique": True},
    }
    document = {
        "source": {"table": "src", "key": "id"},
        "target": {"table": "anon"},
        "attributes": attributes,
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first"},
    }
    return frame, document


def _publish_fixed(database) -> tuple[dict, str, Path, pd.DataFrame, pd.DataFrame]:
    """Run the fixed release on ``database`` (a ``TestDatabase``); the figures, the config's
    and the report's paths, the source and the published table as read back."""
    frame, document = _fixed()
    source, target = database.name("src"), database.name("anon")
    document["source"]["table"], document["target"]["table"] = source, target
    code, config, report = _run(database.engine, database.url, database.tmp_path, frame, document)
    assert code == 0
    source_rows, published = _read(database.engine, source), _read(database.engine, target)
    figures = oracle(source_rows, published, document)
    check_report(figures, report, document)
    return figures, config, database.tmp_path / "report.json", source_rows, published


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("lite"),
        pytest.param("pg", marks=pytest.mark.postgres),
        pytest.param("maria", marks=pytest.mark.mysql),
    ],
)
def test_a_fixed_release_on_each_server_is_reported_as_it_is(request, kind):
    database = request.getfixturevalue(kind)
    figures, config, report, _, _ = _publish_fixed(database)
    assert figures["rows_set_aside"] == 2 and figures["classes"] > 1  # the case is not trivial
    code, out = _cli("verify", config, "--report", str(report), "--source")
    assert code == 0, out
    check_verify_output(figures, out)


# --- tampers that keep k and t: what verify claims ----------------------------------------------


def _swap_pass_through(database, target: str, published: pd.DataFrame) -> None:
    """Two rows trade their ``code`` (a pass-through value no longer its source row's)."""
    quoted = database.quote(target)
    first, second = sorted(published["tclose_row"])[:2]
    a = published.loc[published["tclose_row"] == first, "code"].item()
    b = published.loc[published["tclose_row"] == second, "code"].item()
    for row, value in ((first, "swap"), (second, a), (first, b)):
        database.execute(
            f"UPDATE {quoted} SET code = :v WHERE tclose_row = :r", {"v": value, "r": row}
        )


def _shift_a_class(database, target: str, published: pd.DataFrame) -> None:
    """Every row of one class gets ``x + 1000``: the class (so k and t) is unchanged, its ``x``
    is no longer the mean of its source rows."""
    quoted = database.quote(target)
    row = published.iloc[0]
    x, r = float(row["x"]), int(row["r"])
    database.execute(f"UPDATE {quoted} SET x = x + 1000 WHERE x = :x AND r = :r", {"x": x, "r": r})


def _move_a_confidential_value(database, target: str, published: pd.DataFrame) -> None:
    """Two rows of one class trade their ``c1`` (both differ): each class's distribution, so
    k, t and the multiset, is kept; a confidential value is no longer its source row's."""
    quoted = database.quote(target)
    keys = published[["x", "r", "o", "s", "dte"]].map(_key).apply(tuple, axis=1)
    for _, rows in published.groupby(keys):
        if rows["c1"].nunique() > 1:
            first = rows.iloc[0]
            second = rows[rows["c1"] != first["c1"]].iloc[0]
            break
    update = f"UPDATE {quoted} SET c1 = :v WHERE tclose_row = :r"
    database.execute(update, {"v": int(second["c1"]), "r": int(first["tclose_row"])})
    database.execute(update, {"v": int(first["c1"]), "r": int(second["tclose_row"])})


def _record_again(database, target: str) -> None:
    """Rewrite the registry's identity of ``target`` to the table's own now."""
    from tclose.connectors.releases import releases_table
    from tclose.connectors.sqlite import SQLiteDatabase
    from tclose.naming import TableName

    connector = SQLiteDatabase(database.url)
    with connector.engine.begin() as connection:
        home, identity = connector.release_of(connection, TableName(None, target))
        table = releases_table(home.schema)
        connection.execute(
            table.update().where(table.c.name == home.name).values(identity=identity)
        )
    connector.engine.dispose()


@pytest.mark.parametrize("tamper", [_swap_pass_through, _shift_a_class, _move_a_confidential_value])
def test_verify_with_source_says_what_it_did_not_compare(lite, tamper):
    """A tamper keeping k, t, the row count and the confidential multisets: ``--source`` alone
    cannot see it and must say so (it printed ``verified`` with no note); ``--report`` fails."""
    figures, config, report, source, published = _publish_fixed(lite)
    target = lite.name("anon")
    tamper(lite, target, published)
    with pytest.raises(AssertionError):  # the oracle sees the tamper
        oracle(source, _read(lite.engine, target), _fixed()[1])
    code, out = _cli("verify", config, "--source")
    assert code == 1 and "FAIL  release" in out, out  # the registry's record disagrees
    _record_again(lite, target)  # a tamperer who may write the registry too
    code, out = _cli("verify", config, "--source")
    assert code == 0 and "verdict: verified" in out, out  # k, t, counts, multisets all hold
    assert re.search(
        r"note  without --report, a changed quasi-identifier or pass-through value", out
    )
    assert "CANNOT be detected" in out
    code, out = _cli("verify", config, "--report", str(report), "--source")
    assert code == 1 and "FAIL  content_digest" in out, out
    code, out = _cli("verify", config)
    assert code == 0 and "without --report or --source" in out, out


def test_verify_with_source_fails_a_duplicated_row_with_a_new_key(lite):
    """A copy of a row under a new ``tclose_row`` and ``code`` keeps k (its class grows); the
    row count and the confidential multisets of ``--source`` fail."""
    figures, config, report, source, published = _publish_fixed(lite)
    quoted = lite.quote(lite.name("anon"))
    columns = [c for c in published if c not in ("tclose_row", "code")]
    listed = ", ".join(lite.quote(c) for c in columns)
    lite.execute(
        f"INSERT INTO {quoted} (tclose_row, code, {listed}) SELECT 1000, 'copy', {listed} "
        f"FROM {quoted} WHERE tclose_row = 1"
    )
    code, out = _cli("verify", config, "--source")
    assert code == 1, out
    assert f"FAIL  row_count: expected {figures['rows_out']}, got {figures['rows_out'] + 1}" in out
    assert "FAIL  confidential_multiset:c3" in out


@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_every_row_set_aside_with_a_hierarchy_is_a_data_error(lite, role):
    """Every row has a NULL in an ``exclude-rows`` column and a hierarchical nominal attribute is
    declared: exit 3 (fewer rows than k), nothing published, never an internal error encoding the
    hierarchy of no category."""
    frame = pd.DataFrame(
        {"id": [0, 1], "x": [1.0, 2.0], "c1": [None, None], "h": ["x1", "y1"], "code": ["a", "b"]}
    )
    document = {
        "source": {"table": lite.name("src"), "key": "id"},
        "target": {"table": lite.name("anon")},
        "attributes": {
            "x": {"role": "quasi_identifier"},
            "h": {"role": role, "type": "nominal", "hierarchy": HIERARCHY},
            "c1": {"role": "confidential", "missing": "exclude-rows"},
            "code": {"role": "other", "allow_unique": True},
        },
        "privacy": {"k": 1, "t": 1.0},
        "algorithm": {"name": "t-first"},
    }
    code, _, report = _run(lite.engine, lite.url, lite.tmp_path, frame, document)
    assert code == 3 and report is None
    assert lite.name("anon") not in sa.inspect(lite.engine).get_table_names()


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("lite"),
        pytest.param("pg", marks=pytest.mark.postgres),
        pytest.param("maria", marks=pytest.mark.mysql),
    ],
)
def test_a_datetime_qi_is_its_class_mean_to_the_nearest_microsecond(request, kind):
    """The mean instant of a class, exact to the nanosecond, is written to the nearest microsecond
    (the databases' resolution), not truncated: a mean of 1.000000667 s is written 1.000001 s, on
    every database."""
    database = request.getfixturevalue(kind)
    source, target = database.name("src"), database.name("anon")
    base = pd.Timestamp("1969-12-31 23:59:58")  # before 1970 too: floor, not toward zero
    offsets = [(0, 0), (0, 0), (0, 1), (1, 0), (1, 1), (1, 1), (2, 0), (2, 1), (2, 1)]
    stamps = [base + pd.Timedelta(seconds=s, microseconds=u) for s, u in offsets]
    kind_type = sa.dialects.mysql.DATETIME(fsp=6) if kind == "maria" else sa.DateTime
    database.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("ts", kind_type),
            sa.Column("c", sa.Integer),
            sa.Column("code", sa.String(10)),
        ],
        [
            {"id": i, "ts": stamp.to_pydatetime(), "c": i % 2, "code": f"k{i}"}
            for i, stamp in enumerate(stamps)
        ],
    )
    document = {
        "source": {"url": database.url, "table": source, "key": "id"},
        "target": {"table": target},
        "attributes": {
            "ts": {"role": "quasi_identifier", "type": "datetime"},
            "c": {"role": "confidential"},
            "code": {"role": "other", "allow_unique": True},
        },
        "privacy": {"k": 3},
        "algorithm": {"name": "mdav"},
    }
    code, _ = _cli("run", str(database.write_config(document)))
    assert code == 0
    rows = database.execute(f"SELECT code, ts FROM {database.quote(target)}")
    published = {code: pd.Timestamp(str(ts)) for code, ts in rows}
    original = {f"k{i}": stamp for i, stamp in enumerate(stamps)}
    classes: dict = {}
    for code, stamp in published.items():
        classes.setdefault(stamp, []).append(code)
    assert len(classes) == 3  # the three seconds, three rows each
    for stamp, codes in classes.items():
        mean = Fraction(sum(original[c].value for c in codes), len(codes))  # nanoseconds
        nearest = math.floor(mean / 1000 + Fraction(1, 2)) * 1000
        assert stamp.value == nearest, (stamp, codes)


@pytest.mark.parametrize(
    "kind", [pytest.param("lite"), pytest.param("pg", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("column", ["id", "added"])
def test_a_column_added_after_the_run_that_links_rows_fails_linkage(request, kind, column):
    """The source key (or any column) put back into the published table, unique per row:
    ``tclose verify`` said ``PASS linkage ... got none`` and ``verified``, as it checked the
    configured pass-through columns only. It is judged with them: a column holding one value
    still verifies."""
    database = request.getfixturevalue(kind)
    _, config, _, _, _ = _publish_fixed(database)
    quoted = database.quote(database.name("anon"))
    database.execute(f"ALTER TABLE {quoted} ADD COLUMN {database.quote(column)} INTEGER")
    database.execute(f"UPDATE {quoted} SET {database.quote(column)} = 1")
    code, out = _cli("verify", config)
    # one value singles out nothing more; the added column changed the release
    assert code == 1 and "PASS  linkage" in out and "FAIL  release" in out, out
    database.execute(f"UPDATE {quoted} SET {database.quote(column)} = tclose_row * 7")
    code, out = _cli("verify", config)
    assert code == 1, out
    expected = "FAIL  linkage: expected no row unique on its pass-through columns taken together"
    assert expected in out and "row(s) unique on (" in out and f"{column})" in out, out
