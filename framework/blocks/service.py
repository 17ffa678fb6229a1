"""Block execution as a framework service: any algorithm runs in blocks, on any executor.

:func:`tclose.blocks.framed.run_algorithm` calls :func:`run_in_blocks` for every algorithm whose
block options (:data:`~tclose.blocks.split.BLOCK_OPTIONS`) the framework applies. It returns
``None`` when the run has one block (``blocks: 1``, or ``auto`` on a small table): the algorithm
then runs unblocked, exactly as without blocks. Otherwise it asks the algorithm for its
:class:`~tclose.interfaces.BlockPlan` (``block_plan``, see :class:`~tclose.interfaces.BlockHooks`;
default: :func:`default_plan`), splits the rows (:func:`~tclose.blocks.split.stratified_blocks`
when the plan has strata, :func:`~tclose.blocks.split.bisection_blocks` otherwise), sends one task
per block to the executor (:func:`~tclose.blocks.executors.run_tasks`), numbers the clusters of
block ``b`` after those of blocks ``0..b-1``, and hands the result to the algorithm's global step
(``finish_blocks``), if it has one. In a block, the algorithm's ``partition_block`` runs (default:
its ``partition``) on a :class:`~tclose.interfaces.Problem` of the block's rows, with fitted
distances that measure every EMD against the whole table (:func:`tclose.kernels.blocks.restrict`).
The driver never looks at an algorithm's name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tclose.base.plugin_calls import call_hook, checked_labels, plugin_call
from tclose.blocks.executors import run_tasks
from tclose.blocks.split import (
    BlockSpec,
    auto_blocks,
    bisection_blocks,
    global_strata,
    stratified_blocks,
)
from tclose.interfaces import Algorithm, BlockPlan, FittedDistance, Partition, Problem, Strata

log = logging.getLogger("tclose")

__all__ = ["BlockPlan", "Strata", "default_plan", "n_blocks", "run_block", "run_in_blocks"]


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


def default_plan(problem: Problem) -> BlockPlan:
    """The plan of an algorithm without ``block_plan``: ``floor(n / k)`` clusters, plain blocks."""
    return BlockPlan(clusters=problem.x.shape[0] // problem.k, distances=bool(problem.distances))


def run_in_blocks(algorithm: Algorithm, problem: Problem, spec: BlockSpec) -> Partition | None:
    """Run ``algorithm`` on ``problem`` in the blocks ``spec`` asks for; ``None`` for one block.

    Returns:
        the :class:`~tclose.interfaces.Partition`; its ``info`` holds the plan's ``info``, what
        ``finish_blocks`` adds, then ``blocks``, ``executor``, ``block_rows`` (smallest and
        largest block) and ``block_seconds`` (``split``, ``tasks``, ``combine``).
    """
    plan_of = getattr(algorithm, "block_plan", None)
    plan = call_hook(plan_of, problem) if plan_of else default_plan(problem)
    blocks = n_blocks(spec, problem.x.shape[0], plan.clusters)
    if blocks <= 1:
        return None
    return _partition_blocked(algorithm, problem, spec, blocks, plan)


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
    algorithm: Algorithm, problem: Problem, spec: BlockSpec, blocks: int, plan: BlockPlan
) -> Partition:
    from tclose.kernels.blocks import reference_of

    x = np.ascontiguousarray(problem.x, dtype=np.float64)
    started = time.perf_counter()
    parts, payloads = _split(x, problem.distances, problem.k, plan, blocks)
    payloads = [replace(p, number=i + 1, count=len(payloads)) for i, p in enumerate(payloads)]
    split = time.perf_counter()
    sizes = [len(p) for p in parts]
    log.info(
        "%s: %d rows in %d blocks (%d to %d rows) on executor %s",
        *(algorithm.name, x.shape[0], len(parts), min(sizes), max(sizes), spec.executor),
    )
    references = tuple(reference_of(d) for d in problem.distances) if plan.distances else ()
    shared = _Shared(algorithm, problem.k, problem.t, dict(problem.options), references)
    preload = tuple(getattr(algorithm, "block_preload", ()))
    options = {n: getattr(spec, n) for n in ("executor", "scheduler", "workers", "retries")}
    results = run_tasks(run_block, payloads, shared=shared, sizes=sizes, preload=preload, **options)
    tasks = time.perf_counter()
    partition = Partition(_combined(x.shape[0], parts, results), dict(plan.info))
    finish = getattr(algorithm, "finish_blocks", None)
    if finish is not None:
        partition = call_hook(finish, replace(problem, x=x), partition, [r.info for r in results])
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


def _combined(n: int, parts: Sequence[np.ndarray], results: Sequence[Partition]) -> np.ndarray:
    """The labels of the whole table: block ``b``'s clusters numbered after those of blocks
    ``0..b-1``."""
    labels = np.empty(n, dtype=np.int64)
    offset = 0
    for rows, result in zip(parts, results, strict=True):
        labels[rows] = result.labels + offset
        offset += int(result.labels.max()) + 1
    return labels


def run_block(shared: _Shared, block: _Block) -> Partition:
    """The task of one block (run by the executor's workers): the algorithm's
    ``partition_block`` (else its ``partition``) on a :class:`~tclose.interfaces.Problem` of
    the block's rows, with its own copy of the options (a plugin may change them).

    Returns:
        a :class:`~tclose.interfaces.Partition` of the block's rows, labels checked
        (:func:`tclose.base.plugin_calls.checked_labels`, here in the worker: an answer a pool
        cannot pickle back, a lambda in its info, fails naming the plugin, not as a lost task
        that is retried) and renumbered dense ``0..L_b-1``.

    Raises:
        VerificationError: the answer breaks the contract (naming the plugin).
        PluginFailure: the algorithm raised an exception that is not a
            :class:`~tclose.errors.TcloseError` or a ``MemoryError`` (any ``BaseException``
            but ``KeyboardInterrupt``): a bug in the plugin, as in
            :func:`tclose.base.plugin_calls.plugin_call`; the message names the plugin and the
            block. The executors raise a ``TcloseError`` of a task at once, without retrying it
            (:func:`tclose.blocks.executors.run_tasks`).
    """
    from tclose.kernels.blocks import restrict

    views = [restrict(r, c) for r, c in zip(shared.references, block.codes, strict=True)]
    algorithm = shared.algorithm
    options = dict(shared.options)
    problem = Problem(block.x, views, shared.k, shared.t, options, strata=block.strata)
    where = f" in block {block.number} of {block.count} ({len(block.x):,} rows)"
    with plugin_call(algorithm, where=where):
        method = getattr(algorithm, "partition_block", None) or algorithm.partition
        result = call_hook(method, problem)
        return Partition(checked_labels(algorithm, result, len(block.x)), result.info)
