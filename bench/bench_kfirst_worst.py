"""Benchmark of k-first's worst cases, against the reference kernel.

Usage::

    python bench/bench_kfirst_worst.py                 # both cases, full size, 1 run each
    python bench/bench_kfirst_worst.py --repeats 3     # medians of 3 runs
    python bench/bench_kfirst_worst.py --quick         # 6,000 rows instead of the full sizes
    python bench/bench_kfirst_worst.py --before-full   # the reference kernel at full size too

The two cases are generated (seed 0), never read from ``../shared``:

- **ordered**: :func:`tclose.app.demo.discharge_table` with 23,435 rows (the paper's Patient
  Discharge size) whose 7 quasi-identifiers follow the order of the confidential ``charge``:
  every QI column is sorted and the sorted columns are given to the rows in the order of their
  charge (the row with the i-th smallest charge gets the i-th smallest value of every QI).
  k = 2, t = 0.25 and t = 0.05.
- **nominal**: 20,000 rows of the same table with a nominal confidential ``diagnosis`` of 21
  categories (ICD-10 chapters), drawn with probabilities that depend on age and severity, fitted
  with :class:`~tclose.kernels.nominal.NominalEMD` (equal ground distance, and the
  hierarchical distance of a two-level tree of the chapters). k = 5, t = 0.2.

QIs are standardized to z-scores. For each case the script times k-first alone and k-first + the
merge loop (Algorithm 2 as the ``k-first`` plugin runs it), then checks the final partition with
the independent verifier :func:`tclose.core.verify.verify_rows` (k, and t for the confidential
attribute, recomputed from the written rows). "Before" is the reference kernel
(``tests/k_first_previous.py``, which recomputes ``k`` EMDs per candidate; same partitions): it
is timed on 2,000 and 4,000 rows (1,000 and 2,000 for the nominal cases, where it is much slower)
and extrapolated to the full size with the exponent of those two points, unless
``--before-full``. The extrapolation underestimates the reference kernel, whose cost grows
faster at larger sizes.
Every kernel runs once on a small input first (compilation or cache load), untimed.

Budget: k-first + merge at most 60 s on each case.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import k_first_previous  # noqa: E402  (the reference kernel, kept in the tests)

from tclose.app.demo import QI_COLUMNS, discharge_table  # noqa: E402
from tclose.base.hierarchy import Hierarchy  # noqa: E402
from tclose.core.verify import verify_rows  # noqa: E402
from tclose.kernels.emd import OrderedEMD  # noqa: E402
from tclose.kernels.k_first import k_first  # noqa: E402
from tclose.kernels.merge import merge_until_t_close  # noqa: E402
from tclose.kernels.nominal import NominalEMD  # noqa: E402
from tclose.plugins.emd_ordered import OrderedEMDDistance  # noqa: E402
from tclose.plugins.nominal_ranking import NominalRankingDistance  # noqa: E402

ORDERED_ROWS = 23_435
NOMINAL_ROWS = 20_000
CHAPTERS = [f"C{i:02d}" for i in range(1, 22)]
TREE = {
    "*": {
        "infectious-neoplasms": CHAPTERS[0:3],
        "metabolic-mental-nervous": CHAPTERS[3:7],
        "circulatory-respiratory-digestive": CHAPTERS[7:11],
        "skin-musculoskeletal-genitourinary": CHAPTERS[11:14],
        "pregnancy-perinatal-congenital": CHAPTERS[14:17],
        "symptoms-injuries-other": CHAPTERS[17:21],
    }
}


def standardize(qi: np.ndarray) -> np.ndarray:
    std = qi.std(axis=0)
    return np.ascontiguousarray((qi - qi.mean(axis=0)) / np.where(std > 0, std, 1.0))


def ordered_case(n: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The table with QIs following the charge's order; ``(table, x, charge)``."""
    table = discharge_table(n, seed=0)
    charge = table["charge"].to_numpy()
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(charge, kind="stable")] = np.arange(n)
    for column in QI_COLUMNS:
        table[column] = np.sort(table[column].to_numpy())[rank]
    qi = table[list(QI_COLUMNS)].to_numpy(dtype=np.float64)
    return table, standardize(qi), charge


