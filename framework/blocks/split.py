"""Block decomposition: split a table into independent blocks that keep the privacy guarantee.

The algorithms cost ``O(n^2 / k)``. Past a few hundred thousand rows the rows are split into
``P`` blocks, each clustered on its own (and, through :mod:`tclose.blocks.executors`, on its own core or
machine), for a cost of about ``O(n^2 / (k P))``. Blocks are lists of row indices; this module sees
NumPy arrays only.

**Stratified blocks** (t-first, and the t-enforcing ``merge`` and ``k-first``). t-first's
guarantee (Proposition 2 of the paper) needs only that every cluster holds one record of each of
the ``k'`` *global* strata (subsets of consecutive confidential ranks). So the strata are assigned
once, on the whole table (:func:`global_strata`, exactly as the t-first kernel does), and the
table is bisected recursively: at each node, every stratum is split at its own median along the
node's principal axis (:func:`principal_axis`), so both halves keep the same count of every
stratum. t-first then runs inside each block with the global strata: every cluster still holds one
record per global stratum, and the bound holds for any ``P``.

*Counts.* A node holds ``q`` clusters' worth of records: ``q + e_i`` records of stratum ``i``,
where ``e_i`` are the node's *extra* records (the ``n mod k'`` remainder records that t-first
places in the central strata), ``r = sum_i e_i``. Invariant: ``r <= q``. A node for ``P`` leaves
is split into a left child of ``P_L = floor(P/2)`` leaves and ``q_L = floor(q P_L / P)`` clusters
and a right child of ``P_R = P - P_L`` leaves and ``q_R = q - q_L`` clusters. The extras go
proportionally: ``r_L = floor(r q_L / q)`` and ``r_R = r - r_L``, shared among the strata by
largest remainders (Hamilton's method: stratum ``i`` gets ``floor(e_i r_L / r)`` or one more, never
more than ``e_i``). Then every stratum sends its ``q_L + e_{L,i}`` records of lowest projection to
the left child and the rest to the right.

*Why every block can be clustered.* At the root ``r = n mod k' < floor(n / k') = q`` (see
:mod:`tclose.kernels.t_first`). If ``r <= q`` then ``r_L = floor(r q_L / q) <= q_L`` and
``r_R = ceil(r q_R / q) <= q_R``, so the invariant passes to both children; and ``P <= q`` gives
``q_L >= P_L``, ``q_R >= P_R`` (every leaf gets at least one cluster). In a leaf with ``q_b``
clusters and ``r_b <= q_b`` extras (``r_b <= r < k'``), the t-first kernel makes exactly ``q_b``
clusters, each with one record of every stratum plus at most one extra: ``n_b // k' = q_b`` since
``r_b < k'``, and each of the ``q_b`` clusters takes one extra while any is left.

**Plain blocks** (``mdav``). Recursive bisection at the median of the principal axis, with sizes
that are multiples of ``k``: a node of ``n`` rows (``c = floor(n / k)`` clusters) for ``P``
leaves sends ``k floor(c P_L / P)`` rows to the left and the rest (which carries the ``n mod k``
remainder) to the right. With ``P <= c`` every block has at least ``k`` rows; all but the last
have a multiple of ``k``.

**Determinism.** The principal axis is the top eigenvector of the node's scatter matrix, with its
sign fixed (its largest-magnitude component positive; ties to the first). The records of lowest
projection are selected by introselect (``np.argpartition``: linear time per level, so splitting
costs ``O(n log P)``); among records of equal projection at the median the choice is arbitrary but
deterministic. Blocks are returned in depth-first order (left before right), each as ascending
row indices. The same input gives the same blocks on any executor.

**How many blocks** (``blocks: auto``): see :func:`auto_blocks`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tclose.errors import ConfigError
from tclose.interfaces import Option

__all__ = [
    "AUTO_CLUSTERS_PER_BLOCK",
    "AUTO_MIN_ROWS",
    "BLOCK_OPTIONS",
    "BlockSpec",
    "auto_blocks",
    "block_spec",
    "bisection_blocks",
    "global_strata",
    "principal_axis",
    "stratified_blocks",
]

#: ``blocks: auto`` keeps one block below this many rows (the unblocked algorithm, exactly).
AUTO_MIN_ROWS = 200_000
#: ``blocks: auto`` aims at blocks of about this many clusters (see :func:`auto_blocks`).
AUTO_CLUSTERS_PER_BLOCK = 3_000
#: :func:`principal_axis` uses at most about this many rows.
AXIS_SAMPLE = 100_000


class _BlocksType(type):
    """``isinstance(v, BlocksValue)``: ``v`` is ``"auto"`` or an ``int >= 1`` (not a bool)."""

    def __instancecheck__(cls, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        return value == "auto" if isinstance(value, str) else isinstance(value, int) and value >= 1


class BlocksValue(metaclass=_BlocksType):
    """The type of the ``blocks`` option: ``"auto"`` or a positive integer."""


BlocksValue.__name__ = "int >= 1 or 'auto'"

#: The options every built-in algorithm accepts for blocked runs (``algorithm.options``).
BLOCK_OPTIONS: Mapping[str, Option] = {
    "blocks": Option(
        BlocksValue,
        "auto",
        "Number of independent blocks, or 'auto' (one block below 200,000 rows, then about "
        "3,000 clusters per block); 1 runs the algorithm on the whole table.",
    ),
    "executor": Option(
        str,
        "local",
        "Where blocks run: 'local' (a process pool on this machine) or 'dask' (Dask distributed).",
        choices=("local", "dask"),
    ),
    "scheduler": Option(
        str,
        "",
        "Dask scheduler address (e.g. 'tcp://10.0.0.5:8786'); empty starts a LocalCluster. "
        "Only with executor 'dask'.",
    ),
    "workers": Option(
        int,
        0,
        "Worker processes of the local pool or of the Dask LocalCluster (0: one per core).",
        min=0,
    ),
    "retries": Option(
        int, 2, "Times a failed or lost block is retried before the run fails.", min=0
    ),
}


@dataclass(frozen=True)
class BlockSpec:
    """The validated block and executor options of one run.

    Attributes:
        blocks: ``"auto"`` or the number of blocks asked for.
        executor: ``"local"`` or ``"dask"``.
        scheduler: Dask scheduler address, or ``""`` for a LocalCluster.
        workers: processes to start (``0``: one per core).
        retries: retries of a failed block.
    """

    blocks: int | str = "auto"
    executor: str = "local"
    scheduler: str = ""
    workers: int = 0
    retries: int = 2


def block_spec(owner: str, options: Mapping[str, Any]) -> BlockSpec:
    """The :class:`BlockSpec` of an algorithm's validated options (defaults for missing keys).

    Raises:
        ConfigError: ``scheduler`` given without ``executor: dask``.
    """
    spec = BlockSpec(**{name: options[name] for name in BLOCK_OPTIONS if name in options})
    if spec.scheduler and spec.executor != "dask":
        raise ConfigError(
            f"The 'scheduler' option of {owner} "
            f"needs executor 'dask'. Got executor {spec.executor!r} instead.",
            path=("algorithm", "options", "scheduler"),
        )
    return spec


def auto_blocks(n: int, clusters: int) -> int:
    """The number of blocks ``blocks: auto`` uses for ``n`` rows making ``clusters`` clusters.

    Rule: one block (the unblocked algorithm, bit for bit) below :data:`AUTO_MIN_ROWS` rows;
    above, ``P = ceil(clusters / AUTO_CLUSTERS_PER_BLOCK)`` blocks of about 3,000 clusters
    (30,000 rows at ``k' = 10``). The cost of a block is about proportional to its rows times its
    clusters, so the run costs ``O(n * 3,000)``: linear in ``n``. The quality cost was measured
    on the benchmark tables (``docs/scaling.md``, ``bench/bench_blocks_quality.py``): at
    1,000,000 rows, +2.5 % SSE on the discharge-like table and -3.6 % on a Gaussian one against
    the unblocked run, for about a quarter less CPU than blocks of 5,000 clusters (+2.4 % / -3.5 %).

    Args:
        n: rows.
        clusters: clusters the unblocked algorithm would make (``floor(n / k')`` for t-first,
            ``floor(n / k)`` for MDAV).

    Returns:
        ``P >= 1``, at most ``clusters``.
    """
    if n < AUTO_MIN_ROWS or clusters <= 1:
        return 1
    return max(1, min(clusters, math.ceil(clusters / AUTO_CLUSTERS_PER_BLOCK)))


def global_strata(ranks: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The stratum of every row: stratum ``i`` holds the ranks ``sum(sizes[:i]) ..`` onwards.

    Args:
        ranks: ``int64 (n,)`` permutation of ``0..n-1`` (position of each row in the
            confidential order).
        sizes: ``int64 (k',)`` strata sizes, summing to ``n`` (t-first's ``strata_sizes``).

    Returns:
        ``int64 (n,)`` stratum index of every row, in ``0..k'-1``.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    return np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)[np.asarray(ranks)]


def principal_axis(x: np.ndarray) -> np.ndarray:
    """Unit vector of greatest variance of the rows of ``x`` (``(n, d)``, ``n >= 1``).

    The top eigenvector of the scatter matrix of the centred rows, sign fixed so that its
    largest-magnitude component is positive (ties: the first). Above :data:`AXIS_SAMPLE` rows it
    is computed on every ``ceil(n / AXIS_SAMPLE)``-th row (deterministic; the axis only guides
    the split). A zero scatter matrix (all rows equal) gives the first axis.
    """
    d = x.shape[1]
    if d == 0:
        return np.zeros(0)
    step = -(-x.shape[0] // AXIS_SAMPLE)
    sample = x[::step]
    centred = sample - sample.mean(axis=0)
    scatter = centred.T @ centred
    if not np.any(scatter):
        axis = np.zeros(d)
        axis[0] = 1.0
        return axis
    axis = np.linalg.eigh(scatter)[1][:, -1]
    lead = int(np.argmax(np.abs(axis)))
    return -axis if axis[lead] < 0 else axis


def _projection(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Projection of the rows on their principal axis."""
    sub = x[rows]
    return sub @ principal_axis(sub)


def _lowest(values: np.ndarray, count: int) -> np.ndarray:
    """Positions of the ``count`` smallest ``values`` (introselect: linear, deterministic)."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    if count >= values.shape[0]:
        return np.arange(values.shape[0])
    return np.argpartition(values, count - 1)[:count]


def _split_leaves(leaves: int) -> tuple[int, int]:
    left = leaves // 2
    return left, leaves - left


def _share_extras(extras: np.ndarray, total_left: int) -> np.ndarray:
    """Hamilton apportionment of ``total_left`` among strata holding ``extras`` (each capped)."""
    total = int(extras.sum())
    if total == 0 or total_left == 0:
        return np.zeros_like(extras)
    quota = extras * total_left
    left = quota // total
    short = total_left - int(left.sum())
    if short:
        remainder = quota - left * total
        order = np.lexsort((np.arange(extras.shape[0]), -remainder))
        left[order[:short]] += 1
    return left


def stratified_blocks(
    x: np.ndarray, stratum: np.ndarray, sizes: np.ndarray, n_blocks: int
) -> list[np.ndarray]:
    """Recursive stratified bisection into blocks that t-first can cluster with global strata.

    Args:
        x: ``float64 (n, d)`` standardized quasi-identifiers.
        stratum: ``int64 (n,)`` global stratum of every row (:func:`global_strata`).
        sizes: ``int64 (k',)`` global strata sizes, ``floor(n / k')`` each plus the extras;
            the extras must be fewer than ``floor(n / k')`` in total (t-first's strata are).
        n_blocks: blocks wanted; clipped to ``[1, floor(n / k')]``.

    Returns:
        the blocks, as ascending ``int64`` row indices, in depth-first order. Block ``b`` with
        ``q_b`` clusters holds ``q_b`` or more records of every stratum, and
        ``sum_i (count_i - q_b) <= q_b`` extras.

    Raises:
        ValueError: on inconsistent strata.

    Example:
        >>> import numpy as np
        >>> x = np.arange(8.0).reshape(-1, 1)
        >>> stratum = np.array([0, 1, 0, 1, 1, 0, 1, 0])
        >>> [b.tolist() for b in stratified_blocks(x, stratum, np.array([4, 4]), 2)]
        [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    stratum = np.asarray(stratum, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    n_strata = sizes.shape[0]
    n = stratum.shape[0]
    if n == 0 or n_strata == 0:
        return [np.arange(n, dtype=np.int64)]
    if int(sizes.sum()) != n or not np.array_equal(np.bincount(stratum, minlength=n_strata), sizes):
        raise ValueError("stratum and sizes disagree: sizes must count the rows of each stratum.")
    clusters = n // n_strata
    extras = sizes - clusters
    if (extras < 0).any() or int(extras.sum()) > clusters:
        raise ValueError(
            "Every stratum needs floor(n / k') records and the extras must not "
            "outnumber the clusters."
        )
    n_blocks = max(1, min(int(n_blocks), clusters))
    small = np.int16 if n_strata <= 2**15 else np.int64
    blocks: list[np.ndarray] = []
    # Depth-first, left child first: a stack of (rows, clusters, extras per stratum, leaves).
    stack = [(np.arange(n, dtype=np.int64), clusters, extras, n_blocks)]
    while stack:
        rows, q, e, leaves = stack.pop()
        if leaves == 1:
            blocks.append(rows)
            continue
        leaves_left, leaves_right = _split_leaves(leaves)
        q_left = q * leaves_left // leaves
        e_left = _share_extras(e, int(e.sum()) * q_left // q)
        take = q_left + e_left  # records of each stratum that go left
        projection = _projection(x, rows)
        group = stratum[rows]
        by_group = np.argsort(group.astype(small), kind="stable")  # radix sort for int16
        bounds = np.searchsorted(group[by_group], np.arange(n_strata + 1))
        goes_left = np.zeros(rows.shape[0], dtype=bool)
        for i in range(n_strata):
            members = by_group[bounds[i] : bounds[i + 1]]
            goes_left[members[_lowest(projection[members], int(take[i]))]] = True
        stack.append((rows[~goes_left], q - q_left, e - e_left, leaves_right))
        stack.append((rows[goes_left], q_left, e_left, leaves_left))
    return blocks


def bisection_blocks(x: np.ndarray, k: int, n_blocks: int) -> list[np.ndarray]:
    """Recursive bisection along principal axes into blocks of at least ``k`` rows (MDAV).

    Args:
        x: ``float64 (n, d)`` standardized quasi-identifiers.
        k: minimum cluster size.
        n_blocks: blocks wanted; clipped to ``[1, max(1, floor(n / k))]``.

    Returns:
        the blocks, as ascending ``int64`` row indices, in depth-first order. Every block has at
        least ``k`` rows (if ``n >= k``); all but the last have a multiple of ``k``.

    Example:
        >>> import numpy as np
        >>> [b.tolist() for b in bisection_blocks(np.arange(7.0).reshape(-1, 1), 2, 2)]
        [[0, 1], [2, 3, 4, 5, 6]]
    """
    n = x.shape[0]
    clusters = n // k if k >= 1 else 0
    n_blocks = max(1, min(int(n_blocks), clusters))
    blocks: list[np.ndarray] = []
    stack = [(np.arange(n, dtype=np.int64), n_blocks)]
    while stack:
        rows, leaves = stack.pop()
        if leaves == 1:
            blocks.append(rows)
            continue
        leaves_left, leaves_right = _split_leaves(leaves)
        n_left = k * ((rows.shape[0] // k) * leaves_left // leaves)
        goes_left = np.zeros(rows.shape[0], dtype=bool)
        goes_left[_lowest(_projection(x, rows), n_left)] = True
        stack.append((rows[~goes_left], leaves_right))
        stack.append((rows[goes_left], leaves_left))
    return blocks
