#!/usr/bin/env python3
"""MariaDB read through each driver against the PostgreSQL read of the same table.

Target: the MariaDB read of a 1M-row table at most 2x PostgreSQL's, peak RSS at most 1 GB.

The table is the one of ``bench/bench_database.py`` (``id`` key, 8 numeric quasi-identifiers,
``charge``, 10 pass-through columns of mixed types), created with its SQL in both servers under
the name ``bench_read_<rows>`` and dropped at the end (``--keep`` keeps it for the next call).
A read is what a run's first pass does: :meth:`tclose.connectors.sql.Session.read` of the key, the
8 quasi-identifiers and ``charge`` in the session's snapshot (server-side cursor, 50,000-row
chunks, DataFrames), concatenated. Each read is a fresh child process (``--child``); CPU and
peak RSS come from ``os.wait4``. Repeats are interleaved (PostgreSQL, mysqlclient, PyMySQL, ...)
so that the load of the shared machine hits every side alike. A driver that is not installed
(``tclose[mariadb]``, ``tclose[mysqlclient]``) is left out with a note; the medians and the ratios to
PostgreSQL are printed, with the load average.

Usage::

    python bench/bench_mysql_read.py [--rows 1000000] [--repeats 3] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_database import QUASI, create_table  # noqa: E402

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MARIADB = "mysql+{driver}://root@127.0.0.1:3306/test"
SIDES = {
    "PostgreSQL (psycopg)": POSTGRES,
    "MariaDB (mariadb, binary)": MARIADB.format(driver="mariadbconnector"),
    "MariaDB (mysqlclient)": MARIADB.format(driver="mysqldb"),
    "MariaDB (PyMySQL)": MARIADB.format(driver="pymysql"),
}
RATIO_TARGET = 2.0
RSS_TARGET_MB = 1024


def create(url: str, name: str, rows: int) -> None:
    """Create table ``name`` with ``rows`` seeded rows (kept if it exists with that many)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as connection:
        exists = sa.inspect(connection).has_table(name)
        count = exists and connection.exec_driver_sql(f"SELECT COUNT(*) FROM {name}").scalar()
    engine.dispose()
    create_table(url, rows, recreate=count != rows, name=name)


def drop(url: str, name: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
    engine.dispose()


def child(url: str, name: str) -> None:
    """One read in this process; prints ``{"seconds": ..., "rows": ...}``."""
    import pandas as pd

    from tclose.base.registry import dialect_of, load_registry
    from tclose.connectors.sql import TableName

    registry = load_registry(entry_points=False)
    database = registry.connector_for(dialect_of(url)).connect(url)
    started = time.perf_counter()
    with database.session(read_only=True) as session:
        chunks = list(session.read(TableName(None, name), [*QUASI, "charge"], key="id"))
    frame = pd.concat(chunks, ignore_index=True)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rows": len(frame)}))


def installed(url: str) -> bool:
    """Whether the driver of ``url`` can be imported."""
    import importlib.util

    from tclose.connectors.mysql import DRIVERS

    driver = url.split("://", 1)[0].partition("+")[2]
    return driver not in DRIVERS or importlib.util.find_spec(DRIVERS[driver][0]) is not None


def measure(url: str, name: str) -> tuple[float, float, int, int]:
    """(read s, process CPU s, peak RSS MB, rows) of one child process."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", url, name], stdout=subprocess.PIPE, text=True
    )
    out = process.stdout.read() if process.stdout else ""
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the read through {url} failed")
    result = json.loads(out.splitlines()[-1])
    cpu = usage.ru_utime + usage.ru_stime
    return result["seconds"], cpu, usage.ru_maxrss // 1024, result["rows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the tables for the next call")
    parser.add_argument("--child", nargs=2, metavar=("URL", "TABLE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    name = f"bench_read_{args.rows}"
    started = time.perf_counter()
    create(POSTGRES, name, args.rows)
    create(MARIADB.format(driver="pymysql"), name, args.rows)
    print(f"tables {name} ready in {time.perf_counter() - started:.0f} s")
    sides = {side: url for side, url in SIDES.items() if installed(url)}
    for side in SIDES.keys() - sides.keys():
        print(f"{side}: driver not installed, left out")
    samples: dict[str, list[tuple[float, float, int, int]]] = {side: [] for side in sides}
    load_before = os.getloadavg()
    try:
        for _ in range(args.repeats):
            for side, url in sides.items():
                samples[side].append(measure(url, name))
    finally:
        if not args.keep:
            drop(POSTGRES, name)
            drop(MARIADB.format(driver="pymysql"), name)
    load = ", ".join(f"{a:.2f}->{b:.2f}" for a, b in zip(load_before, os.getloadavg()))
    print(f"{args.rows} rows: key + {len(QUASI)} QIs + charge read through Session.read")
    print(f"medians of {args.repeats} interleaved reads; load average (1, 5, 15 min) {load}\n")
    floor = statistics.median(s[0] for s in samples["PostgreSQL (psycopg)"])
    for side, runs in samples.items():
        seconds = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        rss = max(r[2] for r in runs)
        rows = {r[3] for r in runs}
        ratio = seconds / floor
        verdict = (
            ""
            if side.startswith("PostgreSQL")
            else (
                f"  (target <= {RATIO_TARGET:.1f}x: {'met' if ratio <= RATIO_TARGET else 'NOT met'})"
            )
        )
        print(
            f"{side:<26} read {seconds:6.2f} s  process CPU {cpu:6.2f} s  peak RSS {rss:5d} MB "
            f"(<= {RSS_TARGET_MB}: {'yes' if rss <= RSS_TARGET_MB else 'NO'})  "
            f"rows {sorted(rows)}  ratio {ratio:.2f}x{verdict}"
        )


if __name__ == "__main__":
    main()
