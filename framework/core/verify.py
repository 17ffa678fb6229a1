"""The independent verifier: k and t recomputed from written rows, nothing taken on trust.

The verifier sees only the rows as they were written (read back from the database, or the output
DataFrame of :func:`tclose.anonymize`). It rebuilds the equivalence classes from the written
quasi-identifier values, so two clusters that happen to share their aggregated values count as one
class. It shares no code with the algorithms except the distance definitions (the registered
distance plugins), which define what ``t`` means.

Checks, each with ``name``, ``passed``, ``expected``, ``actual``:

- ``row_count``: as many rows as the source had (only when the expected count is known);
- ``k_anonymity``: the smallest class has at least ``k`` rows;
- ``t_closeness:<column>``: no class has an EMD above ``t + EMD_TOLERANCE`` (only if ``t`` is set
  and the algorithm enforces it), and every class's EMD is a finite number >= 0 (else the check
  fails, with ``invalid_emds`` and a ``problem`` naming the distance: :func:`emd_problem`);
- ``confidential_multiset:<column>``: the confidential values are exactly the source's (sorted
  comparison), so nothing was lost, duplicated or altered (only when the source's values are
  given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.arrays import equal_row_classes
from tclose.base.compile_notice import compile_notice
from tclose.base.plugin_calls import fit_distance, plugin_call, plugin_label, read_only
from tclose.interfaces import EMD_TOLERANCE, Distance


@dataclass
class Verification:
    """The verifier's verdict."""

    passed: bool
    checks: list[dict[str, Any]]
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

    def failures(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["passed"]]


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


def same_multiset(expected: np.ndarray, written: np.ndarray) -> bool:
    """Whether two columns hold the same values with the same multiplicities, compared exactly
    (arrays of different types are compared as exact ``Decimal`` numbers, or as text)."""
    if len(expected) != len(written):
        return False
    if expected.dtype == written.dtype and expected.dtype != object:
        return bool(np.array_equal(np.sort(expected), np.sort(written)))
    return sorted(map(_exact_key, expected.tolist())) == sorted(map(_exact_key, written.tolist()))


def _exact_key(value: Any) -> tuple:
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        try:
            return (0, Decimal(value), "")
        except (InvalidOperation, ValueError):
            pass
    return (1, Decimal(0), str(value))


def _k_anonymity_check(sizes: np.ndarray, k: int) -> dict[str, Any]:
    """The ``k_anonymity`` check of the classes of ``sizes`` rows."""
    k_achieved = int(sizes.min()) if len(sizes) else 0
    return {
        "name": "k_anonymity",
        "passed": k_achieved >= k,
        "expected": k,
        "actual": k_achieved,
        "classes": int(len(sizes)),
        "classes_below_k": int((sizes < k).sum()),
    }


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


def problems(checks: Sequence[Mapping[str, Any]]) -> str:
    """The ``problem`` sentence of every failed check that has one, each after a space ("" if
    none), for the message of a failed verification."""
    return "".join(f" {c['problem']}" for c in checks if not c["passed"] and c.get("problem"))


def verify_rows(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    confidential: Mapping[str, tuple[Distance, Mapping[str, Any]]],
    k: int,
    t: float | None,
    expected_rows: int | None,
    expected_confidential: Mapping[str, np.ndarray] | None = None,
) -> Verification:
    """Verify a written table.

    Args:
        frame: the written rows' quasi-identifier and confidential columns.
        quasi_identifiers: the QI column names.
        confidential: column → (distance plugin, its options), used to compute EMDs.
        k: the k to check.
        t: the t to check, or ``None`` to only measure the EMD.
        expected_rows: the source's row count, or ``None`` when it is not known (``tclose verify``
            without the source): then no ``row_count`` check is made.
        expected_confidential: column → the source's values, for the multiset check.
    """
    checks: list[dict[str, Any]] = []
    if expected_rows is not None:
        checks.append(
            {
                "name": "row_count",
                "passed": len(frame) == expected_rows,
                "expected": expected_rows,
                "actual": len(frame),
            }
        )
    classes = equivalence_classes(frame, quasi_identifiers)
    sizes = np.bincount(classes) if len(classes) else np.zeros(0, dtype=np.int64)
    k_achieved = int(sizes.min()) if len(sizes) else 0
    checks.append(_k_anonymity_check(sizes, k))
    t_achieved: dict[str, float] = {}
    class_emds: dict[str, np.ndarray] = {}
    for column, (distance, options) in confidential.items():
        values = frame[column].to_numpy()
        if len(values) == 0:
            t_achieved[column] = 0.0
            class_emds[column] = np.zeros(0)
            continue
        where = f" while verifying {column!r}"
        with compile_notice():  # a first run compiles the EMD kernels here
            fitted = fit_distance(distance, column, values, options, where)
            with plugin_call(distance, "Distance", where):
                emds = np.asarray(fitted.cluster_emd(read_only(classes)), dtype=np.float64)
        class_emds[column] = emds
        invalid, problem = emd_problem(column, distance, emds, len(sizes))
        worst = float(emds.max()) if problem is None else float("nan")
        t_achieved[column] = worst
        if t is not None:
            check = {
                "name": f"t_closeness:{column}",
                "passed": problem is None and worst <= t + EMD_TOLERANCE,
                "expected": t,
                "actual": worst if problem is None else None,
                "distance": distance.name,
                "classes_above_t": int((emds > t + EMD_TOLERANCE).sum()),
                "invalid_emds": invalid,
            }
            if problem is not None:
                check["problem"] = problem
            checks.append(check)
        if expected_confidential is not None and column in expected_confidential:
            same = same_multiset(np.asarray(expected_confidential[column]), values)
            checks.append(
                {
                    "name": f"confidential_multiset:{column}",
                    "passed": same,
                    "expected": "the source's values",
                    "actual": "identical" if same else "different",
                }
            )
    return Verification(
        all(c["passed"] for c in checks), checks, k_achieved, t_achieved, sizes, class_emds
    )
