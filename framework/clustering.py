"""Fit the distances and run the algorithm: the kernel phase of a run, shared by the database
runner and the in-memory API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .arrays import dense_labels
from .errors import DataError, VerificationError
from .interfaces import FittedDistance, Partition
from .kernel_notice import compile_notice

if TYPE_CHECKING:
    from .runner import Resolved


def cluster_rows(
    x: np.ndarray,
    confidential: Mapping[str, np.ndarray],
    distance_options: Mapping[str, Mapping[str, Any]],
    resolved: Resolved,
    k: int,
    t: float | None,
) -> tuple[np.ndarray, Partition, list[FittedDistance]]:
    """Fit one distance per confidential attribute and partition the rows.

    Args:
        x: ``(n, p)`` encoded quasi-identifiers (:func:`tclose.attributes.encode_table`).
        confidential: column → the values its distance is fitted on.
        distance_options: column → options derived from the attribute (hierarchy, categories),
            added to the distance's configured options.
        resolved: the algorithm and distances of the run.
        k: minimum cluster size.
        t: t-closeness level, or ``None``.

    Returns:
        dense labels ``0..L-1``, the algorithm's :class:`Partition`, and the fitted distances.

    Raises:
        DataError: fewer rows than ``k``.
        VerificationError: the algorithm returned labels of the wrong shape.
    """
    n = x.shape[0]
    if n < k:
        raise DataError(
            f"The table has {n} rows, fewer than k = {k}: no k-anonymous release "
            f"is possible. Lower k or add rows."
        )
    fitted = []
    with compile_notice():
        for column, values in confidential.items():
            distance, options = resolved.distances[column]
            model = distance.fit(values, {**options, **distance_options.get(column, {})})
            model.column = column
            fitted.append(model)
        partition = resolved.algorithm.partition(x, fitted, k, t, resolved.algorithm_options)
    labels = np.asarray(partition.labels)
    if labels.shape != (n,):
        raise VerificationError(
            f"Algorithm {resolved.algorithm.name} returned {labels.shape} labels for {n} rows."
        )
    return dense_labels(labels), partition, fitted
