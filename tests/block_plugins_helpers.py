"""Algorithm plugins for tests/test_adversarial_block_plugins.py (no tests here).

The workers of a process pool or of Dask import a blocked algorithm by module name, so the
plugins live in this plain module (its folder is put on ``sys.path`` by the test module, and the
pools pass ``sys.path`` on to their workers), not in a test module.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tclose.errors import DataError
from tclose.interfaces import Option, Partition


class _Unprintable(Exception):
    """An exception whose ``str()`` raises (a research prototype's broken ``__str__``)."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ of the plugin's exception failed")


class _Abort(BaseException):
    """A plugin's own ``BaseException`` subclass (as some libraries define for cancellation)."""


class _Unpicklable(Exception):
    """An exception no pool can send back as it is (its ``__init__`` needs two arguments)."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what} ({code})")


def _fault(fault: str) -> None:
    if fault == "zero":
        1 / 0  # noqa: B018 - the plugin's bug
    elif fault == "exit":
        raise SystemExit(0)
    elif fault == "unpicklable":
        raise _Unpicklable("the plugin's own exception", 7)
    elif fault == "data":
        raise DataError("Faulty refuses these rows on purpose.")
    elif fault == "generator_exit":
        raise GeneratorExit
    elif fault == "base_exception":
        raise _Abort("the plugin gave up")
    elif fault == "unprintable":
        raise _Unprintable("secret 4242")


class Faulty:
    """Honest labels (rows in the order of the first QI, ``k`` per cluster), except that its
    ``partition_block`` fails in every block as option ``fault`` says. Every call appends a
    line to the file ``attempts`` (if given), so that a test counts how often a block ran."""

    name = "faulty"
    requires_t = True
    options_schema = {
        "fault": Option(
            str,
            "zero",
            "How it fails.",
            choices=(
                "none",
                "zero",
                "exit",
                "unpicklable",
                "data",
                "generator_exit",
                "base_exception",
                "unprintable",
                "pops_options",
                "prints",
            ),
        ),
        "attempts": Option(str, "", "A file that counts the calls."),
    }

    def partition(self, x, distances, k, t, options):
        return Partition(_groups(x, k))

    def partition_block(self, x, distances, k, t, options, strata=None):
        if options.get("attempts"):
            with open(options["attempts"], "a") as attempts:
                attempts.write(f"{os.getpid()}\n")
        if options.get("fault") == "unpicklable_result":
            return Partition(_groups(x, k), info={"f": lambda: 0})
        if options.get("fault") == "pops_options":
            options.pop("fault")  # a prototype consuming its options: the next block has none
            return Partition(_groups(x, k))
        if options.get("fault") == "prints":
            print("Faulty: debugging output on stdout")
            return Partition(_groups(x, k))
        _fault(options.get("fault", "zero"))
        return Partition(_groups(x, k))


def _groups(x: np.ndarray, k: int) -> np.ndarray:
    order = np.argsort(x[:, 0], kind="stable")
    labels = np.empty(len(x), dtype=np.int64)
    labels[order] = np.minimum(np.arange(len(x)) // k, len(x) // k - 1)
    return labels


def attempts(path: Path) -> int:
    """Calls of ``partition_block`` counted in ``path``."""
    return len(path.read_text().splitlines()) if path.exists() else 0


class FaultyNative(Faulty):
    """:class:`Faulty` with its hooks in the problem form, as the built-ins have them. Option
    ``fault: "unpicklable_result"`` returns a partition whose info holds a lambda (the pool
    cannot send it back)."""

    name = "faulty-native"
    options_schema = {**Faulty.options_schema, "fault": Option(str, "zero", "How it fails.")}

    def partition(self, problem):
        return Partition(_groups(problem.x, problem.k))

    def partition_block(self, problem):
        return Faulty.partition_block(
            self, problem.x, problem.distances, problem.k, problem.t, dict(problem.options)
        )
