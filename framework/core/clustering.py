"""Fit the distances and run the algorithm: the kernel phase of a run, shared by the database
runner and the in-memory API."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tclose.base.compile_notice import compile_notice
from tclose.base.plugin_calls import checked_labels, fit_distance, plugin_call, plugin_label
from tclose.blocks.framed import run_algorithm
from tclose.core.entities import enforce, requirements
from tclose.errors import DataError, VerificationError
from tclose.interfaces import FittedDistance, Partition, Problem

if TYPE_CHECKING:
    from tclose.base.attributes import EncodedTable
    from tclose.core.plan import Resolved


def refuse_too_few_rows(n: int, k: int, set_aside: int = 0) -> None:
    """:class:`DataError` (exit 3) when ``n`` rows (left once ``missing: exclude-rows`` set
    ``set_aside`` aside) are fewer than ``k``: no k-anonymous release is possible."""
    if n < k:
        left = f" left once missing: exclude-rows set {set_aside} row(s) aside" if set_aside else ""
        raise DataError(
            f"The table has {n} rows{left}, fewer than k = {k}: no k-anonymous release "
            f"is possible. Lower k or add rows."
        )


def cluster_rows(
    x: np.ndarray,
    confidential: Mapping[str, np.ndarray],
    distance_options: Mapping[str, Mapping[str, Any]],
    resolved: Resolved,
    k: int,
    t: float | None,
    set_aside: int = 0,
    release_sse: Callable[[np.ndarray], float] | None = None,
    *,
    entities: tuple[str, np.ndarray] | None = None,
    l_diversity: tuple[int, str] | None = None,
) -> tuple[np.ndarray, Partition, list[FittedDistance]]:
    """Fit one distance per confidential attribute and partition the rows (the algorithm
    with the framework's blocks and refinement: :func:`tclose.blocks.framed.run_algorithm`),
    then merge every cluster with fewer than ``k`` distinct entities or not ``l``-diverse in a
    confidential attribute into its nearest (:func:`tclose.core.entities.enforce`), whatever
    the algorithm.

    Args:
        x: ``(n, p)`` encoded quasi-identifiers (:func:`tclose.base.attributes.encode_table`).
        confidential: column → the values its distance is fitted on.
        distance_options: column → options derived from the attribute (hierarchy, categories),
            added to the distance's configured options.
        resolved: the algorithm and distances of the run.
        k: minimum cluster size.
        t: t-closeness level, or ``None``.
        set_aside: how many rows ``missing: exclude-rows`` set aside (named in the error when
            too few rows are left).
        release_sse: the report's SSE of a partition (:func:`release_sse_of`), handed to the
            algorithm as :attr:`Problem.release_sse <tclose.interfaces.Problem.release_sse>`.
        entities: ``(column, codes)``: the ``source.entity`` column and the entity of every
            row (:func:`tclose.core.entities.entity_codes`), or ``None``.
        l_diversity: ``(l, kind)`` (``privacy.l``, ``privacy.l_kind``), or ``None``.

    Returns:
        dense labels ``0..L-1``, the algorithm's :class:`Partition`, and the fitted distances.

    Raises:
        DataError: fewer rows than ``k``.
        ConfigError: the whole table has fewer than ``k`` entities or is not ``l``-diverse.
        VerificationError: the algorithm broke its contract (:func:`checked_labels`); nothing
            has been written.
        PluginFailure: the algorithm or a distance raised an exception that is not a
            :class:`TcloseError` (any ``BaseException`` but ``KeyboardInterrupt``, which is
            left alone).
    """
    n = x.shape[0]
    refuse_too_few_rows(n, k, set_aside)
    fitted = []
    algorithm = resolved.algorithm
    before = _fingerprint(x)
    with compile_notice():
        for column, values in confidential.items():
            distance, options = resolved.distances[column]
            own = {**options, **distance_options.get(column, {})}
            fitted.append(fit_distance(distance, column, values, own))
        entity, codes = entities if entities is not None else (None, None)
        needed = requirements(k, codes, entity, l_diversity, fitted)
        own = copy.deepcopy(resolved.algorithm_options)  # the report records the original
        problem = Problem(x, fitted, k, t, own, release_sse=release_sse)
        with plugin_call(algorithm):
            partition = run_algorithm(algorithm, problem, resolved.algorithms or None)
    if _fingerprint(x) != before:
        raise VerificationError(
            f"{plugin_label(algorithm)} changed its input x in place (the quasi-identifiers the "
            f"report's disclosure risk is measured on), which an algorithm must not do: "
            f"work on a copy."
        )
    labels = enforce(x, checked_labels(algorithm, partition, n), partition, needed)
    return labels, partition, fitted


def release_sse_of(encoded: EncodedTable) -> Callable[[np.ndarray], float]:
    """The report's ``utility.sse`` of the release a partition of ``encoded``'s kept rows would
    publish: :meth:`EncodedTable.information_loss` of :meth:`EncodedTable.aggregate`, as
    :func:`tclose.core.report.release_summary` computes it (labels are made dense first)."""
    from tclose.base.arrays import dense_labels

    def sse(labels: np.ndarray) -> float:
        return float(encoded.information_loss(encoded.aggregate(dense_labels(labels)))["sse"])

    return sse


def _fingerprint(array: np.ndarray) -> str:
    """A digest of ``array``'s values, to tell whether a plugin changed it."""
    return hashlib.blake2b(np.ascontiguousarray(array).data, digest_size=16).hexdigest()
