"""What "verified" means: one criterion object per guarantee, each turning the evidence into checks.

The verifier (:func:`tclose.core.verify.verify`) gathers the :class:`Evidence` of a release once
(the written rows, their equivalence classes and EMDs, the linkage of the pass-through columns,
the content digest, and, for ``tclose verify --report``, the run's report) and asks every
criterion of :func:`built_in_criteria` and every third-party criterion (hook
``register_criteria``, :mod:`tclose.hookspecs`) for its :class:`Check`. A release is verified
when every check passes. ``tclose run``, ``tclose verify``, :func:`tclose.anonymize` and
``tclose compare`` run the same criteria; a criterion whose evidence is absent (no report, no
source, no ``t``) gives no check.

The built-in criteria, in the order their checks are listed (the report's
``verification.checks`` and the lines ``tclose verify`` prints):

- ``row_count`` (:class:`RowCount`): as many rows as the source had (when that count is known),
  less exactly the rows suppressed as outliers;
- ``suppression`` (:class:`Suppression`): the rows suppressed as outliers are at most the share
  ``privacy.max_suppressed`` of the rows considered (when suppression is configured or
  declared);
- ``k_anonymity`` (:class:`KAnonymity`): the smallest equivalence class has at least ``k`` rows;
- ``t_closeness:<column>`` (:class:`TCloseness`, one per confidential column): no class has an
  EMD above ``t + EMD_TOLERANCE`` and every EMD is a finite number >= 0 (when ``t`` is set and
  the algorithm enforces it);
- ``confidential_multiset:<column>`` (:class:`ConfidentialMultiset`, one per confidential
  column): the column holds exactly the source's values (when they are known);
- ``linkage`` (:class:`Linkage`): no row is unique on its pass-through columns taken together;
- ``config_sha256`` (:class:`ConfigDigest`): the configuration is the run's (with a report);
- ``content_digest`` (:class:`ContentDigest`): the published rows are the ones the run wrote
  (with a report);
- ``hierarchy_sha256:<column>`` (:class:`HierarchyDigest`): every hierarchy file is the run's
  (with a report that records hierarchies);
- ``run_id`` (:class:`RunMark`): the table's run mark names the report's run (with a report, on
  a table that carries a mark).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from tclose.base.hierarchy import Hierarchy
from tclose.base.plugin_calls import plugin_call, plugin_label
from tclose.errors import PluginFailure
from tclose.interfaces import (
    BUILT_IN_CRITERIA,
    EMD_TOLERANCE,
    Check,
    Criterion,
    Evidence,
    LinkageFacts,
    SuppressionFacts,
)

__all__ = [
    "BUILT_IN_CRITERIA",
    "Check",
    "Criterion",
    "Evidence",
    "LinkageFacts",
    "SuppressionFacts",
    "built_in_criteria",
    "judge",
]


class RowCount:
    """``row_count``: the written table has every row count known of the release: the source's
    (the run, ``--source``) or a report's ``target.rows`` (``expected_rows``), and, when the
    rows left out as outliers are known, the rows considered minus the rows suppressed. Every
    known count must hold: a report whose ``target.rows`` disagrees with its own suppression
    figures, or with the table, fails."""

    name = "row_count"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        facts = evidence.suppression
        if facts is None:
            if evidence.expected_rows is None:
                return None
            passed = evidence.rows == evidence.expected_rows
            return Check(self.name, passed, evidence.expected_rows, evidence.rows)
        expected = facts.considered - facts.rows
        details: dict[str, Any] = {
            "rows_considered": facts.considered,
            "rows_suppressed": facts.rows,
        }
        passed = evidence.rows == expected
        if evidence.expected_rows is not None and evidence.expected_rows != expected:
            details["rows_expected_otherwise"] = evidence.expected_rows
            passed = False
        return Check(self.name, passed, expected, evidence.rows, details)


class Suppression:
    """``suppression``: the rows left out as outliers are at most the share
    ``privacy.max_suppressed`` of the rows considered (``0`` when the configuration sets no
    bound), and, when the verifier chose them again from the source, as many as the run's
    report declares. No check when nothing is known of them, or when no bound is set and none
    is suppressed."""

    name = "suppression"
    config_keys: tuple[str, ...] = ("privacy.max_suppressed",)

    def check(self, evidence: Evidence) -> Check | None:
        facts = evidence.suppression
        bound = float(getattr(evidence.config, "max_suppressed", 0.0) or 0.0)
        declared = facts.declared if facts is not None else None
        if facts is None or (bound == 0 and facts.rows == 0 and not declared):
            return None
        allowed = math.floor(bound * facts.considered)
        details: dict[str, Any] = {
            "max_suppressed": bound,
            "rows_considered": facts.considered,
            "share": facts.rows / facts.considered if facts.considered else 0.0,
        }
        passed = facts.rows <= allowed
        if declared is not None:
            details["rows_declared"] = declared
            passed = passed and declared == facts.rows
        expected = f"at most {allowed} rows ({bound:g} of {facts.considered})"
        return Check(self.name, passed, expected, facts.rows, details)


class KAnonymity:
    """``k_anonymity``: every equivalence class of the written QI values has at least ``k``
    rows (``classes``: how many classes, ``classes_below_k``: how many are smaller)."""

    name = "k_anonymity"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check:
        sizes, k = evidence.class_sizes, evidence.k
        k_achieved = int(sizes.min()) if len(sizes) else 0
        details = {"classes": int(len(sizes)), "classes_below_k": int((sizes < k).sum())}
        return Check(self.name, k_achieved >= k, k, k_achieved, details)


class TCloseness:
    """``t_closeness:<column>``: no class's EMD for ``column`` exceeds ``t`` (with
    :data:`~tclose.interfaces.EMD_TOLERANCE`), and every EMD is a finite number >= 0 (else the
    check fails with ``invalid_emds`` and a ``problem``). No check when ``t`` is only measured
    or the table is empty."""

    config_keys: tuple[str, ...] = ()

    def __init__(self, column: str) -> None:
        self.column = column
        self.name = f"t_closeness:{column}"

    def check(self, evidence: Evidence) -> Check | None:
        t, emds = evidence.t, evidence.class_emds.get(self.column)
        if t is None or emds is None or not evidence.rows:
            return None
        invalid, problem = evidence.emd_problems.get(self.column, (0, None))
        worst = float(emds.max()) if problem is None else None
        details: dict[str, Any] = {
            "distance": evidence.distances.get(self.column),
            "classes_above_t": int((emds > t + EMD_TOLERANCE).sum()),
            "invalid_emds": invalid,
        }
        if problem is not None:
            details["problem"] = problem
        passed = worst is not None and worst <= t + EMD_TOLERANCE
        return Check(self.name, passed, t, worst, details)


class ConfidentialMultiset:
    """``confidential_multiset:<column>``: the written ``column`` holds exactly the source's
    values with their multiplicities (nothing lost, duplicated or altered); only when the
    source's values are known and the table is not empty."""

    config_keys: tuple[str, ...] = ()

    def __init__(self, column: str) -> None:
        self.column = column
        self.name = f"confidential_multiset:{column}"

    def check(self, evidence: Evidence) -> Check | None:
        expected = evidence.expected_confidential
        if expected is None or self.column not in expected or not evidence.rows:
            return None
        written = evidence.frame[self.column].to_numpy()
        same = same_multiset(np.asarray(expected[self.column]), written)
        return Check(self.name, same, "the source's values", "identical" if same else "different")


