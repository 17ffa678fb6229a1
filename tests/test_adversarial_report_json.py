"""Adversarial: an audit report that is not strict JSON.

``json.dumps`` writes NaN and infinities as the bare tokens ``NaN`` / ``Infinity``, which RFC
8259 forbids: JavaScript's ``JSON.parse``, Go, serde_json and PostgreSQL's ``jsonb`` reject the
whole file (on PostgreSQL the audit row, written in the publishing transaction, would fail the
publish). Every report here is parsed with a strict parser. A
non-finite number may come from the configuration (YAML reads ``.nan`` and ``.inf`` as numbers),
from an algorithm's ``info``, or from a figure tclose computes; the first two are refused before
anything is written, the last is written as ``null`` with a warning naming it.
"""

from __future__ import annotations

import json
import math
import sqlite3
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import yaml

import tclose
import tclose.app.cli
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.jsonsafe import to_json
from tclose.base.registry import load_registry
from tclose.errors import ConfigError
from tclose.interfaces import Partition

NAN, INF = float("nan"), float("inf")


def strict(text: str):
    """``text`` parsed as RFC 8259 JSON: ``NaN``, ``Infinity`` and ``-Infinity`` are errors."""

    def refuse(token: str):
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def _table(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "q": rng.normal(size=n),
            "q2": rng.integers(0, 50, n).astype(float),
            "c": rng.integers(0, 5, n).astype(float),
        }
    )


# --- the configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("t", [NAN, INF, -INF, -0.0, 0.0, np.float32("nan")])
def test_t_that_is_not_in_0_1_is_refused_never_compared(t):
    """A NaN t compares False with everything, so ``emd > t`` would never fail: such a t is refused
    and never reaches the verifier."""
    with pytest.raises(ConfigError, match=r"At key: t"):
        tclose.anonymize(_table(), ["q", "q2"], ["c"], k=3, t=t)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("report", "interval_p"), NAN),
        (("report", "interval_p"), INF),
        (("attributes", "age", "weight"), INF),
        (("algorithm", "options", "refine_seconds"), INF),
        (("attributes", "severity", "categories"), ["1", NAN]),
        (("privacy", "t"), NAN),
    ],
)
def test_a_non_finite_number_in_the_yaml_is_refused_naming_its_key(
    sqlite_run, capsys, where, value
):
    """YAML reads ``.nan`` and ``.inf`` as floats: ``interval_p: .nan`` (no comparison with NaN
    holds, so no record would count as at risk), ``.inf``, ``weight: .inf`` and ``refine_seconds:
    .inf`` are configuration errors naming the key, before anything is written."""
    document = sqlite_run.config()
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    if where[1] == "severity":
        document["attributes"]["severity"] = {"role": "quasi_identifier", "type": "ordinal"}
    if where[-1] == "refine_seconds":
        document["algorithm"]["options"]["refine"] = True
    node = document
    for key in where[:-1]:
        node = node.setdefault(key, {})
    node[where[-1]] = value
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"At {'.'.join(where[:-1])} ==> At key: {where[-1]}" in err, err
    assert "finite" in err or "(0, 1]" in err, err
    assert sqlite_run.tables() == {"discharges"}
    assert not (sqlite_run.tmp_path / "r.json").exists()


@pytest.mark.parametrize("p", [NAN, INF, np.float32("nan"), -1.0, 0.0, "0.05"])
def test_the_api_refuses_an_interval_p_that_is_not_a_positive_finite_number(p):
    """``tclose.anonymize(..., interval_p=...)`` refuses NaN, an infinity, 0, a negative number or a
    text, naming ``interval_p``: a NaN would report an interval disclosure of 0 (no record at risk).
    """
    with pytest.raises(ConfigError, match="interval_p"):
        tclose.anonymize(_table(), ["q", "q2"], ["c"], k=3, t=0.5, interval_p=p)


