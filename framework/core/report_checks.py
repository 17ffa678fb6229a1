"""What makes parsed JSON an audit report that ``tclose report`` and ``tclose verify --report``
read: strict JSON, the report's schema (:func:`tclose.core.report_model.report_schema`), counts
that fit their edges and categories, and a verdict its own checks make."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tclose.base.jsonsafe import dotted
from tclose.base.schema import is_number, json_kind, schema_problem
from tclose.core.report_model import report_schema
from tclose.interfaces import EMD_TOLERANCE


def report_problem(report: Any) -> str | None:
    """Why ``report`` (parsed JSON) is not an audit report that ``tclose report`` can render and
    ``tclose verify --report`` can check, in one sentence naming the field and never its value;
    ``None`` if it is one.

    Checked: that no number is NaN or infinite (tclose writes strict JSON: docs/reports.md), the
    report's schema (every field of the type tclose writes), that every histogram has one more
    edge than counts and every category its counts, and that ``verification.passed`` is ``true``
    only if its checks make that verdict (a report claiming a verdict its own checks contradict
    is not one tclose wrote).
    """
    if not isinstance(report, dict):
        return f"it holds {json_kind(report)}, not a JSON object"
    at = _non_finite_at(report)
    if at is not None:
        return (
            f"{dotted(at)} is NaN or an infinity, which no report holds (reports are strict "
            f"JSON: an undefined figure is null)"
        )
    return (
        schema_problem(report, report_schema())
        or _count_problem(report)
        or _stated_verdict_problem(report)
    )


def stated_verdict(verification: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether a report's ``verification`` says "verified", and the names of its checks that
    did not pass. One field is not a verdict: ``passed`` must be ``true``, at least one check
    must have run, and every check must say ``passed: true`` too (the page, ``tclose report``
    and :func:`report_problem` all read it so)."""
    checks = verification.get("checks") or []
    failed = [str(c.get("name")) for c in checks if c.get("passed") is not True]
    return verification.get("passed") is True and bool(checks) and not failed, failed


def _count_problem(report: Mapping[str, Any]) -> str | None:
    """Whether every histogram has one more edge than counts (and at least 2 edges), and every
    category distribution one count per category, in a report that fits its schema."""
    histograms: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {
        ("privacy", "emd_histogram", c): (h["edges"], {"counts": h["counts"]})
        for c, h in report["privacy"]["emd_histogram"].items()
    }
    for column, data in report["distributions"].items():
        counts = {"original": data["original"], "anonymized": data["anonymized"]}
        if "categories" in data:
            for name, values in counts.items():
                if len(values) != len(data["categories"]):
                    return (
                        f"distributions.{column}.{name} has {len(values)} counts for "
                        f"{len(data['categories'])} categories"
                    )
        else:
            histograms["distributions", column] = (data["edges"], counts)
    for at, (edges, counts) in histograms.items():
        if len(edges) < 2:
            return f"{dotted(at)}.edges has {len(edges)} edges, not at least 2"
        for name, values in counts.items():
            if len(values) != len(edges) - 1:
                return f"{dotted(at)}.{name} has {len(values)} counts for {len(edges)} edges"
    return None


def _stated_verdict_problem(report: Mapping[str, Any]) -> str | None:
    """Why ``verification.passed`` is ``true`` while the report's checks do not make it."""
    verification = report["verification"]
    verified, failed = stated_verdict(verification)
    if verification["passed"] is True and not verified:
        which = f"its check {failed[0][:80]!r} failed" if failed else "no check ran"
        return f"verification.passed is true, but {which}"
    if verified:
        problem = _verdict_problem(report, verification["checks"])
        if problem:
            return f"verification.passed is true, but {problem}"
    return None


def _non_finite_at(value: Any) -> tuple[Any, ...] | None:
    """Where the first NaN or infinite number in parsed JSON is (its path of keys and list
    indexes), or ``None``: Python's parser reads the tokens ``NaN``, ``Infinity``,
    ``-Infinity`` and a number too large for a float (``1e400``) that tclose never writes."""
    pending: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while pending:
        node, at = pending.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return at
        if isinstance(node, dict):
            pending.extend((item, (*at, key)) for key, item in reversed(node.items()))
        elif isinstance(node, list):
            pending.extend((item, (*at, i)) for i, item in reversed(list(enumerate(node))))
    return None


def _verdict_problem(report: Mapping[str, Any], checks: list[dict[str, Any]]) -> str | None:
    """Why the passed ``checks`` of ``report`` do not make its verdict: the verifier always
    checks k, and t for every confidential attribute when the algorithm enforces it; a report
    edited to drop the check that failed, or to mark a failed check passed, is refused."""
    named = {c["name"]: c for c in checks if isinstance(c.get("name"), str)}
    privacy = report.get("privacy") or {}
    needed = ["k_anonymity"]
    if privacy.get("t") is not None and privacy.get("t_enforced", True) is not False:
        needed += [f"t_closeness:{c}" for c in privacy.get("t_achieved") or {}]
    for name in needed:
        if name not in named:
            return f"it has no {name[:80]} check"
        check = named[name]
        expected: Any = check.get("expected")
        actual: Any = check.get("actual")
        if not _finite(expected):
            return f"its check {name[:80]!r} expects {_shown(expected)}, not a finite number"
        if name == "k_anonymity" and not (_finite(actual) and actual >= expected):
            return f"its check {name!r} passed with {_shown(actual)} < {expected}"
        if name != "k_anonymity" and not (_finite(actual) and actual <= expected + EMD_TOLERANCE):
            return f"its check {name[:80]!r} passed with {_shown(actual)} > {expected}"
    return None


def _finite(value: Any) -> bool:
    """A finite number a float can hold (a figure a passed check can have)."""
    return is_number(value) and math.isfinite(value)


def _shown(value: Any) -> str:
    """A figure of a check in a message: a number, or what else it is (never a long text)."""
    return str(value) if value is None or _finite(value) else json_kind(value)
