"""Adversarial: ``tclose.anonymize`` in the hands of a careless user or an attacker.

The release (``result.data``) carries nothing of the input's index, its rows are shuffled, its
values keep their meaning (a time zone, a date outside the nanosecond range) and its dtypes say
nothing the rows do not; ``result.labels`` follows the input rows by position; bad input is a
:class:`tclose.errors.TcloseError` naming the column, never a pandas or NumPy traceback and never
an index label (which may be a person's id); the input frame is never modified.
"""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.errors import ConfigError, DataError

N = 24


def frame(n: int = N) -> pd.DataFrame:
    """Two numeric QIs with repeats and a confidential column."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 70, n),
            "zip": rng.integers(1000, 1006, n),
            "charge": rng.integers(1, 5, n) * 100,
        }
    )


def _roles(role: str, column: str, spec: Any = None) -> dict[str, Any]:
    """``anonymize()``'s keyword arguments giving ``column`` the ``role`` (``quasi_identifier``
    beside ``age``, or ``confidential``) and the frame's other columns a role: ``spec`` is
    ``column``'s type or full spec, or ``None`` for the list form (numeric)."""
    if role == "quasi_identifier":
        named = ["age", column] if spec is None else {"age": "numeric", column: spec}
        return {"quasi_identifiers": named, "other": ["zip"]}
    return {"confidential": [column] if spec is None else {column: spec}, "identifiers": ["charge"]}


def anonymize(df: pd.DataFrame, **kwargs) -> tclose.AnonymizationResult:
    """``tclose.anonymize`` with the defaults of these tests; the input must come out unchanged,
    whether the call succeeds or raises."""
    kwargs.setdefault("quasi_identifiers", ["age", "zip"])
    kwargs.setdefault("confidential", ["charge"])
    kwargs.setdefault("k", 3)
    before = df.copy(deep=True)
    try:
        result = tclose.anonymize(df, **kwargs)
        json.dumps(result.report, allow_nan=False)  # the report is strict JSON
        return result
    finally:
        pd.testing.assert_frame_equal(df, before, check_exact=True)
        assert df.index.equals(before.index) and df.index.names == before.index.names


def ssn_index(n: int = N) -> pd.Index:
    return pd.Index([f"123-45-{6000 + i}" for i in range(n)], name="ssn")


