#!/usr/bin/env python3
"""The 1M-row PostgreSQL round trip against the binary COPY floor.

Target: everything a ``tclose run`` does but the kernel — the whole process, start-up and exit
included, minus the report's ``kernel`` time — at most 1.5x the floor: a bare binary
``COPY (SELECT * ...) TO STDOUT`` of the source table plus a ``COPY ... FROM STDIN`` of those
bytes into an empty table of the same columns, measured in the same call.

The table is the one of ``bench/bench_database.py`` (``id`` key, 8 numeric quasi-identifiers,
``charge``, 10 pass-through columns of mixed types; ~220 MB at 1M rows), created as
``bench_rt_<rows>`` and dropped at the end with the run's output (``--keep`` keeps the source).
The run is the real command, ``python -m tclose run`` (t-first, k = 10, t = 0.25, its default
options), in a fresh process; its wall time and peak RSS come from ``os.wait4``, its phases from
the JSON report. Repeats interleave floor and run; the medians are printed with the phases of
the non-kernel time, so that one sees where it goes, and the CPU in core-seconds: the bench's
own for the floor and the run's main process for the run (``os.wait4``: the kernel's block
workers are not in it, as they are the children of multiprocessing's fork server), each beside
the PostgreSQL server's, read from ``/proc`` (so the server must run on this machine;
background processes count too), and the whole machine's during the run (``/proc/stat``: the
block workers included, and anything else running). The measures run beside the write (a
background thread, see ``docs/reports.md``): ``measures`` is their own duration, part of which
overlaps ``write``, and ``measures_wait`` what the run then still waited for them.

``--kernel-alone`` then also times the kernel by itself: t-first's partition (default options,
as the run calls it) of the table's quasi-identifiers and ``charge``, read once, in this
process, ``--repeats`` times; its CPU is the whole machine's (``/proc/stat``, so the block
workers count, and so does anything else running: use it on a quiet machine). The machine's
core-seconds during the run minus the kernel's are about what everything but the kernel costs
(a little more: the run's kernel phase also encodes, digests and aggregates); divided by the
cores, they give the shortest non-kernel wall time any schedule of that work could reach, and
its ratio to the floor.

Usage::

    python bench/bench_roundtrip.py [--rows 1000000] [--repeats 3] [--keep] [--kernel-alone]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_database import QUASI, create_table  # noqa: E402

URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CONNINFO = "host=127.0.0.1 port=5432 user=postgres dbname=test"
TARGET_RATIO = 1.5


def create(name: str, rows: int) -> None:
    """The seeded source table (kept when it exists with ``rows`` rows)."""
    import psycopg

    with psycopg.connect(CONNINFO, autocommit=True) as connection:
        found = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        same = bool(found and found[0]) and connection.execute(
            f"SELECT COUNT(*) FROM {name}"
        ).fetchone() == (rows,)
    create_table(URL, rows, recreate=not same, name=name)


def drop(*names: str) -> None:
    import psycopg

    with psycopg.connect(CONNINFO, autocommit=True) as connection:
        for name in names:
            connection.execute(f"DROP TABLE IF EXISTS {name}")


def server_cpu() -> float:
    """CPU seconds (user + system) used so far by the PostgreSQL server processes on this
    machine, read from ``/proc``: each live process's own time plus the time of the children
    it has reaped (a backend that has exited is counted in the postmaster's). A difference of
    two readings is the server's CPU between them, background processes included."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        if not stat[stat.index("(") + 1 : stat.rindex(")")].startswith("postgres"):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def copy_floor(name: str) -> tuple[float, float, float, float]:
    """(COPY TO seconds, COPY FROM seconds, client CPU seconds, server CPU seconds): the whole
    table out in binary, and back into an empty table of the same columns (created, filled and
    dropped in one transaction)."""
    import psycopg

    with psycopg.connect(CONNINFO) as connection:
        client, server = time.process_time(), server_cpu()
        started = time.perf_counter()
        chunks = []
        with connection.cursor().copy(
            f"COPY (SELECT * FROM {name}) TO STDOUT (FORMAT BINARY)"
        ) as copy:
            for chunk in copy:
                chunks.append(bytes(chunk))
        copied_out = time.perf_counter() - started
        copy_name = f"{name}_floor"
        connection.execute(f"CREATE TABLE {copy_name} (LIKE {name})")
        started = time.perf_counter()
        with connection.cursor().copy(f"COPY {copy_name} FROM STDIN (FORMAT BINARY)") as copy:
            for chunk in chunks:
                copy.write(chunk)
        connection.commit()
        copied_in = time.perf_counter() - started
        client, server = time.process_time() - client, server_cpu() - server
        connection.execute(f"DROP TABLE {copy_name}")
        connection.commit()
    return copied_out, copied_in, client, server


def machine_cpu() -> float:
    """CPU seconds the whole machine has been busy (all cores, every process), from
    ``/proc/stat``: user, nice, system, irq, softirq and steal time."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = stat.readline().split()[1:]
    busy = [int(fields[i]) for i in (0, 1, 2, 5, 6, 7)]
    return sum(busy) / os.sysconf("SC_CLK_TCK")


def kernel_alone(name: str, repeats: int) -> tuple[float, float]:
    """(median wall s, median machine CPU s) of t-first's partition of the table's QIs and
    ``charge`` in this process, as ``tclose run`` partitions them (default options, k = 10,
    t = 0.25); a 3,000-row partition first loads the compiled kernels."""
    import numpy as np
    import pandas as pd
    import psycopg

    from tclose.base.attributes import encode_table
    from tclose.base.config import _attributes, _Checker
    from tclose.base.options import validate_options
    from tclose.blocks.framed import options_schema, run_algorithm
    from tclose.interfaces import Problem
    from tclose.kernels.emd import OrderedEMD
    from tclose.plugins.t_first import TFirst

    with psycopg.connect(CONNINFO) as connection:
        rows = connection.execute(f"SELECT {', '.join(QUASI)}, charge FROM {name}").fetchall()
    frame = pd.DataFrame(rows, columns=[*QUASI, "charge"]).astype("float64")
    document = {q: {"role": "quasi_identifier", "type": "numeric"} for q in QUASI}
    document["charge"] = {"role": "confidential", "type": "numeric"}
    attributes = list(_attributes(_Checker({}), document).values())
    plugin = TFirst()
    options = validate_options(plugin.name, options_schema(plugin), {}, "options")

    def partition(encoded) -> None:
        distance = OrderedEMD.fit(encoded.confidential["charge"])
        distance.column = "charge"
        labels = run_algorithm(plugin, Problem(encoded.x, [distance], 10, 0.25, options)).labels
        assert len(np.asarray(labels)) == len(encoded.x)

    partition(encode_table(frame.head(3000), attributes))
    encoded = encode_table(frame, attributes)
    walls, cpus = [], []
    for _ in range(repeats):
        cpu, started = machine_cpu(), time.perf_counter()
        partition(encoded)
        walls.append(time.perf_counter() - started)
        cpus.append(machine_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def run_config(folder: Path, name: str) -> Path:
    document = {
        "source": {"url": URL, "table": name, "key": "id"},
        "target": {"table": f"{name}_out", "if_exists": "replace"},
        "attributes": {
            **{q: {"role": "quasi_identifier", "type": "numeric"} for q in QUASI},
            "charge": {"role": "confidential", "type": "numeric"},
            **{f"p{i}": {"role": "other", "allow_unique": True} for i in range(1, 11)},
        },
        "privacy": {"k": 10, "t": 0.25},
        "algorithm": {"name": "t-first"},
        "report": {"json": (folder / "report.json").as_posix()},
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def run_once(config: Path) -> tuple[float, int, dict[str, float], float, float, float]:
    """(process wall s, peak RSS MB, the report's timings, the main process's CPU s: user +
    system, the server's CPU s meanwhile, the machine's CPU s meanwhile) of one ``tclose
    run``."""
    env = {**os.environ, "TCLOSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    server, machine = server_cpu(), machine_cpu()
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tclose", "run", str(config), "-q"], env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    time.sleep(0.2)  # the postmaster reaps the run's backend
    server, machine = server_cpu() - server, machine_cpu() - machine
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("tclose run failed")
    report = json.loads((config.parent / "report.json").read_text(encoding="utf-8"))
    if not report["verification"]["passed"]:
        raise SystemExit("the run did not verify")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss // 1024, report["timings"], cpu, server, machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the source table")
    parser.add_argument(
        "--kernel-alone", action="store_true", help="also time the kernel alone (see above)"
    )
    args = parser.parse_args()
    name = f"bench_rt_{args.rows}"
    create(name, args.rows)
    floors, runs = [], []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        config = run_config(Path(tmp), name)
        try:
            for _ in range(args.repeats):
                floors.append(copy_floor(name))
                runs.append(run_once(config))
            alone = kernel_alone(name, args.repeats) if args.kernel_alone else None
        finally:
            drop(f"{name}_out", *([] if args.keep else [name]))
    load = ", ".join(f"{a:.2f}->{b:.2f}" for a, b in zip(load_before, os.getloadavg()))
    print(f"{args.rows} rows, t-first k=10 t=0.25; medians of {args.repeats}; load {load}\n")
    out = statistics.median(f[0] for f in floors)
    into = statistics.median(f[1] for f in floors)
    floor = statistics.median(f[0] + f[1] for f in floors)
    print(f"floor: binary COPY TO {out:.2f} s + COPY FROM {into:.2f} s = {floor:.2f} s")
    floor_client = statistics.median(f[2] for f in floors)
    floor_server = statistics.median(f[3] for f in floors)
    print(
        f"  CPU: client {floor_client:.2f} s + server {floor_server:.2f} s = "
        f"{floor_client + floor_server:.2f} core-seconds"
    )
    wall = statistics.median(r[0] for r in runs)
    phases = sorted({p for r in runs for p in r[2] if p != "total"}, key=list(runs[0][2]).index)
    median = {p: statistics.median(r[2].get(p, 0.0) for r in runs) for p in phases}
    total = statistics.median(r[2]["total"] for r in runs)
    non_kernel = statistics.median(r[0] - r[2].get("kernel", 0.0) for r in runs)
    cpu = statistics.median(r[3] for r in runs)
    print(
        f"tclose run: process wall {wall:.2f} s, CPU {cpu:.2f} s, "
        f"peak RSS {max(r[1] for r in runs)} MB (largest of the runs)"
    )
    run_server = statistics.median(r[4] for r in runs)
    run_machine = statistics.median(r[5] for r in runs)
    print(
        f"  CPU: main process {cpu:.2f} s + server {run_server:.2f} s; whole machine "
        f"{run_machine:.2f} core-seconds on {os.cpu_count()} cores (the kernel's workers too)"
    )
    for phase in phases:
        overlap = "; beside write" if phase == "measures" and "measures_wait" in phases else ""
        print(
            f"  {phase:<13} {median[phase]:6.2f} s  ({median[phase] / floor:.2f}x floor{overlap})"
        )
    print(f"  {'start/exit':<13} {wall - total:6.2f} s  (process wall - report total)")
    ratio = non_kernel / floor
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(
        f"\nnon-kernel (process wall - kernel) {non_kernel:.2f} s / floor {floor:.2f} s = "
        f"{ratio:.2f}x (target <= {TARGET_RATIO}x: {verdict})"
    )
    if alone is not None:
        kernel_wall, kernel_cpu = alone
        rest = run_machine - kernel_cpu
        cores = os.cpu_count() or 1
        print(
            f"kernel alone: {kernel_wall:.2f} s wall, {kernel_cpu:.2f} core-seconds (machine)\n"
            f"everything but the kernel: about {run_machine:.2f} - {kernel_cpu:.2f} = "
            f"{rest:.2f} core-seconds; on {cores} cores at least {rest / cores:.2f} s = "
            f"{rest / cores / floor:.2f}x the floor, however well spread"
        )


if __name__ == "__main__":
    main()
