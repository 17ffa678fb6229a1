"""Block execution as a framework service: an algorithm that knows nothing of blocks (the example
third-party plugin's ``principal-sort``, and ones defined here) runs in blocks on the local pool
through :func:`tclose.blocks.framed.run_algorithm`; the driver never looks at an algorithm's
name; hooks of the five-value form ``(x, distances, k, t, options)`` are called as such."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.base.options import validate_options
from tclose.base.registry import load_registry
from tclose.blocks import service as block_service
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.interfaces import EMD_TOLERANCE, BlockPlan, Partition, Problem
from tclose.kernels.emd import OrderedEMD


def _table(n: int = 4000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Two standardized QIs and a confidential column unrelated to them (ties included)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = rng.integers(0, 40, size=n).astype(np.float64)
    return (x - x.mean(axis=0)) / x.std(axis=0), y


def _run(plugin, x, y, k, t, **options) -> Partition:
    validated = validate_options(plugin.name, options_schema(plugin), options, "algorithm.options")
    distance = OrderedEMD.fit(y)
    distance.column = "y"
    return run_algorithm(plugin, Problem(x, [distance], k, t, validated))


def _check(partition: Partition, y: np.ndarray, k: int, t: float) -> np.ndarray:
    labels = np.unique(partition.labels, return_inverse=True)[1].reshape(-1)
    assert np.bincount(labels).min() >= k
    assert OrderedEMD.fit(y).cluster_emd(labels).max() <= t + EMD_TOLERANCE
    return labels


def test_third_party_algorithm_runs_in_blocks_on_the_local_pool() -> None:
    sortagg = pytest.importorskip("tclose_sortagg")
    plugin = sortagg.PrincipalSort()
    assert "blocks" not in plugin.options_schema and "blocks" in options_schema(plugin)
    x, y = _table()
    k, t = 5, 0.15
    pooled = _run(plugin, x, y, k, t, blocks=4, executor="local", workers=2)
    assert pooled.info["blocks"] == 4 and pooled.info["executor"] == "local"
    assert pooled.info["block_rows"]["min"] >= 900
    labels = _check(pooled, y, k, t)
    serial = _run(plugin, x, y, k, t, blocks=4, workers=1)
    assert np.array_equal(np.unique(serial.labels, return_inverse=True)[1].reshape(-1), labels)
    # Clusters never straddle two blocks: more clusters than one principal-sort on each block
    # could make would mean the driver mixed them; fewer than 4 would mean no blocks ran.
    assert labels.max() + 1 >= 4


class _RegistersSortagg:
    """A plugin that registers the example's algorithm, as its entry point does."""

    @tclose.hookimpl
    def register_algorithms(self, register):
        register(pytest.importorskip("tclose_sortagg").PrincipalSort())


def test_registered_third_party_algorithm_runs_in_blocks_through_anonymize() -> None:
    pytest.importorskip("tclose_sortagg")
    registry = load_registry([_RegistersSortagg()], entry_points=False)
    x, y = _table()
    df = pd.DataFrame({"q1": x[:, 0], "q2": x[:, 1], "y": y})
    options = {"blocks": 4, "executor": "local", "workers": 2, "axis": "first"}
    result = tclose.anonymize(df, ["q1", "q2"], ["y"], 5, 0.15, "principal-sort", registry=registry,
                              **options)  # fmt: skip
    algorithm = result.report["algorithm"]
    assert algorithm["name"] == "principal-sort" and algorithm["options"]["blocks"] == 4
    assert algorithm["info"]["blocks"] == 4 and algorithm["info"]["executor"] == "local"
    assert result.report["privacy"]["k_achieved"] >= 5  # verified on the release
    assert np.bincount(result.labels).min() >= 5
    assert OrderedEMD.fit(y).cluster_emd(result.labels).max() <= 0.15 + EMD_TOLERANCE


def test_one_block_is_the_algorithm_itself() -> None:
    sortagg = pytest.importorskip("tclose_sortagg")
    x, y = _table(600)
    distance = OrderedEMD.fit(y)
    alone = sortagg.PrincipalSort().partition(Problem(x, [distance], 5, 0.2, {"axis": "principal"}))
    framed = _run(sortagg.PrincipalSort(), x, y, 5, 0.2, axis="principal", blocks=1)
    assert np.array_equal(alone.labels, framed.labels) and alone.info == framed.info