class Linkage:
    """``linkage``: no written row is unique on its pass-through columns taken together (such
    a row maps one-to-one onto its source row); see :mod:`tclose.core.published`."""

    name = "linkage"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        facts = evidence.linkage
        if facts is None:
            return None
        failed = facts.linkable_rows > 0
        columns = list(facts.columns)
        actual = f"{facts.linkable_rows} row(s) unique on ({', '.join(columns)})"
        details = {
            "linkable_rows": facts.linkable_rows,
            "columns": columns,
            "linking_columns": columns if failed else [],
            "allowed_unique": list(facts.allowed_unique),
        }
        return Check(
            self.name,
            not failed,
            "no row unique on its pass-through columns taken together",
            actual if failed else "none",
            details,
        )


class ConfigDigest:
    """``config_sha256``: the configuration's digest is the one the run's report records."""

    name = "config_sha256"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        if evidence.report is None or evidence.config is None:
            return None
        recorded = evidence.report.get("config_sha256")
        digest = evidence.config.digest_as_recorded(recorded)
        return Check(self.name, recorded == digest, recorded, digest)


class ContentDigest:
    """``content_digest``: the published table's digest recomputed now equals the one the run
    recorded, over the same column names and types, of the same table (the one the recorded
    statement names), and of a table, not a view."""

    name = "content_digest"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        if evidence.report is None:
            return None
        recorded = (evidence.report.get("target") or {}).get("content_digest") or {}
        computed = evidence.content_digest or {}
        sha256 = computed.get("sha256")
        difference = _digest_difference(recorded, computed) if sha256 else None
        passed = bool(sha256) and difference is None and recorded.get("sha256") == sha256
        actual = sha256 or computed.get("unavailable")
        if difference is not None:
            actual = f"{sha256} {difference}"
        expected = recorded.get("sha256") or "a digest in the report (none recorded)"
        return Check(self.name, passed, expected, actual)


