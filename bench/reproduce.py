#!/usr/bin/env python3
"""Reproduce the empirical section of "t-Closeness through Microaggregation".

Runs the paper's three algorithms (``merge``, ``k-first``, ``t-first``) through the public API,
:func:`tclose.anonymize`, over a grid of ``k`` and ``t`` (by default the paper's: k in
{2, 5, 10, 15, 20, 25, 30}, t in {0.01, 0.05, ..., 0.25}) and writes into ``--out``:

- ``<name>_cells.csv``: one row per (algorithm, k, t): cluster count, min / mean / max size,
  normalized SSE, achieved k and t, run time, the algorithm's info, and the checks;
- ``<name>_tables.md`` and ``<name>_<algorithm>.csv``: the paper's Tables 1-3 layout ("min/avg"
  cluster size per cell, rows k, columns t);
- ``<name>_sse.png`` / ``<name>_sse.csv``: normalized SSE versus t at the smallest k (k = 2), like
  the paper's SSE figure;
- ``<name>_time.png`` / ``<name>_time.csv``: run time versus t at the smallest k (the paper's
  run-time figure), the median of ``--repeats`` runs;
- with ``--compare-paper``: ``<name>_vs_paper.md``, every cell next to the paper's MCD and HCD
  values, with match counts;
- with ``--partner-study``: ``<name>_partner.md/.csv``, merge with ``partner="nearest"`` (the
  paper's rule) against ``partner="min-emd"`` for each ``--candidates`` value.

Every cell is checked three times: :func:`tclose.anonymize` verifies its own output (the
independent verifier rebuilds the classes from the written rows); this script then asserts that
the smallest cluster has at least ``k`` rows, that every ``t_achieved`` is at most ``t + 1e-9``,
and recomputes every cluster's EMD with its own small NumPy code (sharing nothing with the
package). A cell that fails any check is reported on stderr in capitals, kept in the CSV with
``ok = False``, and the script exits with status 1 at the end. Nothing is hidden or retried.

Examples::

    python bench/reproduce.py --csv ../shared/data/census_casc.csv --qi TAXINC POTHVAL \\
        --confidential FEDTAX --name census_fedtax --out docs/reproduction --compare-paper
    python bench/reproduce.py --discharge 23435 --ks 2 --name discharge --out docs/reproduction
    python bench/reproduce.py --csv census.csv --qi TAXINC POTHVAL --confidential FICA \\
        --name census_fica_partner --out out --partner-study --ks 2 5 --candidates 5 10

matplotlib is imported only when plots are drawn (``--no-plots`` skips them).
Timings are wall-clock seconds on whatever else the machine is doing: indicative only.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

K_GRID = (2, 5, 10, 15, 20, 25, 30)
T_GRID = (0.01, 0.05, 0.09, 0.13, 0.17, 0.21, 0.25)
ALGORITHMS = ("merge", "k-first", "t-first")
#: Same tolerance as ``tclose.interfaces.EMD_TOLERANCE``, restated so that this script's own
#: check does not depend on the package's constant.
TOLERANCE = 1e-9

# --------------------------------------------------------------------------------------------
# The paper's Tables 1-3 (Census, n = 1080), copied from the LaTeX source: per k, per t, the
# "MCD" then the "HCD" cell, each "min/avg".
# --------------------------------------------------------------------------------------------
_PAPER_LATEX = {
    "merge": r"""
$k=2$ & 1080/1080 & 1080/1080  & 56/120 & 36/98  & 20/42 & 16/31 & 8/20 & 8/52 & 4/10 & 4/9 & 4/7 & 4/7 & 2/8 & 2/5 \\
$k=5$ & 1080/1080 & 1080/1080  & 385/540 & 200/216  & 40/154 & 40/60 & 20/47 & 20/80 & 10/24 & 10/21 & 10/17 & 10/15 & 5/12 & 5/11 \\
$k=10$ & 1080/1080 & 1080/1080  & 1080/1080 & 1080/1080  & 110/270 & 180/216 & 40/108 & 40/190 & 20/57 & 20/47 & 20/35 & 20/31 & 10/24 & 10/20 \\
$k=15$ & 1080/1080 & 1080/1080  & 1080/1080 & 495/540  & 135/360 & 195/270 & 45/90 & 60/270 & 30/64 & 30/68 & 30/45 & 30/54 & 15/33 & 15/33 \\
$k=20$ & 1080/1080 & 1080/1080  & 380/540 & 240/360  & 160/216 & 180/216 & 80/154 & 60/140 & 40/83 & 40/72 & 40/54 & 40/60 & 20/37 & 20/40 \\
$k=25$ & 1080/1080 & 1080/1080  & 1080/1080 & 1080/1080  & 1080/1080 & 230/360 & 455/540 & 50/250 & 50/180 & 50/98 & 50/90 & 50/72 & 25/72 & 25/48 \\
$k=30$ & 1080/1080 & 1080/1080  & 540/540 & 1080/1080  & 270/360 & 330/540 & 120/180 & 150/390 & 60/98 & 60/108 & 60/77 & 60/90 & 30/57 & 30/57 \\
""",
    "k-first": r"""
