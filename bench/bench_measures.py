"""Benchmark of the disclosure-risk and utility measures.

Usage::

    python bench/bench_measures.py                       # 100k, 300k, 1M rows (a few minutes)
    python bench/bench_measures.py --sizes 100000 300000 --repeats 3
    python bench/bench_measures.py --data uniform --sizes 1000000 --repeats 3 --previous 954202d

Data: 8 correlated Gaussian numeric quasi-identifiers and a confidential attribute correlated with
the first (all values distinct), seeded, as in ``bench_blocks.py``. The published table is the
one t-first (k = 10, t = 0.25, default options: ``blocks: auto``, local executor) makes of it.
For each size it prints the median wall-clock time of ``--repeats`` runs of:

- ``anonymize``: t-first's partition (what the run's ``kernel`` phase costs);
- ``all measures``: :func:`tclose.measures.measure_configured`, everything the report's ``risk``
  and extra ``utility`` hold (the run's ``measures`` phase), from the encoded source and the
  published values;
- ``record linkage``: :func:`tclose.measures.record_linkage` alone, and its time divided by
  ``n log2 n`` (constant if it scales as ``n log n``).

``--data uniform`` takes the quasi-identifiers of the 1M-row round trip instead
(``bench/bench_database.py``: 8 uniformly spread numeric QIs, four of them integers, and a
``charge``). ``--previous REV`` also times the measures of the tree at git revision ``REV``
(its ``framework/measures/__init__.py`` and ``_linkage.py``, loaded beside the current ones),
alternating the two in each repeat, and prints both medians, the ratio and whether the
record-linkage shares agree row for row. ``--repeats`` then applies at 1M rows too. ``REV`` has
the layered layout (``framework/measures/``): a tree whose ``measures.py`` imports the modules of
a flat ``framework/`` by relative names cannot be loaded beside the current one.

Budgets: all measures at 1M rows ≤ 30 s, and no more than the anonymization at 100k rows. The
load average is printed first: on a shared machine the figures are only comparable between
runs made at the same load.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.attributes import encode_table
from tclose.base.config import _attributes, _Checker
from tclose.base.options import validate_options
from tclose.blocks.framed import options_schema, run_algorithm
from tclose.interfaces import Problem
from tclose.kernels.emd import OrderedEMD
from tclose.measures import measure_configured, record_linkage
from tclose.plugins.t_first import TFirst

K, T, D = 10, 0.25, 8


def synthetic_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """``D`` correlated Gaussian QIs ``q0..q7`` and a distinct confidential ``c``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D)) @ rng.normal(size=(D, D))
    frame = pd.DataFrame(x, columns=[f"q{j}" for j in range(D)])
    frame["c"] = 0.5 * x[:, 0] / x[:, 0].std() + rng.normal(size=n)
    return frame