@pytest.mark.parametrize(
    "index",
    [
        ssn_index(),
        pd.Index([i // 2 for i in range(N)]),  # duplicate labels
        pd.MultiIndex.from_arrays([[f"p{i}" for i in range(N)], range(N)], names=["id", "n"]),
        pd.Index(range(N - 1, -1, -1), name="person"),  # unsorted integers, named
    ],
    ids=["ssn", "duplicates", "multiindex", "reversed"],
)
def test_the_release_and_report_carry_nothing_of_the_index(index):
    df = frame().set_axis(index, axis=0)
    result = anonymize(df)
    assert isinstance(result.data.index, pd.RangeIndex) and result.data.index.name is None
    assert list(result.data.columns) == ["age", "zip", "charge"]
    assert "123-45-" not in json.dumps(result.report, allow_nan=False)
    # labels follow the input rows by position: the rows of one cluster publish one QI tuple
    reference = anonymize(frame())
    assert (result.labels == reference.labels).all()
    kept = anonymize(df, keep_order=True)
    assert kept.data.index.equals(df.index)
    for label in np.unique(kept.labels):
        rows = kept.data.iloc[np.flatnonzero(kept.labels == label)]
        assert len(rows) >= 3 and len(rows[["age", "zip"]].drop_duplicates()) == 1


def test_error_messages_number_rows_by_position_not_by_index_label():
    df = frame().set_axis(ssn_index(), axis=0).astype({"age": float})
    df.iloc[4, 0] = np.nan
    with pytest.raises(DataError, match=r"'age' has 1 missing .*rows 4\)") as error:
        anonymize(df)
    assert "123-45-" not in str(error.value)
    df = frame().set_axis(ssn_index(), axis=0).assign(s=["a", "b"] * (N // 2))
    df.iloc[3, 3] = "x"
    with pytest.raises(DataError, match=r"rows 3; values are not shown") as error:
        anonymize(
            df,
            quasi_identifiers={
                "age": "numeric",
                "s": {"type": "nominal", "categories": ["a", "b"]},
            },
            other=["zip"],
        )
    assert "123-45-" not in str(error.value)


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True, 42, None])
def test_any_seed_is_a_config_error(seed):
    with pytest.raises(ConfigError, match="takes no seed"):
        anonymize(frame(), seed=seed)


@pytest.mark.parametrize("keep_order", ["false", 0, None])
def test_keep_order_takes_a_bool_only(keep_order):
    # "false" is truthy: it kept the input's order and index, which link the release back
    with pytest.raises(ConfigError, match="keep_order must be True or False"):
        anonymize(frame().set_axis(ssn_index(), axis=0), keep_order=keep_order)


def test_a_spec_that_is_neither_a_type_nor_a_mapping_is_a_config_error():
    with pytest.raises(ConfigError, match="'age' \\(quasi_identifier\\): give its type"):
        anonymize(frame(), quasi_identifiers={"age": 3, "zip": "numeric"})


def test_none_for_a_role_names_no_column():
    df = frame()
    result = anonymize(df, confidential=None, identifiers=None, other=["charge"])
    assert list(result.data.columns) == ["age", "zip", "charge"]
    with pytest.raises(ConfigError, match="No attribute has role quasi_identifier"):
        anonymize(df, quasi_identifiers=None, other=["age", "zip"])
    # a bare name is one column, as for the other roles (not its letters)
    result = anonymize(df.assign(name="x"), identifiers="name")
    assert "name" not in result.data.columns


@pytest.mark.parametrize(
    "values",
    [
        pd.array([True, False, True] * (N // 3), dtype="boolean"),
        pd.array([1, 2, 3] * (N // 3), dtype="Int64"),
        pd.array([1, 2, 3] * (N // 3), dtype="UInt8"),
        pd.array(["a", "b", "c"] * (N // 3), dtype="string"),
        np.array([True, False, True] * (N // 3)),
        np.array([2**63 + 1, 2**63 + 2, 2**63 + 3] * (N // 3), dtype=np.uint64),
    ],
    ids=["boolean", "Int64", "UInt8", "string", "bool", "uint64"],
)
def test_a_nominal_qi_comes_back_in_its_extension_dtype(values):
    df = frame().assign(v=values)
    result = anonymize(df, quasi_identifiers={"age": "numeric", "v": "nominal"}, other=["zip"])
    assert result.data["v"].dtype == df["v"].dtype
    assert set(result.data["v"]) <= set(df["v"])


def test_a_category_dtype_does_not_name_a_rare_value_the_release_hides():
    # one person holds "hiv": their cluster publishes its majority value (a tie goes to the
    # first category), and the released column's category list must not tell that someone in
    # the input had it
    df = frame().assign(dx=pd.Categorical(["flu"] * 12 + ["cold"] * 11 + ["hiv"]))
    result = anonymize(df, quasi_identifiers={"age": "numeric", "dx": "nominal"}, other=["zip"])
    assert "hiv" not in set(result.data["dx"])
    assert list(result.data["dx"].cat.categories) == ["cold", "flu"]
    assert "hiv" not in json.dumps(result.report)
    declared = pd.Categorical(["low"] * 12 + ["high"] * 12, categories=["low", "mid", "high"])
    kept = anonymize(
        frame().assign(g=declared),
        quasi_identifiers={"age": "numeric", "g": "nominal"},
        other=["zip"],
    )
    # a declared domain no row held is not the release's: its categories are the values shown
    assert set(kept.data["g"].cat.categories) == set(kept.data["g"]) <= {"low", "high"}


def test_a_time_zone_survives_aggregation():
    when = pd.date_range("2020-03-28", periods=N, freq="7h", tz="Europe/Paris")
    df = frame().assign(when=when)
    result = anonymize(df, quasi_identifiers={"age": "numeric", "when": "datetime"}, other=["zip"])
    assert result.data["when"].dt.tz is not None
    assert str(result.data["when"].dt.tz) == "Europe/Paris"
    # each published instant is its cluster's mean instant, whatever the zone it is shown in
    published = result.data["when"].sort_values().reset_index(drop=True)
    means = df.groupby(result.labels)["when"].transform("mean").sort_values().reset_index(drop=True)
    assert (published == means).all()


@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_dates_beyond_the_nanosecond_range_are_refused_not_wrapped(role):
    # NumPy's cast to datetime64[ns] wrapped 2500-01-01 to 1915-06-14, published as verified
    when = np.array(["2500-01-01", "1990-05-01", "1990-05-02"] * (N // 3), dtype="datetime64[s]")
    df = frame().assign(when=when)
    roles = _roles(role, "when", "date")
    with pytest.raises(DataError, match=r"'when' holds 8 date\(s\) outside the range .* 2262"):
        anonymize(df, **roles)


def test_cli_refuses_a_sqlite_date_beyond_the_nanosecond_range(tmp_path):
    import sqlite3

    from tclose.app.cli import main

    with sqlite3.connect(tmp_path / "d.db") as db:
        db.execute("create table p (age int, born date, charge int)")
        rows = [(20 + i % 5, "2500-01-01" if i % 2 else "1990-05-01", i % 4) for i in range(12)]
        db.executemany("insert into p values (?, ?, ?)", rows)
    config = tmp_path / "c.yaml"
    config.write_text(
        f'source: {{url: "sqlite:///{tmp_path / "d.db"}", table: p}}\n'
        "target: {table: p_anon}\n"
        "attributes:\n"
        "  age: {role: quasi_identifier, type: numeric}\n"
        "  born: {role: quasi_identifier, type: date}\n"
        "  charge: {role: confidential, type: numeric}\n"
        "privacy: {k: 3, t: 0.5}\n"
    )
    assert main(["run", str(config), "--report", str(tmp_path / "r.json")]) == 3
    with sqlite3.connect(tmp_path / "d.db") as db:
        tables = {name for (name,) in db.execute("select name from sqlite_master")}
    assert "p_anon" not in tables


@pytest.mark.parametrize(
    "values, message",
    [
        (np.array([1 + 1j, 2, 3] * (N // 3)), "holds complex numbers"),
        (pd.period_range("2020-01", periods=N, freq="M"), "holds periods"),
        (pd.to_timedelta(np.arange(N) % 4, unit="D"), "holds durations"),
        (pd.Series([1, "a", 2] * (N // 3), dtype=object), "3 row\\(s\\) hold non-numeric|8 row"),
    ],
    ids=["complex", "period", "timedelta", "mixed"],
)
@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_values_that_are_not_real_numbers_are_refused_in_a_numeric_column(values, message, role):
    df = frame().assign(v=values)
    roles = _roles(role, "v")
    with pytest.raises(DataError, match=f"column 'v' is declared numeric but .*{message}"):
        anonymize(df, **roles)


@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_list_or_dict_cells_in_a_nominal_column_are_a_data_error(role):
    df = frame().assign(v=[[1], {"a": 2}, (3,)] * (N // 3))
    roles = _roles(role, "v", "nominal")
    with pytest.raises(DataError, match=r"'v' holds 16 value\(s\) that are not single values"):
        anonymize(df, **roles)


def test_the_release_drops_the_frames_attrs():
    df = frame()
    df.attrs["source"] = "patients.csv of 2026-11-27, ids in column 0"
    assert anonymize(df).data.attrs == {}


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint64", "Int64"])
def test_a_rounded_integer_qi_keeps_its_integer_dtype(dtype):
    df = frame().astype({"age": dtype})
    result = anonymize(
        df, quasi_identifiers={"age": {"type": "numeric", "round": True}, "zip": "numeric"}
    )
    assert result.data["age"].dtype == df["age"].dtype
    means = df["age"].astype(float).groupby(result.labels).transform("mean")
    assert sorted(result.data["age"]) == sorted(np.rint(means).astype(int))


@pytest.mark.parametrize(
    "values",
    [
        np.array([2**63 - 1 - 3 * i for i in range(N)], dtype=np.int64),  # float mean: 2**63
        np.array([-(2**63) + 5 * i for i in range(N)], dtype=np.int64),
        np.array([2**53 + i for i in range(N)], dtype=np.int64),
        np.array([2**64 - 1 - 7 * i for i in range(N)], dtype=np.uint64),
        pd.array([2**62 + 3 * i for i in range(N)], dtype="Int64"),
    ],
    ids=["int64-max", "int64-min", "2^53", "uint64-max", "Int64"],
)
def test_rounded_means_of_huge_integers_are_exact(values):
    # through float64, 2**63 - 1 - 3i averaged to 2**63, which an int64 cast wraps to -2**63
    df = frame().assign(b=values)
    qis = {"age": "numeric", "b": {"type": "numeric", "round": True}}
    result = anonymize(df, quasi_identifiers=qis, other=["zip"], keep_order=True)
    assert result.data["b"].dtype == df["b"].dtype
    for label in np.unique(result.labels):
        members = [int(v) for v in df["b"][result.labels == label]]
        exact = Fraction(sum(members), len(members))
        assert {int(v) for v in result.data["b"][result.labels == label]} == {round(exact)}


def test_rows_set_aside_keep_labels_and_keep_order_aligned():
    df = frame().set_axis(ssn_index(), axis=0).astype({"age": float})
    df.iloc[[2, 5], 0] = np.nan
    qis = {"age": {"type": "numeric", "missing": "exclude-rows"}, "zip": "numeric"}
    result = anonymize(df, quasi_identifiers=qis, keep_order=True)
    assert list(result.labels[[2, 5]]) == [-1, -1] and (np.delete(result.labels, [2, 5]) >= 0).all()
    assert result.data.index.equals(df.index.delete([2, 5]))
    shuffled = anonymize(df, quasi_identifiers=qis)
    assert len(shuffled.data) == N - 2 and isinstance(shuffled.data.index, pd.RangeIndex)
    assert "123-45-" not in json.dumps(shuffled.report)


@pytest.mark.parametrize("name", ["tclose_row", "index", "level_0", "__index_level_0__", ""])
def test_a_column_named_like_an_internal_one_is_an_ordinary_column(name):
    df = frame().rename(columns={"zip": name})
    result = anonymize(df, quasi_identifiers=["age", name])
    assert list(result.data.columns) == ["age", name, "charge"]
    assert len(result.data[["age", name]].value_counts()) == len(np.unique(result.labels))


@pytest.mark.parametrize(
    "values",
    [
        [f"id{i}" for i in range(N)],
        pd.array([f"id{i}" for i in range(N)], dtype="string"),
        pd.Categorical([f"id{i}" for i in range(N)]),
        [[i] for i in range(N)],  # unhashable cells
        [float(i) for i in range(N - 1)] + [np.nan],  # NULLs are ignored
    ],
    ids=["object", "string", "category", "lists", "with-nan"],
)
def test_a_pass_through_column_unique_per_row_is_refused(values):
    df = frame().assign(person=values)
    with pytest.raises(
        tclose.errors.VerificationError, match="Linking columns .*: person"
    ) as error:
        anonymize(df, other=["person"])
    assert error.value.report["verification"]["passed"] is False


@pytest.mark.parametrize(
    "df, kwargs, error, message",
    [
        (frame().iloc[:0], {}, DataError, "0 rows, fewer than k = 3"),
        (frame(2), {}, DataError, "2 rows, fewer than k = 3"),
        (frame(), {"t": 0}, ConfigError, "must be in \\(0, 1\\]"),
        (frame(), {"t": 1.5}, ConfigError, "must be in \\(0, 1\\]"),
        (frame(), {"t": float("nan")}, ConfigError, "finite number"),
        (frame(), {"quasi_identifiers": ["age", "zip", "charge"]}, ConfigError, "two roles"),
        (frame(), {"other": ["age"]}, ConfigError, "two roles"),
        (frame(), {"quasi_identifiers": ["age", "nope"]}, ConfigError, "'nope' is not in"),
        (
            frame().rename(columns={"age": "age "}),
            {},
            ConfigError,
            "'age' is not in the DataFrame. Its columns are: 'age ', 'zip'",
        ),
        (frame().assign(id=range(N)), {}, ConfigError, "1 column\\(s\\) with no role: 'id'"),
    ],
    ids=[
        "empty",
        "n<k",
        "t=0",
        "t>1",
        "t=nan",
        "qi+conf",
        "qi+other",
        "unknown",
        "trailing-space",
        "unlisted",
    ],
)
def test_bad_input_is_a_tclose_error_and_leaves_the_frame_alone(df, kwargs, error, message):
    with pytest.raises(error, match=message):
        anonymize(df, **kwargs)


def test_a_view_of_another_frame_leaves_both_unchanged():
    parent = frame(2 * N)
    before = parent.copy(deep=True)
    view = parent.iloc[::2]
    result = anonymize(view, keep_order=True)
    assert result.data.index.equals(view.index)
    pd.testing.assert_frame_equal(parent, before)
    result.data.iloc[:, :] = 0  # the release shares no memory with the input
    pd.testing.assert_frame_equal(parent, before)


def test_too_few_rows_after_exclude_rows_says_rows_were_set_aside():
    df = frame().astype({"age": float})
    df.iloc[: N - 2, 0] = np.nan
    qis = {"age": {"type": "numeric", "missing": "exclude-rows"}, "zip": "numeric"}
    with pytest.raises(DataError, match=r"2 rows left once missing: exclude-rows set 22 row"):
        anonymize(df, quasi_identifiers=qis)


@pytest.mark.parametrize(
    "values",
    [[0.0, -0.0, 1.5, 2.5], pd.Series([1, 1.0, True, 2], dtype=object)],
    ids=["signed-zero", "one-spelled-three-ways"],
)
@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_values_equal_but_spelled_apart_are_categories_not_a_crash(values, role):
    # pandas.unique takes 0.0 and -0.0 (or 1, 1.0 and True) as one value, their texts differ:
    # the ordering of the categories raised KeyError: '-0.0'
    df = frame().assign(f=list(values) * (N // 4))
    roles = _roles(role, "f", "nominal")
    result = anonymize(df, **roles)
    assert {repr(v) for v in result.data["f"]} <= {repr(v) for v in df["f"]}
    assert result.data["f"].dtype == df["f"].dtype


@pytest.mark.parametrize("missing", ["error", "category"])
@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_the_text_tclose_names_null_by_is_refused_in_a_category_column(role, missing):
    # "(missing)" is how tclose names NULL in a category column: a value spelled so would be
    # taken for NULL, and the EMD computed on other values than those published
    df = frame().assign(s=["(missing)", "a", "b", "a"] * (N // 4))
    spec = {"type": "nominal", "missing": missing}
    roles = _roles(role, "s", spec)
    with pytest.raises(DataError, match=r"'s' holds the text '\(missing\)' in 6 row\(s\)"):
        anonymize(df, **roles)


def test_cli_refuses_the_text_tclose_names_null_by(tmp_path):
    import sqlite3

    from tclose.app.cli import main

    with sqlite3.connect(tmp_path / "d.db") as db:
        db.execute("create table p (age int, zip int, dx text)")
        rows = [(20 + i, i % 3, ["(missing)", "a", "b"][i % 3]) for i in range(12)]
        db.executemany("insert into p values (?, ?, ?)", rows)
    config = tmp_path / "c.yaml"
    config.write_text(
        f'source: {{url: "sqlite:///{tmp_path / "d.db"}", table: p}}\n'
        "target: {table: p_anon}\n"
        "attributes:\n"
        "  age: {role: quasi_identifier, type: numeric}\n"
        "  zip: {role: quasi_identifier, type: numeric}\n"
        "  dx: {role: confidential, type: nominal}\n"
        "privacy: {k: 3, t: 0.5}\n"
    )
    assert main(["run", str(config), "--report", str(tmp_path / "r.json")]) == 3


@pytest.mark.parametrize(
    "big", [10**400, -(10**400), Decimal("1e400")], ids=["int", "negative-int", "decimal"]
)
@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_numbers_beyond_the_double_range_are_a_data_error(big, role):
    # beyond the double range: pandas.to_numeric overflows on the int, the Decimal is infinite
    df = frame().assign(v=pd.Series([big, 1, 2] * (N // 3), dtype=object))
    roles = _roles(role, "v")
    with pytest.raises(DataError, match=r"'v' holds .*beyond the double precision range"):
        anonymize(df, **roles)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_exact_rounded_means_match_fractions(dtype):
    from tclose.base.attributes import exact_rounded_means

    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    edges = [info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2**53 + 1, 2**32 - 1, 2**32]
    values = np.concatenate(
        [
            np.array([v for v in edges if info.min <= v <= info.max], dtype=dtype),
            rng.integers(info.min, info.max, 300, dtype=dtype, endpoint=True),
            rng.integers(0, 10, 300).astype(dtype),  # ties: half to even
        ]
    )
    for clusters in (1, 2, 7, 50):
        labels = rng.integers(0, clusters, len(values))
        means = exact_rounded_means(values, labels, clusters)
        assert means.dtype == dtype
        for label in range(clusters):
            members = [int(v) for v in values[labels == label]]
            if members:
                assert int(means[label]) == round(Fraction(sum(members), len(members)))


@pytest.mark.parametrize("kind", ["datetime", "date"])
def test_a_datetime_qi_mean_is_the_exact_mean_instant(kind):
    # through float64 nanoseconds, three equal instants 05:06:07.123457 averaged to
    # 05:06:07.123457024, an instant nobody had
    stamps = [
        "2021-03-04 05:06:07.123457",
        "2021-03-04 05:06:07.123457",
        "2262-04-10 23:59:59.000000",
    ]
    df = frame().assign(w=pd.to_datetime(stamps * (N // 3)))
    result = anonymize(df, quasi_identifiers={"age": "numeric", "w": kind}, other=["zip"])
    nanoseconds = df["w"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    published = result.data["w"].to_numpy(dtype="datetime64[ns]").astype(np.int64)
    expected = []
    for label in np.unique(result.labels):
        members = [int(v) for v in nanoseconds[result.labels == label]]
        mean = round(Fraction(sum(members), len(members)))
        if kind == "date":
            mean = (mean + 12 * 3600 * 10**9) // (86400 * 10**9) * 86400 * 10**9
        expected += [mean] * len(members)
    assert sorted(published.tolist()) == sorted(expected)


def test_cli_publishes_exact_rounded_means_of_a_bigint_qi(tmp_path):
    # through float64, 2**63 - 1 - 3i averaged to 2**63: refused as out of range; and
    # 2**62 + 3i all came out as 2**62
    import sqlite3

    from tclose.app.cli import main

    with sqlite3.connect(tmp_path / "d.db") as db:
        db.execute("create table p (age int, big int, small int, charge int)")
        rows = [(20 + i % 4, 2**63 - 1 - 3 * i, 2**62 + 3 * i, i % 3) for i in range(12)]
        db.executemany("insert into p values (?, ?, ?, ?)", rows)
    config = tmp_path / "c.yaml"
    config.write_text(
        f'source: {{url: "sqlite:///{tmp_path / "d.db"}", table: p}}\n'
        "target: {table: p_anon}\n"
        "attributes:\n"
        "  age: {role: quasi_identifier, type: numeric}\n"
        "  big: {role: quasi_identifier, type: numeric, round: true}\n"
        "  small: {role: quasi_identifier, type: numeric, round: true}\n"
        "  charge: {role: confidential, type: numeric}\n"
        "privacy: {k: 3, t: 0.5}\n"
    )
    assert main(["-q", "run", str(config), "--report", str(tmp_path / "r.json")]) == 0
    with sqlite3.connect(tmp_path / "d.db") as db:
        published = db.execute("select age, big, small from p_anon").fetchall()
    # each class's published values are its members' exact rounded means: the mean of the
    # published values over the class (all equal) is one of the exact means of some grouping
    for column, originals in ((1, [r[1] for r in rows]), (2, [r[2] for r in rows])):
        values = [row[column] for row in published]
        assert all(isinstance(v, int) for v in values)
        assert min(originals) <= min(values) and max(values) <= max(originals)
        # the published values sum to the originals' sum, up to the rounding of each class
        assert abs(sum(values) - sum(originals)) <= len(values)
