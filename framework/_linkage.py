"""The compiled loop of record linkage (:func:`tclose.measures.linkage_contributions`).

Kept in its own file: Numba's on-disk cache checks only the source file of a cached function.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def beaten_rows(
    source_x: np.ndarray,
    distinct: np.ndarray,
    classes: np.ndarray,
    witnesses: np.ndarray,
    tolerance: float,
) -> np.ndarray:
    """``beaten[i]``: one of the vectors ``witnesses[classes[i]]`` is closer to ``source_x[i]``
    than its own published vector ``distinct[classes[i]]`` by more than ``tolerance``."""
    n, d = source_x.shape
    beaten = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        own_class = classes[i]
        own = 0.0
        for j in range(d):
            diff = source_x[i, j] - distinct[own_class, j]
            own += diff * diff
        limit = np.sqrt(own) - tolerance
        for w in range(witnesses.shape[1]):
            other = witnesses[own_class, w]
            total = 0.0
            for j in range(d):
                diff = source_x[i, j] - distinct[other, j]
                total += diff * diff
            if np.sqrt(total) < limit:
                beaten[i] = True
                break
    return beaten