@pytest.mark.parametrize(
    ("algorithm", "options"),
    [
        ("t-first", {"refine": True, "refine_seconds": INF}),
        ("merge", {"refine": True, "refine_seconds": INF}),
        ("t-first", {"refine": True, "refine_seconds": np.float64("inf")}),
    ],
)
def test_an_infinite_algorithm_option_is_refused_naming_it(algorithm, options):
    """An infinite float option (``[0.0, inf]`` holds inf) is refused naming it: the report cannot
    hold it."""
    name = next(iter(o for o in options if o != "refine"))
    with pytest.raises(ConfigError, match=rf"At key: {name}\n.*finite"):
        tclose.anonymize(_table(), ["q", "q2"], ["c"], k=3, t=0.5, algorithm=algorithm, **options)


def test_an_infinite_weight_is_a_configuration_error_not_a_plugin_bug():
    """An infinite weight is a configuration error naming the key, never a failure of the algorithm
    plugin."""
    with pytest.raises(ConfigError, match=r"At attributes.q ==> At key: weight"):
        tclose.anonymize(_table(), {"q": {"weight": INF}, "q2": "numeric"}, ["c"], k=3, t=0.5)


# --- an algorithm's info ------------------------------------------------------------------------


def _registry(info):
    """Built-ins plus algorithm ``rogue``: honest clusters of k rows, and ``info``."""

    class Rogue:
        name = "rogue"
        options_schema: dict = {}
        requires_t = True

        def partition(self, x, distances, k, t, options):
            order = np.argsort(x[:, 0], kind="stable")
            labels = np.empty(len(x), dtype=np.int64)
            labels[order] = np.minimum(np.arange(len(x)) // k, len(x) // k - 1)
            return Partition(labels, info=info)

    class Plugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(Rogue())

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


BAD_INFO = {
    "nan": ({"gap": NAN}, "info.gap"),
    "inf_in_list": ({"steps": [1.0, INF]}, "info.steps[1]"),
    "minus_inf_nested": ({"a": {"b": [{"c": -INF}]}}, "info.a.b[0].c"),
    "float32_nan": ({"x": np.float32("nan")}, "info.x"),
    "float64_inf_array": ({"x": np.array([0.5, np.inf])}, "info.x[1]"),
    "tuple": ({"pair": (NAN, 1)}, "info.pair[0]"),
    "decimal_nan": ({"d": Decimal("NaN")}, "Decimal"),  # guard: refused before too
    # strict JSON, but PostgreSQL's jsonb refuses the audit row, and with it the publish
    "nul": ({"note": "a\x00b"}, "info.note holds a NUL"),
    "lone_surrogate": ({"steps": ["ok", "a\ud800"]}, "info.steps[1] holds"),
    "nul_in_a_key": ({"k\x00": 1}, "info.k\\x00 holds"),
    "numpy_text": ({"names": np.array(["a", "b\x00c"])}, "info.names[1] holds"),
}


@pytest.mark.parametrize("case", list(BAD_INFO))
def test_an_info_with_a_non_finite_number_is_refused_before_anything_is_written(
    sqlite_run, monkeypatch, capsys, case
):
    """An ``algorithm.info`` holding NaN or an infinity is refused as any info JSON cannot hold
    (exit 1, naming the plugin and where the value is), before the staging table is written."""
    info, where = BAD_INFO[case]
    registry = _registry(info)
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["privacy"]["t"] = 1.0  # the honest clusters are k-anonymous, not 0.2-close
    document["report"] = {
        "json": str(sqlite_run.tmp_path / "r.json"),
        "html": str(sqlite_run.tmp_path / "r.html"),
        "table": "audit",
    }
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Algorithm 'rogue'" in err and "info" in err and where in err, err
    assert sqlite_run.tables() == {"discharges"}
    assert not (sqlite_run.tmp_path / "r.json").exists()
    assert not (sqlite_run.tmp_path / "r.html").exists()


def test_the_conformance_kit_refuses_a_non_finite_info():
    """``tclose.testing`` (the plugin authors' checks) took ``json.dumps(info)`` as proof."""
    from tclose.testing import check_algorithm

    class Rogue:
        name = "rogue"
        options_schema: dict = {}
        requires_t = False

        def partition(self, x, distances, k, t, options):
            labels = np.minimum(np.arange(len(x)) // k, len(x) // k - 1)
            return Partition(labels, info={"gap": NAN})

    with pytest.raises(AssertionError, match="info"):
        check_algorithm(Rogue())


# --- figures tclose computes --------------------------------------------------------------------


def test_to_json_never_writes_a_non_strict_token_and_names_the_value():
    with pytest.raises(ValueError, match=r"utility\.il1s"):
        to_json({"utility": {"il1s": NAN}})
    with pytest.raises(ValueError, match=r"a\[2\]"):
        to_json({"a": [1, 2, np.float32("-inf")]})
    assert strict(to_json({"a": [1.5, np.float64(2.0), None, 1e308, 5e-324]}))["a"][3] == 1e308


def _nan_distance_registry():
    """Built-ins plus distance ``nan-emd``: emd-ordered whose EMDs are all NaN (a broken
    third-party distance)."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class NanEMD(OrderedEMDDistance):
        name = "nan-emd"
        default_for = ()

        def fit(self, values, options):
            fitted = super().fit(values, options)
            original = fitted.cluster_emd

            def cluster_emd(labels):
                return np.full(len(original(labels)), np.nan)

            fitted.cluster_emd = cluster_emd
            return fitted

    class Plugin:
        @tclose.hookimpl
        def register_distances(self, register):
            register(NanEMD())

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


def test_a_nan_emd_of_a_measured_only_t_is_null_in_every_report(sqlite_run, monkeypatch, capsys):
    """mdav measures t without enforcing it, so a distance that returns NaN does not stop the
    release: ``t_achieved``, the EMD histogram and the verification hold ``null``, in report.json
    and in the audit row, with a warning naming each field; the HTML page is written."""
    registry = _nan_distance_registry()
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "mdav", "options": {}})
    document["attributes"]["charge"]["distance"] = "nan-emd"
    del document["privacy"]["t"]
    document["report"] = {
        "json": str(sqlite_run.tmp_path / "r.json"),
        "html": str(sqlite_run.tmp_path / "r.html"),
        "table": "audit",
    }
    # not quiet: the summary printed after the publish read the report's figures
    assert main(["run", str(sqlite_run.write(document))]) == 0, capsys.readouterr().err
    assert "achieved (largest EMD) charge -" in capsys.readouterr().out
    report = strict((sqlite_run.tmp_path / "r.json").read_text())
    assert report["run"]["published"] is True
    assert report["privacy"]["t_achieved"] == {"charge": None}
    assert report["privacy"]["emd_histogram"]["charge"]["mean"] is None
    assert any(
        "privacy.t_achieved.charge" in w and "not a finite number" in w for w in report["warnings"]
    )
    with sqlite3.connect(sqlite_run.db) as connection:
        (stored,) = connection.execute("SELECT report FROM audit").fetchone()
    assert strict(stored)["privacy"]["t_achieved"] == {"charge": None}
    assert "t_achieved" in (sqlite_run.tmp_path / "r.html").read_text()


def test_a_nan_emd_of_an_enforced_t_fails_verification_with_a_strict_report(
    sqlite_run, monkeypatch, capsys
):
    """NaN <= t is false, so the verifier fails closed (guard); the failed run's report was
    written with ``NaN``."""
    registry = _nan_distance_registry()
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "nan-emd"
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 1
    report = strict((sqlite_run.tmp_path / "r.json").read_text())
    assert report["verification"]["passed"] is False and report["run"]["published"] is False
    check = next(c for c in report["verification"]["checks"] if c["name"] == "t_closeness:charge")
    assert check["passed"] is False and check["actual"] is None
    assert sqlite_run.tables() == {"discharges"}


@pytest.mark.postgres
def test_a_nan_in_the_report_does_not_fail_the_publish_on_postgresql(pg, monkeypatch, capsys):
    """The audit row is written in the publishing transaction into a ``jsonb`` column, which refuses
    ``NaN``: the row is strict JSON, so a verified release is published with its report."""
    registry = _nan_distance_registry()
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    source, target, audit = pg.name("src"), pg.name("anon"), pg.name("audit")
    pg.create_patients(source, n=60)
    document = pg.config(source, target, algorithm={"name": "mdav", "options": {}})
    document["attributes"]["charge"]["distance"] = "nan-emd"
    del document["privacy"]["t"]
    document["report"] = {"json": str(pg.tmp_path / "r.json"), "table": audit}
    code = main(["-q", "run", str(pg.write_config(document))])
    assert code == 0, capsys.readouterr().err
    report = strict((pg.tmp_path / "r.json").read_text())
    assert report["run"]["published"] and report["run"].get("audited_in_publish")
    quoted = pg.quote(audit)
    rows = pg.rows(audit, "report->'privacy'->'t_achieved'->>'charge', t_achieved")
    assert rows == [(None, None)]
    assert pg.execute(f"SELECT count(*) FROM {quoted}") == [(1,)]
    assert pg.tables() == {source, target, audit}


# --- degenerate data ----------------------------------------------------------------------------


def _degenerate():
    table = _table()
    constant_qi = table.assign(q=1.0)
    return {
        "constant_qi": (constant_qi, dict(t=0.5)),
        "every_qi_constant": (constant_qi.assign(q2=5.0), dict(t=0.5)),
        "constant_confidential": (table.assign(c=2.0), dict(t=0.5)),
        "single_row": (table.iloc[:1], dict(k=1, t=0.5)),
        "k_equals_n": (table, dict(k=len(table), t=0.5)),
        "k_equals_n_mdav": (table, dict(k=len(table))),
        "plus_minus_1e308": (table.assign(q=[1e308, -1e308] * 6), dict(t=0.5)),
        "confidential_1e308": (table.assign(c=[1.7e308, -1.7e308, 0.0] * 4), dict(t=0.5)),
        "subnormal": (table.assign(q=[5e-324, 1e-320, 0.0, 3e-320] * 3), dict(t=0.5)),
        "t_subnormal": (table, dict(t=1e-320)),
    }


@pytest.mark.parametrize("case", list(_degenerate()))
def test_reports_of_degenerate_tables_are_strict_json(case):
    """Measures that are undefined on these tables are ``null`` (their documented convention), never
    NaN; the HTML page renders."""
    from tclose.app.html_report import render_html

    frame, settings = _degenerate()[case]
    settings = {"k": 3, **settings}
    result = tclose.anonymize(frame, ["q", "q2"], ["c"], **settings)
    report = strict(to_json(result.report))
    assert report["verification"]["passed"] is True
    for value in _numbers(report):
        assert math.isfinite(value)
    assert "<html" in render_html(result.report)


def _numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, float):
        yield value


def test_the_conformance_kit_counts_a_nan_emd_as_above_t():
    """``worst > t`` is false for a NaN EMD: the kit passed a partition whose EMD was NaN (the
    verifier's own check, ``worst <= t``, already failed it: guard in the test above)."""
    from tclose.interfaces import Problem
    from tclose.testing import check_partition

    class Honest:
        name = "honest"
        options_schema: dict = {}
        requires_t = True

        def partition(self, x, distances, k, t, options):
            return Partition(np.minimum(np.arange(len(x)) // k, len(x) // k - 1))

    class NanDistance:
        column = "c"

        def cluster_emd(self, labels):
            return np.full(int(np.max(labels)) + 1, np.nan)

    x = np.arange(12, dtype=float).reshape(-1, 1)
    problems = check_partition(Honest(), Problem(x, [NanDistance()], 3, 0.5, {}))
    assert any("EMD" in p and "nan" in p for p in problems), problems


def test_compare_json_is_strict(sqlite_run, monkeypatch, capsys):
    """``tclose compare --json`` printed ``"t_achieved": NaN`` for a distance whose EMD is NaN,
    or the EMD of another attribute as the worst, depending on their order."""
    import tclose.app.compare

    registry = _nan_distance_registry()
    monkeypatch.setattr(tclose.app.compare, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "mdav", "options": {}})
    attributes = document["attributes"]
    attributes["admission_day"] = {"role": "confidential", "type": "numeric"}
    attributes["charge"] = {**attributes.pop("charge"), "distance": "nan-emd"}  # last
    del document["privacy"]["t"]
    main(["-q", "compare", str(sqlite_run.write(document)), "--json"])
    result = strict(capsys.readouterr().out)
    # the worst EMD is unknown, not admission_day's (max([0.4, nan]) is 0.4, max([nan, 0.4]) nan)
    assert [run["t_achieved"] for run in result["runs"]] == [None]
    assert any("t_achieved" in w for w in result["warnings"])


def test_the_conformance_kit_refuses_an_infinite_option_default():
    """``Option(float, inf, "no limit")`` passed the kit, and every run wrote ``Infinity`` in
    ``algorithm.options`` (the defaults are recorded with the options)."""
    from tclose.interfaces import Option
    from tclose.testing import check_options_schema

    class Unbounded:
        name = "unbounded"
        options_schema = {"budget": Option(float, INF, "Seconds; inf: no limit.", min=0.0)}

    problems = check_options_schema(Unbounded())
    assert any("budget" in p and "finite" in p for p in problems), problems


# --- YAML values JSON has no type for -----------------------------------------------------------

_DAYS = ["2020-01-01", "2020-01-02", "2020-01-03"]


def _days_table(path):
    with sqlite3.connect(path) as connection:
        connection.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, day TEXT, "1" REAL, c REAL)')
        connection.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)",
            [(i, _DAYS[i % 3], i * 1.5, float(i % 4)) for i in range(30)],
        )


def test_an_unquoted_date_in_the_yaml_does_not_lose_the_report_after_the_publish(tmp_path, capsys):
    """YAML reads ``categories: [2020-01-01, ...]`` as dates (the run compares their text, so it
    works): the report records them as text, and is written after the publish."""
    import hashlib

    from tclose.base.config import load_config
    from tclose.base.redaction import redacted_document

    db = tmp_path / "d.db"
    _days_table(db)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"""
source: {{url: "sqlite:///{db}", table: t, key: id}}
target: {{table: t_anon}}
attributes:
  day: {{role: quasi_identifier, type: ordinal, categories: [{", ".join(_DAYS)}]}}
  "1": {{role: quasi_identifier}}
  c: {{role: confidential}}
privacy: {{k: 3, t: 1.0}}
report: {{json: {tmp_path / "r.json"}, html: {tmp_path / "r.html"}, table: audit}}
""",
        encoding="utf-8",
    )
    assert main(["-q", "run", str(config)]) == 0, capsys.readouterr().err
    report = strict((tmp_path / "r.json").read_text())
    assert report["run"]["published"] is True
    assert report["config"]["attributes"]["day"]["categories"] == _DAYS
    # the digest is the one the configuration always had (dates read as their text)
    document = yaml.safe_load(config.read_text())
    canonical = json.dumps(
        redacted_document(document, remembered=False),
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    )
    assert report["config_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert report["config_sha256"] == load_config(config).digest()
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "r.json")]) == 0


