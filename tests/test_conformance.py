"""tclose.testing: the conformance suite passes on every built-in algorithm and catches the faults
it promises to catch."""

from __future__ import annotations

import numpy as np
import pytest

from tclose.base.registry import load_registry
from tclose.interfaces import Option, Partition
from tclose.testing import ConformanceError, cases, check_algorithm


@pytest.fixture(scope="module")
def registry():
    return load_registry(entry_points=False)


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("mdav", {}),
        ("t-first", {}),
        ("merge", {}),
        ("merge", {"base": "t-first", "partner": "min-emd"}),
        ("k-first", {}),
        ("auto", {}),
        ("t-first", {"refine": True}),
        ("mdav", {"refine": True}),
        ("merge", {"partner": "gain", "split": True, "refine": True}),
        ("k-first", {"refine": True}),
    ],
)
def test_builtin_algorithms_conform(registry, name, options):
    algorithm = registry.algorithms[name].obj
    assert check_algorithm(algorithm, options) == len(list(cases()))


class Blocks:
    """A correct baseline: sort on the first QI, cut into blocks of k rows (last one larger)."""

    name = "blocks"
    options_schema = {"factor": Option(int, 1, "Blocks of k * factor rows.", min=1)}
    requires_t = False

    def partition(self, x, distances, k, t, options):
        size = k * options["factor"]
        order = np.argsort(x[:, 0], kind="stable")
        labels = np.empty(len(x), dtype=np.int64)
        labels[order] = np.minimum(np.arange(len(x)) // size, max(len(x) // size, 1) - 1)
        return Partition(labels, {"blocks": int(labels.max()) + 1})


def test_a_correct_baseline_passes():
    assert check_algorithm(Blocks()) > 0


def _random_halves(x, distances, k, t, options):
    """Valid clusters (two halves of at least k rows), but drawn at random on every call."""
    n = len(x)
    labels = np.zeros(n, dtype=np.int64)
    if n >= 2 * k:
        labels[np.random.default_rng().permutation(n)[: n // 2]] = 1
    return Partition(labels)


def _broken(**overrides):
    algorithm = Blocks()
    for attribute, value in overrides.items():
        setattr(algorithm, attribute, value)
    return algorithm


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [
        (_broken(partition=lambda x, d, k, t, o: Partition(np.arange(len(x)))), "fewer than k"),
        (
            _broken(partition=lambda x, d, k, t, o: Partition(np.zeros(len(x) - 1, dtype=int))),
            "one label per row",
        ),
        (_broken(partition=lambda x, d, k, t, o: Partition(np.zeros(len(x)))), "integer dtype"),
        (_broken(partition=_random_halves), "not deterministic"),
        (
            _broken(
                partition=lambda x, d, k, t, o: Partition(
                    np.zeros(len(x), dtype=int), {"bad": object()}
                )
            ),
            "info that JSON cannot hold",
        ),
        (
            _broken(options_schema={"factor": Option(int, 0, "Bad default.", min=1)}),
            "default of option 'factor' is invalid",
        ),
        (_broken(options_schema={"factor": Option(int, 1, "")}), "has no doc"),
        (_broken(options_schema={"factor": 1}), "is not a tclose.interfaces.Option"),
    ],
    ids=[
        "singletons",
        "short-labels",
        "float-labels",
        "random",
        "info",
        "bad-default",
        "no-doc",
        "not-an-option",
    ],
)
def test_faults_are_reported(algorithm, expected):
    with pytest.raises(ConformanceError, match=expected):
        check_algorithm(algorithm)


def test_t_is_checked_when_the_algorithm_requires_it():
    ignores_t = _broken(requires_t=True, name="ignores-t")
    with pytest.raises(ConformanceError, match=r"EMD for c is .* > t"):
        check_algorithm(ignores_t)


def test_input_mutation_is_reported():
    class Mutates(Blocks):
        def partition(self, x, distances, k, t, options):
            x[:] = 0.0
            return Partition(np.zeros(len(x), dtype=np.int64))

    with pytest.raises(ConformanceError, match="modified its input"):
        check_algorithm(Mutates())
