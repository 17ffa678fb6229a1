"""The independent verifier: the evidence of a release gathered once, judged by the criteria.

The verifier sees only the rows as they were written (read back from the database, or the output
DataFrame of :func:`tclose.anonymize`). It rebuilds the equivalence classes from the written
quasi-identifier values, so two clusters that happen to share their aggregated values count as one
class, and measures every class's EMD. It shares no code with the algorithms except the distance
definitions (the registered distance plugins), which define what ``t`` means.

What "verified" means is the list of criteria (:mod:`tclose.core.criteria`: row count, k, t per
confidential column, confidential multisets, linkage, and with a run's report its configuration,
content, hierarchy and run-mark digests), plus those third-party plugins register
(``register_criteria``). :func:`verify` runs them on the :class:`~tclose.core.criteria.Evidence`;
``tclose run``, ``tclose verify``, :func:`tclose.anonymize` and ``tclose compare`` all call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.arrays import equal_row_classes
from tclose.base.compile_notice import compile_notice
from tclose.base.plugin_calls import fit_distance, plugin_call, plugin_label, read_only
from tclose.core.criteria import (
    Check,
    Criterion,
    Evidence,
    LinkageFacts,
    SuppressionFacts,
    built_in_criteria,
    judge,
    same_multiset,
)
from tclose.interfaces import EMD_TOLERANCE, Distance

__all__ = ["Check", "Evidence", "LinkageFacts", "Verification", "same_multiset", "verify"]


@dataclass
class Verification:
    """The verifier's verdict: the checks of every criterion and what was measured."""

    passed: bool
    #: the checks, in the order of the criteria (:mod:`tclose.core.criteria`).
    results: list[Check]
    k_achieved: int
    #: confidential column → its largest class EMD (NaN when the distance gave an EMD that is
    #: not a finite number >= 0: :func:`emd_problem`).
    t_achieved: dict[str, float]
    class_sizes: np.ndarray = field(repr=False)
    #: confidential column → EMD of every class (aligned with ``class_sizes``).
    class_emds: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: the written table's content digest (:mod:`tclose.core.published`), when it was read from a
    #: database.
    content_digest: dict[str, Any] | None = None
    #: risk and utility against the source (``tclose verify --source``), see tclose.measures.
    measures: dict[str, Any] | None = field(default=None, repr=False)
    #: the run mark of the published table (``tclose verify``), when it carries one.
    run_id: str | None = None

    @property
    def checks(self) -> list[dict[str, Any]]:
        """The checks as the report records them (:meth:`Check.as_dict`)."""
        return [check.as_dict() for check in self.results]

    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.results if not c.passed]


def equivalence_classes(frame: pd.DataFrame, quasi_identifiers: Sequence[str]) -> np.ndarray:
    """Class of every row: rows with identical written QI values share a class (NULLs included;
    ``0.0`` and ``-0.0`` are equal, NaNs are one value), classes numbered in the order of their
    first row. When every QI column holds NumPy integers or floats, the classes come from a hash
    of each row (:func:`tclose.base.arrays.equal_row_classes`, ~7x faster at 1M rows), proven exact
    row by row; otherwise, or if two different rows share a hash, from pandas' grouping."""
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64)
    columns = [frame[q].to_numpy() for q in quasi_identifiers]
    if columns and all(isinstance(c, np.ndarray) and c.dtype.kind in "iuf" for c in columns):
        classes = equal_row_classes(columns)
        if classes is not None:
            return classes
    return (
        frame.groupby(list(quasi_identifiers), dropna=False, sort=False, observed=True)
        .ngroup()
        .to_numpy(dtype=np.int64)
    )


def emd_problem(
    column: str, distance: Distance, emds: np.ndarray, classes: int
) -> tuple[int, str | None]:
    """How many of the ``classes`` EMDs a distance gave for ``column`` cannot be compared with
    ``t``, and a sentence saying so (``None`` when every EMD is valid).

    An EMD is a distance between two distributions: a finite number >= 0. One that is NaN,
    infinite or negative (``-inf <= t`` holds: such an EMD would pass a plain comparison) is a bug
    in the distance plugin, and the t check fails on it. A value less than
    :data:`~tclose.interfaces.EMD_TOLERANCE` below 0 is valid: an EMD computed as a sum of
    differences can come out a few ulps below 0, and the same tolerance is granted against
    ``t``. An answer that is not one EMD per class counts every class as invalid.
    """
    name = plugin_label(distance, "Distance")
    if emds.shape != (classes,):
        return classes, (
            f"{name} gave {emds.size} EMD(s) for {classes} classes of {column!r} (shape "
            f"{emds.shape}): cluster_emd must return one EMD per class, so t was not checked "
            f"(a bug in the distance plugin)."
        )
    invalid = ~np.isfinite(emds) | (emds < -EMD_TOLERANCE)
    count = int(invalid.sum())
    if count == 0:
        return 0, None
    shown = ", ".join(repr(float(v)) for v in np.unique(emds[invalid])[:3])
    return count, (
        f"{name} gave {count} of {classes} classes of {column!r} an EMD that is not a finite "
        f"number >= 0 (e.g. {shown}); an EMD is a distance, so t cannot be checked against it "
        f"(a bug in the distance plugin)."
    )


def problems(checks: Iterable[Check]) -> str:
    """The ``problem`` sentence of every failed check that has one, each after a space ("" if
    none), for the message of a failed verification."""
    return "".join(f" {c.problem}" for c in checks if not c.passed and c.problem)


