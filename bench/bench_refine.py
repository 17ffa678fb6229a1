"""Benchmark of ``auto`` (refined candidates) against the paper's three algorithms.

Usage::

    python bench/bench_refine.py --data ../shared/data --out docs/reproduction
    python bench/bench_refine.py --data ../shared/data --only grid --tables census_fedtax
    python bench/bench_refine.py --only time            # auto vs t-first at 23,435 x 7 rows
    python bench/bench_refine.py --only blocks          # 16 blocks vs 1 at 100,000 rows

Sections:

- ``grid``: on every table of :data:`TABLES` (the paper's Census with FEDTAX and with FICA,
  Tarragona, EIA and the sdcMicro test data, all under ``--data``) and every ``k`` in
  ``{2, 5, 10}`` and ``t`` in ``{0.05, 0.1, 0.2}``: ``t-first``, ``merge`` and ``k-first`` with
  their default options (the paper's algorithms, no refinement) and ``auto``, each through
  :func:`tclose.anonymize`. Every published table is checked again here with
  :func:`tclose.core.verify.verify_rows` (k and every EMD recomputed from the written rows). Printed per
  cell: the SSE of each paper algorithm, auto's SSE and its ratio to the smallest paper SSE, the
  winning candidate's SSE before and after refinement, auto's cluster sizes and the times. Then
  the median ratio over the cells and the largest. ``k-first`` is skipped where a run would take
  over ``--k-first-seconds`` (estimated from the table size; no table here comes close).
- ``time``: the seeded synthetic discharge table (23,435 rows, 7 QIs, confidential charge), the
  same ``k x t`` grid: wall time of ``t-first`` and of ``auto`` (median of ``--repeats``).
- ``blocks``: :func:`synthetic_table` (as in ``bench_blocks.py``) and the discharge table, at
  100,000 rows (k = 10, t = 0.25): SSE of t-first with 16 blocks against one block, without and
  with ``refine`` (which runs on the whole table after the blocks, so across their borders).

SSE is the report's ``utility.sse`` (numeric QIs: the mean over rows and QIs of the squared
z-score difference). Outputs: ``refine_cells.csv``, ``refine_cells.md`` and ``refine.png`` under
``--out`` (the plot needs matplotlib, the ``plots`` extra).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import tclose
from tclose.core.verify import verify_rows
from tclose.plugins.emd_ordered import OrderedEMDDistance

KS = (2, 5, 10)
TS = (0.05, 0.1, 0.2)
PAPER = ("t-first", "merge", "k-first")

#: name -> (file, QIs, confidential attributes, description)
TABLES: dict[str, tuple[str, list[str], list[str], str]] = {
    "census_fedtax": (
        "census_casc.csv",
        ["TAXINC", "POTHVAL"],
        ["FEDTAX"],
        "Census, FEDTAX (r = 0.92)",
    ),
    "census_fica": ("census_casc.csv", ["TAXINC", "POTHVAL"], ["FICA"], "Census, FICA (ties)"),
    "tarragona": (
        "tarragona.csv",
        ["SALES", "FIXED.ASSETS"],
        ["NET.PROFIT"],
        "Tarragona, NET.PROFIT",
    ),
    "eia": (
        "eia.csv",
        ["RESSALES", "COMSALES"],
        ["RESREVENUE"],
        "EIA, RESREVENUE (r = 0.96)",
    ),
    "sdc_testdata": (
        "sdcmicro_testdata.csv",
        ["age", "expend", "savings"],
        ["income"],
        "sdcMicro testdata, income (uncorrelated)",
    ),
}


def anonymize(frame: pd.DataFrame, qi: list[str], conf: list[str], k: int, t: float, name: str):
    started = time.perf_counter()
    result = tclose.anonymize(
        frame[qi + conf], quasi_identifiers=qi, confidential=conf, k=k, t=t, algorithm=name
    )
    return result, time.perf_counter() - started


def check(result: Any, frame: pd.DataFrame, qi: list[str], conf: list[str], k: int, t: float):
    """Independent verification of the published rows; raises if k or t fails."""
    distance = OrderedEMDDistance()
    verdict = verify_rows(
        result.data[qi + conf],
        qi,
        {c: (distance, {}) for c in conf},
        k,
        t,
        len(frame),
        {c: frame[c].to_numpy() for c in conf},
    )
    if not verdict.passed:
        failed = [c["name"] for c in verdict.checks if not c["passed"]]
        raise SystemExit(f"VERIFICATION FAILED: {failed}")
    return verdict


def grid_cell(frame, qi, conf, k, t, k_first_ok: bool) -> dict[str, Any]:
    row: dict[str, Any] = {"k": k, "t": t, "n": len(frame)}
    for name in PAPER:
        if name == "k-first" and not k_first_ok:
            row["sse_k-first"], row["s_k-first"] = np.nan, np.nan
            continue
        result, seconds = anonymize(frame, qi, conf, k, t, name)
        check(result, frame, qi, conf, k, t)
        row[f"sse_{name}"] = result.report["utility"]["sse"]
        row[f"s_{name}"] = seconds
    result, seconds = anonymize(frame, qi, conf, k, t, "auto")
    check(result, frame, qi, conf, k, t)
    info = result.report["algorithm"]["info"]
    winner = next(c for c in info["candidates"] if c["name"] == info["winner"])
    sizes = np.bincount(result.labels)
    best_paper = min(row[f"sse_{name}"] for name in PAPER if not np.isnan(row[f"sse_{name}"]))
    row.update(
        sse_auto=result.report["utility"]["sse"],
        s_auto=seconds,
        winner=info["winner"],
        winner_before=winner["wcss_unrefined"],
        winner_after=winner["wcss"],
        best_paper=best_paper,
        ratio=result.report["utility"]["sse"] / best_paper if best_paper > 0 else 1.0,
        clusters=len(sizes),
        size_min=int(sizes.min()),
        size_median=float(np.median(sizes)),
        size_max=int(sizes.max()),
    )
    return row


def run_grid(data: Path, names: Sequence[str], k_first_seconds: float) -> pd.DataFrame:
    rows = []
    for name in names:
        file, qi, conf, _ = TABLES[name]
        frame = pd.read_csv(data / file)
        # k-first cost grows about as n^2 / k; ~1 s at 1,000 rows here, so 60 s near 8,000 rows.
        k_first_ok = (len(frame) / 1000) ** 2 <= k_first_seconds
        for k in KS:
            for t in TS:
                row = {"table": name, **grid_cell(frame, qi, conf, k, t, k_first_ok)}
                rows.append(row)
                print(
                    f"{name:14s} k={k:2d} t={t:<4} paper t/m/k "
                    f"{row['sse_t-first']:.4f}/{row['sse_merge']:.4f}/{row['sse_k-first']:.4f} "
                    f"auto {row['sse_auto']:.4f} ratio {row['ratio']:.3f} ({row['winner']}: "
                    f"{row['winner_before']:.4f} -> {row['winner_after']:.4f}) sizes "
                    f"{row['size_min']}/{row['size_median']:g}/{row['size_max']} "
                    f"time auto {row['s_auto']:.2f}s",
                    flush=True,
                )
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    lines = [
        "| table | k | t | t-first | merge | k-first | auto | auto / best | winner: before → after "
        "| sizes min / median / max | time t-first / merge / k-first / auto (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in frame.iterrows():
        kf = "skipped" if np.isnan(r["sse_k-first"]) else f"{r['sse_k-first']:.4f}"
        kfs = "–" if np.isnan(r["s_k-first"]) else f"{r['s_k-first']:.2f}"
        lines.append(
            f"| {r['table']} | {r['k']} | {r['t']} | {r['sse_t-first']:.4f} | {r['sse_merge']:.4f}"
            f" | {kf} | **{r['sse_auto']:.4f}** | {r['ratio']:.3f} | {r['winner']}: "
            f"{r['winner_before']:.4f} → {r['winner_after']:.4f} | {r['size_min']} / "
            f"{r['size_median']:g} / {r['size_max']} | {r['s_t-first']:.2f} / {r['s_merge']:.2f}"
            f" / {kfs} / {r['s_auto']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def plot(frame: pd.DataFrame, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (extra 'plots'): no plot written")
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    tables = list(dict.fromkeys(frame["table"]))
    width = 0.8 / len(tables)
    cells = [f"k={k}\nt={t}" for k in KS for t in TS]
    for i, name in enumerate(tables):
        part = frame[frame["table"] == name]
        ax.bar(np.arange(len(part)) + i * width, part["ratio"], width, label=name)
    ax.axhline(0.8, color="black", linestyle="--", linewidth=1, label="target 0.80")
    ax.axhline(1.0, color="grey", linewidth=1)
    ax.set_xticks(np.arange(len(cells)) + 0.4 - width / 2, cells, fontsize=8)
    ax.set_ylabel("SSE of auto / smallest SSE of the paper's algorithms")
    ax.set_title("auto (refined candidates) against t-first, merge, k-first")
    ax.set_ylim(0, 1.1)
    ax.legend(fontsize=8, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def time_section(repeats: int) -> None:
    from tclose.app.demo import QI_COLUMNS, discharge_table

    frame = discharge_table(23435, seed=0)
    qi, conf = list(QI_COLUMNS), ["charge"]
    anonymize(frame.head(500), qi, conf, 2, 0.2, "auto")  # warm-up (compiled kernels)
    ratios = []
    for k in KS:
        for t in TS:
            seconds = {}
            for name in ("t-first", "auto"):
                runs = [anonymize(frame, qi, conf, k, t, name) for _ in range(repeats)]
                seconds[name] = statistics.median(s for _, s in runs)
                sse = runs[0][0].report["utility"]["sse"]
                seconds[name + "_sse"] = sse
            ratio = seconds["auto"] / seconds["t-first"]
            ratios.append(ratio)
            print(
                f"23,435 x 7  k={k:2d} t={t:<4} t-first {seconds['t-first']:.2f}s "
                f"(SSE {seconds['t-first_sse']:.4f})  auto {seconds['auto']:.2f}s "
                f"(SSE {seconds['auto_sse']:.4f})  auto / t-first {ratio:.2f}",
                flush=True,
            )
    print(
        f"time ratio auto / t-first: median {statistics.median(ratios):.2f}, max {max(ratios):.2f}"
    )


def synthetic_table(n: int, d: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The table of ``bench/bench_blocks.py``: standardized correlated Gaussian QIs ``(n, d)``
    and a distinct confidential column correlated with the first."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(d, d))
    x = rng.normal(size=(n, d)) @ mixing
    confidential = 0.5 * x[:, 0] / x[:, 0].std() + rng.normal(size=n)
    x -= x.mean(axis=0)
    x /= x.std(axis=0)
    return x, confidential


def blocks_section() -> None:
    from tclose.app.demo import QI_COLUMNS, discharge_table
    from tclose.base.arrays import standardize
    from tclose.base.options import validate_options
    from tclose.blocks.framed import options_schema, run_algorithm
    from tclose.interfaces import Problem
    from tclose.kernels.emd import OrderedEMD
    from tclose.kernels.refine import sse_of
    from tclose.plugins.t_first import TFirst

    discharge = discharge_table(100_000, seed=0)
    tables = {
        "synthetic 100,000 x 8": synthetic_table(100_000),
        "discharge 100,000 x 7": (
            standardize(discharge[list(QI_COLUMNS)].to_numpy(np.float64)),
            discharge["charge"].to_numpy(),
        ),
    }
    plugin = TFirst()
    for name, (x, confidential) in tables.items():
        distance = OrderedEMD.fit(confidential)
        results = {}
        for blocks in (1, 16):
            for refine in (False, True):
                options = validate_options(
                    "t-first", options_schema(plugin), {"blocks": blocks, "refine": refine}, "o"
                )
                started = time.perf_counter()
                labels = run_algorithm(plugin, Problem(x, [distance], 10, 0.25, options)).labels
                results[blocks, refine] = sse_of(x, labels) / x.size
                print(
                    f"{name}, k=10, t=0.25, {blocks:2d} block(s), refine={refine!s:5}: SSE "
                    f"{results[blocks, refine]:.5f} in {time.perf_counter() - started:.1f}s",
                    flush=True,
                )
        base = results[1, False]
        print(
            f"{name}: 16 blocks vs 1 block: {100 * (results[16, False] / base - 1):+.1f}% "
            f"unrefined; with refine {100 * (results[16, True] / base - 1):+.1f}% against 1 "
            f"block unrefined, {100 * (results[16, True] / results[1, True] - 1):+.1f}% against "
            f"1 block refined"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=None, help="write CSV, Markdown and plot")
    parser.add_argument("--only", choices=("grid", "time", "blocks"), action="append")
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--k-first-seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sections = args.only or ["grid", "time", "blocks"]
    print(f"load average: {' '.join(f'{v:.1f}' for v in __import__('os').getloadavg())}")
    if "grid" in sections:
        frame = run_grid(args.data, args.tables, args.k_first_seconds)
        ratios = frame["ratio"]
        print(
            f"auto / smallest paper SSE over {len(frame)} cells: median {ratios.median():.3f}, "
            f"max {ratios.max():.3f}; cells above 1: {int((ratios > 1 + 1e-9).sum())}"
        )
        for name, part in frame.groupby("table", sort=False):
            print(f"  {name:14s} median {part['ratio'].median():.3f} max {part['ratio'].max():.3f}")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            frame.to_csv(args.out / "refine_cells.csv", index=False)
            (args.out / "refine_cells.md").write_text(markdown(frame))
            plot(frame, args.out / "refine.png")
    if "time" in sections:
        time_section(args.repeats)
    if "blocks" in sections:
        blocks_section()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
