"""Property: over random configurations, no published quasi-identifier or pass-through
column maps one-to-one onto the source rows unless the configuration allows it, and the source
key is published only with ``output.keep_key``."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tclose
from tclose.app.cli import main
from tclose.errors import VerificationError


def _one_to_one(values: pd.Series) -> bool:
    """Whether the column's values single out every row (all distinct, at least two rows)."""
    return len(values) >= 2 and not values.duplicated().any()


def _singled_out(frame: pd.DataFrame, columns: list[str]) -> int:
    """The rows whose tuple of ``columns`` no other row holds (none without columns, or below
    two rows): the rows the linkage check counts (guide.md)."""
    if not columns or len(frame) < 2:
        return 0
    keys = frame[columns].apply(tuple, axis=1)
    return int((keys.map(keys.value_counts()) == 1).sum())


def _judged(other: dict) -> list[str]:
    return [c for c, spec in other.items() if not spec["allow_unique"]]


@st.composite
def releases(draw):
    n = draw(st.integers(8, 60))
    k = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "q1": rng.normal(size=n),
            "q2": rng.choice(["a", "b", "c"], n),
            "conf": rng.permutation(n),
        }
    )
    other = {}
    for i in range(draw(st.integers(0, 3))):
        cardinality = draw(st.sampled_from([1, 3, n]))  # n: unique per row
        name = f"o{i}"
        frame[name] = [f"v{j % cardinality}" for j in rng.permutation(n)]
        other[name] = {"allow_unique": draw(st.booleans())}
    algorithm = draw(st.sampled_from(["t-first", "merge", "k-first", "mdav"]))
    t = None if algorithm == "mdav" else draw(st.sampled_from([0.3, 0.6, 1.0]))
    return frame, other, min(k, n), t, algorithm


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_no_column_of_the_api_release_links_rows_unless_allowed(case):
    frame, other, k, t, algorithm = case
    linkable = _singled_out(frame, _judged(other))
    quasi = {"q1": "numeric", "q2": "nominal"}
    try:
        result = tclose.anonymize(
            frame, quasi, ["conf"], k=k, t=t, algorithm=algorithm, other=other
        )
    except VerificationError as error:
        assert linkable and "linkage" in str(error)
        (check,) = [c for c in error.checks if c["name"] == "linkage"]
        assert check["linkable_rows"] == linkable
        return
    assert not linkable
    assert _singled_out(result.data, _judged(other)) == 0
    for column in quasi:
        assert not _one_to_one(result.data[column])
    assert isinstance(result.data.index, pd.RangeIndex)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases(), st.booleans(), st.booleans())
def test_no_column_of_the_database_release_links_rows_unless_allowed(
    tmp_path_factory, case, declare_key, keep_key
):
    frame, other, k, t, algorithm = case
    folder = tmp_path_factory.mktemp("prop")
    db = folder / "p.db"
    with sqlite3.connect(db) as connection:
        extra = "".join(f", {c} TEXT" for c in other)
        connection.execute(
            f"CREATE TABLE src (id INTEGER PRIMARY KEY, q1 REAL, q2 TEXT, conf INTEGER{extra})"
        )
        rows = [
            (i + 1, *(v.item() if hasattr(v, "item") else v for v in r))
            for i, r in enumerate(frame.itertuples(index=False))
        ]
        connection.executemany(
            f"INSERT INTO src VALUES ({', '.join('?' * (len(other) + 4))})", rows
        )
    attributes = {
        "q1": {"role": "quasi_identifier"},
        "q2": {"role": "quasi_identifier", "type": "nominal"},
        "conf": {"role": "confidential"},
        **{
            c: {"role": "other", **({"allow_unique": True} if s["allow_unique"] else {})}
            for c, s in other.items()
        },
    }
    document = {
        "source": {
            "url": f"sqlite:///{db}",
            "table": "src",
            **({"key": "id"} if declare_key else {}),
        },
        "target": {"table": "out"},
        "attributes": attributes,
        "privacy": {"k": k, **({"t": t} if t is not None else {})},
        "algorithm": {"name": algorithm},
        "output": {"keep_key": keep_key},
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    code = main(["run", "-q", str(path)])
    if _singled_out(frame, _judged(other)):
        assert code == 1
        return
    assert code == 0
    with sqlite3.connect(db) as connection:
        out = pd.read_sql_query("SELECT * FROM out", connection)
    assert ("id" in out.columns) == keep_key
    assert _singled_out(out, _judged(other)) == 0
    for column in ("q1", "q2"):
        assert not _one_to_one(out[column])


def test_property_sanity():
    """The property's own check: a unique column is one-to-one, a repeated one is not."""
    assert _one_to_one(pd.Series(["a", "b", "c"]))
    assert not _one_to_one(pd.Series(["a", "b", "a"]))
    with pytest.raises(AssertionError):
        assert not _one_to_one(pd.Series([1, 2]))
