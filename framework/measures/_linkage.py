"""The compiled loops of record linkage (:func:`tclose.measures.linkage_contributions`).

A KD-tree over the distinct published vectors and a bounded search per source row. Kept in its
own file: Numba's on-disk cache checks only the source file of a cached function, so every
compiled function these call is defined here.
"""

from __future__ import annotations

import numpy as np

from tclose.base.jit import njit

#: Row states written by :func:`link_rows`.
DECIDED, OVERFLOW = 0, 1


@njit(
    "Tuple((int64[::1], int64[::1], int64[::1], int64[::1], float64[:, ::1], float64[:, ::1]))"
    "(readonly(float64[:, ::1]), int64)",
    cache=True,
)
def build_tree(
    points: np.ndarray, leaf_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A KD-tree over the ``(m, d)`` rows of ``points``: ``(perm, start, stop, left, lo, hi)``.

    Node 0 is the root. Node ``v`` holds the points ``perm[start[v]:stop[v]]`` and their tight
    bounding box ``lo[v]``, ``hi[v]``; an inner node's children are ``left[v]`` and
    ``left[v] + 1`` (the halves at the median along the widest side of the box), a leaf has
    ``left[v] == -1`` (at most ``leaf_size`` points, or points that all coincide).
    """
    m, d = points.shape
    perm = np.empty(m, np.int64)  # np.arange and np.full would compile their own machinery
    for p in range(m):
        perm[p] = p
    capacity = 2 * (m // max(leaf_size // 2, 1) + 1) + 1
    start = np.empty(capacity, np.int64)
    stop = np.empty(capacity, np.int64)
    left = np.empty(capacity, np.int64)
    for v in range(capacity):
        left[v] = -1
    lo = np.empty((capacity, d))
    hi = np.empty((capacity, d))
    count = 1
    start[0] = 0
    stop[0] = m
    stack = np.empty(130, np.int64)  # median splits: depth <= log2(m) + 1
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        a, b = start[node], stop[node]
        for j in range(d):
            lo[node, j] = np.inf
            hi[node, j] = -np.inf
        for t in range(a, b):
            p = perm[t]
            for j in range(d):
                v = points[p, j]
                if v < lo[node, j]:
                    lo[node, j] = v
                if v > hi[node, j]:
                    hi[node, j] = v
        if b - a <= leaf_size:
            continue
        widest, width = 0, -1.0
        for j in range(d):
            if hi[node, j] - lo[node, j] > width:
                widest, width = j, hi[node, j] - lo[node, j]
        if width <= 0.0:
            continue
        middle = (a + b) // 2
        # Quickselect (median of three): perm[middle] becomes the point of rank middle - a
        # along column widest, those before it no greater and those after it no smaller.
        first, last = a, b - 1
        while last > first:
            mid = (first + last) // 2
            x = points[perm[first], widest]
            y = points[perm[mid], widest]
            z = points[perm[last], widest]
            pivot = max(min(x, y), min(max(x, y), z))
            i, k = first, last
            while i <= k:
                while points[perm[i], widest] < pivot:
                    i += 1
                while points[perm[k], widest] > pivot:
                    k -= 1
                if i <= k:
                    perm[i], perm[k] = perm[k], perm[i]
                    i += 1
                    k -= 1
            if middle <= k:
                last = k
            elif middle >= i:
                first = i
            else:
                break
        child = count
        count += 2
        start[child], stop[child] = a, middle
        start[child + 1], stop[child + 1] = middle, b
        left[node] = child
        stack[top] = child
        stack[top + 1] = child + 1
        top += 2
    return (
        perm,
        start[:count].copy(),
        stop[:count].copy(),
        left[:count].copy(),
        lo[:count].copy(),
        hi[:count].copy(),
    )


def rows_in_tree_order(classes: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """The rows sorted (stably) by the position of their class's vector in the tree: rows of a
    class are consecutive and neighbouring rows search the same part of the tree."""
    rank = np.empty(len(perm), np.int64)
    rank[perm] = np.arange(len(perm))
    return np.argsort(rank[classes], kind="stable")


@njit(
    "float64(readonly(float64[:, ::1]), int64, readonly(float64[:, ::1]), int64)",
    cache=True,
    nogil=True,
)
def _distance(source_x: np.ndarray, i: int, distinct: np.ndarray, c: int) -> float:
    """Euclidean distance of source row ``i`` and published vector ``c`` (unrotated, in order:
    no fast-math, so every decision uses the same figure)."""
    total = 0.0
    for j in range(source_x.shape[1]):
        diff = source_x[i, j] - distinct[c, j]
        total += diff * diff
    return np.sqrt(total)


@njit(
    "void(readonly(int64[::1]), readonly(float64[:, ::1]), readonly(float64[:, ::1]),"
    " readonly(float64[:, ::1]), readonly(float64[:, ::1]), readonly(int64[::1]),"
    " readonly(int64[::1]), readonly(int64[::1]), readonly(int64[::1]),"
    " readonly(float64[:, ::1]), readonly(float64[:, ::1]), readonly(int64[::1]),"
    " readonly(int64[::1]), float64, float64, int64, float64[::1], int8[::1])",
    cache=True,
    nogil=True,
    fastmath={"reassoc", "contract"},
)
def link_rows(
    rows: np.ndarray,
    source_x: np.ndarray,
    distinct: np.ndarray,
    basis: np.ndarray,
    points: np.ndarray,
    perm: np.ndarray,
    start: np.ndarray,
    stop: np.ndarray,
    left: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    counts: np.ndarray,
    classes: np.ndarray,
    tolerance: float,
    slack: float,
    buffer: int,
    share: np.ndarray,
    state: np.ndarray,
) -> None:
    """Record-linkage shares of the source rows ``rows``, written to ``share[rows]``.

    ``points`` are the distinct published vectors ``distinct`` rotated by ``basis`` in tree
    order (``points[t]`` is vector ``perm[t]``), the tree is :func:`build_tree`'s. For row ``i``
    at distance ``r`` from its own vector the tree is searched for vectors within ``r +
    tolerance`` (boxes and rotated points within ``r + tolerance + slack``, ``slack`` covering
    the rounding of the rotation and of the fast-math sums; every candidate's distance is then
    computed exactly, unrotated). A vector closer than ``r - tolerance`` ends the search: a miss,
    share 0. Otherwise ``N(i)`` is the own vector and the vectors found within the minimum
    ``+ tolerance``, and the share ``1/|N(i)|`` (multiplicities ``counts``). A row with more than
    ``buffer`` vectors within ``r + tolerance`` is left to the caller (``state[i] = OVERFLOW``).

    Rows of one class should be consecutive (:func:`rows_in_tree_order`): the vectors that
    proved a miss for a row of the class are tried first for its next rows.
    """
    d = source_x.shape[1]
    stack = np.empty(160, np.int64)
    stack_distance = np.empty(160)
    found_distance = np.empty(max(buffer, 1))
    found_class = np.empty(max(buffer, 1), np.int64)
    witnesses = np.empty(8, np.int64)
    listed = 0
    witness_class = -1
    rotated = np.empty(d)
    for q in range(len(rows)):
        i = rows[q]
        own_class = classes[i]
        if own_class != witness_class:
            witness_class, listed = own_class, 0
        own = _distance(source_x, i, distinct, own_class)
        below = own - tolerance
        within = own + tolerance
        settled = False  # a miss, or a row left to the caller
        for w in range(min(listed, 8)):
            if _distance(source_x, i, distinct, witnesses[w]) < below:
                settled = True
                break
        state[i] = DECIDED
        share[i] = 0.0
        if settled:
            continue
        for k in range(d):
            total = 0.0
            for j in range(d):
                total += source_x[i, j] * basis[j, k]
            rotated[k] = total
        reach = within + slack
        reach *= reach
        found = 0
        minimum = own
        stack[0] = 0
        stack_distance[0] = 0.0
        top = 1
        while top > 0 and not settled:
            top -= 1
            node = stack[top]
            if stack_distance[top] > reach:
                continue
            child = left[node]
            if child < 0:
                for t in range(start[node], stop[node]):
                    total = 0.0
                    for j in range(d):
                        diff = rotated[j] - points[t, j]
                        total += diff * diff
                    if total > reach:
                        continue
                    c = perm[t]
                    if c == own_class:
                        continue
                    distance = _distance(source_x, i, distinct, c)
                    if distance < below:
                        settled = True
                        witnesses[listed % 8] = c
                        listed += 1
                        break
                    if distance <= within:
                        if found == buffer:
                            state[i] = OVERFLOW
                            settled = True
                            break
                        found_distance[found] = distance
                        found_class[found] = c
                        found += 1
                        minimum = min(minimum, distance)
                continue
            near = 0.0
            far = 0.0
            for j in range(d):
                v = rotated[j]
                gap = max(lo[child, j] - v, v - hi[child, j], 0.0)
                near += gap * gap
                gap = max(lo[child + 1, j] - v, v - hi[child + 1, j], 0.0)
                far += gap * gap
            first, second = child, child + 1
            if far < near:
                first, second, near, far = second, first, far, near
            if far <= reach:  # the nearer child on top: searched first
                stack[top] = second
                stack_distance[top] = far
                top += 1
            if near <= reach:
                stack[top] = first
                stack_distance[top] = near
                top += 1
        if settled:
            continue
        size = counts[own_class]
        for f in range(found):
            if found_distance[f] <= minimum + tolerance:
                size += counts[found_class[f]]
        share[i] = 1.0 / size