class _Chunks:
    """A test algorithm with every block hook, named like a built-in to show the name is unused."""

    name = "mdav"
    options_schema = {}
    requires_t = False

    def __init__(self) -> None:
        self.finished: list[dict] = []

    def partition(self, problem: Problem) -> Partition:
        return Partition(np.arange(problem.x.shape[0]) // problem.k)

    def block_plan(self, problem: Problem) -> BlockPlan:
        return BlockPlan(problem.x.shape[0] // problem.k, distances=False, info={"planned": True})

    def partition_block(self, problem: Problem) -> Partition:
        assert problem.distances == [] and problem.strata is None  # the plan asked for none
        n, k = problem.x.shape[0], problem.k
        return Partition(np.minimum(np.arange(n) // k, n // k - 1), {"rows": n})

    def finish_blocks(self, problem: Problem, partition: Partition, block_infos) -> Partition:
        self.finished.extend(block_infos)
        partition.info["rows_in_blocks"] = sum(i["rows"] for i in block_infos)
        return partition


class _FiveValueChunks(_Chunks):
    """:class:`_Chunks` with every hook in the five-value form ``(x, distances, k, t, options)``."""

    def partition(self, x, distances, k, t, options) -> Partition:
        return super().partition(Problem(x, distances, k, t, options))

    def block_plan(self, x, distances, k, t, options) -> BlockPlan:
        return super().block_plan(Problem(x, distances, k, t, options))

    def partition_block(self, x, distances, k, t, options, strata=None) -> Partition:
        return super().partition_block(Problem(x, distances, k, t, options, strata=strata))

    def finish_blocks(self, x, distances, k, t, options, partition, block_infos) -> Partition:
        return super().finish_blocks(Problem(x, distances, k, t, options), partition, block_infos)


@pytest.mark.parametrize("kind", [_Chunks, _FiveValueChunks])
def test_hooks_are_called_in_order_and_by_interface_only(kind) -> None:
    algorithm = kind()
    x, y = _table(103)
    partition = _run(algorithm, x, y, 4, None, blocks=3, executor="local", workers=1)
    assert partition.info["planned"] is True and partition.info["rows_in_blocks"] == 103
    assert len(algorithm.finished) == 3 == partition.info["blocks"]
    assert np.bincount(partition.labels).min() >= 4
    one = _run(kind(), x, y, 4, None, blocks=1)  # one block: partition on the whole table
    assert "blocks" not in one.info and np.array_equal(one.labels, np.arange(103) // 4)


def test_the_driver_knows_no_algorithm_name() -> None:
    source = inspect.getsource(block_service)
    for name in ("t-first", "k-first", "merge", "mdav", "principal-sort"):
        assert f'"{name}"' not in source


class _SparseLabels:
    """A third-party algorithm returning non-dense labels: ``{0, 5, 10, ...}`` or negative ones."""

    options_schema = {}
    requires_t = False

    def __init__(self, name: str, relabel) -> None:
        self.name = name
        self.relabel = relabel

    def partition(self, x, distances, k, t, options) -> Partition:
        n = x.shape[0]
        return Partition(self.relabel(np.minimum(np.arange(n) // k, n // k - 1)))


def _times_five(groups: np.ndarray) -> np.ndarray:
    return groups * 5


def _negative(groups: np.ndarray) -> np.ndarray:
    return -groups


@pytest.mark.parametrize("relabel", [_times_five, _negative], ids=["sparse", "negative"])
def test_blocked_renumbers_labels_that_are_not_dense(relabel) -> None:
    algorithm = _SparseLabels("sparse-labels", relabel)
    x, y = _table(103)
    k = 4
    partition = _run(algorithm, x, y, k, None, blocks=3, workers=1)
    labels = np.asarray(partition.labels)
    rows = partition.info["block_rows"]
    assert partition.info["blocks"] == 3 and rows["min"] + rows["max"] < 103
    # Every block's clusters keep their own numbers: dense 0..L-1, one cluster per k rows of every
    # block (a collision between blocks would merge two clusters and give fewer).
    assert np.array_equal(np.unique(labels), np.arange(labels.max() + 1))
    sizes = np.bincount(labels)
    assert sizes.min() >= k and sizes.max() < 2 * k
