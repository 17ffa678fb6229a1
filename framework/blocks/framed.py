"""The framework's steps around an algorithm: blocks and refinement, for every algorithm.

An algorithm plugin implements ``partition(problem)`` on the rows it is given; the framework
reads the common options of ``algorithm.options``, and

1. **blocks** (:data:`~tclose.blocks.split.BLOCK_OPTIONS`): when they ask for more than one
   block, splits the rows and runs the algorithm in every block
   (:func:`tclose.blocks.service.run_in_blocks`, with its optional hooks ``block_plan``,
   ``partition_block``, ``finish_blocks``); else calls ``partition`` on the whole table;
2. **refinement** (:data:`~tclose.kernels.refinement.REFINE_OPTIONS`): with ``refine: true``,
   lowers the partition's within-cluster sum of squares keeping ``k`` and ``t``
   (:func:`tclose.kernels.refinement.apply_refinement`).

Built-in and third-party algorithms alike: the steps are chosen from the configuration, never
from the algorithm's name. An option the algorithm declares itself under the name of a step's
option is its own: the framework then neither adds that step's options nor applies the step. An
algorithm's ``framework_steps`` (default ``("blocks", "refine")``) names the steps it takes; one
that solves other algorithms (``auto``) takes none, and its block options go on to the
algorithms it solves (:meth:`tclose.interfaces.Problem.solve`).

The plugin's methods take the :class:`~tclose.interfaces.Problem`; a method written with the
five values ``(x, distances, k, t, options)`` in its place (tclose 0.x) is called with them
(:func:`tclose.base.plugin_calls.call_hook`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tclose.base.options import validate_options
from tclose.base.plugin_calls import call_hook
from tclose.blocks.service import run_in_blocks
from tclose.blocks.split import BLOCK_OPTIONS, block_spec
from tclose.interfaces import Algorithm, Option, Partition, Problem
from tclose.kernels.refinement import REFINE_OPTIONS, apply_refinement

__all__ = ["STEPS", "options_schema", "run_algorithm", "steps_of"]

#: The framework's steps, in the order they apply, and the options each reads.
STEPS: Mapping[str, Mapping[str, Option]] = {"blocks": BLOCK_OPTIONS, "refine": REFINE_OPTIONS}


def steps_of(algorithm: Algorithm) -> tuple[str, ...]:
    """The steps the framework applies around ``algorithm``: those of its ``framework_steps``
    (default: all) none of whose options it declares itself."""
    chosen = getattr(algorithm, "framework_steps", tuple(STEPS))
    own = algorithm.options_schema
    return tuple(s for s in STEPS if s in chosen and not any(o in own for o in STEPS[s]))


def _passed_on(algorithm: Algorithm) -> tuple[str, ...]:
    """The steps whose options the framework accepts for ``algorithm``: its steps, and the
    block options of an algorithm that takes no block step itself (handed to those it
    solves) unless it declares one of them."""
    steps = steps_of(algorithm)
    if "blocks" in steps or any(o in algorithm.options_schema for o in BLOCK_OPTIONS):
        return steps
    return ("blocks", *steps)


def options_schema(algorithm: Algorithm) -> dict[str, Option]:
    """Every option ``algorithm.options`` accepts: the algorithm's own, then the options of the
    framework's steps (:func:`steps_of`; block options always)."""
    schema = dict(algorithm.options_schema)
    for step in _passed_on(algorithm):
        schema.update(STEPS[step])
    return schema


def run_algorithm(
    algorithm: Algorithm,
    problem: Problem,
    algorithms: Mapping[str, Algorithm] | None = None,
) -> Partition:
    """``algorithm``'s partition of ``problem``, with the framework's steps.

    Args:
        algorithm: the plugin.
        problem: the rows; its ``options`` validated against :func:`options_schema` (the
            framework's options among them). ``t`` goes to the algorithm, the blocks and the
            refinement only if the algorithm ``requires_t``.
        algorithms: name → plugin, for :meth:`Problem.solve <tclose.interfaces.Problem.solve>`
            (default: the built-in algorithms).

    Raises:
        ConfigError: invalid block options.
    """
    steps = steps_of(algorithm)
    own = {n: v for n, v in problem.options.items() if n in algorithm.options_schema}
    common = {n: v for n, v in problem.options.items() if n not in algorithm.options_schema}
    inherited = {n: v for n, v in common.items() if n in BLOCK_OPTIONS}
    plain = replace(
        problem,
        t=problem.t if algorithm.requires_t else None,
        options=own,
        solver=_solver(algorithms, inherited),
    )
    partition = None
    if "blocks" in steps:
        partition = run_in_blocks(algorithm, plain, block_spec(algorithm.name, common))
    if partition is None:
        partition = call_hook(algorithm.partition, plain)
    if "refine" in steps:
        partition = apply_refinement(partition, replace(plain, options=common))
    return partition


def _solver(
    algorithms: Mapping[str, Algorithm] | None, inherited: Mapping[str, Any]
) -> Callable[[str, Problem, Mapping[str, Any]], Partition]:
    """The :attr:`Problem.solver <tclose.interfaces.Problem.solver>` of a run: the named
    algorithm with its defaults, the run's block options and the options asked for."""

    def solve(name: str, problem: Problem, options: Mapping[str, Any]) -> Partition:
        table = algorithms if algorithms is not None else _built_ins()
        algorithm = table[name]
        schema = options_schema(algorithm)
        chosen = {n: v for n, v in inherited.items() if n in schema}
        validated = validate_options(name, schema, {**chosen, **options}, ("algorithm", "options"))
        return run_algorithm(algorithm, replace(problem, options=validated, strata=None), table)

    return solve


def _built_ins() -> dict[str, Algorithm]:
    from tclose.base.registry import load_registry

    registry = load_registry(entry_points=False)
    return {name: provided.obj for name, provided in registry.algorithms.items()}
