"""Benchmark of blocked runs: time and SSE against the number of blocks, executors.

Usage::

    python bench/bench_blocks.py                    # everything but 10M rows (about 15 minutes)
    python bench/bench_blocks.py --sizes 100000 1000000 10000000
    python bench/bench_blocks.py --only curve       # one section: kernel, quality, curve,
                                                    # issue, others, dask, verify
    python bench/bench_blocks.py --plot docs/scaling/blocks.png

Data: :func:`synthetic_table` (seeded): 8 correlated Gaussian quasi-identifiers, standardized,
and a confidential attribute correlated with the first (all values distinct). The ``issue``
section uses :func:`tclose.app.demo.discharge_table` (23,435 rows x 7 QIs, k = 2, t = 0.25) as the
issue's author did. Times are wall-clock medians of ``--repeats`` runs (one run at 10M rows),
after a warm-up on a small table (Numba cache load, worker start-up of the pool is included in
every timed run: the pool lives for one run). The machine's load average is printed first: the
figures are only comparable on a quiet machine.

Sections:

- ``kernel``: t-first (k = 10, t = 0.25) through the plugin with the default options
  (``blocks: auto``, ``executor: local``) at each ``--sizes``; the time covers splitting, the
  block tasks and the final t check.
- ``quality``: at ``--quality-rows`` (100,000 by default; 1,000,000 takes minutes unblocked), SSE
  of the default options and of the auto rule's number of blocks against the unblocked run.
- ``curve``: time and SSE against the number of blocks P at ``--curve-rows`` rows.
- ``issue``: the issue author's table, P = 1, 4, 16, 64.
- ``others``: ``merge`` (base MDAV) and ``k-first`` with the default options at each ``--sizes``
  (one run each).
- ``dask``: t-first at 1M rows on a Dask LocalCluster of 2 workers and of 1 worker (cluster
  started outside the timing), and with ``executor: dask`` starting its own LocalCluster.
- ``verify``: ``OrderedEMD.cluster_emd`` on 1M rows in 100k classes with 1M distinct values, and
  ``tclose.core.verify.equivalence_classes`` on 1M written rows x 8 QIs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.arrays import dense_labels
from tclose.base.options import validate_options
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.blocks.split import AUTO_CLUSTERS_PER_BLOCK
from tclose.core.verify import equivalence_classes
from tclose.interfaces import Problem
from tclose.kernels.emd import OrderedEMD
from tclose.plugins.t_first import TFirst

K, T = 10, 0.25


def synthetic_table(n: int, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standardized QIs ``(n, d)`` (correlated Gaussians) and a distinct confidential column."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d))
    x = np.empty((n, d))
    chunk = 1_000_000
    for start in range(0, n, chunk):  # bounded temporaries at 10M rows
        stop = min(n, start + chunk)
        x[start:stop] = rng.normal(size=(stop - start, d)) @ mixing
    confidential = 0.5 * x[:, 0] / x[:, 0].std() + rng.normal(size=n)
    x -= x.mean(axis=0)
    x /= x.std(axis=0)
    return x, confidential


def cluster_means(matrix: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean of each column per cluster: shape ``(L, d)`` for dense labels ``0..L-1``."""
    n_clusters = int(labels.max()) + 1 if len(labels) else 0
    counts = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    sums = np.zeros((n_clusters, matrix.shape[1]))
    np.add.at(sums, labels, matrix)
    return sums / counts[:, None]


def sse(x: np.ndarray, labels: np.ndarray) -> float:
    """The normalized SSE of ``utility.sse`` for standardized ``x``: mean squared z-difference."""
    labels = dense_labels(labels)
    return float(((x - cluster_means(x, labels)[labels]) ** 2).sum() / x.size)


def t_first_run(x: np.ndarray, distance: OrderedEMD, **options: Any) -> Any:
    plugin = TFirst()
    validated = validate_options(plugin.name, options_schema(plugin), options, "options")
    return run_algorithm(plugin, Problem(x, [distance], K, T, validated))


def fitted(confidential: np.ndarray) -> OrderedEMD:
    distance = OrderedEMD.fit(confidential)
    distance.column = "confidential"
    return distance


