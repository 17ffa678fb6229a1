"""Turning columns into the arrays kernels see, and cluster labels back into output values.

Quasi-identifiers are standardized to z-scores (``(x - mean) / std``, population std; a constant
column becomes zeros), so that MDAV's Euclidean distances weigh every attribute equally.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .errors import DataError


def _rows(mask: pd.Series) -> str:
    """The first few index labels where ``mask`` holds, for error messages."""
    labels = [str(label) for label in mask.index[mask.to_numpy()][:5]]
    more = ", ..." if int(mask.sum()) > 5 else ""
    return ", ".join(labels) + more


def numeric_column(values: pd.Series, column: str, role: str) -> np.ndarray:
    """The column as ``float64``; :class:`DataError` naming the column for NULLs or text.

    Messages give the column, the problem, how many rows and the first rows affected (by the
    Series' index: the row key when the caller indexes by it), never the offending values, which
    may be personal data.

    Args:
        values: the raw column as read from the source.
        column: its name, for messages.
        role: ``"quasi-identifier"`` or ``"confidential"``, for messages.
    """
    missing = values.isna()
    if missing.any():
        raise DataError(
            f"The {role} column {column!r} has {int(missing.sum())} missing (NULL) value(s) in "
            f"{len(values)} rows (rows {_rows(missing)}). Fill or exclude them before "
            f"anonymizing."
        )
    converted = pd.to_numeric(values, errors="coerce")
    bad = converted.isna()
    if bad.any():
        raise DataError(
            f"The {role} column {column!r} is declared numeric but {int(bad.sum())} row(s) hold "
            f"non-numeric values (rows {_rows(bad)}). Clean them, or declare another type."
        )
    result = converted.to_numpy(dtype=np.float64)
    infinite = ~np.isfinite(result)
    if infinite.any():
        raise DataError(
            f"The {role} column {column!r} holds infinite values in "
            f"{int(infinite.sum())} row(s) (rows {_rows(pd.Series(infinite, index=values.index))})."
        )
    return result


def standardize(matrix: np.ndarray) -> np.ndarray:
    """Z-scores per column (population standard deviation); constant columns become 0."""
    mean = matrix.mean(axis=0)
    std = matrix.std(axis=0)
    std[std == 0] = 1.0
    return (matrix - mean) / std


def dense_labels(labels: np.ndarray) -> np.ndarray:
    """Renumber labels to ``0..L-1`` in order of first appearance of each sorted label."""
    return np.unique(labels, return_inverse=True)[1].astype(np.int64).reshape(-1)


def cluster_means(matrix: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean of each column per cluster: shape ``(L, d)`` for dense labels ``0..L-1``."""
    n_clusters = int(labels.max()) + 1 if len(labels) else 0
    counts = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    sums = np.zeros((n_clusters, matrix.shape[1]))
    np.add.at(sums, labels, matrix)
    return sums / counts[:, None]


def aggregate(
    matrix: np.ndarray, labels: np.ndarray, columns: Sequence[str], rounded: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """Each row's quasi-identifiers replaced by its cluster's mean (rounded where asked).

    Returns column → ``(n,)`` array.
    """
    means = cluster_means(matrix, labels)
    result = {}
    for j, column in enumerate(columns):
        values = means[labels, j]
        result[column] = np.rint(values) if column in rounded else values
    return result


def information_loss(original: np.ndarray, anonymized: np.ndarray) -> dict[str, float]:
    """Information loss of the quasi-identifiers.

    ``sse``: the paper's normalized SSE, ``1/n * sum_j 1/d * sum_i NED(a_ji, a'_ji)^2`` with the
    normalized Euclidean distance of one attribute taken as the difference divided by the
    attribute's (population) standard deviation in the original data; ``sse_raw``: the sum of
    squared differences of the standardized values; ``sse_sst``: ``sse_raw`` over the total sum of
    squares of the standardized values (``SSE/SST``; equal to ``sse`` unless a column is constant).
    """
    mean = original.mean(axis=0)
    std = original.std(axis=0)
    std[std == 0] = 1.0
    z_original = (original - mean) / std
    z_anonymized = (anonymized - mean) / std
    sse_raw = float(((z_original - z_anonymized) ** 2).sum())
    sst = float((z_original**2).sum())
    n, d = original.shape
    return {
        "sse": sse_raw / (n * d) if n and d else 0.0,
        "sse_raw": sse_raw,
        "sse_sst": sse_raw / sst if sst else 0.0,
    }
