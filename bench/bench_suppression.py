"""SSE with and without suppression of outliers (``privacy.max_suppressed``), side by side.

Usage::

    python bench/bench_suppression.py                       # ../shared/data, 2 % suppression
    python bench/bench_suppression.py --data DIR --fraction 0.05 --repeats 3

Four real tables (``../shared/data``, see its README): Census (CASC, 1,080 rows), Tarragona
(834 firms), EIA (4,092 utility-months) and sdcMicro's household survey ``testdata`` (4,580
rows, categorical QIs and age). Each is anonymized by :func:`tclose.anonymize` with the same
``k``, ``t`` and algorithm, once with ``max_suppressed=0`` and once with the fraction given.
Printed per table: the SSE of the published rows (``utility.sse``, in the standardization of
the whole table), with suppression also the full-table figure (``utility.sse_full_table``: each
suppressed row counted at its distance to the table's aggregate), the rows suppressed, the
relative change of the published rows' SSE, and the verifier's verdict of both releases. With
``--repeats`` the anonymizations run that many times and the seconds are medians (the SSE is
deterministic).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pandas as pd

import tclose

#: name → (file, QIs as anonymize takes them, confidential column, columns kept)
TABLES = {
    "census": ("census_casc.csv", ["TAXINC", "POTHVAL"], "FEDTAX"),
    "tarragona": ("tarragona.csv", ["SALES", "FIXED.ASSETS"], "NET.PROFIT"),
    "eia": ("eia.csv", ["RESSALES", "COMSALES"], "RESREVENUE"),
    "testdata": (
        "sdcmicro_testdata.csv",
        {
            "age": "numeric",
            "urbrur": "nominal",
            "roof": "nominal",
            "walls": "nominal",
            "water": "nominal",
            "sex": "nominal",
            "hhcivil": "nominal",
        },
        "income",
    ),
}


def run(frame: pd.DataFrame, qis, confidential: str, args, fraction: float):  # type: ignore[no-untyped-def]
    """The report of one anonymization and its median seconds over ``args.repeats``."""
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = tclose.anonymize(
            frame,
            qis,
            [confidential],
            k=args.k,
            t=args.t,
            algorithm=args.algorithm,
            max_suppressed=fraction,
        )
        seconds.append(time.perf_counter() - start)
    return result.report, statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared" / "data"))
    parser.add_argument("--fraction", type=float, default=0.02)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--t", type=float, default=0.2)
    parser.add_argument("--algorithm", default="t-first")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(
        f"k = {args.k}, t = {args.t}, algorithm {args.algorithm}, suppression "
        f"{args.fraction:.0%} (outliers first)"
    )
    header = (
        f"{'table':<10} {'rows':>5} {'SSE none':>9} {'SSE supp.':>9} {'change':>7} "
        f"{'full tbl':>9} {'left out':>8} {'s none':>6} {'s supp.':>7} verified"
    )
    print(header)
    for name, (file, qis, confidential) in TABLES.items():
        columns = list(qis) + [confidential]
        frame = pd.read_csv(Path(args.data) / file, usecols=columns)[columns]
        plain, plain_s = run(frame, qis, confidential, args, 0.0)
        cut, cut_s = run(frame, qis, confidential, args, args.fraction)
        before, after = plain["utility"]["sse"], cut["utility"]["sse"]
        verified = plain["verification"]["passed"] and cut["verification"]["passed"]
        print(
            f"{name:<10} {len(frame):>5} {before:>9.5f} {after:>9.5f} "
            f"{(after - before) / before:>+7.1%} {cut['utility']['sse_full_table']:>9.5f} "
            f"{cut['privacy']['suppression']['rows']:>8} {plain_s:>6.2f} {cut_s:>7.2f} "
            f"{'yes' if verified else 'NO'}"
        )


if __name__ == "__main__":
    main()
