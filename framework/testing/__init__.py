"""Conformance checks for algorithm plugins: run them on a new algorithm before publishing it.

::

    from tclose.testing import check_algorithm

    def test_my_algorithm_conforms():
        check_algorithm(MyAlgorithm())

:func:`check_algorithm` runs the algorithm as the runner does (standardized quasi-identifiers,
fitted ``emd-ordered`` distances, validated options with defaults filled in, the framework's
blocks and refinement applied: :func:`tclose.blocks.framed.run_algorithm`) on small seeded data
sets chosen to reach the edges: ``n == k``, ``n == 2k - 1``, ties and a 70/30 binary confidential
attribute, duplicated and constant quasi-identifiers, one and two confidential attributes. It
checks that:

- the options schema is well formed: every entry is an :class:`~tclose.interfaces.Option` with a
  one-sentence ``doc``, every default passes the schema's own constraints, and an unknown option
  is rejected;
- the algorithm has a ``name`` and ``requires_t``, and returns a
  :class:`~tclose.interfaces.Partition` that the runner accepts
  (:func:`tclose.base.plugin_calls.checked_labels`): its ``info`` is JSON the report can hold
  faithfully (strict JSON: no NaN or infinity, no dict that holds itself, no keys such as ``3``
  and ``"3"``);
- the partition covers every row exactly once: ``labels`` is an integer array of shape ``(n,)``
  (not masked, not timedeltas);
- every cluster has at least ``k`` rows;
- when the algorithm ``requires_t``, every cluster's EMD is at most ``t + EMD_TOLERANCE`` for
  every confidential attribute (a NaN EMD is not);
- it is deterministic (the same input gives the same clusters) and leaves its input unchanged.

It raises :class:`ConformanceError` (an ``AssertionError``) listing every failure, so it works
as a plain assertion in pytest. Kernels are small here: a run takes a second or two.

A plugin's own tests find it as ``tclose`` does with :func:`load_registry` (the built-ins, the
installed entry points and ``extra_plugins``), which this module exports for them:
``from tclose.testing import load_registry``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels, standardize
from tclose.base.options import validate_options
from tclose.base.plugin_calls import checked_labels
from tclose.base.registry import load_registry as load_registry  # exported: see above
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.errors import ConfigError, VerificationError
from tclose.interfaces import (
    EMD_TOLERANCE,
    Distance,
    FittedDistance,
    Option,
    Partition,
    Problem,
)


class ConformanceError(AssertionError):
    """An algorithm failed one or more conformance checks; the message lists them."""


@dataclass
class Case:
    """One input of the conformance suite.

    Attributes:
        name: what the case exercises.
        quasi: raw quasi-identifier matrix ``(n, d)`` (standardized before the call).
        confidential: confidential columns ``(n,)`` each, by name.
        k: the k to ask for.
        t: the t to ask for (ignored by algorithms that do not require it).
    """

    name: str
    quasi: np.ndarray
    confidential: dict[str, np.ndarray]
    k: int
    t: float


def cases(seed: int = 0) -> Iterator[Case]:
    """The seeded inputs of :func:`check_algorithm`."""
    rng = np.random.default_rng(seed)

    def table(n: int, d: int) -> np.ndarray:
        return rng.normal(size=(n, d)) * [10.0**j for j in range(d)]

    yield Case(
        "typical: 120 rows, 3 QIs, distinct confidential values",
        table(120, 3),
        {"c": rng.permutation(120).astype(float)},
        k=4,
        t=0.2,
    )
    yield Case("n == k: one cluster", table(5, 2), {"c": rng.normal(size=5)}, k=5, t=0.5)
    yield Case("n == 2k - 1", table(9, 2), {"c": rng.normal(size=9)}, k=5, t=0.5)
    yield Case("k == 1", table(12, 2), {"c": rng.normal(size=12)}, k=1, t=0.5)
    binary = np.zeros(100)
    binary[rng.permutation(100)[:30]] = 1.0
    yield Case(
        "ties: 70/30 binary confidential attribute, k = 2",
        table(100, 2),
        {"c": binary},
        k=2,
        t=0.25,
    )
    duplicated = np.repeat(table(20, 2), 4, axis=0)
    yield Case(
        "duplicated QI rows and a constant QI column",
        np.column_stack([duplicated, np.full(80, 7.0)]),
        {"c": rng.integers(0, 6, 80).astype(float)},
        k=3,
        t=0.3,
    )
    yield Case("one QI column", table(60, 1), {"c": rng.normal(size=60)}, k=3, t=0.3)
    yield Case(
        "two confidential attributes",
        table(90, 2),
        {"c1": rng.normal(size=90), "c2": rng.integers(0, 4, 90).astype(float)},
        k=3,
        t=0.3,
    )


#: The distance the cases are fitted with, found by name in the plugin registry.
DISTANCE = "emd-ordered"


def _fit(distance: Distance, confidential: Mapping[str, np.ndarray]) -> list[FittedDistance]:
    fitted = []
    for column, values in confidential.items():
        model = distance.fit(values, {})
        model.column = column
        fitted.append(model)
    return fitted


def check_options_schema(algorithm: Any) -> list[str]:
    """Problems with ``algorithm.options_schema`` (an empty list when there are none)."""
    problems = []
    name = getattr(algorithm, "name", "?")
    schema = getattr(algorithm, "options_schema", None)
    if not isinstance(schema, Mapping):
        return [f"options_schema must be a mapping of option name to Option, got {schema!r}"]
    for option_name, option in schema.items():
        if not isinstance(option, Option):
            problems.append(f"option {option_name!r} is not a tclose.interfaces.Option")
            continue
        if not option.doc or not option.doc.strip():
            problems.append(f"option {option_name!r} has no doc")
        try:
            validate_options(name, schema, {option_name: option.default}, ("algorithm", "options"))
        except ConfigError as error:
            problems.append(f"the default of option {option_name!r} is invalid: {error.problem}")
    try:
        validate_options(name, schema, {"__not_an_option__": 1}, ("algorithm", "options"))
        problems.append("an unknown option was accepted")
    except ConfigError:
        pass
    return problems


def check_partition(algorithm: Any, problem: Problem) -> list[str]:
    """Problems with one run of ``algorithm`` on ``problem`` as the framework runs it
    (:func:`tclose.blocks.framed.run_algorithm`: its blocks and refinement options apply); an
    empty list when there are none."""
    x_before = problem.x.copy()
    try:
        first = run_algorithm(algorithm, problem)
    except Exception as error:  # report, do not crash the suite
        return [f"partition raised {type(error).__name__}: {error}"]
    dense, problems = _answer_problems(algorithm, first, problem)
    if dense is None:
        return problems
    if not np.array_equal(problem.x, x_before):
        problems.append("partition modified its input matrix x")
    second = run_algorithm(algorithm, replace(problem, x=problem.x.copy()))
    if not np.array_equal(_canonical(dense), _canonical(dense_labels(np.asarray(second.labels)))):
        problems.append("not deterministic: two calls on the same input gave different clusters")
    return problems


def _answer_problems(
    algorithm: Any, answer: Any, problem: Problem
) -> tuple[np.ndarray | None, list[str]]:
    """The dense labels of ``answer`` (``None`` if it is not a partition of the rows) and what
    is wrong with it: clusters under ``k``, EMDs over ``t``."""
    n, k, t = len(problem.x), problem.k, problem.t
    if not isinstance(answer, Partition):
        return None, [
            f"partition returned {type(answer).__name__}, not a tclose.interfaces.Partition"
        ]
    labels = np.asarray(answer.labels)
    if labels.shape != (n,):
        return None, [f"labels have shape {labels.shape}; expected ({n},): one label per row"]
    if not np.issubdtype(labels.dtype, np.integer):
        return None, [f"labels have dtype {labels.dtype}; expected an integer dtype"]
    try:  # the runner's own check of the answer: masked labels, an info the report cannot hold
        dense = checked_labels(algorithm, answer, n)
    except VerificationError as error:
        return None, [str(error)]
    problems = []
    sizes = np.bincount(dense)
    if sizes.min() < k:
        problems.append(
            f"{int((sizes < k).sum())} cluster(s) have fewer than k = {k} rows "
            f"(smallest: {int(sizes.min())})"
        )
    if t is not None and getattr(algorithm, "requires_t", False):
        for distance in problem.distances:
            worst = float(np.max(distance.cluster_emd(dense)))
            if not worst <= t + EMD_TOLERANCE:  # NaN fails too
                problems.append(f"a cluster's EMD for {distance.column} is {worst:.6f} > t = {t}")
    return dense, problems


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered by first appearance, so equal partitions compare equal."""
    _, first_seen, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first_seen))
    return order[inverse.reshape(-1)]


