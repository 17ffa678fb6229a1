#!/usr/bin/env python3
"""A run's PostgreSQL read and write phases against the binary COPY floor.

The table is the one of ``bench/bench_database.py`` (``id`` key, 8 numeric quasi-identifiers,
``charge``, 10 pass-through columns; ~220 MB at 1M rows), ``bench_rt_<rows>`` as
``bench/bench_roundtrip.py`` names it, or ``--table`` (created if missing, kept). Each repeat, in a fresh
process and interleaved:

- the floor: a bare binary ``COPY (SELECT * ...) TO STDOUT`` of the table, and ``COPY ... FROM
  STDIN`` of those bytes into an empty table of the same columns;
- the run's read: ``Session.read`` of the key, the 8 QIs and ``charge`` in the run's
  ``REPEATABLE READ`` session (the connector's path; ``--generic`` adds the generic one, a
  server-side cursor and ``DataFrame.from_records``, for comparison);
- the run's write: ``fill_joined`` into the staging table, as ``tclose run`` calls it, with a
  random partition into clusters of 10 and random centroids (its cost does not depend on the
  values), then a rollback.

Printed: medians of each side, the ratios read / COPY TO (target <= 1.1x) and write / COPY FROM
(target <= 1.3x), and the server backend's CPU seconds (from ``/proc``, when the server runs on
this machine) next to the wall time.

Usage::

    python bench/bench_pgio.py [--rows 1000000] [--repeats 3] [--generic] [--table NAME]
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

URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
READ_TARGET, WRITE_TARGET = 1.1, 1.3


def backend_cpu(pid: int) -> float:
    """CPU seconds of server process ``pid`` (NaN if it is not on this machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def floor(name: str) -> dict[str, float]:
    import psycopg

    with psycopg.connect(URL.replace("postgresql+psycopg", "postgresql")) as connection:
        pid = connection.info.backend_pid
        cpu, started = backend_cpu(pid), time.perf_counter()
        chunks = []
        with connection.cursor().copy(
            f"COPY (SELECT * FROM {name}) TO STDOUT (FORMAT BINARY)"
        ) as copy:
            for chunk in copy:
                chunks.append(bytes(chunk))
        out = {"copy_to": time.perf_counter() - started, "copy_to_cpu": backend_cpu(pid) - cpu}
        connection.execute(f"CREATE TABLE {name}_pgio_floor (LIKE {name})")
        cpu, started = backend_cpu(pid), time.perf_counter()
        with connection.cursor().copy(f"COPY {name}_pgio_floor FROM STDIN (FORMAT BINARY)") as copy:
            for chunk in chunks:
                copy.write(chunk)
        connection.commit()
        out.update(copy_from=time.perf_counter() - started, copy_from_cpu=backend_cpu(pid) - cpu)
        connection.execute(f"DROP TABLE {name}_pgio_floor")
        connection.commit()
    return out


def phases(name: str, generic: bool) -> dict[str, float]:
    """The read and write of a run, in one session (rolled back)."""
    import numpy as np
    import pandas as pd

    from tclose.connectors.postgresql import PostgreSQLDatabase
    from tclose.connectors.sql import Session, driver_connection
    from tclose.naming import TableName

    database = PostgreSQLDatabase(URL)
    source_name = TableName(None, name)
    source = database.table(source_name)
    output = [c.name for c in source.columns if c.name != "id"]
    staging = database.staging_table(
        TableName(None, f"{name}_pgio_staging"), source, output, QUASI, [], "postgresql"
    )
    staging.info.update(target=TableName(None, f"{name}_pgio_out"), run_id="bench")
    out: dict[str, float] = {}
    with database.session(staging) as session:
        pid = driver_connection(session.connection).info.backend_pid
        columns = [*QUASI, "charge"]
        if generic:
            started = time.perf_counter()
            list(Session.read(session, source_name, columns, key="id"))
            out["read_generic"] = time.perf_counter() - started
        cpu, started = backend_cpu(pid), time.perf_counter()
        frames = list(session.read(source_name, columns, key="id"))
        out.update(read=time.perf_counter() - started, read_cpu=backend_cpu(pid) - cpu)
        keys = pd.concat(frames, ignore_index=True)["__key__"].to_numpy()
        rng = np.random.default_rng(1)
        labels = rng.permutation(len(keys)) // 10
        new_rows = rng.permutation(len(keys)).astype(np.int64) + 1
        centroids = {q: rng.random(labels.max() + 1)[labels] for q in QUASI}
        cpu, started = backend_cpu(pid), time.perf_counter()
        session.fill_joined(source, "id", staging, keys, new_rows, labels, centroids)
        out.update(write=time.perf_counter() - started, write_cpu=backend_cpu(pid) - cpu)
    return out


def child(args: argparse.Namespace) -> None:
    name = args.table or f"bench_rt_{args.rows}"
    print(json.dumps(floor(name) if args.child == "floor" else phases(name, args.generic)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--generic", action="store_true", help="also time the generic read")
    parser.add_argument("--table", help="the seeded table's name (default bench_rt_<rows>)")
    parser.add_argument("--child", choices=["floor", "run"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    name = args.table or f"bench_rt_{args.rows}"
    create_table(URL, args.rows, recreate=False, name=name)
    results: dict[str, list[float]] = {}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for side in ("floor", "run"):
            command = [sys.executable, __file__, "--rows", str(args.rows), "--child", side]
            command += ["--table", name]
            output = subprocess.run(
                command + (["--generic"] if args.generic else []),
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            for key, value in json.loads(output.splitlines()[-1]).items():
                results.setdefault(key, []).append(value)
    median = {key: statistics.median(values) for key, values in results.items()}
    load = ", ".join(f"{a:.2f}->{b:.2f}" for a, b in zip(load_before, os.getloadavg()))
    print(f"{args.rows} rows; medians of {args.repeats}; load {load}")
    print("(seconds wall; in brackets the server backend's CPU seconds)\n")
    for phase, copy, target in (
        ("read", "copy_to", READ_TARGET),
        ("write", "copy_from", WRITE_TARGET),
    ):
        ratio = median[phase] / median[copy]
        verdict = "met" if ratio <= target else "NOT met"
        print(
            f"{phase:<5} {median[phase]:6.2f} s ({median[phase + '_cpu']:.2f})  vs  "
            f"{copy.replace('_', ' ').upper():<9} {median[copy]:6.2f} s "
            f"({median[copy + '_cpu']:.2f})  = {ratio:.2f}x (target <= {target}x: {verdict})"
        )
    if "read_generic" in median:
        print(
            f"\ngeneric read (server-side cursor, from_records): {median['read_generic']:.2f} s "
            f"= {median['read_generic'] / median['copy_to']:.2f}x COPY TO"
        )


if __name__ == "__main__":
    main()
