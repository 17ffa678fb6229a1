"""The report's risk and utility measures against brute-force references written from
docs/reports.md and docs/attributes.md alone.

The references below take the two DataFrames and the attribute specs and reuse nothing of
tclose: no encoding, no embedding, no standardization helper. Sums, means and standard
deviations are computed in :class:`decimal.Decimal` with 60 digits (no overflow near ``1e308``,
no cancellation), loops run over rows and pairs of rows as the formulas are written. They are
compared with :func:`tclose.measures.evaluate` on small generated tables (ties, duplicated rows,
constant columns, NULL categories, huge and tiny magnitudes, ``-0.0``, mixed QI types).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose
from tclose.measures import evaluate

TIE = Decimal("1e-9")
MEAN_NOISE = Decimal(
    "1e-12"
)  # a mean within 1e-12 of the largest magnitude is 0  # docs/reports.md: distances within 1e-9 of the minimum tie
MISSING = object()  # a NULL of an ordinal or nominal QI (missing: category)


# --- the references ------------------------------------------------------------------------------


def _dec(value: Any) -> Decimal:
    return Decimal(int(value)) if isinstance(value, (int, np.integer)) else Decimal(float(value))


def _mean(values: Sequence[Decimal]) -> Decimal:
    return sum(values, Decimal(0)) / len(values)


def _sd(values: Sequence[Decimal], ddof: int) -> Decimal:
    """The standard deviation; exactly 0 for a constant column (the mathematical one)."""
    if len(values) - ddof <= 0 or all(v == values[0] for v in values):
        return Decimal(0)
    m = _mean(values)
    return (sum(((v - m) ** 2 for v in values), Decimal(0)) / (len(values) - ddof)).sqrt()


def _number(spec: Mapping[str, Any], value: Any) -> Decimal:
    """A numeric QI as a number, a date as its nanoseconds."""
    if spec["type"] == "numeric":
        return _dec(value)
    return Decimal(pd.Timestamp(value).value)


def _category(value: Any) -> Any:
    return MISSING if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _ordinal_categories(spec: Mapping[str, Any], column: Sequence[Any]) -> list[Any]:
    """The declared categories, ``(missing)`` last when the source column holds a NULL."""
    return list(spec["categories"]) + ([MISSING] if MISSING in map(_category, column) else [])


def reference_measures(
    original: pd.DataFrame,
    published: pd.DataFrame,
    qis: Mapping[str, Mapping[str, Any]],
    confidential: Mapping[str, str],
    p: float = 0.05,
) -> dict[str, Any]:
    """Every figure of the report's risk and utility sections, by its documented definition."""
    with localcontext() as context:
        context.prec = 60
        return _reference(original, published, qis, confidential, Decimal(p))


