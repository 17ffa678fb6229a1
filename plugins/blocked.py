"""Blocked runs of the built-in algorithms: blocks from :mod:`tclose.blocks`, tasks on an executor.

The algorithm plugins call :func:`partition_blocked` when their ``blocks`` option asks for more
than one block. The driver splits the rows (:func:`tclose.blocks.stratified_blocks` for the
algorithms that enforce ``t``, :func:`tclose.blocks.bisection_blocks` for ``mdav``), sends one
task per block to the executor (:func:`tclose.executors.run_tasks`), numbers the clusters of
block ``b`` after those of blocks ``0..b-1``, and, for the algorithms that enforce ``t``, checks
every cluster against the whole table and runs the merge loop on the whole table if one exceeds
``t`` (so ``t`` holds in the end, always). It keeps only the QI matrix, the codes and the labels.

**EMD against the whole table inside a block.** A block's task measures EMDs against the
*global* distribution of every confidential attribute, never the block's own. The kernels take
fitted distances over the rows they are given, so the task builds a :class:`RestrictedOrderedEMD`
per attribute: a fitted distance over the block's rows whose reference distribution is the whole
table's. It needs only the whole table's cumulative counts (sent once per worker, see
:class:`OrderedReference`) and the block rows' value codes (sent with the block). It offers
``ordered_parts()`` (:class:`~tclose.plugins.kernels.emd.OrderedParts` with the whole table as
reference), so the merge loop and k-first take their compiled exact paths; for ``emd_of_counts``
its value domain is compressed to the values present in the block (a histogram costs ``O(m_b)``,
not ``O(m)``). Its EMDs are those of the whole table's :class:`OrderedEMD` for the same rows, bit
for bit (same exact integer numerator, same final division). Distances other than
``emd-ordered`` get a :class:`RestrictedDistance`, which delegates to the fitted distance
(``O(m)`` per histogram).

Task side: :mod:`tclose.plugins.block_tasks`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tclose.blocks import (
    BlockSpec,
    auto_blocks,
    bisection_blocks,
    global_strata,
    stratified_blocks,
)
from tclose.encoding import dense_labels
from tclose.executors import run_tasks
from tclose.interfaces import EMD_TOLERANCE, FittedDistance, Partition

if TYPE_CHECKING:
    from tclose.plugins.kernels.emd import OrderedParts

log = logging.getLogger("tclose")

__all__ = [
    "OrderedReference",
    "RestrictedDistance",
    "RestrictedOrderedEMD",
    "n_blocks",
    "partition_blocked",
    "reference_of",
    "restrict",
]


# ------------------------------------------------------------------------------------------------
# Distances restricted to a block, measured against the whole table


@dataclass(frozen=True)
class OrderedReference:
    """What a block needs of a whole-table :class:`OrderedEMD`: its cumulative counts.

    Attributes:
        name: the distance's name.
        column: the confidential column.
        n: rows of the whole table.
        m: distinct values of the whole table.
        cum_counts: ``int64 (m,)`` rows holding a value ``<= values[i]``.
        cum_prefix: ``int64 (m,)`` ``sum_{j<i} cum_counts[j]``.
        exact: whether EMD numerators are exact in ``int64``.
    """

    name: str
    column: str | None
    n: int
    m: int
    cum_counts: np.ndarray
    cum_prefix: np.ndarray
    exact: bool


def reference_of(distance: FittedDistance) -> Any:
    """The part of a fitted distance that block tasks need (sent once per worker)."""
    from tclose.plugins.kernels.emd import OrderedEMD

    if isinstance(distance, OrderedEMD):
        return OrderedReference(
            distance.name,
            distance.column,
            distance.n,
            distance.m,
            distance.cum_counts,
            distance.cum_prefix,
            bool(distance.exact),
        )
    return distance


class RestrictedOrderedEMD:
    """The ordered EMD of groups of a block's rows against the whole table's distribution.

    A :class:`~tclose.interfaces.FittedDistance` over the block's ``n_b`` rows. Its value domain
    is the ``m_b`` distinct values present in the block (``codes`` index them, ascending), but
    every EMD is the whole table's: for a group of ``s`` rows with count ``F_i`` at or below the
    whole table's ``i``-th value, ``E = sum_{i<m-1} |N F_i - s G_i|`` over the whole table's
    ``m`` values and cumulative counts ``G``, and ``EMD = E / (N s (m - 1))``. ``F`` is constant
    between two consecutive block values, so each such range is a segment sum (one binary search
    in ``G``, two prefix-sum lookups), as in :mod:`tclose.plugins.kernels.emd`.

    Attributes:
        name, column: the whole-table distance's.
        codes: ``int64 (n_b,)`` index of each block row's value among the block's values.
        m: number of distinct values in the block.
        global_counts: ``int64 (m,)`` block rows holding each of the block's values.
        ranks: ``int64 (n_b,)`` the block rows' positions in the whole table's order.
        reference: the whole table's :class:`OrderedReference`.
        value_codes: ``int64 (m,)`` the block's values as codes of the whole table's values.
    """

    def __init__(
        self,
        reference: OrderedReference,
        table_codes: np.ndarray,
        table_ranks: np.ndarray | None = None,
    ) -> None:
        """Build from the whole-table codes (and optionally ranks) of the block's rows."""
        table_codes = np.asarray(table_codes, dtype=np.int64)
        self.name = reference.name
        self.column = reference.column
        self.reference = reference
        self.value_codes, codes = np.unique(table_codes, return_inverse=True)
        self.codes = codes.reshape(-1).astype(np.int64)
        self.m = int(self.value_codes.shape[0])
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        order = np.argsort(table_codes if table_ranks is None else table_ranks, kind="stable")
        self.ranks = np.empty(order.shape[0], dtype=np.int64)
        self.ranks[order] = np.arange(order.shape[0], dtype=np.int64)
        self._table_codes = table_codes

    def __repr__(self) -> str:
        return (
            f"RestrictedOrderedEMD(rows={self.codes.shape[0]}, m={self.m}, "
            f"table n={self.reference.n}, m={self.reference.m})"
        )

    def _emd(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        count: np.ndarray,
        size: np.ndarray,
        first: np.ndarray,
        starts: np.ndarray,
    ) -> np.ndarray:
        """EMDs from segments: on whole-table codes ``[lo, hi)`` a group of ``size`` rows has
        cumulative count ``count``; ``first`` is each group's lowest code, ``starts`` the index
        of each group's first segment."""
        ref = self.reference
        if ref.m <= 1:
            return np.zeros(starts.shape[0])
        dtype = np.int64 if ref.exact else np.float64
        s = size.astype(dtype)
        v = count.astype(dtype) * ref.n
        threshold = -(-v // s)
        p = np.clip(np.searchsorted(ref.cum_counts, threshold, side="left"), lo, hi)
        sg = ref.cum_prefix.astype(dtype, copy=False)
        seg = v * (p - lo) - s * (sg[p] - sg[lo]) + s * (sg[hi] - sg[p]) - v * (hi - p)
        sizes = size[starts].astype(dtype)
        numer = np.add.reduceat(seg, starts) + sizes * sg[first]
        denom = ref.n * sizes * (ref.m - 1)
        return numer.astype(np.float64) / denom.astype(np.float64)

    def ordered_parts(self) -> OrderedParts | None:
        """The exact description the compiled kernels use (merge loop, k-first): the block rows'
        codes among the whole table's values, and the whole table's cumulative counts.
        ``None`` when the whole table's numerators are not exact in ``int64``."""
        from tclose.plugins.kernels.emd import OrderedParts

        ref = self.reference
        if not ref.exact:
            return None
        return OrderedParts(self._table_codes, ref.cum_counts, ref.cum_prefix, ref.n)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD of each cluster of block rows against the whole table, ``O(n_b log n_b)``.

        Args:
            labels: ``int64 (n_b,)`` dense labels ``0..L-1``.

        Returns:
            ``float64 (L,)``; bit for bit the whole table's ``OrderedEMD.cluster_emd`` value of
            the same rows.
        """
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != self.codes.shape:
            raise ValueError(f"Expected labels of shape {self.codes.shape}; got {labels.shape}.")
        if labels.shape[0] == 0:
            return np.zeros(0)
        sizes = np.bincount(labels)
        if (sizes == 0).any():
            raise ValueError(f"Labels must be dense: label {int(np.argmin(sizes))} is unused.")
        top = self.reference.m - 1
        order = np.lexsort((self._table_codes, labels))
        lab = labels[order]
        lo = self._table_codes[order]
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        hi = np.empty_like(lo)
        hi[:-1] = lo[1:]
        hi[starts[1:] - 1] = top
        hi[-1] = top
        lo = np.minimum(lo, top)
        count = np.arange(lab.shape[0]) - starts[lab] + 1
        return self._emd(lo, hi, count, sizes[lab], lo[starts], starts)

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        """EMD against the whole table of groups given as histograms over the block's values.

        Args:
            counts: ``(m,)`` or ``(g, m)`` nonnegative integer counts over the block's ``m``
                values; every group non-empty.

        Returns:
            a ``float64`` scalar array for one group, or ``(g,)``.
        """
        counts = np.asarray(counts)
        if counts.ndim not in (1, 2) or counts.shape[-1] != self.m:
            raise ValueError(
                f"Expected counts of shape ({self.m},) or (g, {self.m}); got {counts.shape}."
            )
        single = counts.ndim == 1
        counts = np.atleast_2d(counts).astype(np.int64)
        if (counts < 0).any():
            raise ValueError("Counts must be nonnegative.")
        cumulative = np.cumsum(counts, axis=1)
        size = cumulative[:, -1]
        if (size == 0).any():
            raise ValueError("Every group must hold at least one row.")
        groups, width = counts.shape
        top = self.reference.m - 1
        lo = np.minimum(np.broadcast_to(self.value_codes, (groups, width)), top)
        hi = np.empty_like(lo)
        hi[:, :-1] = lo[:, 1:]
        hi[:, -1] = top
        # A group's first segment starts at the block's lowest value, where its count may be 0:
        # the first-code term ``s * cum_prefix[lo]`` below then covers the codes under it.
        starts = np.arange(groups) * width
        result = self._emd(
            lo.reshape(-1),
            hi.reshape(-1),
            cumulative.reshape(-1),
            np.repeat(size, width),
            lo[:, 0],
            starts,
        )
        return result[0] if single else result


class RestrictedDistance:
    """Any fitted distance restricted to a block's rows (delegates every EMD to it).

    ``codes`` are the whole table's codes of the block rows and ``m`` the whole table's, so a
    histogram costs ``O(m)``; ``emd_of_counts`` is the fitted distance's own (whole-table
    reference), ``cluster_emd`` goes through it with one histogram per cluster.
    """

    def __init__(
        self, distance: FittedDistance, table_codes: np.ndarray, table_ranks: np.ndarray
    ) -> None:
        self.name = distance.name
        self.column = distance.column
        self.distance = distance
        self.codes = np.asarray(table_codes, dtype=np.int64)
        self.m = distance.m
        self.global_counts = np.bincount(self.codes, minlength=self.m).astype(np.int64)
        order = np.argsort(table_ranks, kind="stable")
        self.ranks = np.empty(order.shape[0], dtype=np.int64)
        self.ranks[order] = np.arange(order.shape[0], dtype=np.int64)

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        labels = np.asarray(labels, dtype=np.int64)
        n_clusters = int(labels.max()) + 1 if labels.size else 0
        counts = np.bincount(labels * self.m + self.codes, minlength=n_clusters * self.m)
        return np.atleast_1d(self.distance.emd_of_counts(counts.reshape(n_clusters, self.m)))

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        return self.distance.emd_of_counts(counts)

    def tree_parts(self) -> Any:
        """The distance's tree description (k-first's compiled nominal path) with the block rows'
        codes, EMDs against the whole table; ``None`` if the distance has none."""
        from tclose.plugins.kernels.nominal import tree_parts

        parts = tree_parts(self.distance)
        return None if parts is None else parts._replace(codes=self.codes)


def restrict(reference: Any, table_codes: np.ndarray, table_ranks: np.ndarray | None = None) -> Any:
    """A fitted distance over a block's rows, measuring EMDs against the whole table.

    Args:
        reference: :func:`reference_of` a whole-table fitted distance.
        table_codes: the whole-table codes of the block's rows.
        table_ranks: the whole-table ranks of the block's rows (for the view's ``ranks``;
            default: the order of the codes, ties by position).
    """
    if isinstance(reference, OrderedReference):
        return RestrictedOrderedEMD(reference, table_codes, table_ranks)
    ranks = table_codes if table_ranks is None else table_ranks
    return RestrictedDistance(reference, table_codes, ranks)


# ------------------------------------------------------------------------------------------------
# Driver


def n_blocks(spec: BlockSpec, n: int, clusters: int) -> int:
    """Blocks for a run of ``n`` rows that would make ``clusters`` clusters unblocked."""
    if spec.blocks == "auto":
        return auto_blocks(n, clusters)
    return max(1, min(int(spec.blocks), max(clusters, 1)))


def partition_blocked(
    algorithm: str,
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float | None,
    options: Mapping[str, Any],
    spec: BlockSpec,
    blocks: int,
    stratifying: FittedDistance | None = None,
) -> Partition:
    """Run ``algorithm`` on ``blocks`` blocks of the rows; see the module documentation.

    Args:
        algorithm: ``"t-first"``, ``"mdav"``, ``"merge"`` or ``"k-first"``.
        x: ``float64 (n, d)`` standardized QIs.
        distances: the whole-table fitted distances (ignored by ``mdav``).
        k: minimum cluster size.
        t: t-closeness level (``None`` for ``mdav``).
        options: the algorithm's validated options (``partner``, ``candidates``, ``base``,
            ``ties``, ...).
        spec: the executor options.
        blocks: the number of blocks, ``>= 2`` (clipped to what the data allow).
        stratifying: the distance whose ranks form the strata (default ``distances[0]``).

    Returns:
        the :class:`~tclose.interfaces.Partition`; its ``info`` holds ``blocks``, ``executor``,
        ``block_rows`` (smallest and largest block), ``merges_in_blocks``, ``merges_global`` and
        ``block_seconds`` (splitting, tasks, final check).
    """
    from tclose.plugins.block_tasks import Block, Shared, block_task
    from tclose.plugins.kernels.merge import merge_until_t_close
    from tclose.plugins.kernels.t_first import cluster_size, strata_sizes

    x = np.ascontiguousarray(x, dtype=np.float64)
    n = x.shape[0]
    started = time.perf_counter()
    info: dict[str, Any] = {}
    if algorithm == "mdav":
        parts = bisection_blocks(x, k, blocks)
        payloads = [Block(x[rows]) for rows in parts]
        references: tuple[Any, ...] = ()
    else:
        stratifying = stratifying or distances[0]
        k_effective = cluster_size(n, k, t)
        sizes = strata_sizes(n, k_effective)
        stratum = global_strata(stratifying.ranks, sizes)
        parts = stratified_blocks(x, stratum, sizes, blocks)
        references = tuple(reference_of(d) for d in distances)
        payloads = []
        for rows in parts:
            block_stratum = stratum[rows]
            payloads.append(
                Block(
                    x[rows],
                    tuple(d.codes[rows] for d in distances),
                    block_stratum,
                    np.bincount(block_stratum, minlength=k_effective),
                )
            )
        if algorithm == "t-first":
            info.update(k_effective=int(k_effective), stratified_by=stratifying.column)
    split = time.perf_counter()
    log.info(
        "%s: %d rows in %d blocks (%d to %d rows) on executor %s",
        algorithm,
        n,
        len(parts),
        min(len(p) for p in parts),
        max(len(p) for p in parts),
        spec.executor,
    )
    shared = Shared(algorithm, k, t, dict(options), references)
    results = run_tasks(
        block_task,
        payloads,
        shared=shared,
        executor=spec.executor,
        scheduler=spec.scheduler,
        workers=spec.workers,
        retries=spec.retries,
        sizes=[len(p) for p in parts],
    )
    tasks = time.perf_counter()
    labels = np.empty(n, dtype=np.int64)
    offset = 0
    merges_in_blocks = 0
    initial = 0
    for rows, (block_labels, counts) in zip(parts, results, strict=True):
        labels[rows] = block_labels + offset
        offset += int(block_labels.max()) + 1
        merges_in_blocks += counts.get("merges", 0)
        initial += counts.get("initial_clusters", 0)
    merges_global = 0
    if algorithm != "mdav":
        dense = dense_labels(labels)
        worst = max(float(d.cluster_emd(dense).max()) for d in distances)
        if worst > t + EMD_TOLERANCE:
            log.info(
                "%s: a cluster exceeds t across blocks (EMD %.4f); merging on the whole table",
                algorithm,
                worst,
            )
            labels, merges_global = merge_until_t_close(
                x, dense, distances, t, partner=options["partner"], candidates=options["candidates"]
            )
        info.update(
            merges=merges_in_blocks + int(merges_global),
            merges_in_blocks=merges_in_blocks,
            merges_global=int(merges_global),
        )
        if algorithm == "t-first":
            info["merged_to_enforce_t"] = info["merges"] > 0
        else:
            info["initial_clusters"] = initial
    info.update(
        blocks=len(parts),
        executor=spec.executor,
        block_rows={"min": int(min(len(p) for p in parts)), "max": int(max(len(p) for p in parts))},
        block_seconds={
            "split": round(split - started, 4),
            "tasks": round(tasks - split, 4),
            "combine": round(time.perf_counter() - tasks, 4),
        },
    )
    return Partition(labels, info)
