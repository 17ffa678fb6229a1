"""Block execution as a framework service: any algorithm runs in blocks, on any executor.

An algorithm opts in with the options :data:`~tclose.blocks.split.BLOCK_OPTIONS` and one call at
the top of its ``partition``::

    blocked = run_in_blocks(self, x, distances, k, t, options)
    if blocked is not None:
        return blocked

:func:`run_in_blocks` returns ``None`` when the run has one block (``blocks: 1``, or ``auto`` on a
small table): the algorithm then runs unblocked, exactly as without blocks. Otherwise it asks the
algorithm for its :class:`BlockPlan` (``block_plan``, see :class:`~tclose.interfaces.BlockHooks`;
default: :func:`default_plan`), splits the rows (:func:`~tclose.blocks.split.stratified_blocks`
when the plan has strata, :func:`~tclose.blocks.split.bisection_blocks` otherwise), sends one task
per block to the executor (:func:`~tclose.blocks.executors.run_tasks`), numbers the clusters of block
``b`` after those of blocks ``0..b-1``, and hands the result to the algorithm's global step
(``finish_blocks``), if it has one. In a block, the algorithm's ``partition_block`` runs (default:
its ``partition`` with ``blocks: 1``) with fitted distances over the block's rows that measure
every EMD against the whole table (:func:`tclose.kernels.blocks.restrict`).

:func:`blocked` wraps an algorithm that knows nothing of blocks (a third-party plugin) into one
that accepts the block options and runs through this service. The driver never looks at an
algorithm's name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tclose.base.plugin_calls import checked_labels, plugin_call
from tclose.blocks.executors import run_tasks
from tclose.blocks.split import (
    BLOCK_OPTIONS,
    BlockSpec,
    auto_blocks,
    bisection_blocks,
    block_spec,
    global_strata,
    stratified_blocks,
)
from tclose.interfaces import Algorithm, FittedDistance, Option, Partition

log = logging.getLogger("tclose")

__all__ = [
    "BlockPlan",
    "Blocked",
    "Strata",
    "blocked",
    "default_plan",
    "n_blocks",
    "run_block",
    "run_in_blocks",
]


@dataclass(frozen=True)
class BlockPlan:
    """What an algorithm needs of the whole table before its blocks run.

    Attributes:
        clusters: clusters the unblocked run would make (``blocks: auto`` sizes blocks by it; an
            explicit ``blocks`` is clipped to it).
        strata: ``k' > 0``: stratified blocks, with the rows cut into ``k'`` global strata of
            consecutive ranks of ``stratify_by`` (sizes: ``strata_sizes``); every block then holds
            whole clusters' worth of each stratum, and ``partition_block`` receives the block's
            :class:`Strata`. ``0``: plain blocks of a multiple of ``k`` rows (principal-axis
            bisection), and ``strata=None``.
        stratify_by: the distance whose ranks form the strata (default: the first distance).
        strata_sizes: ``int64 (k',)`` the strata sizes (default: ``floor(n/k')`` each, the
            remainder in the central stratum or strata, as t-first).
        distances: whether blocks need the distances (views measuring EMD against the whole
            table); ``False`` ships only the QIs.
        info: facts put first in the partition's ``info``.
    """

    clusters: int
    strata: int = 0
    stratify_by: FittedDistance | None = None
    strata_sizes: np.ndarray | None = None
    distances: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Strata:
    """A block's global strata: ``stratum`` ``int64 (n_b,)`` per row, ``sizes`` ``int64 (k',)``
    rows of each stratum in the block."""

    stratum: np.ndarray
    sizes: np.ndarray


@dataclass(frozen=True)
class _Shared:
    algorithm: Any
    k: int
    t: float | None
    options: Mapping[str, Any]
    references: tuple[Any, ...]


@dataclass(frozen=True)
class _Block:
    x: np.ndarray
    codes: tuple[np.ndarray, ...] = ()
    strata: Strata | None = None
    number: int = 1  # the block's number, 1-based, and the run's blocks, for messages
    count: int = 1


def n_blocks(spec: BlockSpec, n: int, clusters: int) -> int:
    """Blocks for a run of ``n`` rows that would make ``clusters`` clusters unblocked."""
    if spec.blocks == "auto":
        return auto_blocks(n, clusters)
    return max(1, min(int(spec.blocks), max(clusters, 1)))


def default_plan(
    x: np.ndarray, distances: Sequence[FittedDistance], k: int, t: float | None
) -> BlockPlan:
    """The plan of an algorithm without ``block_plan``: ``floor(n / k)`` clusters, plain blocks."""
    return BlockPlan(clusters=x.shape[0] // k, distances=bool(distances))


def run_in_blocks(
    algorithm: Algorithm,
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float | None,
    options: Mapping[str, Any],
) -> Partition | None:
    """Run ``algorithm`` in blocks if its block options ask for more than one; else ``None``.

    Returns:
        the :class:`~tclose.interfaces.Partition`; its ``info`` holds the plan's ``info``, what
        ``finish_blocks`` adds, then ``blocks``, ``executor``, ``block_rows`` (smallest and
        largest block) and ``block_seconds`` (``split``, ``tasks``, ``combine``).

    Raises:
        ConfigError: invalid block options.
    """
    spec = block_spec(algorithm.name, options)
    plan_of = getattr(algorithm, "block_plan", None)
    plan = plan_of(x, distances, k, t, options) if plan_of else default_plan(x, distances, k, t)
    blocks = n_blocks(spec, x.shape[0], plan.clusters)
    if blocks <= 1:
        return None
    return _partition_blocked(algorithm, x, distances, k, t, options, spec, blocks, plan)


def _split(
    x: np.ndarray, distances: Sequence[FittedDistance], k: int, plan: BlockPlan, blocks: int
) -> tuple[list[np.ndarray], list[_Block]]:
    """The blocks' rows and payloads."""
    if plan.strata <= 0:
        parts = bisection_blocks(x, k, blocks)
        return parts, [_Block(x[rows], _codes(distances, rows, plan)) for rows in parts]
    sizes = plan.strata_sizes
    if sizes is None:
        from tclose.kernels.t_first import strata_sizes

        sizes = strata_sizes(x.shape[0], plan.strata)
    stratifying = plan.stratify_by or distances[0]
    stratum = global_strata(stratifying.ranks, sizes)
    parts = stratified_blocks(x, stratum, sizes, blocks)
    payloads = []
    for rows in parts:
        own = stratum[rows]
        strata = Strata(own, np.bincount(own, minlength=plan.strata))
        payloads.append(_Block(x[rows], _codes(distances, rows, plan), strata))
    return parts, payloads