def test_a_column_named_by_a_number_beside_named_columns(tmp_path, capsys):
    """``1:`` is an integer key in YAML: beside text keys the configuration digest (sorted keys)
    takes it as the column ``1``, and the run and ``verify --report`` work."""
    db = tmp_path / "d.db"
    _days_table(db)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"""
source: {{url: "sqlite:///{db}", table: t, key: id}}
target: {{table: t_anon}}
attributes:
  day: {{role: other}}
  1: {{role: quasi_identifier}}
  c: {{role: confidential}}
privacy: {{k: 3, t: 1.0}}
report: {{json: {tmp_path / "r.json"}}}
""",
        encoding="utf-8",
    )
    assert main(["-q", "run", str(config)]) == 0, capsys.readouterr().err
    report = strict((tmp_path / "r.json").read_text())
    assert report["config"]["attributes"]["1"] == {"role": "quasi_identifier"}
    assert main(["-q", "verify", str(config), "--report", str(tmp_path / "r.json")]) == 0


def test_a_plugin_option_default_json_cannot_hold_does_not_lose_the_report(
    sqlite_run, monkeypatch, capsys
):
    """An option's default is recorded in ``algorithm.options`` without validation (a plugin may
    declare ``Option(Path, Path("model.bin"), ...)`` or ``Option(float, inf, ...)``): it is written
    as its text or ``null``, with a warning, and the report is written."""
    from pathlib import Path

    from tclose.interfaces import Option

    registry = _registry({})
    rogue = registry.algorithms["rogue"].obj
    monkeypatch.setattr(
        type(rogue),
        "options_schema",
        {
            "model": Option(Path, Path("model.bin"), "A file."),
            "budget": Option(float, INF, "Seconds; inf: none."),
        },
        raising=False,
    )
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["privacy"]["t"] = 1.0
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json"), "table": "audit"}
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0, capsys.readouterr().err
    report = strict((sqlite_run.tmp_path / "r.json").read_text())
    from tclose.blocks.framed import STEPS

    framework = {n: o.default for step in STEPS.values() for n, o in step.items()}
    expected = {**framework, "model": "model.bin", "budget": None}
    assert report["algorithm"]["options"] == expected
    warned = " ".join(report["warnings"])
    assert "algorithm.options.model" in warned and "algorithm.options.budget" in warned


