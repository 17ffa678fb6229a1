"""Benchmark of ``auto`` against the paper's algorithms: SSE and CPU seconds per cell.

Usage::

    python bench/bench_auto.py --data ../shared/data
    python bench/bench_auto.py --data ../shared/data --only census,survey
    python bench/bench_auto.py --rows 20000,28000 --only generated

Tables:

- ``generated-N`` for each ``--rows`` N (default 20,000 and 28,000): a seeded table with a nominal
  QI (six regions, skewed), three numeric QIs and a confidential ``spend`` that is 0 in ~70 % of
  the rows (:func:`zero_heavy_table`);
- ``survey``: sdcMicro's household survey (``sdcmicro_testdata.csv``, 4,580 rows): QIs ``roof``
  (nominal), ``age`` and ``expend``, confidential ``income``;
- ``census``: the paper's Census (``census_casc.csv``, 1,080 rows): QIs ``TAXINC`` and
  ``POTHVAL``, confidential ``FEDTAX``.

Each cell (a table, ``k`` in ``--ks`` and ``t`` in ``--ts``) runs ``merge``, ``k-first``,
``t-first`` and ``auto`` through :func:`tclose.anonymize` (every release is verified there) and
prints the report's ``utility.sse`` of each, auto's SSE over the best of the three, the CPU
seconds of ``t-first`` and of ``auto`` (``time.process_time`` of this process around the whole
call: kernel, measures and verification, all threads) and their ratio. Then the median and the
largest ratio, and the cells where ``auto`` is worse than the best of the three. Kernels are
compiled by a warm-up run before anything is timed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import tclose

PAPER = ("merge", "k-first", "t-first")

#: name -> (file, QIs, confidential attribute)
REAL: dict[str, tuple[str, dict[str, str], str]] = {
    "survey": (
        "sdcmicro_testdata.csv",
        {"roof": "nominal", "age": "numeric", "expend": "numeric"},
        "income",
    ),
    "census": ("census_casc.csv", {"TAXINC": "numeric", "POTHVAL": "numeric"}, "FEDTAX"),
}
GENERATED_QIS = {"region": "nominal", "age": "numeric", "income": "numeric", "size": "numeric"}


def zero_heavy_table(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows: a skewed nominal ``region``, numeric ``age``, ``income`` (log-normal, higher in
    the north) and ``size``, and ``spend``, 0 in ~70 % of the rows, else a share of income."""
    rng = np.random.default_rng(seed)
    regions = np.array(["north", "south", "east", "west", "centre", "islands"])
    region = regions[rng.choice(6, size=n, p=[0.3, 0.25, 0.2, 0.12, 0.08, 0.05])]
    income = np.round(np.exp(rng.normal(10, 0.8, size=n)) + 300 * (region == "north"), 2)
    spend = np.where(rng.random(n) < 0.7, 0.0, np.round(income * rng.uniform(0.01, 0.2, n), 2))
    return pd.DataFrame(
        {
            "region": region,
            "age": rng.integers(18, 90, size=n).astype(float),
            "income": income,
            "size": rng.integers(1, 8, size=n).astype(float),
            "spend": spend,
        }
    )


def tables(data: Path, rows: list[int], only: set[str] | None):
    """``(name, frame, QIs, confidential)`` of every table asked for."""
    if only is None or "generated" in only:
        for n in rows:
            yield f"generated-{n}", zero_heavy_table(n, seed=n), GENERATED_QIS, "spend"
    for name, (file, qis, confidential) in REAL.items():
        if only is None or name in only:
            frame = pd.read_csv(data / file)
            yield name, frame[[*qis, confidential]], qis, confidential


def anonymize(frame, qis, confidential, k, t, algorithm) -> tuple[dict[str, Any], float]:
    """The report of one run and its CPU seconds."""
    started = time.process_time()
    result = tclose.anonymize(
        frame, quasi_identifiers=qis, confidential=[confidential], k=k, t=t, algorithm=algorithm
    )
    seconds = time.process_time() - started
    if not result.report["verification"]["passed"]:
        raise SystemExit(f"VERIFICATION FAILED: {algorithm} k={k} t={t}")
    return result.report, seconds


def cell(frame, qis, confidential, k, t) -> dict[str, Any]:
    row: dict[str, Any] = {"k": k, "t": t, "n": len(frame)}
    for name in (*PAPER, "auto"):
        report, seconds = anonymize(frame, qis, confidential, k, t, name)
        row[f"sse_{name}"], row[f"cpu_{name}"] = report["utility"]["sse"], seconds
        if name == "auto":
            row["winner"] = report["algorithm"]["info"]["winner"]
    best = min(row[f"sse_{name}"] for name in PAPER)
    row["auto_over_best"] = row["sse_auto"] / best if best > 0 else 1.0
    row["cpu_ratio"] = row["cpu_auto"] / row["cpu_t-first"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--rows", default="20000,28000", help="rows of the generated tables")
    parser.add_argument("--ks", default="3,10")
    parser.add_argument("--ts", default="0.1,0.25")
    parser.add_argument("--only", default=None, help="generated, survey, census (comma-separated)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    ks = [int(v) for v in args.ks.split(",")]
    ts = [float(v) for v in args.ts.split(",")]
    warm = zero_heavy_table(400)
    for name in (*PAPER, "auto"):
        anonymize(warm, GENERATED_QIS, "spend", 3, 0.2, name)
    print(
        f"{'table':16s} {'k':>3s} {'t':>5s} | {'merge':>8s} {'k-first':>8s} {'t-first':>8s} "
        f"{'auto':>8s} {'auto/best':>9s} | {'cpu t-f':>7s} {'cpu auto':>8s} {'ratio':>6s} | winner"
    )
    rows = []
    for name, frame, qis, confidential in tables(
        args.data, [int(r) for r in args.rows.split(",")], only
    ):
        for k in ks:
            for t in ts:
                row = {"table": name, **cell(frame, qis, confidential, k, t)}
                rows.append(row)
                print(
                    f"{name:16s} {k:3d} {t:5.2f} | {row['sse_merge']:8.5f} "
                    f"{row['sse_k-first']:8.5f} {row['sse_t-first']:8.5f} {row['sse_auto']:8.5f} "
                    f"{row['auto_over_best']:9.3f} | {row['cpu_t-first']:7.2f} "
                    f"{row['cpu_auto']:8.2f} {row['cpu_ratio']:6.2f} | {row['winner']}",
                    flush=True,
                )
    ratios = [r["cpu_ratio"] for r in rows]
    worse = [r for r in rows if r["auto_over_best"] > 1.0]
    print(
        f"CPU auto / t-first: median {statistics.median(ratios):.2f}, largest {max(ratios):.2f} "
        f"(targets 4 and 10); cells where auto's SSE exceeds the best of merge, k-first and "
        f"t-first: {len(worse)} of {len(rows)}"
    )


if __name__ == "__main__":
    main()
