"""What a fresh environment's first runs spend compiling Numba kernels.

Usage: python bench/bench_compile.py [REPEATS] [--rows N] [--only NAME[,NAME...]]
       (default 1 repeat, 5,000 rows; prints medians over the repeats; NAME: a config or demo)

Every run is a fresh ``python -m tclose`` process; its CPU (user + system, its worker processes
included) is the growth of ``resource.getrusage(RUSAGE_CHILDREN)`` across it. Each config runs
twice with its own empty ``NUMBA_CACHE_DIR``: the first run compiles every kernel it needs, the
second loads them from that cache. A config's compile CPU is first minus second. The report's
``timings.compile`` (the seconds the run's own process spent compiling, workers not included)
is printed beside it, for the first run and for the second, which must be 0: a second run never
compiles.

Configs (the data are generated here, seeded; SQLite files in a temporary folder):

* ``numeric``: the demo's discharge table and quickstart config (7 numeric QIs, t-first);
* ``nominal``: a nominal QI with a hierarchy, a plain nominal QI, a numeric QI; a nominal
  confidential attribute with a hierarchy and a numeric one (t-first);
* ``date``: two date QIs and a numeric one, a numeric confidential attribute (t-first);
* ``blocks``: the ``numeric`` config with ``blocks: 2`` (the local process pool);
* ``auto``: the ``nominal`` table with a date QI added, algorithm ``auto`` (t-first, merge and
  k-first, each refined).

Then ``tclose demo`` (20,000 rows) twice with one fresh cache: its first run's CPU against its
second's (budget: first <= 2x second), and the five configs' compile CPU against their budget
(<= 30 s in all).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from tclose.app.demo import discharge_table

CONFIGS_COMPILE_BUDGET = 30.0  # seconds of CPU compiling, the five configs' first runs in all
DEMO_RATIO_BUDGET = 2.0  # the demo's first run's CPU / its second's

CITY_TREE = {
    "any": {
        "north": {"n_coast": ["harbor", "cliffs"], "n_inland": ["mill", "ford", "heath"]},
        "south": {"s_coast": ["bay", "dunes"], "s_inland": ["vale", "moor", "marsh", "glen"]},
    }
}
CITIES = ["harbor", "cliffs", "mill", "ford", "heath", "bay", "dunes", "vale", "moor", "marsh"]
CITIES.append("glen")
DIAGNOSIS_TREE = {
    "any": {
        "circulatory": ["hypertension", "angina", "arrhythmia"],
        "respiratory": ["asthma", "copd", "pneumonia"],
        "other": ["fracture", "diabetes"],
    }
}
DIAGNOSES = ["hypertension", "angina", "arrhythmia", "asthma", "copd", "pneumonia"]
DIAGNOSES += ["fracture", "diabetes"]


def adopt_orphans() -> None:
    """Make this process the reaper of its orphaned descendants (Linux), so that the CPU of a
    process the run leaves behind (the local pool's fork server exits after the run's process)
    is counted too: :func:`cpu_of` waits for them."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def cpu_of(args: list[str], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of ``args`` run in a child process, its descendants included
    (those it leaves running are waited for: see :func:`adopt_orphans`)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def numeric_table(database: Path, rows: int) -> dict:
    """The demo's table and the quickstart config's attributes."""
    frame = discharge_table(rows, seed=0).drop(columns=["ward"])
    with sqlite3.connect(database) as connection:
        frame.to_sql("patients", connection, index=False)
    attributes = {
        "patient_id": {"role": "identifier"},
        "name": {"role": "identifier"},
        "charge": {"role": "confidential"},
    }
    for column in ("age", "zip", "admission_day", "length_of_stay", "procedures", "diagnoses"):
        attributes[column] = {"role": "quasi_identifier", "type": "numeric"}
    attributes["severity"] = {"role": "quasi_identifier", "type": "numeric"}
    return attributes


def mixed_table(database: Path, rows: int, dates: bool) -> dict:
    """Nominal QIs (one with a hierarchy), a numeric QI, optionally two date QIs; a nominal
    confidential attribute with a hierarchy and a numeric one."""
    rng = np.random.default_rng(1)
    start = dt.date(2020, 1, 1)
    columns = {
        "name": [f"person {i}" for i in range(rows)],
        "city": np.array(CITIES)[rng.integers(0, len(CITIES), rows)],
        "sex": rng.choice(["female", "male"], rows),
        "age": rng.integers(18, 95, rows),
        "diagnosis": np.array(DIAGNOSES)[rng.integers(0, len(DIAGNOSES), rows)],
        "charge": np.round(rng.lognormal(8.0, 0.7, rows), 2),
    }
    attributes = {
        "name": {"role": "identifier"},
        "city": {"role": "quasi_identifier", "type": "nominal", "hierarchy": CITY_TREE},
        "sex": {"role": "quasi_identifier", "type": "nominal"},
        "age": {"role": "quasi_identifier", "type": "numeric"},
        "diagnosis": {"role": "confidential", "type": "nominal", "hierarchy": DIAGNOSIS_TREE},
        "charge": {"role": "confidential", "type": "numeric"},
    }
    if dates:
        for column, span in (("admitted", 730), ("born", 30_000)):
            days = rng.integers(0, span, rows)
            columns[column] = [(start - dt.timedelta(days=int(d))).isoformat() for d in days]
            attributes[column] = {"role": "quasi_identifier", "type": "date"}
    names = list(columns)
    with sqlite3.connect(database) as connection:
        connection.execute(f"CREATE TABLE patients ({', '.join(names)})")
        connection.executemany(
            f"INSERT INTO patients VALUES ({', '.join('?' * len(names))})",
            zip(*(np.asarray(columns[c]).tolist() for c in names), strict=True),
        )
    return attributes