$k=2$ & 164/216 & 156/360  & 8/10 & 8/11  & 4/7 & 4/7 & 4/6 & 4/4 & 2/3 & 2/3 & 2/3 & 2/3 & 2/3 & 2/3 \\
$k=5$ & 40/64 & 80/154  & 10/16 & 10/10  & 5/7 & 5/8 & 5/7 & 5/8 & 5/7 & 5/7 & 5/7 & 5/8 & 5/6 & 5/7 \\
$k=10$ & 40/108 & 80/135  & 10/17 & 10/17  & 10/17 & 10/17 & 10/15 & 10/16 & 10/15 & 10/14 & 10/13 & 10/14 & 10/12 & 10/12 \\
$k=15$ & 30/57 & 30/60  & 15/28 & 15/30  & 15/25 & 15/26 & 15/23 & 15/23 & 15/23 & 15/22 & 15/19 & 15/21 & 15/16 & 15/17 \\
$k=20$ & 40/54 & 40/49  & 20/37 & 20/43  & 20/35 & 20/36 & 20/32 & 20/32 & 20/31 & 20/29 & 20/26 & 20/28 & 20/22 & 20/23 \\
$k=25$ & 50/51 & 50/51  & 25/51 & 25/51  & 25/43 & 25/43 & 25/39 & 25/39 & 25/40 & 25/37 & 25/32 & 25/35 & 25/28 & 25/26 \\
$k=30$ & 30/57 & 60/64  & 30/68 & 30/64  & 30/54 & 30/54 & 30/49 & 30/47 & 30/47 & 30/43 & 30/37 & 30/42 & 30/34 & 30/34 \\
""",
    "t-first": r"""
