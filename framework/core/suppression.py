"""Suppression of outliers (``privacy.max_suppressed``): rows left out before the algorithm runs.

With ``privacy.max_suppressed: f`` (``0 <= f < 0.5``) a run leaves out

    s = min(floor(f * n), n - k)

of the ``n`` rows it would partition (those left once ``missing: exclude-rows`` set rows
aside): never more than the share ``f``, and never so many that fewer than ``k`` rows remain.
``f = 0`` (the default) leaves out none.

**Outlier** is defined by one rule, cheap (``O(n d)``) and deterministic: a row's outlier score
is its squared distance, in the mixed distance of the quasi-identifiers
(:mod:`tclose.base.attributes`: z-scored numbers and dates, scaled ordinal ranks, one-hot
nominal values, weights), to the mean of the encoded rows, the centroid of the table. The ``s``
rows with the largest scores are suppressed; equal scores are broken by the row's position in
the source's key order (the earlier row first). Such rows are the ones the algorithms can only
absorb into a class at a large within-class distance: extreme values, and values rare in a
nominal attribute (a one-hot value held by few rows lies far from the centroid).

The algorithm then runs on the remaining rows, as if they were the table: the distances are
fitted on their confidential values, so ``t`` is measured against the distribution of the
published rows (as the verifier recomputes it from the written table). Suppressed rows are not
written; the report counts them (``privacy.suppression``) and gives the SSE of the published
rows beside the full-table figure (``utility.sse_full_table``, ``docs/reports.md``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tclose.base.attributes import EncodedTable
from tclose.interfaces import SuppressionFacts

__all__ = [
    "RULE",
    "declared_suppression",
    "full_table_sse",
    "outlier_scores",
    "suppressed_count",
    "suppressed_rows",
    "suppress_outliers",
    "suppression_evidence",
    "suppression_facts",
]

#: The rule that chooses the suppressed rows, as the report names it.
RULE = (
    "outliers first: the rows farthest (squared mixed distance of the quasi-identifiers) from "
    "the centroid of the rows considered; ties by source key order"
)
#: Why a row is left out, as the report names it.
REASON = "outlier (privacy.max_suppressed)"


def suppressed_count(n: int, k: int, bound: float) -> int:
    """How many of ``n`` rows are suppressed under the share ``bound`` with minimum class size
    ``k``: ``min(floor(bound * n), n - k)``, and never below 0.

    >>> suppressed_count(1000, 5, 0.02), suppressed_count(6, 5, 0.4), suppressed_count(3, 5, 0.4)
    (20, 1, 0)
    """
    return max(0, min(math.floor(bound * n), n - k))


def outlier_scores(x: np.ndarray) -> np.ndarray:
    """Each row's squared Euclidean distance to the mean row of ``x`` (``(n, d)``)."""
    if len(x) == 0:
        return np.zeros(0)
    centred = x - x.mean(axis=0)
    return np.einsum("ij,ij->i", centred, centred)


def suppressed_rows(x: np.ndarray, count: int) -> np.ndarray:
    """Mask of the ``count`` rows of ``x`` with the largest :func:`outlier_scores`; equal scores
    by position (the earlier row first)."""
    mask = np.zeros(len(x), dtype=bool)
    if count <= 0:
        return mask
    scores = outlier_scores(x)
    order = np.lexsort((np.arange(len(x)), -scores))
    mask[order[:count]] = True
    return mask


def suppress_outliers(encoded: EncodedTable, k: int, bound: float) -> EncodedTable:
    """``encoded`` with its outliers left out (:meth:`EncodedTable.without`): the
    :func:`suppressed_count` rows chosen by :func:`suppressed_rows`; ``encoded`` itself when
    none is."""
    count = suppressed_count(len(encoded.x), k, bound)
    if count == 0:
        return encoded
    return encoded.without(suppressed_rows(encoded.x, count))


def suppression_facts(encoded: EncodedTable, bound: float) -> dict[str, Any]:
    """The report's ``privacy.suppression``: the bound, the rows considered (read and not set
    aside), the rows suppressed, their share, the reason and the rule."""
    rows = int(encoded.suppressed.sum()) if encoded.suppressed is not None else 0
    considered = len(encoded.x) + rows
    return {
        "max_suppressed": bound,
        "rows_considered": considered,
        "rows": rows,
        "share": rows / considered if considered else 0.0,
        "reason": REASON,
        "rule": RULE,
    }


def full_table_sse(encoded: EncodedTable, sse_per_attribute: dict[str, float]) -> float:
    """The SSE of the whole table (``utility.sse_full_table``): each published row's distance
    term to its published value, each suppressed row's to the aggregate of the whole table as
    one class, averaged over every considered row and every QI; ``sse_per_attribute`` the
    published rows' mean terms."""
    published = len(encoded.x)
    rows = published + (int(encoded.suppressed.sum()) if encoded.suppressed is not None else 0)
    if not rows or not sse_per_attribute:
        return 0.0
    per_attribute = [
        (mean * published + encoded.suppressed_loss.get(name, 0.0)) / rows
        for name, mean in sse_per_attribute.items()
    ]
    return float(np.mean(per_attribute))


def suppression_evidence(
    encoded: EncodedTable, bound: float, declared: int | None = None
) -> SuppressionFacts | None:
    """What the verifier knows of the rows ``encoded`` left out as outliers
    (:class:`~tclose.interfaces.SuppressionFacts`); ``None`` when no bound is set and none
    is left out (nor ``declared``)."""
    rows = int(encoded.suppressed.sum()) if encoded.suppressed is not None else 0
    if bound == 0 and rows == 0 and not declared:
        return None
    return SuppressionFacts(rows, len(encoded.x) + rows, declared)


def declared_suppression(report: Any) -> SuppressionFacts | None:
    """The rows a run's audit report declares suppressed (``privacy.suppression.rows``) of the
    rows it considered (``source.rows`` less ``source.rows_set_aside``); ``None`` for a report
    that declares no suppression."""
    declared = ((report or {}).get("privacy") or {}).get("suppression")
    source = (report or {}).get("source") or {}
    if not isinstance(declared, dict) or not isinstance(source.get("rows"), int):
        return None
    rows = declared.get("rows")
    if not isinstance(rows, int) or isinstance(rows, bool):
        return None
    considered = source["rows"] - int(source.get("rows_set_aside") or 0)
    return SuppressionFacts(rows, considered)