def _reference(original, published, qis, confidential, p) -> dict[str, Any]:
    n = len(original)
    rows = list(original.index)
    src = {c: [original.at[r, c] for r in rows] for c in original.columns}
    pub = {c: [published.at[r, c] for r in rows] for c in original.columns}
    continuous = [c for c, s in qis.items() if s["type"] in ("numeric", "date", "datetime")]
    numbers = {c: [_number(qis[c], v) for v in src[c]] for c in continuous}
    numbers_pub = {c: [_number(qis[c], v) for v in pub[c]] for c in continuous}
    ordinal = {c: _ordinal_categories(s, src[c]) for c, s in qis.items() if s["type"] == "ordinal"}

    def distance(i: int, j: int) -> Decimal:
        """Mixed distance of source row i and published row j (docs/attributes.md)."""
        total = Decimal(0)
        for c, spec in qis.items():
            w = _dec(spec.get("weight", 1))
            if c in numbers:
                sigma = _sd(numbers[c], 0) or Decimal(1)
                total += w * ((numbers[c][i] - numbers_pub[c][j]) / sigma) ** 2
            elif spec["type"] == "ordinal":
                a, b = (
                    ordinal[c].index(_category(src[c][i])),
                    ordinal[c].index(_category(pub[c][j])),
                )
                total += w * (Decimal(a - b) / max(len(ordinal[c]) - 1, 1)) ** 2
            elif "hierarchy" in spec:  # (H - depth(LCA)) / H, H = 2 (test hierarchy TREE)
                a, b = src[c][i], pub[c][j]
                depth = 2 if a == b else 1 if PARENT[a] == PARENT[b] else 0
                total += w * Decimal(2 - depth) / 2
            else:
                total += w * (_category(src[c][i]) != _category(pub[c][j]))
        return total.sqrt()

    linkage = Decimal(0)
    for i in range(n):
        d = [distance(i, j) for j in range(n)]
        nearest = [j for j in range(n) if d[j] <= min(d) + TIE]
        linkage += Decimal(int(i in nearest)) / len(nearest)

    interval = il1s = None
    if continuous:
        sample_sd = {c: _sd(numbers[c], 1) for c in continuous}
        inside, loss = 0, Decimal(0)
        for i in range(n):
            ok = True
            for c in continuous:
                x, y = numbers[c][i], numbers_pub[c][i]
                # the rounding allowance: of a number; of an instant after the column's earliest
                origin = min(numbers[c]) if qis[c]["type"] != "numeric" else 0
                ok &= abs(x - y) <= p * sample_sd[c] + Decimal("1e-12") * abs(x - origin)
                loss += abs(x - y) / (Decimal(2).sqrt() * (sample_sd[c] or 1))
            inside += ok
        interval, il1s = inside / n, loss / (n * len(continuous))

    def key(row: int) -> tuple:
        return tuple(
            _category(pub[c][row]) if c not in numbers else numbers_pub[c][row] for c in qis
        )

    class_of = [key(i) for i in range(n)]
    members: dict[tuple, list[int]] = {}
    for i, k in enumerate(class_of):
        members.setdefault(k, []).append(i)
    sizes = [len(m) for m in members.values()]

    attribute: dict[str, dict[str, Any]] = {}
    for c in confidential:
        table = Counter(pub[c])
        distinct, entropy, beta = [], [], Decimal(0)
        for group in members.values():
            counts = Counter(pub[c][i] for i in group)
            distinct.append(len(counts))
            q = [Decimal(v) / len(group) for v in counts.values()]
            entropy.append(math.exp(-sum(x * x.ln() for x in q)))
            for value, count in counts.items():
                share, overall = Decimal(count) / len(group), Decimal(table[value]) / n
                if share > overall:
                    beta = max(beta, (share - overall) / overall)
        attribute[c] = {"distinct_l": min(distinct), "entropy_l": min(entropy), "beta": beta}
    if attribute:
        attribute["overall"] = {
            "distinct_l": min(a["distinct_l"] for a in attribute.values()),
            "entropy_l": min(a["entropy_l"] for a in attribute.values()),
            "beta": max(a["beta"] for a in attribute.values()),
        }

    def pearson(x: Sequence[Decimal], y: Sequence[Decimal]) -> Decimal:
        if _sd(x, 0) == 0 or _sd(y, 0) == 0:
            return Decimal(0)  # a constant column correlates 0
        mx, my = _mean(x), _mean(y)
        num = sum(((a - mx) * (b - my) for a, b in zip(x, y)), Decimal(0))
        den = (sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y)).sqrt()
        return num / den

    numeric = [c for c, s in qis.items() if s["type"] == "numeric"]
    numeric += [c for c, kind in confidential.items() if kind == "numeric"]
    before = {c: [_dec(v) for v in src[c]] for c in numeric}
    after = {c: [_dec(v) for v in pub[c]] for c in numeric}
    correlation = None
    if len(numeric) >= 2:
        correlation = max(
            abs(pearson(before[a], before[b]) - pearson(after[a], after[b]))
            for a in numeric
            for b in numeric
            if a != b
        )

    moments = {}
    for c in (c for c, s in qis.items() if s["type"] == "numeric"):
        mean, mean_after = _mean(numbers[c]), _mean(numbers_pub[c])
        top = max(abs(v) for v in numbers[c])
        var, var_after = _sd(numbers[c], 0) ** 2, _sd(numbers_pub[c], 0) ** 2
        moments[c] = {
            "mean": (mean_after - mean) / abs(mean) if abs(mean) > MEAN_NOISE * top else None,
            "variance": (var_after - var) / var if var != 0 else None,
        }

    variation = {}
    for c in (c for c, s in qis.items() if s["type"] in ("ordinal", "nominal")):
        f, g = Counter(map(_category, src[c])), Counter(map(_category, pub[c]))
        variation[c] = sum(Decimal(abs(f[v] - g[v])) for v in set(f) | set(g)) / (2 * n)

    smallest = min(sizes)
    return {
        "risk": {
            "record_linkage": linkage / n,
            "interval_disclosure": interval,
            "attribute": attribute,
            "reidentification": {
                "max": Decimal(1) / smallest,
                "mean": Decimal(len(sizes)) / n,
                "records_at_max": Decimal(sum(s for s in sizes if s == smallest)) / n,
            },
            "classes": len(sizes),
        },
        "utility": {
            "il1s": il1s,
            "correlation_max_diff": correlation,
            "moments": moments,
            "categorical_total_variation": variation,
        },
    }