def uniform_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """The columns of the round-trip table (``bench/bench_database.py``) as ``q0..q7`` and ``c``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "q0": 18 + np.floor(rng.random(n) * 73),
            "q1": 10000 + np.floor(rng.random(n) * 90000),
            "q2": np.floor(rng.random(n) * 30),
            "q3": np.floor(rng.random(n) * 5),
            "q4": rng.random(n) * 100,
            "q5": rng.random(n) * 1000,
            "q6": 50 + rng.random(n) * 100,
            "q7": rng.random(n),
        }
    )
    frame["c"] = np.round(rng.random(n) * 100000, 2)
    return frame


def specs() -> dict:
    document = {f"q{j}": {"role": "quasi_identifier", "type": "numeric"} for j in range(D)}
    document["c"] = {"role": "confidential", "type": "numeric", "distance": "emd-ordered"}
    return _attributes(_Checker({}), document)


def previous_measures(revision: str) -> Any:
    """``tclose.measures`` as of git ``revision``, as the module ``tclose._previous_measures``
    (its ``_linkage.py`` as ``tclose._previous_linkage``, uncached), beside the current one."""
    root = Path(__file__).resolve().parent.parent
    folder = Path(tempfile.mkdtemp(prefix="tclose_previous_"))
    files = {"_linkage.py": "_previous_linkage", "__init__.py": "_previous_measures"}
    for name, alias in files.items():
        source = subprocess.run(
            ["git", "-C", str(root), "show", f"{revision}:framework/measures/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        source = source.replace(
            "from tclose.measures._linkage import", "from tclose._previous_linkage import"
        )
        source = source.replace("cache=True", "cache=False")
        path = folder / f"{alias}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"tclose.{alias}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["tclose._previous_measures"]


def anonymize(encoded) -> np.ndarray:
    distance = OrderedEMD.fit(encoded.confidential["c"])
    distance.column = "c"
    plugin = TFirst()
    options = validate_options(plugin.name, options_schema(plugin), {}, "options")
    labels = run_algorithm(plugin, Problem(encoded.x, [distance], K, T, options)).labels
    return np.unique(np.asarray(labels), return_inverse=True)[1].reshape(-1)


def timed(run: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return times, result


def line(name: str, times: list[float], extra: str = "") -> None:
    runs = ", ".join(f"{t:.2f}" for t in times)
    print(f"{name:<36} median {statistics.median(times):8.2f} s  [{runs}] {extra}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (1 at 1M rows)")
    parser.add_argument("--data", choices=("gaussian", "uniform"), default="gaussian")
    parser.add_argument("--previous", metavar="REV", help="also time the measures of git REV")
    args = parser.parse_args()
    print(f"load average: {', '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    make = synthetic_frame if args.data == "gaussian" else uniform_frame
    attributes = specs()
    warm = encode_table(make(3000, seed=9), list(attributes.values()))
    measure_configured(warm, warm.aggregate(anonymize(warm)), attributes)
    previous = previous_measures(args.previous) if args.previous else None
    if previous is not None:
        previous.measure_configured(warm, warm.aggregate(anonymize(warm)), attributes)
    for n in args.sizes:
        repeats = 1 if n >= 1_000_000 and previous is None else args.repeats
        encoded = encode_table(make(n), list(attributes.values()))
        once = 1 if previous is not None else repeats  # the partition is not compared
        times, labels = timed(lambda encoded=encoded: anonymize(encoded), once)
        line(f"{n:>9,} anonymize (t-first)", times, f"{labels.max() + 1:,} clusters")
        published = encoded.aggregate(labels)
        if previous is not None:
            compare(previous, encoded, published, labels, attributes, repeats, n)
            continue
        times, figures = timed(
            lambda e=encoded, p=published, c=labels: measure_configured(e, p, attributes, labels=c),
            repeats,
        )
        risk = figures["risk"]
        line(
            f"{n:>9,} all measures",
            times,
            f"linkage {risk['record_linkage']:.4f}, interval {risk['interval_disclosure']:.4f}, "
            f"IL1s {figures['utility']['il1s']:.4f}",
        )
        embedded = np.column_stack(
            [(published[q.name] - q.values.mean()) / q.std for q in encoded.quasi_identifiers]
        )
        times, _ = timed(lambda e=encoded, z=embedded, c=labels: record_linkage(e.x, z, c), repeats)
        per = statistics.median(times) / (n * math.log2(n)) * 1e9
        line(f"{n:>9,} record linkage", times, f"{per:.1f} ns per n log2 n")


def compare(previous, encoded, published, labels, attributes, repeats: int, n: int) -> None:
    """The measures of ``previous`` and of the current tree, alternated; both medians (wall and
    CPU time), the ratios, and whether the figures and the record-linkage shares are
    identical."""
    runs: dict[str, list[float]] = {"previous": [], "current": []}
    cpu: dict[str, list[float]] = {"previous": [], "current": []}
    figures: dict[str, Any] = {}
    for _ in range(repeats):
        for name, module in (("previous", previous), ("current", None)):
            measure = module.measure_configured if module is not None else measure_configured
            start, used = time.perf_counter(), time.process_time()
            figures[name] = measure(encoded, published, attributes, labels=labels)
            runs[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - used)
    for name, times in runs.items():
        spent = ", ".join(f"{t:.2f}" for t in cpu[name])
        line(f"{n:>9,} all measures, {name}", times, f"CPU [{spent}]")
    ratio = statistics.median(runs["previous"]) / statistics.median(runs["current"])
    ratio_cpu = statistics.median(cpu["previous"]) / statistics.median(cpu["current"])
    classes = figures["current"]["risk"]["classes"]
    print(
        f"{n:>9,} speed-up {ratio:.2f}x wall, {ratio_cpu:.2f}x CPU; {classes:,} classes; "
        f"figures identical: {figures['previous'] == figures['current']}",
        flush=True,
    )
    embedded = np.column_stack(
        [(published[q.name] - q.values.mean()) / q.std for q in encoded.quasi_identifiers]
    )
    shares = [
        module.linkage_contributions(encoded.x, embedded, labels)
        for module in (previous, sys.modules["tclose.measures"])
    ]
    print(
        f"{n:>9,} record-linkage shares identical row for row: "
        f"{np.array_equal(shares[0], shares[1])}",
        flush=True,
    )


if __name__ == "__main__":
    main()