def nominal_case(n: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The table with a nominal ``diagnosis`` depending on age and severity."""
    table = discharge_table(n, seed=0)
    rng = np.random.default_rng(1)
    age = table["age"].to_numpy(dtype=np.float64)
    severity = table["severity"].to_numpy(dtype=np.float64)
    slope = np.linspace(-1.5, 1.5, len(CHAPTERS))
    logits = np.outer(age / 40.0 - 1.0, slope) + np.outer(severity - 2.5, slope[::-1]) * 0.5
    logits += rng.gumbel(size=logits.shape)
    table["diagnosis"] = np.array(CHAPTERS)[np.argmax(logits, axis=1)]
    qi = table[list(QI_COLUMNS)].to_numpy(dtype=np.float64)
    return table, standardize(qi), table["diagnosis"].to_numpy()


def run_once(
    kernel: Callable, x, distances, k: int, t: float
) -> tuple[float, float, np.ndarray, float]:
    """``(k-first seconds, total seconds with the merge loop, final labels, total CPU seconds)``;
    wall-clock seconds, and the CPU seconds of this process (the machine may be shared)."""
    start, cpu = time.perf_counter(), time.process_time()
    labels = kernel(x, distances, k, t)
    middle = time.perf_counter()
    merged, _ = merge_until_t_close(x, labels, distances, t)
    end = time.perf_counter()
    return middle - start, end - start, merged, time.process_time() - cpu


def verify(table: pd.DataFrame, labels: np.ndarray, column: str, distance, options, k, t) -> str:
    """Publish-like rows (QIs replaced by cluster means) checked by the independent verifier."""
    frame = table[list(QI_COLUMNS) + [column]].copy()
    for qi in QI_COLUMNS:
        frame[qi] = frame.groupby(labels)[qi].transform("mean")
    result = verify_rows(frame, list(QI_COLUMNS), {column: (distance, options)}, k, t, len(frame))
    sizes = np.bincount(labels)
    status = (
        "passed" if result.passed else "FAILED: " + ", ".join(c.name for c in result.failures())
    )
    return (
        f"verify_rows {status} (k achieved {result.k_achieved}, t achieved "
        f"{result.t_achieved[column]:.4f}; {sizes.size} clusters, largest {sizes.max()})"
    )


def before(
    make: Callable, fit: Callable, k: int, t: float, n: int, full: bool, sizes: tuple[int, int]
) -> str:
    """The reference kernel's k-first + merge time at size ``n``: measured, or extrapolated from
    ``sizes``."""
    if full:
        _, x, values = make(n)
        return f"{run_once(k_first_previous.k_first, x, [fit(values)], k, t)[1]:.1f} s measured"
    points = []
    for size in sizes:
        _, x, values = make(size)
        points.append((size, run_once(k_first_previous.k_first, x, [fit(values)], k, t)[1]))
    (n1, t1), (n2, t2) = points
    exponent = math.log(t2 / t1) / math.log(n2 / n1)
    estimate = t2 * (n / n2) ** exponent
    return (
        f"~{estimate:.0f} s extrapolated ({t1:.2f} s at {n1:,}, {t2:.2f} s at {n2:,}, "
        f"exponent {exponent:.2f})"
    )


def bench_case(name, make, fit, plugin, options, column, n, k, t, args) -> None:
    table, x, values = make(n)
    distances = [fit(values)]
    runs = [run_once(k_first, x, distances, k, t) for _ in range(args.repeats)]
    kernel = statistics.median(r[0] for r in runs)
    total = statistics.median(r[1] for r in runs)
    print(f"\n{name}: {n:,} rows, k = {k}, t = {t}", flush=True)
    cpu = statistics.median(r[3] for r in runs)
    print(
        f"  after:  k-first {kernel:.2f} s, k-first + merge {total:.2f} s, CPU {cpu:.2f} s "
        f"(medians of {args.repeats}; runs {', '.join(f'{r[1]:.2f}' for r in runs)})",
        flush=True,
    )
    print(f"  {verify(table, runs[-1][2], column, plugin, options, k, t)}", flush=True)
    if not args.skip_before:
        sizes = (1_000, 2_000) if column == "diagnosis" else (2_000, 4_000)  # the reference is slow
        print(f"  before: {before(make, fit, k, t, n, args.before_full, sizes)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6,000 rows per case")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per case")
    parser.add_argument("--before-full", action="store_true", help="old kernel at full size")
    parser.add_argument(
        "--skip-before", action="store_true", help="do not time the reference kernel"
    )
    args = parser.parse_args()
    tree = Hierarchy.from_mapping(TREE)
    ordered_fit = OrderedEMD.fit
    cases = [
        ("ordered QIs, ordered charge", ordered_case, ordered_fit, OrderedEMDDistance(), {},
         "charge", ORDERED_ROWS, 2, 0.25),
        ("ordered QIs, ordered charge", ordered_case, ordered_fit, OrderedEMDDistance(), {},
         "charge", ORDERED_ROWS, 2, 0.05),
        ("nominal diagnosis, equal distance", nominal_case, NominalEMD.fit,
         NominalRankingDistance(), {}, "diagnosis", NOMINAL_ROWS, 5, 0.2),
        ("nominal diagnosis, hierarchical distance", nominal_case,
         lambda v: NominalEMD.fit(v, hierarchy=tree), NominalRankingDistance(),
         {"hierarchy": tree}, "diagnosis", NOMINAL_ROWS, 5, 0.2),
    ]  # fmt: skip
    for _name, make, fit, _plugin, _options, _column, _n, k, t in cases:  # warm up, untimed
        _, x, values = make(300)
        run_once(k_first, x, [fit(values)], k, t)
        if not args.skip_before:
            run_once(k_first_previous.k_first, x, [fit(values)], k, t)
    for name, make, fit, plugin, options, column, n, k, t in cases:
        size = 6_000 if args.quick else n
        bench_case(name, make, fit, plugin, options, column, size, k, t, args)


if __name__ == "__main__":
    main()