def _codes(
    distances: Sequence[FittedDistance], rows: np.ndarray, plan: BlockPlan
) -> tuple[np.ndarray, ...]:
    return tuple(d.codes[rows] for d in distances) if plan.distances else ()


def _partition_blocked(
    algorithm: Algorithm,
    x: np.ndarray,
    distances: Sequence[FittedDistance],
    k: int,
    t: float | None,
    options: Mapping[str, Any],
    spec: BlockSpec,
    blocks: int,
    plan: BlockPlan,
) -> Partition:
    from tclose.kernels.blocks import reference_of

    x = np.ascontiguousarray(x, dtype=np.float64)
    started = time.perf_counter()
    parts, payloads = _split(x, distances, k, plan, blocks)
    payloads = [replace(p, number=i + 1, count=len(payloads)) for i, p in enumerate(payloads)]
    split = time.perf_counter()
    sizes = [len(p) for p in parts]
    log.info(
        "%s: %d rows in %d blocks (%d to %d rows) on executor %s",
        algorithm.name,
        x.shape[0],
        len(parts),
        min(sizes),
        max(sizes),
        spec.executor,
    )
    references = tuple(reference_of(d) for d in distances) if plan.distances else ()
    results = run_tasks(
        run_block,
        payloads,
        shared=_Shared(algorithm, k, t, dict(options), references),
        executor=spec.executor,
        scheduler=spec.scheduler,
        workers=spec.workers,
        retries=spec.retries,
        sizes=sizes,
        preload=tuple(getattr(algorithm, "block_preload", ())),
    )
    tasks = time.perf_counter()
    labels = np.empty(x.shape[0], dtype=np.int64)
    offset = 0
    for rows, result in zip(parts, results, strict=True):
        labels[rows] = result.labels + offset
        offset += int(result.labels.max()) + 1
    partition = Partition(labels, dict(plan.info))
    finish = getattr(algorithm, "finish_blocks", None)
    if finish is not None:
        partition = finish(x, distances, k, t, options, partition, [r.info for r in results])
    partition.info.update(
        blocks=len(parts),
        executor=spec.executor,
        block_rows={"min": int(min(sizes)), "max": int(max(sizes))},
        block_seconds={
            "split": round(split - started, 4),
            "tasks": round(tasks - split, 4),
            "combine": round(time.perf_counter() - tasks, 4),
        },
    )
    return partition