def check_algorithm(algorithm: Any, options: Mapping[str, Any] | None = None, seed: int = 0) -> int:
    """Run every conformance check on ``algorithm``; raise :class:`ConformanceError` if any fails.

    Args:
        algorithm: an object following :class:`tclose.interfaces.Algorithm`.
        options: options to run with (validated against the schema; defaults filled in).
        seed: seed of the generated cases.

    Returns:
        the number of cases run.
    """
    problems: list[str] = []
    for attribute in ("name", "options_schema", "requires_t", "partition"):
        if not hasattr(algorithm, attribute):
            problems.append(f"missing attribute {attribute!r}")
    if problems:
        raise ConformanceError(_message(algorithm, problems))
    problems += [f"options: {p}" for p in check_options_schema(algorithm)]
    if problems:  # running the cases with a broken schema would only add noise
        raise ConformanceError(_message(algorithm, problems))
    try:
        validated = validate_options(
            algorithm.name, options_schema(algorithm), options, ("algorithm", "options")
        )
    except ConfigError as error:
        raise ConformanceError(_message(algorithm, [f"options: {error}"])) from None
    distance = load_registry(entry_points=False).get("distance", DISTANCE, ("check_algorithm",))
    count = 0
    for case in cases(seed):
        count += 1
        distances = _fit(distance, case.confidential)
        x = standardize(np.asarray(case.quasi, dtype=np.float64))
        t = case.t if algorithm.requires_t else None
        problem = Problem(x, distances, case.k, t, validated)
        problems += [f"{case.name}: {p}" for p in check_partition(algorithm, problem)]
    if problems:
        raise ConformanceError(_message(algorithm, problems))
    return count


