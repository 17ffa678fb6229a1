"""Small array helpers shared by the runner, the API and the conformance suite.

Attribute encoding itself (types, the mixed distance, aggregation) is in :mod:`tclose.attributes`.
"""

from __future__ import annotations

import numpy as np


def standardize(matrix: np.ndarray) -> np.ndarray:
    """Z-scores per column (population standard deviation); constant columns become 0."""
    mean = matrix.mean(axis=0)
    std = matrix.std(axis=0)
    std[std == 0] = 1.0
    return (matrix - mean) / std


def dense_labels(labels: np.ndarray) -> np.ndarray:
    """Renumber labels to ``0..L-1`` in the order of the sorted distinct labels."""
    return np.unique(labels, return_inverse=True)[1].astype(np.int64).reshape(-1)
