"""Population uniqueness (Zayatz's model) against an oracle written here from the formula.

The oracle computes the hypergeometric probabilities with ``math.lgamma`` (no SciPy) from the
frequencies of class sizes of generated tables, and shares no code with
:mod:`tclose.measures.population`. The report's ``risk.population`` of a release must equal
the oracle on the classes rebuilt by pandas from the published rows and from the original QI
values.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import tclose
from tclose.errors import ConfigError
from tclose.measures.population import population_uniqueness


def log_choose(a: int, b: int) -> float:
    return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)


def one_drawn(big_n: int, size: int, n: int) -> float:
    """P(exactly 1 of a population class of ``size`` in a sample of ``n`` out of ``big_n``)."""
    if n - 1 > big_n - size:
        return 0.0
    return math.exp(math.log(size) + log_choose(big_n - size, n - 1) - log_choose(big_n, n))


def zayatz_oracle(sizes: list[int], fraction: float) -> tuple[int, float]:
    """(N, estimated population uniques) from the class sizes of a sample."""
    n = sum(sizes)
    big_n = max(n, round(n / fraction))
    frequency = pd.Series(sizes).value_counts()
    f1 = int(frequency.get(1, 0))
    if f1 == 0:
        return big_n, 0.0
    classes = frequency.sum()
    below = sum(count / classes * one_drawn(big_n, size, n) for size, count in frequency.items())
    conditional = f1 / classes * one_drawn(big_n, 1, n) / below
    return big_n, f1 * conditional / fraction


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fraction", [0.01, 0.05, 0.3, 1.0])
def test_the_estimate_equals_the_formula_on_generated_frequency_tables(seed, fraction):
    rng = np.random.default_rng(seed)
    sizes = list(rng.geometric(rng.uniform(0.2, 0.9), size=rng.integers(5, 400)))
    big_n, expected = zayatz_oracle(sizes, fraction)
    found = population_uniqueness(np.array(sizes), fraction)
    assert found["population_size"] == big_n
    assert found["sample_uniques"] == sizes.count(1)
    assert found["population_uniques"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert found["population_uniqueness"] == pytest.approx(expected / big_n, rel=1e-9, abs=1e-15)
    assert found["model"] == "Zayatz (1991)" and found["sampling_fraction"] == fraction


def test_a_census_has_as_many_population_uniques_as_sample_uniques():
    found = population_uniqueness(np.array([1, 1, 1, 2, 5]), 1.0)
    assert found["population_uniques"] == 3 and found["population_size"] == 10


def test_no_sample_unique_means_no_population_unique():
    assert population_uniqueness(np.array([2, 3, 7]), 0.01)["population_uniques"] == 0.0
    assert population_uniqueness(np.array([], dtype=np.int64), 0.1)["population_uniques"] == 0.0


def test_the_report_gives_the_model_on_the_release_and_on_the_original_values():
    rng = np.random.default_rng(11)
    n = 600
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["f", "m"], n),
            "zone": rng.choice(list("abcdefgh"), n),
            "charge": rng.integers(0, 40, n),
        }
    )
    qis = {"age": "numeric", "sex": "nominal", "zone": "nominal"}
    result = tclose.anonymize(df, qis, ["charge"], k=3, t=0.3, sampling_fraction=0.05)
    population = result.report["risk"]["population"]
    assert population["model"] == "Zayatz (1991)" and population["sampling_fraction"] == 0.05
    released = result.data.groupby(list(qis)).size().tolist()
    big_n, expected = zayatz_oracle(released, 0.05)
    assert population["population_size"] == big_n
    assert population["release"]["population_uniques"] == pytest.approx(expected)
    assert population["release"]["sample_uniques"] == 0  # k >= 2
    original = df.groupby(list(qis)).size().tolist()
    _, before = zayatz_oracle(original, 0.05)
    assert population["source"]["sample_uniques"] == original.count(1) > 0
    assert population["source"]["population_uniques"] == pytest.approx(before, rel=1e-9)


def test_the_default_sampling_fraction_is_one_percent():
    df = pd.DataFrame({"a": np.arange(20) % 7, "c": np.arange(20)})
    report = tclose.anonymize(df, ["a"], ["c"], k=2).report
    assert report["risk"]["population"]["sampling_fraction"] == 0.01
    assert report["risk"]["population"]["population_size"] == 2000


@pytest.mark.parametrize("fraction", [0, 1.5, -0.1, True, "0.1"])
def test_a_sampling_fraction_outside_zero_to_one_is_refused(fraction):
    df = pd.DataFrame({"a": np.arange(20) % 7, "c": np.arange(20)})
    with pytest.raises(ConfigError, match="sampling_fraction"):
        tclose.anonymize(df, ["a"], ["c"], k=2, sampling_fraction=fraction)