def run_block(shared: _Shared, block: _Block) -> Partition:
    """The task of one block (run by the executor's workers): the algorithm's
    ``partition_block`` on the block's rows, or its ``partition`` with ``blocks: 1``.

    Returns:
        a :class:`~tclose.interfaces.Partition` of the block's rows, labels dense ``0..L_b-1``
        (``partition_block`` must return them so; ``partition``'s are renumbered).

    Raises:
        VerificationError: the answer of the algorithm's own ``partition_block`` breaks the
            contract (:func:`tclose.base.plugin_calls.checked_labels`, naming the plugin).
        PluginFailure: the algorithm raised an exception that is not a
            :class:`~tclose.errors.TcloseError` or a ``MemoryError`` (any ``BaseException``
            but ``KeyboardInterrupt``): a bug in the plugin, as in
            :func:`tclose.base.plugin_calls.plugin_call`; the message names the plugin (the wrapped
            one, for :class:`Blocked`) and the block. The executors raise a ``TcloseError`` of
            a task at once, without retrying it (:func:`tclose.blocks.executors.run_tasks`).
    """
    from tclose.kernels.blocks import restrict

    views = [restrict(r, c) for r, c in zip(shared.references, block.codes, strict=True)]
    algorithm = shared.algorithm
    plugin = algorithm.algorithm if isinstance(algorithm, Blocked) else algorithm
    where = f" in block {block.number} of {block.count} ({len(block.x):,} rows)"
    with plugin_call(plugin, where=where):
        own = getattr(algorithm, "partition_block", None)
        if own is not None:
            options = dict(shared.options)  # each block its own: a plugin may change them
            result = own(block.x, views, shared.k, shared.t, options, strata=block.strata)
            if isinstance(algorithm, Blocked):
                return result  # checked by Blocked.partition_block, naming the wrapped plugin
            # Checked here, in the worker, as in process: an answer a pool cannot pickle back (a
            # lambda in its info) fails naming the plugin, not as a lost task that is retried.
            return Partition(checked_labels(algorithm, result, len(block.x)), result.info)
        options = (
            {**shared.options, "blocks": 1} if "blocks" in shared.options else {**shared.options}
        )
        result = algorithm.partition(block.x, views, shared.k, shared.t, options)
        return Partition(checked_labels(algorithm, result, len(block.x)), result.info)


class Blocked:
    """An algorithm that knows nothing of blocks, run through this service: the wrapped
    algorithm's options plus :data:`~tclose.blocks.split.BLOCK_OPTIONS`; one block runs it as it is,
    several run its ``partition`` in every block (see the module documentation). The wrapped
    algorithm must be picklable (a module-level class of an installed package) for the local pool
    and Dask executors."""

    def __init__(self, algorithm: Algorithm) -> None:
        self.algorithm = algorithm
        self.name = algorithm.name
        self.requires_t = algorithm.requires_t
        self.options_schema: Mapping[str, Option] = {
            **algorithm.options_schema,
            **BLOCK_OPTIONS,
        }
        for hook in ("block_plan", "finish_blocks", "block_preload"):
            if hasattr(algorithm, hook):
                setattr(self, hook, getattr(algorithm, hook))

    def partition(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
    ) -> Partition:
        own = {name: value for name, value in options.items() if name not in BLOCK_OPTIONS}
        result = run_in_blocks(self, x, distances, k, t, options)
        if result is None:
            return self.algorithm.partition(x, distances, k, t, own)
        return result

    def partition_block(
        self,
        x: np.ndarray,
        distances: Sequence[FittedDistance],
        k: int,
        t: float | None,
        options: Mapping[str, Any],
        strata: Strata | None = None,
    ) -> Partition:
        """The wrapped algorithm's ``partition_block`` if it has one, else its ``partition``; its
        labels (any integers, as ``partition`` may return: checked as the runner checks them,
        :func:`tclose.base.plugin_calls.checked_labels`) renumbered dense ``0..L_b-1``, as the driver
        needs to number the clusters of block ``b`` after those of blocks ``0..b-1``."""
        own = {name: value for name, value in options.items() if name not in BLOCK_OPTIONS}
        inner = getattr(self.algorithm, "partition_block", None)
        if inner is not None:
            result = inner(x, distances, k, t, own, strata=strata)
        else:
            result = self.algorithm.partition(x, distances, k, t, own)
        return Partition(checked_labels(self.algorithm, result, len(x)), result.info)


def blocked(algorithm: Algorithm) -> Blocked:
    """``algorithm`` with blocks: register ``blocked(MyAlgorithm())``, not ``MyAlgorithm()``."""
    return Blocked(algorithm)