def release_criteria(confidential: Iterable[str], registry: Any = None) -> list[Criterion]:
    """The criteria a release is verified against: the built-in ones
    (:func:`tclose.core.criteria.built_in_criteria`), then those the plugins of ``registry``
    register (hook ``register_criteria``), in registration order."""
    extra = [p.obj for p in registry.criteria.values()] if registry is not None else []
    return built_in_criteria(confidential) + extra


def verify(evidence: Evidence, criteria: Sequence[Criterion] | None = None) -> Verification:
    """The verdict of ``criteria`` (by default the built-in ones) on ``evidence``: passed when
    every check passes."""
    if criteria is None:
        criteria = built_in_criteria(evidence.confidential)
    t_achieved = {  # before any criterion sees the evidence
        column: _worst(emds, evidence.emd_problems[column][1])
        for column, emds in evidence.class_emds.items()
    }
    sizes = evidence.class_sizes
    results = judge(criteria, evidence)
    return Verification(
        passed=all(c.passed for c in results),
        results=results,
        k_achieved=int(sizes.min()) if len(sizes) else 0,
        t_achieved=t_achieved,
        class_sizes=sizes,
        class_emds=dict(evidence.class_emds),
        content_digest=dict(evidence.content_digest) if evidence.content_digest else None,
        run_id=evidence.run_id,
    )


def _worst(emds: np.ndarray, problem: str | None) -> float:
    """The largest EMD of a column (0 without classes), NaN when some EMD is not valid."""
    if problem is not None:
        return float("nan")
    return float(emds.max()) if len(emds) else 0.0


def gather_evidence(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    confidential: Mapping[str, tuple[Distance, Mapping[str, Any]]],
    k: int,
    t: float | None,
    **known: Any,
) -> Evidence:
    """The :class:`~tclose.core.criteria.Evidence` of a written table: its equivalence classes
    and every class's EMD for each confidential column, with what else is ``known`` (the
    other fields of :class:`~tclose.core.criteria.Evidence`: ``expected_rows``, ``linkage``,
    ``report``, ...). Its arrays are read-only: a criterion that writes into them fails, naming
    itself, rather than changing what the next one judges."""
    classes = equivalence_classes(frame, quasi_identifiers)
    sizes = np.bincount(classes) if len(classes) else np.zeros(0, dtype=np.int64)
    class_emds: dict[str, np.ndarray] = {}
    emd_problems: dict[str, tuple[int, str | None]] = {}
    for column, (distance, options) in confidential.items():
        values = frame[column].to_numpy()
        if len(values) == 0:
            class_emds[column], emd_problems[column] = np.zeros(0), (0, None)
            continue
        class_emds[column] = read_only(_class_emds(column, distance, options, values, classes))
        emd_problems[column] = emd_problem(column, distance, class_emds[column], len(sizes))
    return Evidence(
        frame=frame,
        quasi_identifiers=tuple(quasi_identifiers),
        confidential=tuple(confidential),
        classes=read_only(classes),
        class_sizes=read_only(sizes),
        k=k,
        t=t,
        distances={column: d.name for column, (d, _options) in confidential.items()},
        class_emds=class_emds,
        emd_problems=emd_problems,
        **known,
    )


def _class_emds(
    column: str,
    distance: Distance,
    options: Mapping[str, Any],
    values: np.ndarray,
    classes: np.ndarray,
) -> np.ndarray:
    """The EMD of every class of ``column``'s ``values``, as the distance plugin computes it."""
    where = f" while verifying {column!r}"
    with compile_notice():  # a first run compiles the EMD kernels here
        fitted = fit_distance(distance, column, values, options, where)
        with plugin_call(distance, "Distance", where):
            return np.asarray(fitted.cluster_emd(read_only(classes)), dtype=np.float64)


def verify_rows(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    confidential: Mapping[str, tuple[Distance, Mapping[str, Any]]],
    k: int,
    t: float | None,
    expected_rows: int | None,
    expected_confidential: Mapping[str, np.ndarray] | None = None,
    *,
    linkage: LinkageFacts | None = None,
    config: Any = None,
    criteria: Sequence[Criterion] | None = None,
    entities: np.ndarray | None = None,
    suppression: SuppressionFacts | None = None,
) -> Verification:
    """Verify written rows: :func:`gather_evidence`, then :func:`verify`.

    Args:
        frame: the written rows' quasi-identifier and confidential columns.
        quasi_identifiers: the QI column names.
        confidential: column → (distance plugin, its options), used to compute EMDs.
        k: the k to check.
        t: the t to check, or ``None`` to only measure the EMD.
        expected_rows: the source's row count, or ``None`` when it is not known (``tclose verify``
            without the source): then no ``row_count`` check is made.
        expected_confidential: column → the source's values, for the multiset check.
        linkage: the linkage of the pass-through columns, for the ``linkage`` check.
        config: the configuration (or the API's :class:`~tclose.base.config.Settings`), for
            the criteria that read it.
        criteria: the criteria (by default the built-in ones, :func:`release_criteria`).
        entities: the entity (``source.entity``) of every row of ``frame``, or ``None``.
        suppression: the rows left out as outliers, for the ``row_count`` and ``suppression``
            checks.
    """
    evidence = gather_evidence(
        frame,
        quasi_identifiers,
        confidential,
        k,
        t,
        expected_rows=expected_rows,
        expected_confidential=expected_confidential,
        linkage=linkage,
        config=config,
        entities=entities,
        suppression=suppression,
    )
    return verify(evidence, criteria)