def assert_same(actual: Any, expected: Any, path: str = "", rel: float = 1e-9) -> None:
    """``actual`` (the report) equals ``expected`` (the reference) figure by figure; None only
    where the reference is None."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert key in actual, f"{path}.{key} missing"
            assert_same(actual[key], value, f"{path}.{key}", rel)
        return
    if expected is None or isinstance(expected, (str, bool)):
        assert actual == expected, f"{path}: {actual!r}, expected {expected!r}"
        return
    assert actual is not None, f"{path}: null, expected {float(expected)!r}"
    assert float(actual) == pytest.approx(float(expected), rel=rel, abs=1e-12), path


# --- generated releases ----------------------------------------------------------------------------

ORDINAL = ["lo", "mid", "hi"]
#: A hierarchy of height 2 over the same values: lo and mid meet at depth 1, hi at the root.
TREE = {"any": {"low": ["lo", "mid"], "high": ["hi"]}}
PARENT = {"lo": "low", "mid": "low", "hi": "high"}
SCALES = [1.0, 1e-300, 1e300, 1e-12, 1e12]


@st.composite
def releases(draw) -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """A small source table, its QI specs, and a microaggregated release of it: rows grouped in
    clusters, numeric QIs published as the cluster mean, dates as the mean day, ordinal QIs as
    the lower median, nominal QIs as the most frequent value (ties: first in category order) —
    or, sometimes, each published value drawn freely (any release ``evaluate`` accepts)."""
    n = draw(st.integers(1, 9))
    scale = draw(st.sampled_from(SCALES))
    pool = draw(
        st.sampled_from(
            [[0.0, -0.0, 1.0, 2.0], [0.1], [0.1, 0.2, 0.7], [-3.0, 5.0, 5.0, 1.5], [7.0]]
        )
    )
    frame = pd.DataFrame(index=pd.RangeIndex(n))
    qis: dict[str, dict[str, Any]] = {}
    kinds = draw(
        st.lists(
            st.sampled_from(["numeric", "ordinal", "nominal", "date", "datetime", "tree"]),
            min_size=1,
        )
    )
    for position, kind in enumerate(kinds[:4]):
        name = f"q{position}"
        if kind == "numeric":
            values = draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n))
            frame[name] = np.array(values) * scale
            qis[name] = {"type": "numeric", "weight": draw(st.sampled_from([1, 0.5, 3]))}
        elif kind == "date":
            days = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
            frame[name] = pd.Timestamp("2020-02-27") + pd.to_timedelta(days, unit="D")
            qis[name] = {"type": "date"}
        elif kind == "datetime":  # instants a nanosecond, an hour and 3 years apart
            hour = 3600 * 10**9
            offsets = draw(st.lists(st.sampled_from([0, 1, hour, 10**17]), min_size=n, max_size=n))
            frame[name] = pd.Timestamp("1999-12-31 23:59:59") + pd.to_timedelta(offsets)
            qis[name] = {"type": "datetime", "weight": 0.5}
        elif kind == "tree":
            frame[name] = draw(st.lists(st.sampled_from(ORDINAL), min_size=n, max_size=n))
            qis[name] = {"type": "nominal", "hierarchy": TREE, "weight": 2}
        else:
            null = draw(st.booleans())
            choices = ORDINAL + ([None] if null else [])
            values = draw(st.lists(st.sampled_from(choices), min_size=n, max_size=n))
            if kind == "nominal" and not any(v is not None for v in values):
                values[0] = "lo"
            frame[name] = pd.Series(values, dtype=object)
            qis[name] = {"type": kind}
            if kind == "ordinal":
                qis[name]["categories"] = ORDINAL
            if null:
                qis[name]["missing"] = "category"
    frame["c_num"] = draw(st.lists(st.sampled_from([0.0, -0.0, 2.0, 5.0]), min_size=n, max_size=n))
    frame["c_nom"] = pd.Series(
        draw(st.lists(st.sampled_from(["x", "y", "z", None]), min_size=n, max_size=n)),
        dtype=object,
    )
    confidential = {"c_num": "numeric", "c_nom": "nominal"}

    labels = draw(
        st.one_of(
            st.just([0] * n),  # one cluster
            st.just(list(range(n))),  # every row its own cluster
            st.lists(st.integers(0, n - 1), min_size=n, max_size=n),
        )
    )
    published = frame.copy()
    free = draw(st.booleans())
    for name, spec in qis.items():
        if free:  # any value of the column, in any row
            published[name] = draw(st.permutations(list(frame[name]))) if n > 1 else frame[name]
            continue
        column = list(frame[name])
        for label in set(labels):
            group = [i for i in range(n) if labels[i] == label]
            published.loc[group, name] = _aggregate(spec, [column[i] for i in group])
    return frame, published, qis, confidential


def _aggregate(spec: Mapping[str, Any], values: list) -> Any:
    if spec["type"] == "numeric":  # the mean, within the members' range (no rounding out of it)
        return min(max(math.fsum(values) / len(values), min(values)), max(values))
    if spec["type"] == "date":
        nanoseconds = sum(v.value for v in values) / len(values)
        return pd.Timestamp(round(nanoseconds / 86_400e9) * 86_400 * 10**9)
    if spec["type"] == "datetime":  # the mean instant, exact to the nanosecond
        return pd.Timestamp(round(Fraction(sum(v.value for v in values), len(values))))
    order = list(ORDINAL) + [None]
    if spec["type"] == "ordinal":
        ranked = sorted(values, key=lambda v: order.index(v))
        return ranked[(len(ranked) - 1) // 2]
    counts = Counter(values)
    return max(sorted(counts, key=order.index), key=lambda v: counts[v])


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_every_measure_equals_its_documented_definition(release) -> None:
    frame, published, qis, confidential = release
    published = published.astype(frame.dtypes.to_dict())
    specs = {"c_num": "numeric", "c_nom": {"type": "nominal", "missing": "category"}}
    actual = evaluate(frame, published, dict(qis), specs)
    expected = reference_measures(frame, published, qis, confidential)
    assert_same(actual, expected)


def _release_from_labels(frame: pd.DataFrame, qis: Mapping, labels: np.ndarray) -> pd.DataFrame:
    """The release of ``frame`` whose clusters are ``labels``, aggregated by the reference."""
    published = frame.copy()
    for name, spec in qis.items():
        for label in np.unique(labels):
            group = list(np.flatnonzero(labels == label))
            published.loc[group, name] = _aggregate(spec, list(frame.loc[group, name]))
    return published.astype(frame.dtypes.to_dict())


def test_a_constant_column_changes_no_measure_of_a_run() -> None:
    """A QI holding 0.1 in every row: its computed mean is 0.10000000000000002 (three rows) or
    0.09999999999999999 (seven), its computed deviation 1.4e-17, not 0. The run published that
    noise, then measured it in those 1e-17 units: a record's distance to a cluster of another
    size grew by ~1 (record linkage), IL1s counted ~0.6 per value, the column's variance
    'fell by 100 %' and it 'correlated' with the others."""
    n = 10
    frame = pd.DataFrame(
        {"flat": [0.1] * n, "age": np.arange(n, dtype=float), "charge": [1.0, 3.0] * (n // 2)}
    )
    qis = {"flat": {"type": "numeric"}, "age": {"type": "numeric"}}
    result = tclose.anonymize(frame, list(qis), ["charge"], k=3, algorithm="mdav")
    assert set(result.data["flat"]) == {0.1}
    expected = reference_measures(
        frame, _release_from_labels(frame, qis, result.labels), qis, {"charge": "numeric"}
    )
    assert_same(result.report, expected)
    assert result.report["utility"]["moments"]["flat"] == {"mean": 0.0, "variance": None}


@pytest.mark.parametrize("scale", [1e-300, 1e-15, 1.0, 1e300])
def test_measures_do_not_depend_on_the_unit(scale: float) -> None:
    """Columns of tiny numbers: their squares underflowed, so a deviation of 0 made
    [0, 1e-300, ...] a constant column (IL1s in units of 1, every distance 0), and the absolute
    rounding allowance 1e-12 of interval disclosure counted every record of a column of
    1e-15s as disclosed."""
    frame = pd.DataFrame({"x": [0.0, 1.0, 2.0, 4.0, 8.0, 9.0], "y": [3.0, 1.0, 4.0, 1.0, 5.0, 9.0]})
    frame["x"] *= scale
    published = frame.copy()
    published["x"] = np.array([0.5, 0.5, 3.0, 3.0, 8.5, 8.5]) * scale
    qis = {"x": {"type": "numeric"}}
    figures = evaluate(frame, published, ["x"], ["y"])
    assert_same(figures, reference_measures(frame, published, qis, {"y": "numeric"}))
    unit = evaluate(frame / scale, published / scale, ["x"], ["y"])
    assert_same(figures, unit)


# --- a run in blocks, its report, and tclose verify --source on the rows read back -------------


def _mixed_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    level = rng.choice(np.array(["lo", "mid", "hi", None], dtype=object), n)
    return pd.DataFrame(
        {
            "pid": np.arange(100, 100 + n),
            "age": rng.integers(20, 30, n).astype(float),
            "flat": np.full(n, 0.1),
            "level": level,
            "sex": rng.choice(np.array(["f", "m", None], dtype=object), n),
            "admitted": [f"2024-03-{d:02d}" for d in rng.integers(1, 6, n)],
            "charge": rng.choice([10.0, 20.0, 35.0, 80.0], n),
            "ward": rng.choice(["a", "b", "c"], n),
        }
    )


def test_blocked_run_report_and_verify_source_equal_the_definitions(db, tmp_path) -> None:
    """One release, three computations, on every database: the run's report (the kernel in 2
    blocks), ``tclose verify --source`` on the table read back through SQL
    (``measure_published``, linked by the kept key) and the references on the source and the
    published rows joined by that key. Then the same release without the key."""
    import sqlalchemy as sa
    import yaml

    from tclose.app.cli import main
    from tclose.base.config import load_config
    from tclose.core.runner import verify_published
    from tclose.measures import UNLINKED

    source = _mixed_table(90, seed=3)
    source["admitted"] = pd.to_datetime(source["admitted"]).dt.date
    columns = [
        sa.Column("pid", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("age", sa.Double),
        sa.Column("flat", sa.Double),
        sa.Column("level", sa.String(8)),
        sa.Column("sex", sa.String(8)),
        sa.Column("admitted", sa.Date),
        sa.Column("charge", sa.Double),
        sa.Column("ward", sa.String(8)),
    ]
    records = [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
        for r in source.astype(object).where(source.notna(), None).to_dict("records")
    ]
    db.create(db.name("src"), columns, records)
    qis = {
        "age": {"type": "numeric"},
        "flat": {"type": "numeric", "weight": 0.5},
        "level": {"type": "ordinal", "categories": ["lo", "mid", "hi"], "missing": "category"},
        "sex": {"type": "nominal", "missing": "category"},
        "admitted": {"type": "date"},
    }
    confidential = {"charge": "numeric", "ward": "nominal"}
    document = {
        "source": {"url": db.url, "table": db.name("src"), "key": "pid"},
        "target": {"table": db.name("pub")},
        "attributes": {
            **{name: {"role": "quasi_identifier", **spec} for name, spec in qis.items()},
            "charge": {"role": "confidential", "type": "numeric"},
            "ward": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {"blocks": 2, "workers": 1}},
        "output": {"keep_key": True},
    }
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    report_path = tmp_path / "run.json"
    assert main(["run", str(config), "--report", str(report_path), "-q"]) == 0
    report = json.loads(report_path.read_text())
    assert report["algorithm"]["info"]["blocks"] == 2

    published = db.frame(db.name("pub")).set_index("pid").loc[source["pid"]].reset_index()
    expected = reference_measures(source, published, qis, confidential)
    assert_same(report, expected)

    measures = verify_published(load_config(config), against_source=True).measures
    assert measures["risk"]["linked"] is True
    assert_same(measures, expected)

    # The same release without the key: the figures that need no link are the same, the
    # others null with their reason.
    document["target"]["table"], document["output"]["keep_key"] = db.name("pub2"), False
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    assert main(["run", str(config), "-q"]) == 0
    unlinked = verify_published(load_config(config), against_source=True).measures
    assert unlinked["risk"]["linked"] is False
    for section, name in (
        ("risk", "record_linkage"),
        ("risk", "interval_disclosure"),
        ("utility", "il1s"),
    ):
        assert unlinked[section][name] is None
        assert unlinked[section]["not_computed"][name] == UNLINKED
        expected[section][name] = None
    assert_same(unlinked, expected)


# --- a figure that cannot be computed, and what the measures never show ------------------------


def test_a_measure_that_cannot_be_computed_is_null_with_its_reason() -> None:
    """Only categorical QIs and a constant numeric one: no interval disclosure or IL1s over a
    continuous QI... The JSON says null and why; the page draws no 0 % bar for a figure it does
    not have (it drew interval disclosure as a 0.00 % risk), and says why."""
    from tclose.app.html_report import render_html
    from tclose.measures import FEW_NUMERIC, NO_CONTINUOUS, ZERO_MOMENT

    n = 12
    frame = pd.DataFrame(
        {
            "sex": ["f", "m"] * (n // 2),
            "level": ["lo", "mid", "hi"] * (n // 3),
            "ward": ["a", "b", "c", "d"] * (n // 4),
        }
    )
    qis = {"sex": "nominal", "level": {"type": "ordinal", "categories": ["lo", "mid", "hi"]}}
    result = tclose.anonymize(frame, qis, {"ward": "nominal"}, k=3, t=0.5, algorithm="merge")
    risk, utility = result.report["risk"], result.report["utility"]
    assert risk["interval_disclosure"] is None and utility["il1s"] is None
    assert risk["not_computed"] == {"interval_disclosure": NO_CONTINUOUS}
    assert utility["not_computed"] == {"il1s": NO_CONTINUOUS, "correlation_max_diff": FEW_NUMERIC}
    page = render_html(result.report)
    assert page.count("not computed") == 1  # the bar
    assert page.count(f"Not computed: {NO_CONTINUOUS}.") == 2  # interval disclosure and IL1s
    assert f"Not computed: {FEW_NUMERIC}." in page
    assert "Interval disclosure (p = 0.05): 0.00 %" not in page

    flat = evaluate(pd.DataFrame({"x": [0.0] * 4}), pd.DataFrame({"x": [0.0] * 4}), ["x"])
    assert flat["utility"]["moments"] == {"x": {"mean": None, "variance": None}}
    assert flat["utility"]["not_computed"] == {
        "correlation_max_diff": FEW_NUMERIC,
        "moments.x.mean": ZERO_MOMENT.format("mean"),
        "moments.x.variance": ZERO_MOMENT.format("variance"),
    }
    assert flat["risk"]["not_computed"] == {}


def _leaves(node: Any, path: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}")
    elif isinstance(node, (list, tuple)):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{path}[{index}]")
    else:
        yield path, node


def test_the_measures_hold_no_data_value() -> None:
    """Every figure of ``risk`` and of the measures in ``utility`` is a share, a count, a
    relative change or a text of tclose: no source value (number or category) appears."""
    rng = np.random.default_rng(8)
    n = 60
    frame = pd.DataFrame(
        {
            "age": 600.0 + rng.permutation(n) * 7.31,
            "zone": rng.choice(["Zq-north-4471", "Zq-south-9902", None], n),
            "level": rng.choice(["Lv-alpha", "Lv-beta", "Lv-gamma"], n),
            "charge": rng.choice([7777.77, 8181.18, 9292.29], n),
            "diagnosis": rng.choice(["Dx-secret-1", "Dx-secret-2"], n),
        }
    )
    qis = {
        "age": "numeric",
        "zone": {"type": "nominal", "missing": "category"},
        "level": {"type": "ordinal", "categories": ["Lv-alpha", "Lv-beta", "Lv-gamma"]},
    }
    confidential = {"charge": "numeric", "diagnosis": "nominal"}
    result = tclose.anonymize(frame, qis, confidential, k=4, t=0.6, algorithm="t-first")
    measured = {"risk": result.report["risk"], "utility": result.report["utility"]}
    numbers = {float(v) for c in ("age", "charge") for v in frame[c]}
    texts = {v for c in ("zone", "level", "diagnosis") for v in frame[c].dropna()}
    leaves = list(_leaves(measured))
    assert len(leaves) > 30
    for path, value in leaves:
        if isinstance(value, str):
            assert not any(text in value for text in texts), path
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            assert float(value) not in numbers, path
    for path in (p for p, _ in leaves):
        assert not any(text in path for text in texts), path


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, "NaT"])
def test_published_values_that_are_not_numbers_are_not_measured(bad) -> None:
    """A release (from elsewhere, or a published table changed since the run) with a NULL or
    an infinity in a continuous QI: record linkage was 0 ("nobody re-identified": every
    distance NaN), IL1s and the correlation change NaN, and a NULL date an instant in 1677."""
    from tclose.measures import measure_lines

    frame = pd.DataFrame(
        {
            "age": [30.0, 31.0, 45.0, 46.0, 60.0, 61.0],
            "day": pd.to_datetime(["2024-01-01", "2024-01-02"] * 3),
            "charge": [1.0, 2.0, 1.0, 2.0, 1.0, 3.0],
        }
    )
    published = frame.copy()
    published["age"] = [30.5, 30.5, 45.5, 45.5, 60.5, 60.5]
    published["day"] = pd.Timestamp("2024-01-01")
    column = "day" if bad == "NaT" else "age"
    published[column] = published[column].astype(object)
    published.loc[[2, 3], column] = pd.NaT if bad == "NaT" else bad
    published[column] = published[column].astype(frame[column].dtype)
    figures = evaluate(frame, published, {"age": "numeric", "day": "date"}, ["charge"])
    risk, utility = figures["risk"], figures["utility"]
    reason = f"published values that are NULL or not a finite number, in {column!r} (2)"
    for section, name in (
        (risk, "record_linkage"),
        (risk, "interval_disclosure"),
        (utility, "il1s"),
        (utility, "correlation_max_diff"),
    ):
        assert section[name] is None, name
        assert section["not_computed"][name] == reason
    if column == "age":
        assert utility["moments"]["age"] == {"mean": None, "variance": None}
        assert utility["not_computed"]["moments.age.mean"] == reason
    assert risk["reidentification"]["max"] == 1 / 2 and risk["attribute"]["charge"]["distinct_l"]
    lines = "\n".join(measure_lines(figures))
    assert f"note  record linkage not computed: {reason}." in lines
    assert "nan" not in lines and "inf" not in lines


@pytest.mark.parametrize(("column", "value"), [("sex", "'zz'"), ("age", "NULL")])
def test_verify_source_of_a_changed_table_gives_its_verdict_and_says_why_a_measure_is_null(
    tmp_path, capsys, column, value
) -> None:
    """A published table changed after the run (a category the source does not have, a NULL number):
    ``tclose verify --source`` gives its checks and verdict, and the measures that need the value
    are '-' with a note naming the column and the count."""
    import sqlite3

    import yaml

    from tclose.app.cli import main

    db = tmp_path / "m.db"
    with sqlite3.connect(db) as connection:
        _mixed_table(60, seed=3).to_sql("src", connection, index=False)
    other = {"role": "other", "allow_unique": True}  # together they single out rows
    document = {
        "source": {"url": f"sqlite:///{db}", "table": "src", "key": "pid"},
        "target": {"table": "pub"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "sex": {"role": "quasi_identifier", "type": "nominal", "missing": "category"},
            "charge": {"role": "confidential", "type": "numeric"},
            **{name: other for name in ("flat", "level", "admitted", "ward")},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first"},
        "output": {"keep_key": True},
    }
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    assert main(["run", str(config), "-q"]) == 0
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE pub SET {column} = {value} WHERE pid IN (100, 101, 102)")
    capsys.readouterr()
    assert main(["verify", str(config), "--source"]) in (0, 1)
    out = capsys.readouterr().out
    assert "verdict:" in out and "record linkage -" in out
    kind = "not categories of the source" if column == "sex" else "NULL or not a finite number"
    assert f"note  record linkage not computed: published values that are {kind}" in out
    assert f"in {column!r} (3)." in out
    assert " nan" not in out.lower()


def test_instants_a_microsecond_apart_are_compared_exactly() -> None:
    """Record linkage, interval disclosure and IL1s of a datetime QI: as float64 nanoseconds
    since 1970 the instants were rounded to 256 ns (IL1s 26 % off here), and the rounding
    allowance ``1e-12·|x|`` was ~1.6 ms, so every record was "disclosed"."""
    start = pd.Timestamp("2021-06-01 08:00:00")
    frame = pd.DataFrame(
        {
            "at": [start + pd.Timedelta(microseconds=m) for m in (0, 1, 2, 3, 10, 11)],
            "charge": [1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
        }
    )
    published = frame.copy()
    published["at"] = [
        start + pd.Timedelta(nanoseconds=ns) for ns in (500,) * 2 + (2500,) * 2 + (10500,) * 2
    ]
    qis = {"at": {"type": "datetime"}}
    figures = evaluate(frame, published, qis, ["charge"], p=0.05)
    assert_same(figures, reference_measures(frame, published, qis, {"charge": "numeric"}))
    assert figures["risk"]["interval_disclosure"] == 0.0

    # Published as they are, instants a nanosecond apart: each record links to its own row
    # alone (as floats since 1970 they would be equal: every record tied with the other, 0.5).
    two = pd.DataFrame({"at": [start, start + pd.Timedelta(nanoseconds=1)], "charge": [1.0, 2.0]})
    same = evaluate(two, two, qis, ["charge"])
    assert same["risk"]["record_linkage"] == 1.0 and same["utility"]["il1s"] == 0.0


def test_a_report_whose_reasons_are_not_an_object_is_not_an_audit_report() -> None:
    """``tclose report`` reads ``not_computed`` to write the reasons on the page: a report that
    holds something else there is refused naming the field (else the page crashed, exit 4)."""
    from tclose.core.report_checks import report_problem

    frame = pd.DataFrame({"sex": ["f", "m"] * 4, "ward": ["a", "b", "c", "d"] * 2})
    report = tclose.anonymize(frame, {"sex": "nominal"}, {"ward": "nominal"}, k=2, t=0.9).report
    assert report_problem(json.loads(json.dumps(report))) is None
    for section in ("risk", "utility"):
        changed = json.loads(json.dumps(report))
        changed[section]["not_computed"] = ["il1s"]
        assert f"{section}.not_computed" in str(report_problem(changed))


@pytest.mark.parametrize("algorithm", ["t-first", "merge", "mdav"])
def test_variance_change_is_minus_the_attributes_sse(algorithm) -> None:
    """docs/reports.md: cluster means keep the mean and shrink the variance by the within-
    cluster part, so the relative variance change of a numeric QI is minus its share of the
    normalized SSE (two figures of the report computed by different code)."""
    rng = np.random.default_rng(2)
    n = 120
    frame = pd.DataFrame(
        {
            "a": rng.normal(5, 2, n),
            "b": rng.integers(0, 9, n).astype(float),
            "s": rng.choice(["f", "m"], n),
            "c": rng.choice([1.0, 2.0, 3.0], n),
        }
    )
    t = None if algorithm == "mdav" else 0.3
    qis = {"a": "numeric", "b": "numeric", "s": "nominal"}
    report = tclose.anonymize(frame, qis, ["c"], k=4, t=t, algorithm=algorithm).report
    for column in ("a", "b"):
        moments = report["utility"]["moments"][column]
        assert moments["mean"] == pytest.approx(0.0, abs=1e-12)
        share = report["utility"]["sse_per_attribute"][column]
        assert moments["variance"] == pytest.approx(-share, rel=1e-9)