def _message(algorithm: Any, problems: list[str]) -> str:
    name = getattr(algorithm, "name", type(algorithm).__name__)
    return f"algorithm {name!r} fails {len(problems)} conformance check(s):\n- " + "\n- ".join(
        problems
    )


def check_connector(
    connector: Any,
    url: str,
    password_file: str | None = None,
    *,
    schema: str | None = None,
    decimal_digits: int = 18,
    drop: Any = None,
) -> None:
    """Check a connector against the contract of :mod:`tclose.connector`, on the database at
    ``url`` (see :mod:`tclose.testing.connectors` for every check): reads, exact types, staging,
    verification read-back, publish, and that refusals and failures leave nothing behind.

    The check creates two tables named ``tclose_check_<random>_src``/``_tgt`` (in ``schema``,
    if given) and drops them at the end, through ``drop(name)`` if given, else through the
    database's SQLAlchemy ``engine``. ``decimal_digits``: significant digits of the fixture's
    decimals (SQLite keeps 15: pass 15 there).

    Raises:
        ConformanceError: listing every failed check.
    """
    from tclose.testing.connectors import run_check

    problems = run_check(
        connector, url, password_file, schema=schema, decimal_digits=decimal_digits, drop=drop
    )
    if problems:
        name = getattr(connector, "name", type(connector).__name__)
        raise ConformanceError(
            f"connector {name!r} failed {len(problems)} check(s):\n- " + "\n- ".join(problems)
        )
