"""The framework's steps around an algorithm (tclose.blocks.framed): blocks and refinement for
every algorithm, chosen from the configuration; an option the algorithm declares itself is its
own; an algorithm without steps hands its block options to the algorithms it solves."""

from __future__ import annotations

import numpy as np
import pytest

from tclose.base.arrays import standardize
from tclose.base.options import validate_options
from tclose.blocks.framed import STEPS, options_schema, run_algorithm, steps_of
from tclose.blocks.split import BLOCK_OPTIONS
from tclose.interfaces import Option, Partition, Problem
from tclose.kernels.emd import OrderedEMD
from tclose.kernels.refine import sse_of
from tclose.kernels.refinement import REFINE_OPTIONS


class _Sorted:
    """Rows sorted on the first QI, cut into clusters of k (the last one larger)."""

    name = "sorted"
    options_schema: dict = {}
    requires_t = False

    def __init__(self) -> None:
        self.seen: list[Problem] = []

    def partition(self, problem: Problem) -> Partition:
        self.seen.append(problem)
        n, k = len(problem.x), problem.k
        order = np.argsort(problem.x[:, 0], kind="stable")
        labels = np.empty(n, dtype=np.int64)
        labels[order] = np.minimum(np.arange(n) // k, n // k - 1)
        return Partition(labels, {"own": True})


class _OwnRefine(_Sorted):
    """Declares an option named ``refine`` of its own (another meaning)."""

    name = "own-refine"
    options_schema = {"refine": Option(str, "none", "Its own refinement.")}


class _Solver(_Sorted):
    """Takes no step of the framework; solves ``sorted`` through the problem."""

    name = "solver"
    framework_steps: tuple[str, ...] = ()

    def partition(self, problem: Problem) -> Partition:
        self.seen.append(problem)
        return problem.solve("sorted")


def _table(n: int = 600, seed: int = 1) -> tuple[np.ndarray, OrderedEMD]:
    rng = np.random.default_rng(seed)
    x = standardize(rng.normal(size=(n, 2)))
    return x, OrderedEMD.fit(rng.integers(0, 30, n).astype(float))


def _options(algorithm, **given) -> dict:
    return validate_options(algorithm.name, options_schema(algorithm), given, "algorithm.options")


def test_every_algorithm_gets_the_block_and_refine_options_and_sees_only_its_own() -> None:
    algorithm = _Sorted()
    schema = options_schema(algorithm)
    assert set(schema) == set(BLOCK_OPTIONS) | set(REFINE_OPTIONS)
    assert steps_of(algorithm) == tuple(STEPS)
    x, distance = _table()
    run_algorithm(algorithm, Problem(x, [distance], 5, None, _options(algorithm)))
    assert algorithm.seen[-1].options == {}  # the framework's options are applied, not passed


def test_refine_true_refines_a_third_party_partition() -> None:
    algorithm = _Sorted()
    x, distance = _table()
    plain = run_algorithm(algorithm, Problem(x, [distance], 5, None, _options(algorithm)))
    options = _options(algorithm, refine=True)
    refined = run_algorithm(algorithm, Problem(x, [distance], 5, None, options))
    assert "refine" not in plain.info and refined.info["refine"]["passes"] >= 1
    assert refined.info["own"] is True
    assert np.bincount(refined.labels).min() >= 5
    assert sse_of(x, refined.labels) < sse_of(x, np.asarray(plain.labels))


def test_t_goes_to_the_refinement_of_an_algorithm_that_requires_it() -> None:
    class Close(_Sorted):
        name = "close"
        requires_t = True

        def partition(self, problem: Problem) -> Partition:
            self.seen.append(problem)
            return Partition(np.zeros(len(problem.x), dtype=np.int64))  # one cluster: EMD 0

    algorithm = Close()
    x, distance = _table(300)
    options = _options(algorithm, refine=True)
    refined = run_algorithm(algorithm, Problem(x, [distance], 5, 0.05, options))
    assert algorithm.seen[-1].t == 0.05
    assert distance.cluster_emd(refined.labels).max() <= 0.05 + 1e-9
    assert refined.info["refine"]["passes"] >= 1 and refined.labels.max() >= 1  # it split


def test_t_is_none_for_an_algorithm_that_does_not_require_it() -> None:
    algorithm = _Sorted()
    x, distance = _table(100)
    run_algorithm(algorithm, Problem(x, [distance], 5, 0.3, _options(algorithm)))
    assert algorithm.seen[-1].t is None


def test_an_option_of_its_own_under_a_step_s_name_leaves_that_step_to_the_algorithm() -> None:
    algorithm = _OwnRefine()
    assert steps_of(algorithm) == ("blocks",)
    schema = options_schema(algorithm)
    assert schema["refine"].type is str and "refine_passes" not in schema
    x, distance = _table()
    options = _options(algorithm, refine="mine")
    partition = run_algorithm(algorithm, Problem(x, [distance], 5, None, options))
    assert "refine" not in partition.info  # the framework did not refine
    assert algorithm.seen[-1].options == {"refine": "mine"}


def test_an_algorithm_without_steps_passes_its_block_options_to_those_it_solves() -> None:
    solver, sorted_ = _Solver(), _Sorted()
    assert steps_of(solver) == () and set(options_schema(solver)) == set(BLOCK_OPTIONS)
    x, distance = _table(103)
    options = _options(solver, blocks=3, workers=1)
    partition = run_algorithm(
        solver, Problem(x, [distance], 4, None, options), {"sorted": sorted_, "solver": solver}
    )
    assert solver.seen[-1].options == {}  # not run in blocks itself
    assert partition.info["blocks"] == 3  # the algorithm it solved was
    assert len(sorted_.seen) == 3 and sum(len(p.x) for p in sorted_.seen) == 103


def test_solve_outside_the_framework_and_a_missing_t_are_clear_errors() -> None:
    x, distance = _table(20)
    problem = Problem(x, [distance], 5, None)
    with pytest.raises(RuntimeError, match=r"Problem.solve\('t-first'\) needs the framework"):
        problem.solve("t-first")
    with pytest.raises(ValueError, match="Algorithm 'merge' enforces t-closeness"):
        problem.required_t("merge")


def test_solve_runs_a_built_in_by_name_with_its_defaults() -> None:
    solver = _Solver()
    x, distance = _table(200)
    distance.column = "y"
    problem = Problem(x, [distance], 5, 0.3, _options(solver))
    solver.requires_t = True
    solver.seen.clear()

    def t_first(problem: Problem) -> Partition:
        return problem.solve("t-first", stratify="y")

    solver.partition = t_first  # type: ignore[method-assign]
    partition = run_algorithm(solver, problem)
    assert partition.info["stratified_by"] == "y" and partition.info["k_effective"] >= 5
    assert (
        distance.cluster_emd(np.unique(partition.labels, return_inverse=True)[1]).max()
        <= 0.3 + 1e-9
    )
