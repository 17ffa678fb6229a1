#!/usr/bin/env python3
"""Benchmark of DuckDB and Parquet runs: ``tclose run`` DuckDB → DuckDB and Parquet → Parquet.

A seeded table of N rows (1,000,000 by default) — ``id`` (primary key), 7 numeric
quasi-identifiers ``q1..q7`` (4 integer, 3 double), 1 confidential ``charge`` (double) and 9
pass-through columns ``p1..p9`` (varchar, varchar, integer, bigint, double, decimal(12,2),
timestamp, date, boolean; ``p1`` NULL in 10% of the rows) — is made once in a DuckDB file and
copied to a Parquet file, in a scratch folder (``--folder``, default a temporary one).

Each run is ``tclose run`` in a fresh process (numba's cache warm: one untimed warm-up run
first), t-first with k = 10, t = 0.25 and the default options (``blocks: auto``, ``executor:
local``): DuckDB file → a table of the same file (the in-database join), and Parquet file →
Parquet file (streamed through the client, then ``COPY ... TO`` a temporary file renamed over
the target). The script prints, per scenario, the median over ``--repeats`` runs of the phases
of the run's report (read, kernel, measures, write, verify, publish, seconds) and of the wall
time of the whole command (process start, imports and the kernel-cache load included), with the
load average (``uptime``) before and after.

Examples::

    python bench/bench_duckdb.py                      # 1,000,000 rows, 3 repeats
    python bench/bench_duckdb.py --rows 100000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PHASES = ("read", "kernel", "measures", "write", "verify", "publish")

TABLE = """
CREATE TABLE patients AS SELECT i AS id,
  (18 + floor(random() * 73))::INTEGER AS q1, (10000 + floor(random() * 90000))::INTEGER AS q2,
  floor(random() * 30)::INTEGER AS q3, floor(random() * 5)::INTEGER AS q4,
  random() * 100 AS q5, random() * 1000 AS q6, 50 + random() * 100 AS q7,
  round(random() * 100000, 2)::DOUBLE AS charge,
  CASE WHEN random() < 0.1 THEN NULL ELSE md5(random()::VARCHAR) END AS p1,
  substr(md5(random()::VARCHAR), 1, 12) AS p2, (random() * 1000)::INTEGER AS p3,
  (random() * 1e12)::BIGINT AS p4, random() AS p5, round(random() * 1e6, 2)::DECIMAL(12, 2) AS p6,
  TIMESTAMP '2020-01-01' + to_microseconds((random() * 8.64e13)::BIGINT) AS p7,
  DATE '2020-01-01' + (random() * 1000)::INTEGER AS p8, random() < 0.5 AS p9
FROM range(1, {rows} + 1) t(i)
"""


def make_data(folder: Path, rows: int) -> None:
    """The DuckDB file ``bench.duckdb`` (table ``patients``) and ``patients.parquet``."""
    import duckdb

    database = folder / "bench.duckdb"
    if database.exists():
        database.unlink()
    connection = duckdb.connect(str(database))
    connection.execute("SELECT setseed(0.42)")
    connection.execute(TABLE.format(rows=rows))
    connection.execute("ALTER TABLE patients ADD PRIMARY KEY (id)")
    connection.execute(f"COPY patients TO '{folder / 'patients.parquet'}' (FORMAT parquet)")
    connection.close()


def config(source_url: str, source: str, target_url: str, target: str) -> dict:
    passthrough = {f"p{i}": {"role": "other", "allow_unique": True} for i in range(1, 10)}
    return {
        "source": {"url": source_url, "table": source, "key": "id"},
        "target": {"url": target_url, "table": target, "if_exists": "replace"},
        "attributes": {
            **{f"q{i}": {"role": "quasi_identifier", "type": "numeric"} for i in range(1, 8)},
            "charge": {"role": "confidential", "type": "numeric"},
            **passthrough,
        },
        "privacy": {"k": 10, "t": 0.25},
        "algorithm": {"name": "t-first", "options": {"blocks": "auto"}},
    }


def run_once(folder: Path, name: str, document: dict) -> dict[str, float]:
    """One ``tclose run`` in a fresh process: the report's phase times and the wall time."""
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    report = folder / f"{name}.json"
    command = [sys.executable, "-m", "tclose", "run", str(path), "-q", "--report", str(report)]
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=folder)
    wall = time.perf_counter() - started
    timings = json.loads(report.read_text())["timings"]
    return {**{p: float(timings.get(p, 0.0)) for p in PHASES}, "wall": wall}


def load() -> str:
    return os.getloadavg().__repr__()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="tclose-bench-duckdb-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {load()}  (cores: {os.cpu_count()})")
    started = time.perf_counter()
    make_data(folder, args.rows)
    print(f"made {args.rows:,} rows in {time.perf_counter() - started:.1f} s in {folder}")
    scenarios = {
        "duckdb -> duckdb": config(
            f"duckdb:///{folder / 'bench.duckdb'}", "patients",
            f"duckdb:///{folder / 'bench.duckdb'}", "anon",
        ),
        "parquet -> parquet": config(
            f"parquet:///{folder / 'patients.parquet'}", "patients",
            f"parquet:///{folder / 'anon.parquet'}", "anon",
        ),
    }  # fmt: skip
    run_once(folder, "warmup", next(iter(scenarios.values())))  # numba cache, file cache
    print(f"\n== t-first k=10 t=0.25 blocks: auto, {args.rows:,} rows, median of {args.repeats}")
    print(f"{'scenario':<20}" + "".join(f"{p:>10}" for p in (*PHASES, "wall")))
    for name, document in scenarios.items():
        runs = [run_once(folder, name.replace(" ", ""), document) for _ in range(args.repeats)]
        medians = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        print(f"{name:<20}" + "".join(f"{medians[p]:>10.2f}" for p in (*PHASES, "wall")))
    print(f"\nload average after: {load()}")


if __name__ == "__main__":
    main()
