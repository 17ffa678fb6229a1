"""Population uniqueness estimated from a sample: Zayatz's model (1991), as ARX computes it.

A table of ``n`` rows is taken as a simple random sample, with sampling fraction ``pi``, of a
population of ``N = max(n, round(n / pi))`` people. Rows with equal quasi-identifier values form
an equivalence class; ``f_i`` is the number of classes of size ``i`` in the sample, ``K`` the
number of classes and ``f_1`` the sample uniques. Zayatz estimates the probability that a sample
unique is also unique in the population as

    P(1 | 1) f_1 / sum_i P(1 | i) f_i

where ``P(1 | i)`` is the hypergeometric probability of drawing exactly one member of a
population class of ``i`` members in a sample of ``n`` out of ``N``::

    P(1 | i) = i * C(N - i, n - 1) / C(N, n)

(the class sizes of the sample stand in for those of the population). The estimated number of
population uniques is ``f_1 * P(1 | 1) f_1 / sum_i P(1 | i) f_i / pi``, and the population
uniqueness its share of ``N``. With ``pi = 1`` the population is the table: the estimate is
``f_1``. A k-anonymous release with ``k >= 2`` has no sample unique, hence an estimate of 0;
the figure of the source's original quasi-identifiers is the one that tells how identifying
they are.

Reference: L. Zayatz, "Estimation of the number of unique population elements using a sample",
Proc. Survey Research Methods Section, ASA, 1991; ARX's ``ModelZayatz``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MODEL", "SAMPLING_FRACTION", "population_size", "population_uniqueness"]

#: The model's name, as the report gives it.
MODEL = "Zayatz (1991)"
#: The sampling fraction assumed when none is configured (``report.sampling_fraction``).
SAMPLING_FRACTION = 0.01


def population_size(n: int, sampling_fraction: float) -> int:
    """The population a sample of ``n`` rows is taken from: ``max(n, round(n / pi))``.

    >>> population_size(1000, 0.01), population_size(7, 1.0), population_size(3, 0.7)
    (100000, 7, 4)
    """
    return max(n, round(n / sampling_fraction))


def population_uniqueness(
    class_sizes: np.ndarray, sampling_fraction: float = SAMPLING_FRACTION
) -> dict[str, Any]:
    """Zayatz's estimate of the population uniques from the sample's class sizes.

    Args:
        class_sizes: the rows of every equivalence class of the sample (sizes >= 1).
        sampling_fraction: the share ``pi`` of the population the sample holds, in ``(0, 1]``.

    Returns:
        ``model``, ``sampling_fraction``, ``population_size`` (``N``), ``sample_uniques``
        (``f_1``), ``population_uniques`` (the estimate) and ``population_uniqueness`` (its
        share of ``N``).

    >>> population_uniqueness(np.array([1, 1, 2, 3]), 1.0)["population_uniques"]
    2.0
    """
    sizes = np.asarray(class_sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    n = int(sizes.sum())
    big_n = population_size(n, sampling_fraction)
    uniques = int((sizes == 1).sum())
    estimate = 0.0
    if uniques:
        values, counts = np.unique(sizes, return_counts=True)  # values[0] == 1
        chance = _relative_chance_of_one(big_n, values, n)
        conditional = uniques / float(np.dot(chance, counts))
        estimate = uniques * conditional / sampling_fraction
    return {
        "model": MODEL,
        "sampling_fraction": sampling_fraction,
        "population_size": big_n,
        "sample_uniques": uniques,
        "population_uniques": estimate,
        "population_uniqueness": estimate / big_n if big_n else 0.0,
    }


def _relative_chance_of_one(population: int, sizes: np.ndarray, draws: int) -> np.ndarray:
    """``P(1 | i) / P(1 | 1)`` for every class size ``i`` of ``sizes``: ``P(1 | i)`` is the
    hypergeometric probability that exactly one of ``i`` members of a ``population`` is among
    ``draws`` drawn without replacement, ``i · C(N − i, n − 1) / C(N, n)``. Its ratio to the
    size 1's is the product ``i · Π_{j=1}^{i−1} (N − n + 1 − j) / (N − j)``, computed as a sum
    of ``log1p`` terms: exact to rounding for any ``N``, where the binomials themselves would
    cancel catastrophically (and the ratio is all the estimate needs)."""
    largest = int(sizes.max())
    j = np.arange(1, largest, dtype=np.float64)
    remaining = population - draws + 1 - j  # N − n + 1 − j: no way left once it reaches 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(remaining > 0, np.log1p(-(draws - 1) / (population - j)), -np.inf)
    logs = np.concatenate(([0.0], np.cumsum(terms)))  # logs[i - 1]: the product up to i − 1
    return sizes * np.exp(logs[sizes - 1])
