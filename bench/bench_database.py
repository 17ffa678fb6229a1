#!/usr/bin/env python3
"""Benchmark of the database phases of a run: read, write back, verify, publish.

A seeded table of N rows — ``id`` (primary key), 8 numeric quasi-identifiers ``q1..q8`` (4
integer, 4 double), 1 confidential ``charge`` and 10 pass-through columns ``p1..p10`` (text,
varchar, integer, bigint, double, numeric(12,2), timestamp, date, boolean, text with 10% NULLs) —
is created once per size in the database (PostgreSQL by default; MariaDB with ``--url``) and
anonymized into ``bench_out_<N>`` in the same database with k = 10, t = 0.25.

Each run is a fresh child process (so that its peak memory is its own): it runs
:func:`tclose.core.runner.run` and reports ``report["timings"]`` (seconds per phase) and, sampled
every 20 ms per phase, the peak resident set size (RSS) of the process and of the process with
all its descendants (the worker processes of a blocked kernel), plus the process's high-water
mark (``VmHWM``). The script prints the median of ``--repeats`` runs.

The kernel is O(n²/k) within a block: by default the runs use a clearly labelled stand-in
partition, ``bench-blocks`` (sort on the first quasi-identifier, cut into blocks of k; O(n log n),
not t-close, so the verification measures t without enforcing it), which leaves the non-kernel
phases — the ones this benchmark budgets — unchanged. ``--algorithm t-first`` runs the real
kernel (with its default options: blocked above 200,000 rows).

``--write-path streamed`` forces the cross-database write path (the source streamed a second time
through the client and bulk-written) instead of the in-database ``INSERT ... SELECT ... JOIN``,
to compare the two.

Examples::

    python bench/bench_database.py --rows 100000 1000000 --repeats 3
    python bench/bench_database.py --rows 100000 --algorithm t-first --repeats 1
    python bench/bench_database.py --rows 1000000 --write-path streamed --repeats 1
    python bench/bench_database.py --url mysql+pymysql://root@127.0.0.1:3306/test --rows 100000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

import tclose

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
QUASI = [f"q{i}" for i in range(1, 9)]
PHASES = ("read", "kernel", "write", "verify", "publish")
PAGE = os.sysconf("SC_PAGE_SIZE")

POSTGRES_TABLE = """
CREATE TABLE {name} AS SELECT g::bigint AS id,
  (18 + floor(random() * 73))::int AS q1, (10000 + floor(random() * 90000))::int AS q2,
  floor(random() * 30)::int AS q3, floor(random() * 5)::int AS q4,
  random() * 100 AS q5, random() * 1000 AS q6, 50 + random() * 100 AS q7, random() AS q8,
  round((random() * 100000)::numeric, 2)::float8 AS charge,
  md5(random()::text) AS p1, substr(md5(random()::text), 1, 12)::varchar(40) AS p2,
  (random() * 1000)::int AS p3, (random() * 1e12)::bigint AS p4, random() AS p5,
  round((random() * 1e6)::numeric, 2)::numeric(12, 2) AS p6,
  timestamp '2020-01-01' + random() * interval '1000 days' AS p7,
  date '2020-01-01' + (random() * 1000)::int AS p8, random() < 0.5 AS p9,
  CASE WHEN random() < 0.1 THEN NULL ELSE md5(random()::text) END AS p10
FROM generate_series(1, {rows}) g
"""

MARIADB_TABLE = """
CREATE TABLE {name} (id bigint PRIMARY KEY, q1 int, q2 int, q3 int, q4 int, q5 double,
  q6 double, q7 double, q8 double, charge double, p1 text, p2 varchar(40), p3 int, p4 bigint,
  p5 double, p6 decimal(12, 2), p7 datetime(6), p8 date, p9 boolean, p10 text)
