"""Benchmark of Algorithm 1 (MDAV + merge) and Algorithm 2 (k-first + merge).

Usage::

    python bench/bench_merge_kfirst.py            # 23,435 rows, t in {0.05, 0.15, 0.25}, scaling
    python bench/bench_merge_kfirst.py --quick    # one repeat, scaling at 5k and 10k only

It also times :meth:`OrderedEMD.cluster_emd` on 1,000,000 rows in 100,000 clusters with 1,000,000
distinct values (budget: about 2 s).

The data are :func:`tclose.app.demo.discharge_table` (seed 0): 7 numeric quasi-identifiers standardized
to z-scores (population standard deviation) and the confidential ``charge`` fitted with
:class:`~tclose.kernels.emd.OrderedEMD`; k = 2. The set-up is not timed. The kernels run
once on a small table first (Numba compilation or cache load), then ``--repeats`` times per
configuration; the median, the runs and the phases' medians are printed, with the clusters after
merging (count, smallest, mean, largest), the merges and the largest EMD.

Budgets (issue): MDAV + merge under 5 s and k-first + merge under 30 s at 23,435 x 7, k = 2.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from tclose.app.demo import QI_COLUMNS, discharge_table
from tclose.kernels.emd import OrderedEMD
from tclose.kernels.k_first import k_first
from tclose.kernels.mdav import mdav
from tclose.kernels.merge import merge_until_t_close

PAPER_ROWS = 23_435  # the paper's Patient Discharge data set after removing missing values
K = 2


def prepare(n_rows: int, seed: int = 0) -> tuple[np.ndarray, OrderedEMD]:
    """Standardized QI matrix ``(n, 7)`` and the fitted distance of ``charge``."""
    table = discharge_table(n_rows, seed=seed)
    qi = table[list(QI_COLUMNS)].to_numpy(dtype=np.float64)
    std = qi.std(axis=0)
    x = np.ascontiguousarray((qi - qi.mean(axis=0)) / np.where(std > 0, std, 1.0))
    return x, OrderedEMD.fit(table["charge"].to_numpy())


def run_pipeline(base: str, x: np.ndarray, d: OrderedEMD, t: float) -> dict:
    """One run; returns the phase timings and the shape of the result."""
    start = time.perf_counter()
    labels = mdav(x, K) if base == "mdav" else k_first(x, [d], K, t)
    middle = time.perf_counter()
    merged, merges = merge_until_t_close(x, labels, [d], t)
    end = time.perf_counter()
    sizes = np.bincount(merged)
    return {
        "base": middle - start,
        "merge": end - middle,
        "total": end - start,
        "merges": merges,
        "clusters": sizes.size,
        "min": int(sizes.min()),
        "mean": float(sizes.mean()),
        "max": int(sizes.max()),
        "emd": float(d.cluster_emd(merged).max()),
    }


def measure(base: str, x: np.ndarray, d: OrderedEMD, t: float, repeats: int) -> None:
    runs = [run_pipeline(base, x, d, t) for _ in range(repeats)]
    total = [r["total"] for r in runs]
    last = runs[-1]
    name = f"{'MDAV' if base == 'mdav' else 'k-first'} + merge, n={x.shape[0]}, t={t}"
    print(
        f"{name:<38} median {statistics.median(total):7.3f} s "
        f"({base} {statistics.median(r['base'] for r in runs):.3f} + merge "
        f"{statistics.median(r['merge'] for r in runs):.3f})   runs: "
        + ", ".join(f"{v:.3f}" for v in total),
        flush=True,
    )
    print(
        f"{'':<38} {last['clusters']} clusters, sizes {last['min']}/{last['mean']:.1f}/"
        f"{last['max']}, {last['merges']} merges, max EMD {last['emd']:.4f}",
        flush=True,
    )


def bench_cluster_emd(repeats: int) -> None:
    rng = np.random.default_rng(0)
    n = 1_000_000
    d = OrderedEMD.fit(rng.permutation(n).astype(np.float64))
    labels = np.unique(rng.integers(0, 100_000, n), return_inverse=True)[1].reshape(-1)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        d.cluster_emd(labels)
        times.append(time.perf_counter() - start)
    print(
        f"{'cluster_emd, 1M rows, 100k clusters':<38} median {statistics.median(times):7.3f} s"
        f"   runs: " + ", ".join(f"{v:.3f}" for v in times),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat, small scaling sizes")
    parser.add_argument("--repeats", type=int, default=None, help="runs per configuration")
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    warm_x, warm_d = prepare(300)
    for base in ("mdav", "k-first"):
        run_pipeline(base, warm_x, warm_d, 0.2)

    bench_cluster_emd(repeats)
    x, d = prepare(PAPER_ROWS)
    print(f"# {PAPER_ROWS} x {x.shape[1]}, k = {K}, {repeats} runs each", flush=True)
    for base in ("mdav", "k-first"):
        for t in (0.05, 0.15, 0.25):
            measure(base, x, d, t, repeats)

    sizes = (5_000, 10_000) if args.quick else (5_000, 10_000, 20_000, 40_000)
    print(f"# scaling, k = {K}, t = 0.15", flush=True)
    for n_rows in sizes:
        x, d = prepare(n_rows)
        for base in ("mdav", "k-first"):
            measure(base, x, d, 0.15, repeats)


if __name__ == "__main__":
    main()