def _digest_difference(recorded: Mapping[str, Any], computed: Mapping[str, Any]) -> str | None:
    """What makes a computed digest not comparable with the recorded one, or ``None``: other
    column names (the PostgreSQL digest hashes values only: a renamed column keeps its bytes),
    other column types (a type changed keeping the values), another table than the recorded
    statement's (another table the auditor's search path finds first), or a relation that is
    not a table (a view shows what its query selects)."""
    relation = computed.get("relation")
    if relation:
        return f"of a {relation}, not the table the run published"
    if recorded.get("columns") != computed.get("columns"):
        return f"of other columns: {', '.join(computed.get('columns') or [])}"
    types = recorded.get("types")
    changed = [
        f"{column} {types.get(column)} now {kind}"
        for column, kind in (computed.get("types") or {}).items()
        if types is not None and column in types and types[column] != kind
    ]
    if changed:
        return f"of columns of other types: {'; '.join(changed)}"
    statement = recorded.get("statement")
    if statement is not None and statement != computed.get("statement"):
        return f"of another table: {computed.get('statement')}"
    return None


def hierarchy_digests(attributes: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Column → the ``sha256`` of its hierarchy's content, its ``height`` and the number of
    ``leaves`` of its hierarchy, for every attribute that has one: a hierarchy given as a file
    is named in the configuration by its path only, and its content defines the distances (so
    what t means)."""
    return {
        name: {
            "sha256": attribute.hierarchy.digest(),
            "height": attribute.hierarchy.height,
            "leaves": len(attribute.hierarchy.leaves),
        }
        for name, attribute in attributes.items()
        if isinstance(getattr(attribute, "hierarchy", None), Hierarchy)
    }


class HierarchyDigest:
    """``hierarchy_sha256:<column>``, one per attribute with a hierarchy in the report or in the
    configuration: the hierarchy read now is the run's (a file edited after the run changes the
    distances, so what t means, while the configuration digest, which holds the file's path,
    stays the same). None for a report that records no hierarchies."""

    name = "hierarchy_sha256"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> list[Check]:
        if evidence.report is None or evidence.config is None:
            return []
        recorded = (evidence.report.get("privacy") or {}).get("hierarchies")
        if recorded is None:
            return []
        current = hierarchy_digests(evidence.config.attributes)
        checks = []
        for column in sorted(set(recorded) | set(current)):
            expected = (recorded.get(column) or {}).get("sha256")
            actual = (current.get(column) or {}).get("sha256")
            checks.append(Check(f"{self.name}:{column}", expected == actual, expected, actual))
        return checks


class RunMark:
    """``run_id``: the run mark of the published table names the run of the report (the table
    was published by that run); only when both are known."""

    name = "run_id"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        recorded = ((evidence.report or {}).get("run") or {}).get("id")
        if evidence.report is None or evidence.run_id is None or not recorded:
            return None
        return Check(self.name, evidence.run_id == recorded, recorded, evidence.run_id)


class ReleaseUnchanged:
    """``release``: a table that a trusted registry records as a release is still, in every
    respect its database records (the run's mark, columns and rows), the table tclose
    published; only when it is recorded."""

    name = "release"
    config_keys: tuple[str, ...] = ()

    def check(self, evidence: Evidence) -> Check | None:
        if evidence.release is None:
            return None
        (problem,) = evidence.release
        actual = "unchanged" if problem is None else problem
        return Check(self.name, problem is None, "the table tclose published, unchanged", actual)


def built_in_criteria(confidential: Iterable[str]) -> list[Criterion]:
    """The built-in criteria for a release with these ``confidential`` columns, in the order
    their checks are listed."""
    per_column: list[Criterion] = []
    for column in confidential:
        per_column += [TCloseness(column), ConfidentialMultiset(column)]
    return [
        RowCount(),
        Suppression(),
        KAnonymity(),
        *per_column,
        Linkage(),
        ConfigDigest(),
        ContentDigest(),
        HierarchyDigest(),
        RunMark(),
        ReleaseUnchanged(),
    ]


def judge(criteria: Iterable[Criterion], evidence: Evidence) -> list[Check]:
    """The checks of every criterion on ``evidence``, in order.

    Raises:
        PluginFailure: a criterion raised, or returned something other than a :class:`Check`
            (or a sequence of them, or ``None``), a check whose ``passed`` is not a bool, or a
            check not named after the criterion (``name`` or ``name:<part>``): the message
            names the criterion.
    """
    checks: list[Check] = []
    for criterion in criteria:
        with plugin_call(criterion, "Criterion", " while verifying"):
            found = criterion.check(evidence)
        found = [] if found is None else [found] if isinstance(found, Check) else found
        problem = _misfit(criterion, found)
        if problem:
            raise PluginFailure(
                f"{plugin_label(criterion, 'Criterion')} {problem} (a bug in the criterion)."
            )
        checks += found
    return checks


def _misfit(criterion: Criterion, found: Any) -> str | None:
    """What is wrong with the checks a criterion returned, or ``None``."""
    if not isinstance(found, (list, tuple)):
        return f"returned {type(found).__name__}, not a Check, a list of them or None"
    for check in found:
        if not isinstance(check, Check):
            return f"returned a {type(check).__name__} among its checks, not a Check"
        if not isinstance(check.passed, (bool, np.bool_)):
            return f"returned the check {check.name!r} with passed={check.passed!r}, not a bool"
        name = str(criterion.name)
        if check.name != name and not check.name.startswith(f"{name}:"):
            return f"returned a check named {check.name!r}, not {name!r} or {name + ':...'!r}"
    return None


def same_multiset(expected: np.ndarray, written: np.ndarray) -> bool:
    """Whether two columns hold the same values with the same multiplicities, compared exactly
    (arrays of different types are compared as exact ``Decimal`` numbers, or as text)."""
    if len(expected) != len(written):
        return False
    if expected.dtype == written.dtype and expected.dtype != object:
        return bool(np.array_equal(np.sort(expected), np.sort(written)))
    return sorted(map(_exact_key, expected.tolist())) == sorted(map(_exact_key, written.tolist()))


def _exact_key(value: Any) -> tuple:
    from decimal import Decimal, InvalidOperation

    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        try:
            return (0, Decimal(value), "")
        except (InvalidOperation, ValueError):
            pass
    return (1, Decimal(0), str(value))
