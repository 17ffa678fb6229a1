"""Cost of the test suite, file by file: the collection time, then each test file's CPU seconds
(user + system of pytest and every process it waited for: tclose subprocesses, workers) and wall
seconds, the top files first.

Usage: python bench/bench_suite.py [-m MARKEXPR] [--top N] [--json PATH] [FILE ...]

Without FILE, every ``tests/test_*.py`` is run, one pytest process per file (that is a full
run: on a shared machine, name the files to measure). ``-m`` is passed to pytest (default: the
configuration's, ``not slow``; ``-m ""`` measures both tiers). The database servers' own CPU is
not counted: a file that runs many statements costs more than its figure. CPU time moves less
with the load of other processes than wall time: compare CPU figures, and quote the load
(``uptime``) with them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pytest(arguments: list[str]) -> tuple[float, float, str]:
    """CPU and wall seconds of one pytest process (and its children) and its last output line."""
    cpu, wall = _children_cpu(), time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return _children_cpu() - cpu, time.perf_counter() - wall, lines[-1] if lines else ""


def collection(marks: list[str]) -> dict:
    """The collection alone: seconds and number of tests selected."""
    cpu, wall, summary = _pytest(["--collect-only", *marks])
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", summary)
    return {"cpu": cpu, "wall": wall, "tests": int(found.group(1)) if found else None}


def per_file(files: list[str], marks: list[str]) -> list[dict]:
    """Each file's CPU and wall seconds and pytest's summary line, in the order given."""
    rows = []
    for file in files:
        cpu, wall, summary = _pytest([file, *marks])
        rows.append({"file": file, "cpu": cpu, "wall": wall, "summary": summary})
        print(f"{cpu:8.1f} {wall:8.1f}  {file}  {summary}", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="test files (default: every tests/test_*.py)")
    parser.add_argument("-m", dest="marks", default=None, help="pytest's -m expression")
    parser.add_argument("--top", type=int, default=20, help="files to print (default 20)")
    parser.add_argument("--json", metavar="PATH", help="write every figure here")
    args = parser.parse_args(argv)
    files = args.files or sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_*.py"))
    marks = [] if args.marks is None else ["-m", args.marks]
    load = os.getloadavg()[0]
    collected = collection(marks)
    print(
        f"collection: {collected['cpu']:.1f} s CPU, {collected['wall']:.1f} s wall, "
        f"{collected['tests']} tests (load {load:.1f})"
    )
    rows = per_file(files, marks)
    print(f"{'CPU s':>8} {'wall s':>8}  file (top {args.top} of {len(rows)} by CPU)")
    for row in sorted(rows, key=lambda r: -r["cpu"])[: args.top]:
        print(f"{row['cpu']:8.1f} {row['wall']:8.1f}  {row['file']}  {row['summary']}")
    print(
        f"{sum(r['cpu'] for r in rows):8.1f} {sum(r['wall'] for r in rows):8.1f}  "
        f"all {len(rows)} files (each with its own collection)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"load": load, "collection": collected, "files": rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