"""
MARIADB_FILL = """
INSERT INTO {name} SELECT seq, 18 + floor(rand(42) * 73), 10000 + floor(rand() * 90000),
  floor(rand() * 30), floor(rand() * 5), rand() * 100, rand() * 1000, 50 + rand() * 100, rand(),
  round(rand() * 100000, 2), md5(rand()), substr(md5(rand()), 1, 12), floor(rand() * 1000),
  floor(rand() * 1e12), rand(), round(rand() * 1e6, 2),
  timestamp '2020-01-01 00:00:00' + interval floor(rand() * 86400000) second,
  date '2020-01-01' + interval floor(rand() * 1000) day, rand() < 0.5,
  if(rand() < 0.1, NULL, md5(rand()))
FROM seq_1_to_{rows}
"""


class SortedBlocks:
    """The benchmark's stand-in kernel: sort on the first QI, cut into blocks of k rows."""

    name = "bench-blocks"
    options_schema: dict[str, Any] = {}
    requires_t = False

    def partition(self, x, distances, k, t, options):
        from tclose.interfaces import Partition

        order = np.argsort(x[:, 0], kind="stable")
        labels = np.empty(len(x), dtype=np.int64)
        blocks = max(1, len(x) // k)
        labels[order] = np.minimum(np.arange(len(x)) // k, blocks - 1)
        return Partition(labels, {"stand_in": True})


class StandInPlugin:
    @tclose.hookimpl
    def register_algorithms(self, register):
        register(SortedBlocks())


class MemorySampler:
    """Peak RSS per phase, sampled in a background thread: this process (``peaks``), and this
    process plus all its descendants (``tree_peaks``: the worker processes of a blocked kernel,
    which a process pool may start through a fork server)."""

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.phase = "setup"
        self.peaks: dict[str, int] = {}
        self.tree_peaks: dict[str, int] = {}
        self._pid = os.getpid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mark(self, line: str, *_counts: object, **_progress: object) -> None:
        words = {
            "reading": "read",
            "partitioning": "kernel",
            "writing": "write",
            "verifying": "verify",
            "publishing": "publish",
        }
        self.phase = words.get(line.split(" ", 1)[0], self.phase)
        self._record()

    def _record(self) -> None:
        rss = _rss(self._pid)
        self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), rss)
        tree = rss + sum(_rss(pid) for pid in _descendants(self._pid))
        self.tree_peaks[self.phase] = max(self.tree_peaks.get(self.phase, 0), tree)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._record()


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0  # the process ended meanwhile


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def high_water_mark() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def create_table(url: str, rows: int, recreate: bool, name: str | None = None) -> str:
    """Create the seeded table ``name`` (default ``bench_<rows>``) unless it exists."""
    import sqlalchemy as sa

    name = name or f"bench_{rows}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        exists = sa.inspect(connection).has_table(name)
        if exists and not recreate:
            return name
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql("SELECT setseed(0.42)")
            connection.exec_driver_sql(POSTGRES_TABLE.format(name=name, rows=rows))
            connection.exec_driver_sql(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
            connection.exec_driver_sql(f"ANALYZE {name}")
        else:
            connection.exec_driver_sql(MARIADB_TABLE.format(name=name))
            connection.exec_driver_sql(MARIADB_FILL.format(name=name, rows=rows))
    engine.dispose()
    return name


def child(args: argparse.Namespace) -> None:
    """One run in this process; prints one JSON line."""
    from tclose.base.config import parse_config
    from tclose.base.registry import load_registry
    from tclose.core.runner import run

    if args.write_path == "streamed":
        from tclose.connectors import mysql, postgresql, sqlite

        for cls in (mysql.MySQLDatabase, postgresql.PostgreSQLDatabase, sqlite.SQLiteDatabase):
            cls.joins_in_snapshot = property(lambda self: False)
    rows = args.rows[0]
    document = {
        "source": {"url": args.url, "table": f"bench_{rows}", "chunk_size": args.chunk_size},
        "target": {"table": f"bench_out_{rows}", "if_exists": "replace"},
        "attributes": {
            **{q: {"role": "quasi_identifier", "type": "numeric"} for q in QUASI},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 10, "t": 0.25},
        "algorithm": {"name": args.algorithm},
    }
    registry = load_registry(extra_plugins=[StandInPlugin()])
    with MemorySampler() as sampler:
        started = time.perf_counter()
        result = run(parse_config(document), registry=registry, progress=sampler.mark)
        wall = time.perf_counter() - started
    print(
        json.dumps(
            {
                "rows": rows,
                "timings": result.report["timings"],
                "wall": wall,
                "rss_peak": sampler.peaks,
                "hwm": high_water_mark(),
                "rss_tree_peak": sampler.tree_peaks,
                "verified": result.report["verification"]["passed"],
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--algorithm",
        default="bench-blocks",
        help="bench-blocks (stand-in, default) or t-first (the real kernel)",
    )
    parser.add_argument("--write-path", choices=("joined", "streamed"), default="joined")
    parser.add_argument("--chunk-size", type=int, default=50_000)
    parser.add_argument("--recreate", action="store_true", help="recreate the source tables")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    print(
        f"database: {args.url.split('@')[-1]}  algorithm: {args.algorithm}"
        f"{' (STAND-IN kernel: sort + blocks of k)' if args.algorithm == 'bench-blocks' else ''}"
        f"  write path: {args.write_path}  repeats: {args.repeats}"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    header = (
        f"{'rows':>9} {'read':>7} {'kernel':>8} {'write':>7} {'verify':>7} {'publish':>7}"
        f" {'non-kernel':>10} {'wall-kernel':>11}  peak RSS MB by phase (read/kernel/write/"
        f"verify/publish), HWM, peak RSS with workers"
    )
    lines = []
    for rows in args.rows:
        started = time.perf_counter()
        create_table(args.url, rows, args.recreate)
        print(f"table bench_{rows} ready ({time.perf_counter() - started:.1f} s)", flush=True)
        results = []
        for _ in range(args.repeats):
            command = [
                sys.executable,
                __file__,
                "--child",
                "--url",
                args.url,
                "--rows",
                str(rows),
                "--algorithm",
                args.algorithm,
                "--write-path",
                args.write_path,
                "--chunk-size",
                str(args.chunk_size),
            ]
            output = subprocess.run(command, capture_output=True, text=True, check=False)
            if output.returncode != 0:
                sys.exit(f"run failed:\n{output.stderr}")
            result = json.loads(output.stdout.strip().splitlines()[-1])
            results.append(result)
            print(f"  run: {json.dumps(result)}", flush=True)

        def median(values: list[float]) -> float:
            return statistics.median(values)

        timing = {p: median([r["timings"].get(p, 0.0) for r in results]) for p in PHASES}
        non_kernel = median(
            [sum(r["timings"].get(p, 0.0) for p in PHASES if p != "kernel") for r in results]
        )
        wall_minus = median([r["wall"] - r["timings"]["kernel"] for r in results])
        rss = {p: median([r["rss_peak"].get(p, 0) for r in results]) / 2**20 for p in PHASES}
        hwm = median([r["hwm"] for r in results]) / 2**20
        tree = max(median([r["rss_tree_peak"].get(p, 0) for r in results]) for p in PHASES)
        tree /= 2**20
        lines.append(
            f"{rows:>9} {timing['read']:>7.2f} {timing['kernel']:>8.2f} {timing['write']:>7.2f} "
            f"{timing['verify']:>7.2f} {timing['publish']:>7.2f} {non_kernel:>10.2f} "
            f"{wall_minus:>11.2f}  "
            + "/".join(f"{rss[p]:.0f}" for p in PHASES)
            + f", {hwm:.0f}, {tree:.0f}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("medians (seconds):")
    print(header)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
