"""Benchmark of the disclosure-risk and utility measures (issue #15).

Usage::

    python bench/bench_measures.py                       # 100k, 300k, 1M rows (a few minutes)
    python bench/bench_measures.py --sizes 100000 300000 --repeats 3

Data: 8 correlated Gaussian numeric quasi-identifiers and a confidential attribute correlated with
the first (all values distinct), seeded, as in ``bench_blocks.py``. The published table is the
one t-first (k = 10, t = 0.25, default options: ``blocks: auto``, local executor) makes of it.
For each size it prints the median wall-clock time of ``--repeats`` runs of:

- ``anonymize``: t-first's partition (what the run's ``kernel`` phase costs);
- ``all measures``: :func:`tclose.measures.measure_configured`, everything the report's ``risk``
  and extra ``utility`` hold (the run's ``measures`` phase), from the encoded source and the
  published values;
- ``record linkage``: :func:`tclose.measures.record_linkage` alone, and its time divided by
  ``n log2 n`` (constant if it scales as ``n log n``).

Budgets: all measures at 1M rows ≤ 30 s, and no more than the anonymization at 100k rows. The
load average is printed first: on a shared machine the figures are only comparable between
runs made at the same load.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tclose.attributes import encode_table
from tclose.config import _attributes, _Checker
from tclose.measures import measure_configured, record_linkage
from tclose.options import validate_options
from tclose.plugins.kernels.emd import OrderedEMD
from tclose.plugins.t_first import TFirst

K, T, D = 10, 0.25, 8


def synthetic_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """``D`` correlated Gaussian QIs ``q0..q7`` and a distinct confidential ``c``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)) @ rng.normal(size=(D, D))
    frame = pd.DataFrame(x, columns=[f"q{j}" for j in range(D)])
    frame["c"] = 0.5 * x[:, 0] / x[:, 0].std() + rng.normal(size=n)
    return frame


def specs() -> dict:
    document = {f"q{j}": {"role": "quasi_identifier", "type": "numeric"} for j in range(D)}
    document["c"] = {"role": "confidential", "type": "numeric", "distance": "emd-ordered"}
    return _attributes(_Checker({}), document)


def anonymize(encoded) -> np.ndarray:
    distance = OrderedEMD.fit(encoded.confidential["c"])
    distance.column = "c"
    plugin = TFirst()
    options = validate_options(plugin.name, plugin.options_schema, {}, "options")
    labels = plugin.partition(encoded.x, [distance], K, T, options).labels
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)


def timed(run: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


def line(name: str, times: list[float], extra: str = "") -> None:
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(f"{name:<36} median {statistics.median(times):8.2f} s  [{runs}] {extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (1 at 1M rows)")
    args = parser.parse_args()
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    attributes = specs()
    warm = encode_table(synthetic_frame(3000, seed=9), list(attributes.values()))
    measure_configured(warm, warm.aggregate(anonymize(warm)), attributes)
    for n in args.sizes:
        repeats = 1 if n >= 1_000_000 else args.repeats
        encoded = encode_table(synthetic_frame(n), list(attributes.values()))
        times, labels = timed(lambda encoded=encoded: anonymize(encoded), repeats)
        line(f"{n:>9,} anonymize (t-first)", times, f"{labels.max() + 1:,} clusters")
        published = encoded.aggregate(labels)
        times, figures = timed(
            lambda e=encoded, p=published, c=labels: measure_configured(e, p, attributes, labels=c),
            repeats,
        )
        risk = figures["risk"]
        line(
            f"{n:>9,} all measures",
            times,
            f"linkage {risk['record_linkage']:.4f}, interval {risk['interval_disclosure']:.4f}, "
            f"IL1s {figures['utility']['il1s']:.4f}",
        )
        embedded = np.column_stack(
            [(published[q.name] - q.values.mean()) / q.std for q in encoded.quasi_identifiers]
        )
        times, _ = timed(lambda e=encoded, z=embedded, c=labels: record_linkage(e.x, z, c), repeats)
        per = statistics.median(times) / (n * math.log2(n)) * 1e9
        line(f"{n:>9,} record linkage", times, f"{per:.1f} ns per n log2 n")


if __name__ == "__main__":
    main()