$k=2$ & 49/49 & 49/49  & 10/10 & 10/10  & 6/6 & 6/6 & 4/4 & 4/4 & 3/3 & 3/3 & 3/3 & 3/3 & 2/2 & 2/2 \\
$k=5$ & 49/49 & 49/49  & 10/10 & 10/10  & 6/6 & 6/6 & 5/5 & 5/5 & 5/5 & 5/5 & 5/5 & 5/5 & 5/5 & 5/5 \\
$k=10$ & 49/49 & 49/49  & 10/10 & 10/10  & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 & 10/10 \\
$k=15$ & 49/49 & 49/49  & 15/15 & 15/15  & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 & 15/15 \\
$k=20$ & 49/49 & 49/49  & 20/20 & 20/20  & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 & 20/20 \\
$k=25$ & 49/49 & 49/49  & 25/25 & 25/25  & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 & 25/25 \\
$k=30$ & 49/49 & 49/49  & 30/30 & 30/30  & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 & 30/30 \\
""",
}


def paper_tables() -> dict[tuple[str, str, int, float], tuple[int, int]]:
    """The paper's cells: ``(algorithm, "MCD"|"HCD", k, t) -> (min, avg)``."""
    cells: dict[tuple[str, str, int, float], tuple[int, int]] = {}
    for algorithm, text in _PAPER_LATEX.items():
        for line in text.strip().splitlines():
            head, *rest = line.rstrip(" \\").split("&")
            k = int(head.strip().strip("$").split("=")[1])
            for i, entry in enumerate(rest):
                low, avg = (int(v) for v in entry.strip().split("/"))
                column = "MCD" if i % 2 == 0 else "HCD"
                cells[(algorithm, column, k, T_GRID[i // 2])] = (low, avg)
    return cells


# --------------------------------------------------------------------------------------------
# One cell
# --------------------------------------------------------------------------------------------


@dataclass
class Cell:
    """The outcome of one (algorithm, options, k, t) run and of its checks."""

    dataset: str
    algorithm: str
    options: str
    k: int
    t: float
    n: int
    clusters: int = 0
    min_size: int = 0
    mean_size: float = 0.0
    max_size: int = 0
    k_achieved: int = 0
    t_achieved: float = math.nan
    t_independent: float = math.nan
    sse: float = math.nan
    seconds: float = math.nan
    kernel_seconds: float = math.nan
    runs: int = 0
    info: str = ""
    ok: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def table_entry(self) -> str:
        """``"min/avg"`` as in the paper (average rounded to the nearest integer)."""
        if not self.clusters:
            return "FAILED"
        return f"{self.min_size}/{round(self.mean_size)}"

    def row(self) -> dict[str, Any]:
        """The CSV row."""
        row = asdict(self)
        row["problems"] = "; ".join(self.problems)
        row["entry"] = self.table_entry
        return row


def read_cells(path: Path) -> list[Cell]:
    """Cells back from a ``<name>_cells.csv`` written by :func:`write_cells`."""
    frame = pd.read_csv(path, keep_default_na=False)
    cells = []
    for row in frame.to_dict("records"):
        row.pop("entry", None)
        problems = str(row.pop("problems"))
        cell = Cell(**{key: value for key, value in row.items()})
        cell.k, cell.n, cell.runs = int(cell.k), int(cell.n), int(cell.runs)
        cell.ok = str(cell.ok) == "True"
        cell.problems = [p for p in problems.split("; ") if p]
        cells.append(cell)
    return cells


def independent_emd(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """EMD of every cluster to the whole column, computed here without the package's code.

    Ordered ground distance over the ``m`` distinct values:
    ``EMD = 1/(m-1) * sum_{i<m} |F_cluster(v_i) - F_table(v_i)|`` with ``F`` the empirical
    cumulative distribution functions. Dense, in chunks of clusters.

    Args:
        values: ``(n,)`` confidential values.
        labels: ``(n,)`` dense cluster labels ``0..L-1``.

    Returns:
        ``(L,)`` EMDs.
    """
    distinct, codes = np.unique(values, return_inverse=True)
    codes = codes.reshape(-1)
    m = distinct.size
    n_clusters = int(labels.max()) + 1
    if m == 1:
        return np.zeros(n_clusters)
    table_cdf = np.cumsum(np.bincount(codes, minlength=m)) / codes.size
    sizes = np.bincount(labels, minlength=n_clusters)
    result = np.empty(n_clusters)
    chunk = max(1, 4_000_000 // m)
    for first in range(0, n_clusters, chunk):
        last = min(first + chunk, n_clusters)
        inside = (labels >= first) & (labels < last)
        counts = np.zeros((last - first, m))
        np.add.at(counts, (labels[inside] - first, codes[inside]), 1.0)
        cdf = np.cumsum(counts, axis=1) / sizes[first:last, None]
        result[first:last] = np.abs(cdf - table_cdf)[:, :-1].sum(axis=1) / (m - 1)
    return result


def run_cell(
    frame: pd.DataFrame,
    dataset: str,
    quasi_identifiers: Sequence[str],
    confidential: Sequence[str],
    algorithm: str,
    k: int,
    t: float,
    options: Mapping[str, Any],
    repeats: int = 1,
    repeat_below: float = math.inf,
) -> Cell:
    """Anonymize once (or ``repeats`` times, for the timing) and check the result.

    The run time is the median wall time of :func:`tclose.anonymize` (which includes its own
    verification); ``kernel_seconds`` the median of the report's ``timings["kernel"]``. Runs
    after the first are skipped when the first took ``repeat_below`` seconds or more.
    """
    import tclose
    from tclose.errors import VerificationError

    cell = Cell(dataset, algorithm, json.dumps(dict(options), sort_keys=True), k, t, len(frame))
    walls: list[float] = []
    kernels: list[float] = []
    result = None
    for attempt in range(max(1, repeats)):
        if attempt and walls[0] >= repeat_below:
            break
        started = time.perf_counter()
        try:
            result = tclose.anonymize(
                frame,
                quasi_identifiers=list(quasi_identifiers),
                confidential=list(confidential),
                k=k,
                t=t,
                algorithm=algorithm,
                **options,
            )
        except VerificationError as exc:
            failed = [c for c in exc.checks if not c.get("passed")]
            cell.problems.append(f"tclose verifier rejected the output: {exc} {failed}")
            return cell
        except Exception as exc:  # noqa: BLE001 - any crash is a failed cell, reported loudly
            cell.problems.append(f"{type(exc).__name__}: {exc}")
            return cell
        walls.append(time.perf_counter() - started)
        kernels.append(float(result.report["timings"].get("kernel", math.nan)))
    assert result is not None
    report = result.report
    cell.runs = len(walls)
    cell.seconds = statistics.median(walls)
    cell.kernel_seconds = statistics.median(kernels)
    clusters = report["clusters"]
    cell.clusters, cell.min_size = clusters["count"], clusters["min"]
    cell.mean_size, cell.max_size = clusters["mean"], clusters["max"]
    cell.k_achieved = int(report["privacy"]["k_achieved"])
    achieved = report["privacy"]["t_achieved"]
    cell.t_achieved = max(achieved.values())
    cell.sse = float(report["utility"]["sse"])
    cell.info = json.dumps(report["algorithm"].get("info", {}), sort_keys=True, default=str)

    # Our own checks, on top of the package's verifier.
    labels = np.asarray(result.labels)
    sizes = np.bincount(labels)
    if not report["verification"]["passed"]:
        cell.problems.append("report says verification did not pass")
    if labels.shape != (len(frame),):
        cell.problems.append(f"{labels.shape} labels for {len(frame)} rows")
    if sizes.min() < k or cell.min_size < k or cell.k_achieved < k:
        cell.problems.append(
            f"k violated: smallest cluster {sizes.min()} (report: "
            f"{cell.min_size}, verifier classes: {cell.k_achieved}) < k = {k}"
        )
    if set(achieved) != set(confidential):
        cell.problems.append(f"t_achieved covers {sorted(achieved)}, not {sorted(confidential)}")
    for column, value in achieved.items():
        if not value <= t + TOLERANCE:
            cell.problems.append(f"t violated: t_achieved[{column}] = {value!r} > t = {t}")
    own = max(float(independent_emd(frame[c].to_numpy(), labels).max()) for c in confidential)
    cell.t_independent = own
    if not own <= t + TOLERANCE:
        cell.problems.append(f"t violated (independent EMD): {own!r} > t = {t}")
    # The verifier's classes are unions of clusters (rows with equal written QIs), and the EMD
    # of a union is at most the largest EMD of its parts: so the verifier's largest EMD can be
    # lower than ours on the labels (when two clusters coincide), never higher.
    if cell.t_achieved > own + TOLERANCE:
        cell.problems.append(
            f"EMD implementations disagree: verifier {cell.t_achieved!r} > "
            f"independent {own!r} on the algorithm's clusters"
        )
    elif own > cell.t_achieved + TOLERANCE:
        cell.info += f" [independent max EMD {own:.6g} vs verifier {cell.t_achieved:.6g}]"
    for column in confidential:
        if not np.array_equal(
            np.sort(result.data[column].to_numpy()), np.sort(frame[column].to_numpy())
        ):
            cell.problems.append(f"confidential column {column} altered")
    cell.ok = not cell.problems
    return cell


def warm_up(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    confidential: Sequence[str],
    algorithms: Iterable[str],
    options: Mapping[str, Any],
) -> None:
    """Run every algorithm once on a small sample so that compilation (numba) is not timed."""
    import tclose

    sample = frame.iloc[: min(len(frame), 200)]
    for algorithm in algorithms:
        try:
            tclose.anonymize(
                sample,
                quasi_identifiers=list(quasi_identifiers),
                confidential=list(confidential),
                k=2,
                t=0.25,
                algorithm=algorithm,
                **options,
            )
        except Exception as exc:  # noqa: BLE001 - the real run will report it
            print(f"warm-up of {algorithm} failed: {type(exc).__name__}: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def _t_label(t: float) -> str:
    return f"t={t:g}"


def wide_table(
    cells: Sequence[Cell], algorithm: str, ks: Sequence[int], ts: Sequence[float]
) -> pd.DataFrame:
    """Rows k, columns t, entries ``"min/avg"`` (``""`` where the cell was not run, and
    ``"FAILED ..."`` where it failed a check)."""
    lookup = {
        (c.k, c.t): c.table_entry if c.ok else f"FAILED {c.table_entry}"
        for c in cells
        if c.algorithm == algorithm
    }
    return pd.DataFrame(
        [[lookup.get((k, t), "") for t in ts] for k in ks],
        index=pd.Index([f"k={k}" for k in ks], name="k"),
        columns=[_t_label(t) for t in ts],
    )


def markdown(frame: pd.DataFrame) -> str:
    """A DataFrame as a GitHub Markdown table (index as the first column)."""
    header = [frame.index.name or ""] + [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index)] + [str(v) for v in row]) + " |")
    return "\n".join(lines)


def write_cells(path: Path, cells: Sequence[Cell]) -> None:
    """All cells, long format."""
    rows = [c.row() for c in cells]
    if not rows:
        return
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_tables(
    out: Path,
    name: str,
    title: str,
    cells: Sequence[Cell],
    algorithms: Sequence[str],
    ks: Sequence[int],
    ts: Sequence[float],
) -> None:
    """``<name>_tables.md`` with one table per algorithm, and ``<name>_<algorithm>.csv``."""
    parts = [f"### {title}", ""]
    for algorithm in algorithms:
        table = wide_table(cells, algorithm, ks, ts)
        table.to_csv(out / f"{name}_{algorithm}.csv")
        parts += [f"**{algorithm}** (min/avg cluster size)", "", markdown(table), ""]
    (out / f"{name}_tables.md").write_text("\n".join(parts))


def smallest_k_series(
    cells: Sequence[Cell], algorithms: Sequence[str], attribute: str
) -> pd.DataFrame:
    """``attribute`` versus t at the smallest k run, one column per algorithm."""
    k = min(c.k for c in cells)
    data = {
        a: {c.t: getattr(c, attribute) for c in cells if c.algorithm == a and c.k == k and c.ok}
        for a in algorithms
    }
    frame = pd.DataFrame(data).sort_index()
    frame.index.name = "t"
    frame.attrs["k"] = k
    return frame


def plot_series(frame: pd.DataFrame, path: Path, title: str, ylabel: str, log: bool) -> None:
    """A line plot of the columns of ``frame`` against its index (matplotlib, imported here)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    markers = {"merge": "s", "k-first": "^", "t-first": "o"}
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for column in frame.columns:
        series = frame[column].dropna()
        ax.plot(
            series.index, series.values, marker=markers.get(str(column), "x"), label=str(column)
        )
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("t")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


AGREEMENT_HEADER = (
    "| run | algorithm | paper column | cells | exact min/avg | same min | "
    "avg within 10% | median abs log(avg ratio) |\n|---|---|---|---|---|---|---|---|"
)


def agreement(
    entries: Mapping[tuple[int, float], tuple[int, float]], algorithm: str, column: str, label: str
) -> str:
    """One Markdown row: how ``(k, t) -> (min, mean)`` entries agree with a paper column."""
    paper = paper_tables()
    pairs = [
        (entries[key], paper[(algorithm, column, *key)])
        for key in sorted(entries)
        if (algorithm, column, *key) in paper
    ]
    if not pairs:
        return f"| {label} | {algorithm} | {column} | 0 | | | | |"
    exact = sum(low == p[0] and round(mean) == p[1] for (low, mean), p in pairs)
    same_min = sum(low == p[0] for (low, _), p in pairs)
    close = sum(abs(mean - p[1]) <= 0.1 * p[1] for (_, mean), p in pairs)
    logs = statistics.median(abs(math.log(mean / p[1])) for (_, mean), p in pairs)
    return (
        f"| {label} | {algorithm} | {column} | {len(pairs)} | {exact} | {same_min} | "
        f"{close} | {logs:.3f} |"
    )


def compare_with_paper(
    cells: Sequence[Cell],
    algorithms: Sequence[str],
    ks: Sequence[int],
    ts: Sequence[float],
    n: int,
    label: str,
) -> str:
    """Markdown: every cell as ``ours / MCD / HCD``, and agreement counts."""
    paper = paper_tables()
    ours = {(c.algorithm, c.k, c.t): c for c in cells}
    lines = [f"Cells read `ours / paper MCD / paper HCD` (min/avg). n = {n}.", ""]
    summary = [AGREEMENT_HEADER]
    for algorithm in algorithms:
        table = []
        for k in ks:
            row = []
            for t in ts:
                cell = ours.get((algorithm, k, t))
                mcd = paper.get((algorithm, "MCD", k, t))
                hcd = paper.get((algorithm, "HCD", k, t))
                text = (
                    "-"
                    if cell is None
                    else cell.table_entry
                    if cell.ok
                    else f"FAILED {cell.table_entry}"
                )
                row.append(f"{text} / {_fmt(mcd)} / {_fmt(hcd)}")
            table.append(row)
        frame = pd.DataFrame(
            table,
            index=pd.Index([f"k={k}" for k in ks], name="k"),
            columns=[_t_label(t) for t in ts],
        )
        lines += [f"**{algorithm}**", "", markdown(frame), ""]
        entries = {
            (c.k, c.t): (c.min_size, c.mean_size)
            for c in cells
            if c.algorithm == algorithm and c.clusters
        }
        summary += [agreement(entries, algorithm, column, label) for column in ("MCD", "HCD")]
    return "\n".join(lines + ["", *summary, ""])


def _fmt(entry: tuple[int, int] | None) -> str:
    return "-" if entry is None else f"{entry[0]}/{entry[1]}"


# --------------------------------------------------------------------------------------------
# Hypotheses: why our Tables 1-2 differ from the paper's
# --------------------------------------------------------------------------------------------


def ceiling_cluster_size(n: int, k: int, t: float) -> int:
    """t-first's ``k'`` with the pseudocode's *ceiling* in the adjustment (the text has a floor)."""
    from fractions import Fraction

    exact = Fraction(str(t))
    size = max(
        k, -(-(n * exact.denominator) // (2 * (n - 1) * exact.numerator + exact.denominator))
    )
    if size >= n:
        return n
    return size + -(-(n % size) // (n // size))


def paper_consistency(n: int) -> list[str]:
    """The paper's cells whose average cannot be ``n / L`` for any cluster count ``L``."""
    rows = []
    for (algorithm, column, k, t), (low, avg) in sorted(paper_tables().items()):
        if not any(round(n / count) == avg and count * low <= n for count in range(1, n + 1)):
            rows.append(f"| {algorithm} | {column} | {k} | {t:g} | {low}/{avg} |")
    return rows


def _scaled(quasi: np.ndarray, how: str) -> np.ndarray:
    """QIs scaled for MDAV: z-scores (ours), none, range [0, 1], or ranks."""
    if how == "z-score":
        std = quasi.std(axis=0)
        return (quasi - quasi.mean(axis=0)) / np.where(std == 0, 1.0, std)
    if how == "raw":
        return quasi.copy()
    if how == "range":
        span = quasi.max(axis=0) - quasi.min(axis=0)
        return (quasi - quasi.min(axis=0)) / np.where(span == 0, 1.0, span)
    if how == "rank":
        return np.column_stack([pd.Series(c).rank().to_numpy() for c in quasi.T])
    raise ValueError(how)


def kernel_grid(
    x: np.ndarray,
    values: np.ndarray,
    algorithm: str,
    ks: Sequence[int],
    ts: Sequence[float],
    problems: list[str],
    label: str,
) -> dict[tuple[int, float], tuple[int, float]]:
    """``merge`` or ``k-first`` (both finished by the merge loop) called at kernel level on an
    arbitrary QI matrix; every result checked here (size >= k, independent EMD <= t)."""
    from tclose.kernels.emd import OrderedEMD
    from tclose.kernels.k_first import k_first
    from tclose.kernels.mdav import mdav
    from tclose.kernels.merge import merge_until_t_close

    x = np.ascontiguousarray(x, dtype=np.float64)
    distance = OrderedEMD.fit(values)
    entries = {}
    for k in ks:
        base_mdav = mdav(x, k) if algorithm == "merge" else None
        for t in ts:
            base = base_mdav if base_mdav is not None else k_first(x, [distance], k, t)
            labels, _ = merge_until_t_close(x, base, [distance], t)
            sizes = np.bincount(labels)
            worst = float(independent_emd(values, labels).max())
            if sizes.min() < k or worst > t + TOLERANCE:
                problems.append(
                    f"{label} {algorithm} k={k} t={t:g}: min {sizes.min()}, EMD {worst!r}"
                )
            entries[(k, t)] = (int(sizes.min()), float(sizes.mean()))
    return entries


def experiments(frame: pd.DataFrame, args: argparse.Namespace) -> tuple[str, list[str]]:
    """Cheap what-ifs against the paper's Census tables; returns Markdown and any problems."""
    from tclose.kernels.mdav import mdav
    from tclose.kernels.t_first import cluster_size

    n = len(frame)
    problems: list[str] = []
    out = [f"### Experiments on {args.name} (n = {n})", ""]

    # 1. t-first: floor (text) vs ceiling (pseudocode) in the adjustment of k'.
    paper = paper_tables()
    out += [
        "**t-first cluster size, floor (text) vs ceiling (pseudocode)**: cells where they "
        "differ; the paper's Table 3 entry, then what each rule gives (min/avg, the avg is "
        "n / floor(n / k')).",
        "",
        "| k | t | paper | floor | ceiling |",
        "|---|---|---|---|---|",
    ]
    for k in args.ks:
        for t in args.ts:
            floor_k, ceil_k = cluster_size(n, k, t), ceiling_cluster_size(n, k, t)
            if floor_k != ceil_k:
                entry = paper.get(("t-first", "MCD", k, t))
                out.append(
                    f"| {k} | {t:g} | {_fmt(entry)} | {floor_k}/{round(n / (n // floor_k))}"
                    f" | {ceil_k}/{round(n / (n // ceil_k))} |"
                )
    out.append("")

    # 2. The paper's own tables: averages that cannot be n / (number of clusters).
    inconsistent = paper_consistency(n)
    out += [
        f"**Paper cells whose average is not n / L for any cluster count L** "
        f"({len(inconsistent)}):",
        "",
        "| algorithm | column | k | t | min/avg |",
        "|---|---|---|---|---|",
        *inconsistent,
        "",
    ]

    # 3. MDAV scaling and a what-if with the confidential attribute shuffled (independent).
    quasi = frame[args.qi].to_numpy(dtype=np.float64)
    values = frame[args.confidential[0]].to_numpy()
    rng = np.random.default_rng(0)
    runs = [
        (f"QIs {how}", _scaled(quasi, how), values, algorithm)
        for how in ("z-score", "raw", "range", "rank")
        for algorithm in ("merge", "k-first")
    ]
    runs.append(
        (
            "confidential shuffled (seed 0), QIs z-score",
            _scaled(quasi, "z-score"),
            rng.permutation(values),
            "merge",
        )
    )
    rows = [AGREEMENT_HEADER]
    k2 = [
        "| run | algorithm | " + " | ".join(_t_label(t) for t in args.ts) + " |",
        "|---|---|" + "---|" * len(args.ts),
    ]
    for label, x, column_values, algorithm in runs:
        started = time.perf_counter()
        entries = kernel_grid(x, column_values, algorithm, args.ks, args.ts, problems, label)
        print(
            f"[{args.name}] experiment {label} / {algorithm}: {time.perf_counter() - started:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        rows += [agreement(entries, algorithm, column, label) for column in ("MCD", "HCD")]
        k2.append(
            f"| {label} | {algorithm} | "
            + " | ".join(
                f"{entries[(min(args.ks), t)][0]}/{round(entries[(min(args.ks), t)][1])}"
                for t in args.ts
            )
            + " |"
        )
    out += [
        f"**MDAV scaling and dependence** ({args.confidential[0]}; merge = MDAV + merge loop,"
        " k-first = k-first + merge loop, kernels called directly): agreement with the "
        "paper's columns",
        "",
        *rows,
        "",
        f"Same runs, row k = {min(args.ks)}:",
        "",
        *k2,
        "",
    ]

    # 4. How many MDAV clusters are t-close before any merge (the dependence, measured).
    from tclose.kernels.emd import OrderedEMD

    x = _scaled(quasi, "z-score")
    distance = OrderedEMD.fit(values)
    share = pd.DataFrame(
        [
            [f"{np.mean(emds <= t + TOLERANCE):.0%}" for t in args.ts]
            for emds in (distance.cluster_emd(mdav(x, k)) for k in args.ks)
        ],
        index=pd.Index([f"k={k}" for k in args.ks], name="k"),
        columns=[_t_label(t) for t in args.ts],
    )
    out += [
        f"**Share of MDAV clusters (z-scored QIs) already within t for "
        f"{args.confidential[0]}**, before any merge:",
        "",
        markdown(share),
        "",
    ]

    # 5. MDAV tie handling: lowest row vs sdcMicro's highest row, on these QIs.
    differ = [k for k in args.ks if not np.array_equal(mdav(x, k), mdav(x, k, ties="sdcmicro"))]
    out += [
        f"**MDAV tie rule** (lowest vs sdcMicro's highest row index): partitions differ for "
        f"k in {differ or 'none'} of {list(args.ks)}; duplicate QI rows: "
        f"{int(frame.duplicated(args.qi).sum())}.",
        "",
    ]
    return "\n".join(out), problems


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings to a dict (ints and floats converted)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--option expects KEY=VALUE, got {pair!r}")
        for convert in (int, float):
            try:
                options[key] = convert(value)
                break
            except ValueError:
                continue
        else:
            options[key] = value
    return options


def load_frame(args: argparse.Namespace) -> pd.DataFrame:
    """The input table: ``--csv`` or the seeded synthetic discharge table."""
    if args.discharge:
        from tclose.app.demo import QI_COLUMNS, discharge_table

        frame = discharge_table(args.discharge, seed=args.seed)
        args.qi = args.qi or list(QI_COLUMNS)
        args.confidential = args.confidential or ["charge"]
    else:
        frame = pd.read_csv(args.csv)
    missing = [c for c in [*args.qi, *args.confidential] if c not in frame.columns]
    if missing:
        raise SystemExit(f"Columns {missing} are not in the table; it has {list(frame.columns)}.")
    if args.rank_confidential:
        for column in args.confidential:
            # Distinct ranks, ties broken by row order: EMD then runs over n distinct values.
            frame[column] = frame[column].rank(method="first").astype(np.int64)
    return frame


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--csv", type=Path, help="input table (CSV with a header line)")
    source.add_argument(
        "--discharge",
        type=int,
        metavar="ROWS",
        help="use tclose.app.demo.discharge_table(ROWS, seed=--seed) instead",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --discharge (default 0)")
    parser.add_argument("--qi", nargs="+", default=[], help="quasi-identifier columns")
    parser.add_argument(
        "--confidential",
        nargs="+",
        default=[],
        help="confidential column(s); t must hold for each of them",
    )
    parser.add_argument("--name", required=True, help="prefix of the output files")
    parser.add_argument("--title", default="", help="title of the tables and plots")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    parser.add_argument("--ks", nargs="+", type=int, default=list(K_GRID))
    parser.add_argument("--ts", nargs="+", type=float, default=list(T_GRID))
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="algorithm option passed to every algorithm (repeatable)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs per cell at the smallest k, for the time plot (median)",
    )
    parser.add_argument(
        "--repeat-below",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="repeat a cell only if its first run took less (default 30)",
    )
    parser.add_argument(
        "--rank-confidential",
        action="store_true",
        help="replace each confidential column by its distinct ranks (ties "
        "broken by row order): a what-if for attributes with ties",
    )
    parser.add_argument(
        "--compare-paper",
        action="store_true",
        help="write <name>_vs_paper.md against the paper's Census tables",
    )
    parser.add_argument(
        "--partner-study",
        action="store_true",
        help="instead of the grid: merge with partner nearest vs min-emd",
    )
    parser.add_argument(
        "--candidates",
        nargs="+",
        type=int,
        default=[5, 10],
        help="candidate counts of partner min-emd in --partner-study",
    )
    parser.add_argument(
        "--experiments",
        action="store_true",
        help="instead of the grid: what-ifs against the paper (Census only)",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redo tables and plots from an existing <name>_cells.csv, no runs",
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG files")
    return parser


def run_grid(
    frame: pd.DataFrame,
    args: argparse.Namespace,
    options: Mapping[str, Any],
    variants: Sequence[tuple[str, str, dict[str, Any]]],
    kind: str = "cells",
) -> list[Cell]:
    """Every (variant, k, t) cell; progress on stderr, cells written to ``<name>_<kind>.csv``.

    ``variants`` lists ``(label, algorithm, extra options)``; ``label`` goes in ``Cell.algorithm``.
    """
    cells: list[Cell] = []
    smallest = min(args.ks)
    path = args.out / f"{args.name}_{kind}.csv"
    for label, algorithm, extra in variants:
        total = 0.0
        for k in args.ks:
            for t in args.ts:
                repeats = args.repeats if k == smallest else 1
                cell = run_cell(
                    frame,
                    args.name,
                    args.qi,
                    args.confidential,
                    algorithm,
                    k,
                    t,
                    {**options, **extra},
                    repeats,
                    args.repeat_below,
                )
                cell.algorithm = label
                cells.append(cell)
                total += 0 if math.isnan(cell.seconds) else cell.seconds * max(cell.runs, 1)
                status = "ok" if cell.ok else "FAILED: " + "; ".join(cell.problems)
                print(
                    f"[{args.name}] {label:>14} k={k:<3} t={t:<5g} {cell.table_entry:>11} "
                    f"sse={cell.sse:.5f} t_ach={cell.t_achieved:.4f} {cell.seconds:7.2f}s "
                    f"{status}",
                    file=sys.stderr,
                    flush=True,
                )
                write_cells(path, cells)
        print(f"[{args.name}] {label}: {total:.1f}s in all", file=sys.stderr, flush=True)
    return cells


def partner_study(
    frame: pd.DataFrame, args: argparse.Namespace, options: Mapping[str, Any]
) -> list[Cell]:
    """Merge with the paper's partner rule and with ``min-emd``; writes ``<name>_partner.*``."""
    variants = [("nearest", "merge", {"partner": "nearest"})]
    variants += [
        (f"min-emd/{c}", "merge", {"partner": "min-emd", "candidates": c}) for c in args.candidates
    ]
    cells = run_grid(frame, args, options, variants, kind="partner_cells")
    rows = []
    for k in args.ks:
        for t in args.ts:
            row: dict[str, Any] = {"k": k, "t": t}
            for label, _, _ in variants:
                cell = next(c for c in cells if c.algorithm == label and c.k == k and c.t == t)
                row[f"{label} min/avg"] = (
                    cell.table_entry if cell.ok else f"FAILED {cell.table_entry}"
                )
                row[f"{label} sse"] = f"{cell.sse:.4f}"
            rows.append(row)
    table = pd.DataFrame(rows).set_index(["k", "t"])
    table.to_csv(args.out / f"{args.name}_partner.csv")
    flat = table.copy()
    flat.index = pd.Index([f"k={k}, t={t:g}" for k, t in table.index], name="cell")
    text = f"### {args.title or args.name}: merge partner rule\n\n" + markdown(flat) + "\n"
    if args.compare_paper:
        rows = [AGREEMENT_HEADER]
        for label, _, _ in variants:
            entries = {
                (c.k, c.t): (c.min_size, c.mean_size)
                for c in cells
                if c.algorithm == label and c.clusters
            }
            rows += [agreement(entries, "merge", column, label) for column in ("MCD", "HCD")]
        text += "\nAgreement with the paper's Table 1:\n\n" + "\n".join(rows) + "\n"
    (args.out / f"{args.name}_partner.md").write_text(text)
    return cells


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid, write the outputs; 1 if any cell failed a check, else 0."""
    args = build_parser().parse_args(argv)
    frame = load_frame(args)
    if not args.qi or not args.confidential:
        raise SystemExit("--qi and --confidential are required with --csv")
    options = parse_options(args.option)
    args.out.mkdir(parents=True, exist_ok=True)
    title = (
        args.title
        or f"{args.name} (n = {len(frame)}, QIs {', '.join(args.qi)}; "
        f"confidential {', '.join(args.confidential)})"
    )
    started = time.perf_counter()
    algorithms = ["merge"] if args.partner_study else args.algorithms
    if not args.replot and not args.experiments:
        warm_up(frame, args.qi, args.confidential, algorithms, options)

    if args.experiments:
        text, problems = experiments(frame, args)
        (args.out / f"{args.name}_experiments.md").write_text(text)
        if problems:
            print("!!! EXPERIMENT OUTPUTS FAILED A CHECK:\n" + "\n".join(problems), file=sys.stderr)
            return 1
        return 0
    if args.partner_study:
        cells = partner_study(frame, args, options)
    else:
        if args.replot:
            cells = read_cells(args.out / f"{args.name}_cells.csv")
            algorithms = [a for a in algorithms if any(c.algorithm == a for c in cells)]
        else:
            cells = run_grid(frame, args, options, [(a, a, {}) for a in algorithms])
        write_tables(args.out, args.name, title, cells, algorithms, args.ks, args.ts)
        sse = smallest_k_series(cells, algorithms, "sse")
        seconds = smallest_k_series(cells, algorithms, "seconds")
        sse.to_csv(args.out / f"{args.name}_sse.csv")
        seconds.to_csv(args.out / f"{args.name}_time.csv")
        if not args.no_plots and not sse.empty:
            k = sse.attrs["k"]
            plot_series(
                sse,
                args.out / f"{args.name}_sse.png",
                f"{args.title or args.name}\nnormalized SSE, k = {k}",
                "SSE",
                log=False,
            )
            runs = f"median of {args.repeats} runs where a run took < {args.repeat_below:g} s"
            plot_series(
                seconds,
                args.out / f"{args.name}_time.png",
                f"{args.title or args.name}\nrun time, k = {k} "
                f"({runs if args.repeats > 1 else 'one run'})",
                "seconds (log scale)",
                log=True,
            )
        if args.compare_paper:
            (args.out / f"{args.name}_vs_paper.md").write_text(
                f"### {title}: ours vs the paper\n\n"
                + compare_with_paper(cells, algorithms, args.ks, args.ts, len(frame), args.name)
            )

    failed = [c for c in cells if not c.ok]
    elapsed = time.perf_counter() - started
    print(
        f"[{args.name}] {len(cells)} cells in {elapsed:.1f}s; outputs in {args.out}",
        file=sys.stderr,
    )
    if failed:
        print("\n" + "!" * 78, file=sys.stderr)
        print(f"!!! {len(failed)} CELL(S) FAILED A PRIVACY OR VERIFICATION CHECK:", file=sys.stderr)
        for cell in failed:
            print(
                f"!!!   {cell.algorithm} k={cell.k} t={cell.t:g}: {'; '.join(cell.problems)}",
                file=sys.stderr,
            )
        print("!" * 78, file=sys.stderr)
        return 1
    print(
        f"[{args.name}] all {len(cells)} cells verified: every cluster >= k, every EMD <= t"
        f"{' (as recorded in the CSV)' if args.replot else ''}.",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
