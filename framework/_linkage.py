"""The compiled loop of record linkage (:func:`tclose.measures.linkage_contributions`).

Kept in its own file: Numba's on-disk cache checks only the source file of a cached function.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def resolve_rows(
    source_x: np.ndarray,
    distinct: np.ndarray,
    counts: np.ndarray,
    classes: np.ndarray,
    near: np.ndarray,
    reach: np.ndarray,
    tolerance: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Record-linkage shares decided from each row's own vector and its neighbour list alone.

    ``near[c]`` lists published vectors around vector ``c`` (any order, ``c`` itself may be in
    it) and holds every vector closer to ``c`` than ``reach[c]``. For row ``i`` at distance ``r``
    from its own vector: if a listed vector is closer than ``r - tolerance``, the share is 0 (a
    witness proves the miss); else if ``2r + 4·tolerance < reach``, every vector within
    ``r + tolerance`` of the row is listed (triangle inequality), so ``N(i)`` is known and the
    share is ``1/|N(i)|``. Other rows are left unresolved (``resolved[i]`` false).
    """
    n, d = source_x.shape
    resolved = np.zeros(n, dtype=np.bool_)
    share = np.zeros(n)
    distances = np.empty(near.shape[1])
    for i in range(n):
        own_class = classes[i]
        own = 0.0
        for j in range(d):
            diff = source_x[i, j] - distinct[own_class, j]
            own += diff * diff
        own = np.sqrt(own)
        minimum = own
        for w in range(near.shape[1]):
            other = near[own_class, w]
            total = 0.0
            if other != own_class:
                for j in range(d):
                    diff = source_x[i, j] - distinct[other, j]
                    total += diff * diff
            distances[w] = np.sqrt(total)
            if other != own_class and distances[w] < minimum:
                minimum = distances[w]
        if minimum < own - tolerance:
            resolved[i] = True
        elif 2.0 * own + 4.0 * tolerance < reach[own_class]:
            size = counts[own_class]
            for w in range(near.shape[1]):
                other = near[own_class, w]
                if other != own_class and distances[w] <= minimum + tolerance:
                    size += counts[other]
            resolved[i] = True
            share[i] = 1.0 / size
    return resolved, share
