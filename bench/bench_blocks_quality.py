"""Quality of blocked t-first at scale: time and SSE against the unblocked run.

Usage::

    python bench/bench_blocks_quality.py --reference      # the unblocked runs (about 5 min per
                                                          # table at 1M rows), stored once in
                                                          # bench/blocks_quality_reference.json
    python bench/bench_blocks_quality.py                  # blocked runs against the stored figures
    python bench/bench_blocks_quality.py --options '{"blocks": 16}' --repeats 3

Tables (seeded, ``--rows`` rows x 7 QIs, k = 10, t = 0.25, standardized QIs):

- ``discharge``: :func:`tclose.app.demo.discharge_table` (skewed, discrete, clumped columns: age,
  zip, day of year, counts, a severity score), confidential ``charge``;
- ``gaussian``: 7 correlated Gaussian QIs, confidential attribute correlated with the first
  (:func:`bench_blocks.synthetic_table`).

The SSE is the normalized SSE of ``utility.sse`` (mean squared z-difference to the cluster mean).
Times are wall-clock medians of ``--repeats`` runs of the plugin's ``partition`` (blocks, their
process pool, merge checks and refinement included), with the CPU time of this process and of its
children. The machine's load average is printed: the figures only compare on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_blocks import fitted, sse, synthetic_table  # noqa: E402

from tclose.base.options import validate_options  # noqa: E402
from tclose.blocks.framed import options_schema, run_algorithm  # noqa: E402
from tclose.interfaces import Problem  # noqa: E402
from tclose.plugins.t_first import TFirst  # noqa: E402

K, T = 10, 0.25
REFERENCE = Path(__file__).resolve().parent / "blocks_quality_reference.json"
TABLES = ("discharge", "gaussian")


def table(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardized QIs ``(n, 7)`` and the confidential column of table ``name``."""
    if name == "gaussian":
        return synthetic_table(n, d=7)
    from tclose.app.demo import QI_COLUMNS, discharge_table

    frame = discharge_table(n, seed=0)
    qi = frame[list(QI_COLUMNS)].to_numpy(dtype=np.float64)
    std = qi.std(axis=0)
    x = np.ascontiguousarray((qi - qi.mean(axis=0)) / np.where(std > 0, std, 1.0))
    return x, frame["charge"].to_numpy()


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(x: np.ndarray, c: np.ndarray, options: dict[str, Any]) -> tuple[float, float, Any]:
    plugin = TFirst()
    validated = validate_options(plugin.name, options_schema(plugin), options, "options")
    distance = fitted(c)
    cpu, start = cpu_seconds(), time.perf_counter()
    partition = run_algorithm(plugin, Problem(x, [distance], K, T, validated))
    return time.perf_counter() - start, cpu_seconds() - cpu, partition


def check(x: np.ndarray, c: np.ndarray, labels: np.ndarray) -> str:
    """Every row clustered, clusters >= k, worst EMD (a failed check is printed, not hidden)."""
    from tclose.base.arrays import dense_labels

    labels = dense_labels(labels)
    sizes = np.bincount(labels)
    emd = float(fitted(c).cluster_emd(labels).max())
    ok = sizes.min() >= K and emd <= T + 1e-9
    return f"{'ok' if ok else 'FAILED'} (min size {sizes.min()}, max EMD {emd:.4f})"


def reference(names: list[str], n: int) -> None:
    stored = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    for name in names:
        x, c = table(name, n)
        load = os.getloadavg()
        wall, cpu, partition = run(x, c, {"blocks": 1})
        value = sse(x, partition.labels)
        print(
            f"{name}: unblocked {wall:.1f} s wall, {cpu:.1f} s CPU, sse={value:.6f}, "
            f"{check(x, c, partition.labels)}, load {load}",
            flush=True,
        )
        stored[f"{name} {n}"] = {
            "table": name,
            "rows": n,
            "k": K,
            "t": T,
            "sse": value,
            "seconds": round(wall, 2),
            "cpu_seconds": round(cpu, 2),
            "load_average": [round(v, 2) for v in load],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": f"python bench/bench_blocks_quality.py --reference --rows {n} "
            f"--tables {name}",
        }
        REFERENCE.write_text(json.dumps(stored, indent=1) + "\n")


class DescendantsCPU:
    """CPU seconds of this process's descendants (block workers, forkserver), sampled every
    0.1 s with psutil: the workers of a pool are reaped by the forkserver, so the CPU they
    used never reaches this process's ``RUSAGE_CHILDREN``. At most the last 0.1 s of each
    worker is missed."""

    def __init__(self) -> None:
        import threading

        self.latest: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.wait(0.1):
            for child in me.children(recursive=True):
                try:
                    times = child.cpu_times()
                except psutil.Error:
                    continue
                self.latest[child.pid] = times.user + times.system

    def __enter__(self) -> DescendantsCPU:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.latest.values())


def one_run(name: str, n: int, options: dict[str, Any]) -> None:
    """Child process: one timed run; prints its figures as JSON."""
    x, c = table(name, n)
    with DescendantsCPU() as workers:
        wall, cpu, partition = run(x, c, options)
    value = sse(x, partition.labels)
    result = {
        "wall": wall,
        "cpu": cpu + workers.seconds,
        "sse": value,
        "blocks": partition.info.get("blocks", 1),
        "refine": partition.info.get("refine"),
        "check": check(x, c, partition.labels),
    }
    print(json.dumps(result, default=str))


def spawn_run(name: str, n: int, options: dict[str, Any]) -> dict[str, Any]:
    """:func:`one_run` in a fresh process (a fresh worker pool and Numba state each time)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 1)
        argv = [sys.executable, __file__, "--one", name, "--rows", str(n)]
        os.execv(sys.executable, [*argv, "--options", json.dumps(options)])
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status:
        raise RuntimeError(f"the run {name} {options} failed (status {status})")
    return json.loads(out.strip().splitlines()[-1])


def compare(names: list[str], n: int, options: dict[str, Any], repeats: int) -> None:
    stored = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    print(f"options {options}, {repeats} run(s) per table, each in a fresh process")
    for name in names:
        runs = [spawn_run(name, n, options) for _ in range(repeats)]
        value = runs[-1]["sse"]
        ref = stored.get(f"{name} {n}")
        ratio = f"{100 * (value / ref['sse'] - 1):+.2f} % vs unblocked" if ref else "no reference"
        walls = [r["wall"] for r in runs]
        print(
            f"{name:<10} {n:,} rows: median {statistics.median(walls):.2f} s wall "
            f"[{', '.join(f'{w:.2f}' for w in walls)}], CPU (workers included) "
            f"{statistics.median(r['cpu'] for r in runs):.2f} s, P={runs[-1]['blocks']}, "
            f"sse={value:.6f} ({ratio}), {runs[-1]['check']}, load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        if runs[-1]["refine"]:
            print(f"    refine: {runs[-1]['refine']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tables", nargs="+", choices=TABLES, default=list(TABLES))
    parser.add_argument("--reference", action="store_true", help="run and store the unblocked SSE")
    parser.add_argument("--options", type=json.loads, default={}, help="t-first options (JSON)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", choices=TABLES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one_run(args.one, args.rows, args.options)
        return
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    if args.reference:
        reference(args.tables, args.rows)
    else:
        compare(args.tables, args.rows, args.options, args.repeats)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