@pytest.mark.parametrize(
    ("written", "advice"), [("1e-1", "1.0e-1"), ("5E-2", "5.0e-2"), ("2.5e1", "2.5e+1")]
)
def test_t_written_with_an_exponent_yaml_reads_as_text_gets_advice(
    sqlite_run, capsys, written, advice
):
    """YAML 1.1 reads ``t: 1e-1`` as the text '1e-1': the refusal advises the spelling it reads as a
    number, which a reader would not take for a refusal of 0.1."""
    text = sqlite_run.write(sqlite_run.config()).read_text().replace("t: 0.2", f"t: {written}")
    assert main(["-q", "run", str(sqlite_run.write(text))]) == 2
    err = capsys.readouterr().err
    assert f"Got '{written}' instead" in err and f"write {advice}." in err, err
    assert not isinstance(yaml.safe_load(f"t: {written}")["t"], float)
    assert isinstance(yaml.safe_load(f"t: {advice}")["t"], float)


def test_an_audit_row_rebuilt_from_a_report_with_nan_is_strict():
    """``tclose verify --report`` rebuilds a missing audit row from the run's report and the
    checks it measured, which may hold NaN (an EMD of a broken distance): whatever its base
    holds, the rebuilt report and its row are strict JSON, an unknown figure null."""
    from tclose.core.verify import Check, Verification
    from tclose.plugins.audit_table import audit_row, rebuilt_report

    base = strict(to_json({"run": {"id": "r1", "started": "2026-01-01T00:00:00Z"}}))
    base["risk"] = {"interval_p": NAN, "interval_disclosure": 0.0}
    base["privacy"] = {"t": 0.2, "t_achieved": {"a": 0.1, "b": NAN}}
    checks = [Check("k_anonymity", True, 3, 3), Check("t_closeness:b", False, 0.2, NAN)]
    verification = Verification(False, checks, 3, {}, np.zeros(0))
    report = rebuilt_report(None, "r1", verification, base)
    strict(json.dumps(report, allow_nan=False))
    assert report["risk"]["interval_p"] is None and report["run"]["rebuilt_by"]
    assert report["verification"]["checks"][1]["actual"] is None
    row = audit_row(report)
    assert row["t_achieved"] is None  # not 0.1: b's is unknown
    strict(json.dumps(row["report"], allow_nan=False))