def timed(run: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


def line(name: str, times: list[float], extra: str = "") -> None:
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(f"{name:<44} median {statistics.median(times):8.2f} s  [{runs}] {extra}", flush=True)


def warm_up() -> None:
    x, c = synthetic_table(3000, seed=99)
    distance = fitted(c)
    t_first_run(x, distance, blocks=1)
    t_first_run(x, distance, blocks=2, workers=1)


def section_kernel(sizes: list[int], repeats: int, results: dict) -> None:
    print("\n== kernel: t-first k=10 t=0.25, default options (blocks: auto, executor: local)")
    for n in sizes:
        x, c = synthetic_table(n)
        distance = fitted(c)
        times, partition = timed(
            lambda x=x, d=distance: t_first_run(x, d), 1 if n >= 5_000_000 else repeats
        )
        info = partition.info
        line(
            f"{n:>10,} rows",
            times,
            f"P={info.get('blocks', 1)} "
            f"sse={sse(x, partition.labels):.4f} {info.get('block_seconds', '')}",
        )
        results.setdefault("kernel", {})[n] = {
            "seconds": statistics.median(times),
            "blocks": info.get("blocks", 1),
            "sse": sse(x, partition.labels),
        }


def section_quality(n: int, repeats: int, results: dict) -> None:
    print(f"\n== quality: {n:,} rows, default blocks and the auto rule's P against unblocked")
    x, c = synthetic_table(n)
    distance = fitted(c)
    rule = max(2, math.ceil((n // K) / AUTO_CLUSTERS_PER_BLOCK))
    runs = 1 if n >= 500_000 else repeats
    unblocked_times, unblocked = timed(lambda: t_first_run(x, distance, blocks=1), runs)
    base = sse(x, unblocked.labels)
    line("unblocked (blocks: 1)", unblocked_times, f"sse={base:.5f}")
    figures = {"rows": n, "unblocked_sse": base, "unblocked_seconds": min(unblocked_times)}
    for name, options in (("default", {}), (f"P={rule} (5,000 clusters/block)", {"blocks": rule})):
        times, partition = timed(lambda o=options: t_first_run(x, distance, **o), runs)
        value = sse(x, partition.labels)
        line(
            f"{name} (P={partition.info.get('blocks', 1)})",
            times,
            f"sse={value:.5f} ({100 * (value / base - 1):+.2f} %)",
        )
        figures[name] = {
            "blocks": partition.info.get("blocks", 1),
            "sse": value,
            "seconds": statistics.median(times),
        }
    results.setdefault("quality", []).append(figures)


def section_curve(
    n: int,
    counts: list[int],
    repeats: int,
    results: dict,
    name: str = "curve",
    table: tuple[np.ndarray, np.ndarray] | None = None,
    k: int = K,
    t: float = T,
) -> None:
    x, c = table if table is not None else synthetic_table(n)
    n = x.shape[0]
    distance = fitted(c)
    print(f"\n== {name}: {n:,} rows x {x.shape[1]} QIs, k={k} t={t}, time and SSE against P")
    rows, base = [], None
    for count in counts:
        plugin = TFirst()
        options = validate_options(
            plugin.name, options_schema(plugin), {"blocks": count}, "options"
        )
        times, partition = timed(
            lambda p=plugin, o=options: run_algorithm(p, Problem(x, [distance], k, t, o)), repeats
        )
        value = sse(x, partition.labels)
        base = value if base is None else base
        rows.append(
            {
                "P": partition.info.get("blocks", 1),
                "seconds": statistics.median(times),
                "sse": value,
            }
        )
        line(f"P={count:<4}", times, f"sse={value:.5f} ({100 * (value / base - 1):+.2f} %)")
    results[name] = {"rows": n, "points": rows}


def section_others(sizes: list[int], results: dict) -> None:
    from tclose.plugins.k_first import KFirst
    from tclose.plugins.merge import Merge

    print("\n== others: merge (base mdav) and k-first k=10 t=0.25, default options, one run each")
    for n in sizes:
        x, c = synthetic_table(n)
        distance = fitted(c)
        for plugin in (Merge(), KFirst()):
            options = validate_options(plugin.name, options_schema(plugin), {}, "options")
            times, partition = timed(
                lambda p=plugin, o=options, x=x, d=distance: run_algorithm(
                    p, Problem(x, [d], K, T, o)
                ),
                1,
            )
            info = partition.info
            line(
                f"{plugin.name} {n:>10,} rows",
                times,
                f"P={info.get('blocks', 1)} merges={info.get('merges')} "
                f"(global {info.get('merges_global', 0)}) sse={sse(x, partition.labels):.4f}",
            )
            results.setdefault("others", {})[f"{plugin.name} {n}"] = {
                "seconds": times[0],
                "blocks": info.get("blocks", 1),
                "merges": info.get("merges"),
            }


def section_dask(n: int, repeats: int, results: dict) -> None:
    from distributed import LocalCluster

    print(f"\n== dask: t-first at {n:,} rows on a LocalCluster")
    x, c = synthetic_table(n)
    distance = fitted(c)
    figures = {}
    for workers in (1, 2):
        with LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster:
            address = cluster.scheduler_address
            t_first_run(
                x[:3000], fitted(c[:3000]), blocks=2, executor="dask", scheduler=address
            )  # workers import tclose, load the Numba cache
            times, partition = timed(
                lambda a=address: t_first_run(x, distance, executor="dask", scheduler=a), repeats
            )
        figures[workers] = statistics.median(times)
        line(
            f"{workers} worker(s), P={partition.info['blocks']}",
            times,
            str(partition.info["block_seconds"]),
        )
    print(f"speed-up 2 workers over 1: {figures[1] / figures[2]:.2f}x")
    times, _ = timed(lambda: t_first_run(x, distance, executor="dask", workers=2), repeats)
    line("executor: dask, own LocalCluster(2)", times, "(includes cluster start)")
    local_times, _ = timed(lambda: t_first_run(x, distance), repeats)
    line("executor: local (2 processes)", local_times)
    results["dask"] = {
        "one_worker": figures[1],
        "two_workers": figures[2],
        "own_cluster": statistics.median(times),
        "local": statistics.median(local_times),
    }


def section_verify(repeats: int, results: dict) -> None:
    print("\n== verify: 1M rows, 100k classes, 1M distinct confidential values")
    rng = np.random.default_rng(0)
    n = 1_000_000
    values = rng.permutation(n) + rng.random(n)
    classes = dense_labels(rng.integers(0, 100_000, n))
    fit_times, distance = timed(lambda: OrderedEMD.fit(values), repeats)
    line("OrderedEMD.fit", fit_times, f"m={distance.m:,}")
    emd_times, _ = timed(lambda: distance.cluster_emd(classes), repeats)
    line("OrderedEMD.cluster_emd", emd_times)
    means = rng.normal(size=(classes.max() + 1, 8))
    frame = pd.DataFrame(means[classes], columns=[f"q{j}" for j in range(8)])
    eq_times, found = timed(lambda: equivalence_classes(frame, list(frame.columns)), repeats)
    line("verify.equivalence_classes (8 QIs)", eq_times, f"{found.max() + 1:,} classes")
    results["verify"] = {
        "fit": statistics.median(fit_times),
        "cluster_emd": statistics.median(emd_times),
        "equivalence_classes": statistics.median(eq_times),
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = [(name, value) for name, value in results.items() if "points" in value]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), dpi=100)
    for name, curve in curves:
        points = curve["points"]
        p = [pt["P"] for pt in points]
        label = name
        axes[0].plot(p, [pt["seconds"] for pt in points], "o-", label=label)
        axes[1].plot(
            p, [100 * (pt["sse"] / points[0]["sse"] - 1) for pt in points], "o-", label=label
        )
    for ax, title in zip(axes, ("t-first time (s, 2 cores)", "SSE vs unblocked (%)"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("blocks P")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    print(f"plot written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["kernel", "quality", "curve", "issue", "others", "dask", "verify"],
    )
    parser.add_argument("--curve-rows", type=int, default=100_000)
    parser.add_argument("--quality-rows", type=int, nargs="+", default=[100_000])
    parser.add_argument("--blocks", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    parser.add_argument("--plot", type=Path, help="write the time/SSE-against-P plot here")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument(
        "--plot-from",
        type=Path,
        nargs="+",
        help="plot the curves of these --json files (no benchmark is run)",
    )
    args = parser.parse_args()
    sections = args.only or ["kernel", "quality", "curve", "issue", "others", "dask", "verify"]
    if args.plot_from:
        merged: dict[str, Any] = {}
        for path in args.plot_from:
            merged.update(json.loads(path.read_text()))
        plot(merged, args.plot or Path("docs/scaling/blocks.png"))
        return

    print(
        f"load average {os.getloadavg()}, {os.cpu_count()} cores, python {sys.version.split()[0]}"
    )
    warm_up()
    results: dict[str, Any] = {}
    if "kernel" in sections:
        section_kernel(args.sizes, args.repeats, results)
    if "quality" in sections:
        for n in args.quality_rows:
            section_quality(n, args.repeats, results)
    if "curve" in sections:
        section_curve(
            args.curve_rows,
            args.blocks,
            args.repeats,
            results,
            name=f"synthetic {args.curve_rows:,} x 8, k={K}",
        )
    if "issue" in sections:
        from tclose.app.demo import QI_COLUMNS, discharge_table

        frame = discharge_table(23_435, seed=0)
        qi = frame[list(QI_COLUMNS)].to_numpy(dtype=np.float64)
        std = qi.std(axis=0)
        x = np.ascontiguousarray((qi - qi.mean(axis=0)) / np.where(std > 0, std, 1.0))
        section_curve(
            0,
            [1, 4, 16, 64],
            args.repeats,
            results,
            name="discharge 23,435 x 7, k=2",
            table=(x, frame["charge"].to_numpy()),
            k=2,
            t=0.25,
        )
    if "others" in sections:
        section_others(args.sizes, results)
    if "dask" in sections:
        section_dask(1_000_000, args.repeats, results)
    if "verify" in sections:
        section_verify(args.repeats, results)
    print(f"\nload average {os.getloadavg()}")
    if args.plot:
        plot(results, args.plot)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
