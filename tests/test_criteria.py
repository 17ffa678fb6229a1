"""One verifier of named criteria (issue 30, WP1): the built-in criteria, third-party criteria
registered through ``register_criteria``, and the hooks ``check_run`` and ``rebuild_run_record``.

A criterion from a plugin runs wherever a release is verified (``tclose run``, ``tclose verify``,
:func:`tclose.anonymize`, ``tclose compare``), its checks are listed with the built-in ones, and a
failed one stops the publish like a failed k or t.
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.app.cli import main
from tclose.base.config import load_config
from tclose.base.registry import load_registry
from tclose.core import criteria
from tclose.core.runner import run
from tclose.core.verify import gather_evidence, verify, verify_rows
from tclose.errors import PluginError, PluginFailure, VerificationError
from tclose.interfaces import BUILT_IN_CRITERIA, Check, LinkageFacts
from tclose.plugins.emd_ordered import OrderedEMDDistance

ROOT = Path(__file__).resolve().parents[1]


def _doc_module() -> types.ModuleType:
    """The third-party criterion of docs/plugins.md ("Criteria"), executed as written."""
    text = (ROOT / "docs" / "plugins.md").read_text("utf-8")
    section = text.split("## Criteria", 1)[1].split("\n## ", 1)[0]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "class " in b]
    module = types.ModuleType("tclose_doc_criteria")
    exec(compile(block, "docs/plugins.md", "exec"), module.__dict__)
    return module


def _patients(charge=None, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "age": rng.integers(20, 80, n),
            "zip": rng.integers(1000, 1100, n),
            "charge": rng.integers(100, 1000, n) if charge is None else np.full(n, charge),
        }
    )


# --- the built-in criteria -----------------------------------------------------------------


def test_a_check_serialises_its_four_fields_then_its_details_in_order():
    check = Check("k_anonymity", True, 3, 4, {"classes": 2, "classes_below_k": 0})
    assert list(check.as_dict()) == [
        "name",
        "passed",
        "expected",
        "actual",
        "classes",
        "classes_below_k",
    ]
    with pytest.raises(AttributeError):
        check.passed = False  # frozen: a verdict is not edited after the fact


def test_the_built_in_criteria_are_the_named_guarantees_in_their_order():
    names = [c.name for c in criteria.built_in_criteria(["charge", "stay"])]
    assert names == [
        "row_count",
        "suppression",
        "k_anonymity",
        "t_closeness:charge",
        "confidential_multiset:charge",
        "t_closeness:stay",
        "confidential_multiset:stay",
        "linkage",
        "config_sha256",
        "content_digest",
        "hierarchy_sha256",
        "run_id",
        "release",
    ]
    assert {name.split(":")[0] for name in names} == set(BUILT_IN_CRITERIA)


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"q": [1, 1, 1, 2, 2, 2], "c": [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]})


def test_the_verifier_judges_the_evidence_with_every_criterion_that_applies():
    distance = {"c": (OrderedEMDDistance(), {})}
    evidence = gather_evidence(
        _frame(),
        ["q"],
        distance,
        3,
        0.2,
        expected_rows=6,
        expected_confidential={"c": np.array([3.0, 2.0, 1.0, 3.0, 2.0, 1.0])},
        linkage=LinkageFacts(("ward",), 0),
    )
    verification = verify(evidence)
    assert [c.name for c in verification.results] == [
        "row_count",
        "k_anonymity",
        "t_closeness:c",
        "confidential_multiset:c",
        "linkage",
    ]  # no report: no configuration, content, hierarchy or run-mark check
    assert verification.passed and verification.k_achieved == 3
    assert verification.checks == [c.as_dict() for c in verification.results]


def test_one_failed_criterion_fails_the_verdict_and_names_itself():
    distance = {"c": (OrderedEMDDistance(), {})}
    verification = verify_rows(
        _frame(), ["q"], distance, 3, 0.2, 7, linkage=LinkageFacts(("ward",), 2)
    )
    assert not verification.passed
    assert [c.name for c in verification.failures()] == ["row_count", "linkage"]
    linkage = verification.failures()[1]
    assert linkage.details["linking_columns"] == ["ward"] and linkage.details["linkable_rows"] == 2


# --- third-party criteria ------------------------------------------------------------------


def test_the_documented_criterion_fails_an_api_release_and_names_the_column():
    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    with pytest.raises(VerificationError, match=r"distinct_values:charge") as caught:
        tclose.anonymize(_patients(charge=500), ["age", "zip"], ["charge"], k=5, registry=registry)
    checks = {c["name"]: c for c in caught.value.report["verification"]["checks"]}
    failed = checks["distinct_values:charge"]
    assert failed["passed"] is False and failed["expected"] == 2 and failed["actual"] == 1
    assert failed["classes_below"] >= 1
    assert checks["k_anonymity"]["passed"]  # k and t hold: the plugin's criterion alone fails


def test_the_documented_criterion_passes_a_diverse_release_and_is_in_its_report():
    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    result = tclose.anonymize(_patients(), ["age", "zip"], ["charge"], k=5, registry=registry)
    names = [c["name"] for c in result.report["verification"]["checks"]]
    assert names[-1] == "distinct_values:charge" and result.report["verification"]["passed"]
    assert "criterion:distinct_values" in result.report["plugins"]


def test_tclose_plugins_lists_a_plugin_criterion(monkeypatch, capsys):
    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    monkeypatch.setattr("tclose.app.cli.load_registry", lambda: registry)
    assert main(["plugins"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^criteria:\n  distinct_values +module tclose_doc_criteria", printed, re.M)


def _run_config(sqlite_run, constant_charge: bool) -> Path:
    document = sqlite_run.config()
    if constant_charge:
        import sqlite3

        with sqlite3.connect(sqlite_run.db) as connection:
            connection.execute("UPDATE discharges SET charge = 1000")
    document["report"] = {"json": str(sqlite_run.tmp_path / "report.json")}
    return sqlite_run.write(document)


def test_a_plugin_criterion_stops_the_publish_of_tclose_run(sqlite_run):
    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    config = load_config(_run_config(sqlite_run, constant_charge=True))
    with pytest.raises(VerificationError, match=r"failed \(distinct_values:charge\)"):
        run(config, registry=registry)
    assert "discharges_anon" not in sqlite_run.tables()  # nothing published


def test_tclose_verify_prints_and_judges_a_plugin_criterion(sqlite_run, monkeypatch, capsys):
    path = _run_config(sqlite_run, constant_charge=True)
    assert main(["-q", "run", str(path)]) == 0  # without the plugin the release is published
    capsys.readouterr()
    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    monkeypatch.setattr("tclose.app.cli.load_registry", lambda: registry)
    report = str(sqlite_run.tmp_path / "report.json")
    assert main(["verify", str(path), "--report", report]) == 1
    printed = capsys.readouterr().out
    assert "FAIL  distinct_values:charge: expected 2, got 1" in printed
    assert "PASS  content_digest" in printed and "verdict: NOT verified" in printed


def test_tclose_compare_judges_a_plugin_criterion(sqlite_run):
    from tclose.app.compare import compare

    registry = load_registry(extra_plugins=[_doc_module()], entry_points=False)
    config = load_config(_run_config(sqlite_run, constant_charge=True))
    result = compare(config, ["t-first"], [3], [0.2], registry=registry)
    assert [r["verified"] for r in result["runs"]] == [False]


class _Criterion:
    name = "rigged"
    config_keys = ()

    def __init__(self, answer) -> None:
        self.answer = answer

    def check(self, evidence):
        return self.answer(evidence)


def _judge(answer):
    evidence = gather_evidence(_frame(), ["q"], {"c": (OrderedEMDDistance(), {})}, 3, None)
    return verify(evidence, [*criteria.built_in_criteria(["c"]), _Criterion(answer)])


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda e: {"name": "rigged", "passed": True}, "returned dict"),
        (lambda e: [Check("rigged", True, 1, 1), "ok"], "returned a str among its checks"),
        (lambda e: Check("rigged", "no", 1, 1), "passed='no', not a bool"),
        (lambda e: Check("k_anonymity", True, 1, 1), "check named 'k_anonymity'"),
        (lambda e: Check("riggedx", True, 1, 1), "check named 'riggedx'"),
        (lambda e: 1 / 0, "ZeroDivisionError"),
        (lambda e: e.classes.__setitem__(0, 5), "ValueError: assignment destination is read-only"),
        (lambda e: e.class_emds["c"].fill(0.0), "ValueError: assignment destination is read-only"),
    ],
)
def test_a_criterion_that_misbehaves_fails_naming_itself(answer, problem):
    with pytest.raises(PluginFailure, match=re.escape(problem)) as caught:
        _judge(answer)
    assert "Criterion 'rigged'" in str(caught.value)


def test_a_criterion_may_give_no_check_or_several():
    assert _judge(lambda e: None).passed
    verdict = _judge(lambda e: [Check("rigged:a", True, 1, 1), Check("rigged:b", False, 1, 0)])
    assert [c.name for c in verdict.results][-2:] == ["rigged:a", "rigged:b"]
    assert not verdict.passed


def _registering(*objects) -> object:
    class Plugin:
        @tclose.hookimpl
        def register_criteria(self, register):
            for obj in objects:
                register(obj)

    return Plugin()


@pytest.mark.parametrize(
    ("criterion", "problem"),
    [
        (types.SimpleNamespace(name="k_anonymity", check=lambda e: None), "of a built-in"),
        (types.SimpleNamespace(name="t_closeness", check=lambda e: None), "of a built-in"),
        (types.SimpleNamespace(name="a:b", check=lambda e: None), "without ':'"),
        (types.SimpleNamespace(name="", check=lambda e: None), "non-empty"),
        (types.SimpleNamespace(name="nocheck"), "no method check"),
        (_Criterion, "cannot be made without arguments: TypeError"),
    ],
)
def test_a_criterion_with_a_wrong_name_or_no_check_is_refused_at_registration(criterion, problem):
    with pytest.raises(PluginError, match=problem):
        load_registry(extra_plugins=[_registering(criterion)], entry_points=False)


def test_a_criterion_registered_as_a_class_is_instantiated_and_two_names_clash():
    module = _doc_module()
    registry = load_registry(
        extra_plugins=[_registering(module.DistinctValues)], entry_points=False
    )
    assert isinstance(registry.criteria["distinct_values"].obj, module.DistinctValues)
    with pytest.raises(PluginError, match="Two plugins register the criterion"):
        load_registry(
            extra_plugins=[_registering(module.DistinctValues), _doc_module()], entry_points=False
        )


# --- the hooks that replace the framework's imports of the audit-table plugin ---------------


class _Recorder:
    """Implements ``check_run`` and ``rebuild_run_record``, recording their calls."""

    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.refuse = refuse

    @tclose.hookimpl
    def check_run(self, config, target_database, tables):
        self.calls.append(("check_run", dict(tables)))
        if self.refuse:
            raise tclose.errors.ConfigError("refused by the recorder")

    @tclose.hookimpl
    def rebuild_run_record(self, config, run_id, verification, report):
        self.calls.append(("rebuild_run_record", {"run_id": run_id, "passed": verification.passed}))
        return False


def test_check_run_sees_the_resolved_tables_and_may_refuse_the_run(sqlite_run):
    recorder = _Recorder(refuse=True)
    registry = load_registry(extra_plugins=[recorder], entry_points=False)
    config = load_config(_run_config(sqlite_run, constant_charge=False))
    with pytest.raises(tclose.errors.ConfigError, match="refused by the recorder"):
        run(config, registry=registry)
    ((hook, tables),) = recorder.calls
    assert hook == "check_run" and set(tables) == {"source.table", "target.table", "report.table"}
    assert tables["report.table"] is None and "discharges_anon" in str(tables["target.table"])
    assert "discharges_anon" not in sqlite_run.tables()


def test_verify_asks_the_plugins_to_rebuild_the_record_of_the_marked_run(
    sqlite_run, monkeypatch, capsys
):
    document = sqlite_run.config()
    document["report"] = {"table": "tclose_audit"}
    path = sqlite_run.write(document)
    assert main(["-q", "run", str(path)]) == 0
    recorder = _Recorder()
    registry = load_registry(extra_plugins=[recorder], entry_points=False)
    monkeypatch.setattr("tclose.app.cli.load_registry", lambda: registry)
    assert main(["verify", str(path)]) == 0
    run_id = re.search(r"published by tclose run (\w+)", capsys.readouterr().out).group(1)
    assert ("rebuild_run_record", {"run_id": run_id, "passed": True}) in recorder.calls


def test_the_framework_imports_no_plugin_to_verify_or_plan():
    """The audit table's checks go through hooks: core and app name no plugin module."""
    for path in ("framework/core/guards.py", "framework/app/cli.py", "framework/core/plan.py"):
        tree = ast.parse((ROOT / path).read_text("utf-8"))
        imported = [
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        ]
        assert not [m for m in imported if m.startswith("tclose.plugins")], path


def test_only_the_criteria_build_verdicts():
    """What "verified" means is listed in one place: no other module of the framework writes
    a check's ``"passed":`` by hand (the report's serialisation excepted)."""
    allowed = {"framework/interfaces.py", "framework/core/report.py"}
    found = []
    for path in sorted((ROOT / "framework").rglob("*.py")) + sorted(
        (ROOT / "plugins").glob("*.py")
    ):
        relative = path.relative_to(ROOT).as_posix()
        if relative in allowed or "app/html_report" in relative:
            continue
        if re.search(r"""["']passed["']\s*:""", path.read_text("utf-8")):
            found.append(relative)
    assert found == ["plugins/audit_table.py"]  # the rebuilt report's verification section