def date_table(database: Path, rows: int) -> dict:
    """Two date QIs and a numeric one; a numeric confidential attribute."""
    attributes = mixed_table(database, rows, dates=True)
    for column in ("city", "sex", "diagnosis"):
        attributes[column] = {"role": "other"}
    return attributes


def write_config(
    folder: Path, name: str, rows: int, make: Callable[[Path, int], dict], algorithm: dict
) -> Path:
    database = folder / f"{name}.db"
    attributes = make(database, rows)
    document = {
        "source": {"url": f"sqlite:///{database.as_posix()}", "table": "patients"},
        "target": {"table": "patients_anon", "if_exists": "replace"},
        "attributes": attributes,
        "privacy": {"k": 5, "t": 0.15 if name in ("numeric", "blocks") else 0.3},
        "algorithm": algorithm,
        "report": {"json": (folder / f"{name}.json").as_posix()},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def configs(folder: Path, rows: int) -> dict[str, Path]:
    return {
        "numeric": write_config(folder, "numeric", rows, numeric_table, {"name": "t-first"}),
        "nominal": write_config(
            folder, "nominal", rows, lambda d, n: mixed_table(d, n, False), {"name": "t-first"}
        ),
        "date": write_config(folder, "date", rows, date_table, {"name": "t-first"}),
        "blocks": write_config(
            folder, "blocks", rows, numeric_table, {"name": "t-first", "options": {"blocks": 2}}
        ),
        "auto": write_config(
            folder, "auto", rows, lambda d, n: mixed_table(d, n, True), {"name": "auto"}
        ),
    }


def reported_compile(config: Path) -> float | None:
    """``timings.compile`` of the config's report (``None`` if the report has none)."""
    document = yaml.safe_load(config.read_text(encoding="utf-8"))
    report = json.loads(Path(document["report"]["json"]).read_text(encoding="utf-8"))
    return report["timings"].get("compile")


def first_and_second(
    args: list[str], env: dict[str, str], cache: Path, config: Path | None
) -> tuple[float, float, float | None, float | None]:
    """CPU of a first run with the empty ``cache`` and of a second one with it filled, and the
    reports' ``timings.compile`` of both (``None`` without a config)."""
    runs = []
    for _ in range(2):
        cpu = cpu_of(args, {**env, "NUMBA_CACHE_DIR": str(cache)})
        runs.append((cpu, reported_compile(config) if config is not None else None))
    return runs[0][0], runs[1][0], runs[0][1], runs[1][1]


def figure(value: float | None) -> str:
    return "   -  " if value is None else f"{value:6.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=1, help="runs per figure")
    parser.add_argument("--rows", type=int, default=5_000, help="rows of each config's table")
    parser.add_argument("--only", help="comma-separated configs (and 'demo') to run")
    args = parser.parse_args()
    repeats, rows = args.repeats, args.rows
    only = args.only.split(",") if args.only else None
    adopt_orphans()
    env = {**os.environ, "TCLOSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"medians of {repeats} repeat(s); {rows} rows; {os.cpu_count()} CPUs, load {load}")
    print("CPU s of each run (its workers included); compile = first - second\n")
    print(f"{'config':<8} {'first':>7} {'second':>7} {'compile':>8}   report's timings.compile")
    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = configs(folder, rows)
        for name, path in paths.items():
            if only is not None and name not in only:
                continue
            samples = []
            for repeat in range(repeats):
                cache = folder / f"cache-{name}-{repeat}"
                args = [sys.executable, "-m", "tclose", "run", str(path), "-q"]
                samples.append(first_and_second(args, env, cache, path))
            first, second = (statistics.median(s[i] for s in samples) for i in (0, 1))
            compiled = statistics.median(s[0] - s[1] for s in samples)
            total += compiled
            reported = samples[len(samples) // 2]
            print(
                f"{name:<8} {first:7.2f} {second:7.2f} {compiled:8.2f}   first run "
                f"{figure(reported[2])} s, second run {figure(reported[3])} s"
            )
        if only is None or "demo" in only:
            samples = []
            for repeat in range(repeats):
                cache = folder / f"cache-demo-{repeat}"
                args = [sys.executable, "-m", "tclose", "demo", "--dir", str(folder / "demo")]
                samples.append(first_and_second(args, env, cache, None))
            first, second = (statistics.median(s[i] for s in samples) for i in (0, 1))
            ratio = statistics.median(s[0] / s[1] for s in samples)
            print(
                f"\ndemo     first {first:.2f} s CPU, second {second:.2f} s CPU: first / second "
                f"{ratio:.2f} (budget {DEMO_RATIO_BUDGET:.1f})"
            )
    if only is None or len(set(only) - {"demo"}) == 5:
        print(
            f"five configs' compile CPU in all: {total:.2f} s "
            f"(budget {CONFIGS_COMPILE_BUDGET:.0f} s: {total / CONFIGS_COMPILE_BUDGET:.2f}x)"
        )


if __name__ == "__main__":
    main()
