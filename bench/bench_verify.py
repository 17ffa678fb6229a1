"""``tclose verify`` against pycanon on the same published table.

Usage:
    python bench/bench_verify.py --pycanon-python VENV/bin/python [--rows 1000,2000,5000]
                                 [--repeats 3] [--timeout 300]

pycanon is a benchmark dependency only: it pins its own NumPy and pandas, so it lives in its own
virtual environment (``python3 -m venv V && V/bin/pip install pycanon``) and runs as a separate
process, named by ``--pycanon-python``.

For every size, the script writes the synthetic discharge table of ``tclose demo``
(:func:`tclose.app.demo.discharge_table`: 7 numeric QIs, the confidential ``charge``) into a SQLite
file, publishes it once with ``tclose run`` (t-first, k=5, t=0.15) and exports the published table
to CSV. Then, interleaved and ``--repeats`` times each, in fresh processes:

- **tclose**: ``python -m tclose verify CONFIG`` — reads the published table from SQLite,
  recomputes k and the EMD of every cluster, checks the linking columns;
- **pycanon**: reads the CSV with pandas, then ``k_anonymity`` and ``t_closeness`` over the same QIs
  and confidential column.

CPU is user + system time of the process (``os.wait4``), so another process's load changes it less
than the wall time; both are printed, as medians, with the ratio pycanon / tclose (> 1: tclose is
faster) and the k and t each side found (they must agree).
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

QIS = ["age", "zip", "admission_day", "length_of_stay", "procedures", "diagnoses", "severity"]

PYCANON_SCRIPT = """
import sys
import pandas as pd
from pycanon import anonymity
df = pd.read_csv(sys.argv[1])
qis = sys.argv[2].split(",")
k = anonymity.k_anonymity(df, qis)
t = anonymity.t_closeness(df, qis, ["charge"])
print(f"k={k} t={t:.6f}")
"""


def timed(command: list[str], timeout: float | None = None) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one fresh process; after ``timeout`` seconds of wall
    time the process is killed and (nan, timeout, "") returned."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, text=True)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - started > timeout:
                process.kill()
                os.wait4(process.pid, 0)
                return math.nan, timeout, ""
            time.sleep(0.01)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(command)}")
    return usage.ru_utime + usage.ru_stime, wall, text


def publish(folder: Path, rows: int) -> tuple[Path, Path]:
    """A published table of ``rows`` rows: (the YAML config, the CSV export)."""
    from tclose.app.demo import discharge_table

    database = folder / "verify.db"
    with sqlite3.connect(database) as connection:
        discharge_table(rows, seed=1).to_sql("discharges", connection, index=False)
    config = {
        "source": {"url": f"sqlite:///{database}", "table": "discharges", "key": "patient_id"},
        "target": {"table": "discharges_anon", "if_exists": "replace"},
        "attributes": {
            "name": {"role": "identifier"},
            **{q: {"role": "quasi_identifier", "type": "numeric"} for q in QIS},
            "charge": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
            "ward": {"role": "other"},
        },
        "privacy": {"k": 5, "t": 0.15},
        "algorithm": {"name": "t-first"},
    }
    path = folder / "verify.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "tclose", "run", str(path), "-q"], check=True, capture_output=True
    )
    csv = folder / "published.csv"
    with sqlite3.connect(database) as connection:
        cursor = connection.execute(f"SELECT {', '.join(QIS)}, charge FROM discharges_anon")
        lines = [",".join([*QIS, "charge"])]
        lines += [",".join(repr(v) for v in row) for row in cursor]
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pycanon-python", required=True, help="python of a venv with pycanon")
    parser.add_argument("--rows", default="1000,2000,5000")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds before a pycanon run is stopped"
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"load average: {os.getloadavg()[0]:.2f} (2 cores here); medians of {args.repeats}",
        flush=True,
    )
    print(
        f"{'rows':>8} | {'tclose CPU':>10} {'wall':>7} | {'pycanon CPU':>11} {'wall':>7} | "
        f"{'CPU ratio':>9} | tclose verdict / pycanon k, t"
    )
    for rows in (int(r) for r in args.rows.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            config, csv = publish(Path(tmp), rows)
            ours, theirs = [], []
            for _ in range(args.repeats):
                ours.append(timed([sys.executable, "-m", "tclose", "verify", str(config), "-q"]))
                theirs.append(
                    timed([args.pycanon_python, "-c", PYCANON_SCRIPT, str(csv), ",".join(QIS)])
                )
            verdict = timed([sys.executable, "-m", "tclose", "verify", str(config)])[2]
            verdict_line = next(
                (line for line in verdict.splitlines() if line.startswith("verdict")), "?"
            )
            cpu = statistics.median(c for c, _w, _o in ours)
            wall = statistics.median(w for _c, w, _o in ours)
            if any(math.isnan(c) for c, _w, _o in theirs):  # stopped: wall time is a lower bound
                their, ratio = f"> {args.timeout:.0f}s wall", f">{args.timeout / cpu:.0f}x"
                found = "stopped"
            else:
                their_cpu = statistics.median(c for c, _w, _o in theirs)
                their_wall = statistics.median(w for _c, w, _o in theirs)
                their = f"{their_cpu:>10.2f}s {their_wall:>6.2f}s"
                ratio, found = f"{their_cpu / cpu:.1f}x", theirs[0][2].strip()
            print(
                f"{rows:>8} | {cpu:>9.2f}s {wall:>6.2f}s | {their:>19} | {ratio:>9} | "
                f"{verdict_line} / {found}",
                flush=True,
            )


if __name__ == "__main__":
    main()
