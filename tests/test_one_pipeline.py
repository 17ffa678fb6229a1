"""One pipeline: ``tclose run``, :func:`tclose.anonymize` and ``tclose compare`` take the steps
from an encoded table to a verified release through :mod:`tclose.core.pipeline`.

The rules, over the source (AST, imports inside functions too):

- outside the modules that define them (``core/pipeline.py``, ``core/clustering.py``,
  ``core/verify.py``), no module of ``framework/core`` or ``framework/app`` calls a step's
  building block (``cluster_rows``, ``measure_configured``, ``gather_evidence``,
  ``verify_rows``, ``encode_confidential``, ``encode_table``): a caller wires no step of its own;
- no module of ``framework/core`` or ``framework/app`` imports a private name (``_x``) of
  another module: what two of them share is public.

And the outcome: the same table and settings give the same published values, measures and
verdict through the API and through ``compare``'s steps.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tclose.app.compare import run_setting
from tclose.base.config import parse_settings
from tclose.base.registry import load_registry
from tclose.core import pipeline
from tclose.core.api import anonymize
from tclose.core.plan import resolve_plugins

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "framework" / "core", ROOT / "framework" / "app")
BUILDING_BLOCKS = {
    "cluster_rows",
    "measure_configured",
    "gather_evidence",
    "verify_rows",
    "encode_confidential",
    "encode_table",
}
DEFINERS = {"pipeline.py", "clustering.py", "verify.py"}


def _called(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, name)`` of every call of a building block, by bare name or attribute."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in BUILDING_BLOCKS:
                found.append((node.lineno, name))
    return found


def _private_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, module.name)`` of every private name imported from a tclose module."""
    return [
        (node.lineno, f"{node.module}.{alias.name}")
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tclose")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def _modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in folder.glob("*.py"))


def test_no_caller_wires_a_step_of_its_own():
    found = {
        p.relative_to(ROOT).as_posix(): calls
        for p in _modules()
        if p.name not in DEFINERS and (calls := _called(ast.parse(p.read_text("utf-8"))))
    }
    assert found == {}, "call the steps of tclose.core.pipeline instead"


def test_no_module_imports_a_private_name_of_another():
    found = {
        p.relative_to(ROOT).as_posix(): names
        for p in _modules()
        if (names := _private_imports(ast.parse(p.read_text("utf-8"))))
    }
    assert found == {}, "make what two modules share public"


@pytest.mark.parametrize(
    ("source", "calls", "private"),
    [
        ("from tclose.core.clustering import cluster_rows\ncluster_rows(x)\n", [2], []),
        ("import tclose.measures as m\nm.measure_configured(e)\n", [2], []),
        ("def f():\n    from tclose.core.runner import _read_inputs\n", [], [2]),
        ("from tclose.app.html_report import escape, _CSS\n", [], [1]),
        ("from tclose.core.pipeline import partition\npartition(e, r, 3, None)\n", [], []),
        ("from os import _exit\nfrom tclose.errors import __doc__\n", [], []),
    ],
)
def test_the_rules_see_calls_and_private_imports(source, calls, private):
    tree = ast.parse(source)
    assert [line for line, _ in _called(tree)] == calls
    assert [line for line, _ in _private_imports(tree)] == private


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "age": rng.normal(45, 12, 90).round(1),
            "zip": rng.integers(1000, 1040, 90).astype(float),
            "pay": rng.lognormal(8, 0.5, 90),
        }
    )


@pytest.mark.parametrize(("algorithm", "k", "t"), [("t-first", 4, 0.3), ("mdav", 5, None)])
def test_the_api_and_compare_give_one_release(frame, algorithm, k, t):
    """The API (its release as a DataFrame) and ``compare``'s steps (would-be published values)
    agree on the published values, SSE, clusters and verdict of the same settings."""
    registry = load_registry(entry_points=False)
    result = anonymize(
        frame, ["age", "zip"], ["pay"], k=k, t=t, algorithm=algorithm, keep_order=True
    )
    document = {
        "attributes": {
            "age": "quasi_identifier",
            "zip": "quasi_identifier",
            "pay": "confidential",
        },
        "privacy": {"k": k, "t": t},
        "algorithm": {"name": algorithm, "options": {}},
    }
    settings = parse_settings(document)
    resolved = resolve_plugins(settings, registry)
    encoded = pipeline.encode_frame(frame, settings.attributes)
    clustered = pipeline.partition(encoded, resolved, k, t)
    for column in ("age", "zip"):
        np.testing.assert_array_equal(result.data[column].to_numpy(), clustered.aggregated[column])
    np.testing.assert_array_equal(result.labels, clustered.labels)

    class Interval:  # compare reads these settings from its configuration
        attributes, interval_p = settings.attributes, result.report["risk"]["interval_p"]
        entity, l_diversity = settings.entity, settings.l_diversity
        max_suppressed, sampling_fraction = (
            0.0,
            result.report["risk"]["population"]["sampling_fraction"],
        )

    row = run_setting(encoded, Interval, resolved, k, t, registry)  # type: ignore[arg-type]
    assert row["verified"] is result.report["verification"]["passed"] is True
    assert row["sse"] == pytest.approx(result.report["utility"]["sse"])
    assert row["clusters"] == int(result.labels.max()) + 1
