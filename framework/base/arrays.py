"""Small array helpers shared by the runner, the API, the verifier, the measures and the
conformance suite.

Attribute encoding itself (types, the mixed distance, aggregation) is in :mod:`tclose.base.attributes`.
"""

from __future__ import annotations

from collections.abc import Sequence

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


_MIX = np.uint64(0x9E3779B97F4A7C15)
_NAN_BITS = np.uint64(0x7FF8000000000000)


def equal_row_classes(columns: Sequence[np.ndarray]) -> np.ndarray | None:
    """Class of every row of integer or float ``columns`` (one value per row each, at least one
    column): rows with equal values in every column share one (``-0.0`` equals ``0.0``, NaNs
    equal each other), numbered ``0..C-1`` in the order of their first row, as pandas'
    ``groupby(..., dropna=False, sort=False).ngroup()`` numbers them; ``None`` if two different
    rows hash alike (the caller then groups another way).

    Rows are grouped by a 64-bit hash of their values, then every row is compared with its
    class's first row, column by column. Equal rows always hash alike, so if every row equals
    its first row the classes are exactly those of equal rows. ~7x faster than pandas' grouping
    of 1M rows x 8 columns.
    """
    hashed = np.zeros(len(columns[0]), dtype=np.uint64)
    for column in columns:
        if column.dtype.kind == "f":
            values = column.astype(np.float64) + 0.0  # -0.0 + 0.0 is 0.0
            bits = values.view(np.uint64).copy()
            bits[np.isnan(values)] = _NAN_BITS
        else:
            bits = column.astype(np.int64).view(np.uint64)
        hashed ^= bits
        hashed *= _MIX
        hashed ^= hashed >> np.uint64(29)
    import pandas as pd  # not at import: this module is on the start-up path

    classes, uniques = pd.factorize(hashed)
    first = np.full(len(uniques), len(hashed), dtype=np.int64)
    np.minimum.at(first, classes, np.arange(len(hashed)))
    for column in columns:
        own = column[first][classes]
        same = column == own
        if column.dtype.kind == "f":
            same |= np.isnan(column) & np.isnan(own)
        if not same.all():
            return None
    return classes.astype(np.int64, copy=False)
