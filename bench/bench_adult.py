"""Categorical QIs at scale: tclose t-first against anjana on UCI Adult.

Usage::

    python bench/bench_adult.py --anjana-python /path/to/venv-with-anjana/bin/python
    python bench/bench_adult.py --csv ../shared/data/adult_uci.csv --repeats 5

UCI Adult (32,561 rows), 6 QIs (age numeric, education ordinal, sex, race, marital-status and
native-country nominal: 58 one-hot columns in the distance), confidential ``salary-class``,
k = 5, t = 0.15. anjana (``pip install anjana``, a benchmark dependency only; it pins its own
NumPy and pandas, so give it a venv of its own) generalizes with the hierarchies of
:func:`anjana_hierarchies` and no suppression.

Each side runs in a fresh process (interleaved, ``--repeats`` times); the figures are medians:
CPU seconds of the anonymization call alone (``time.process_time``), CPU of the whole process
(imports included) and its peak RSS (``os.wait4``). tclose's SSE is the normalized SSE of
``utility.sse``; its privacy is checked by the independent verifier (``report.verification``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

QUASI_IDENTIFIERS = ["age", "education", "sex", "race", "marital-status", "native-country"]
SENSITIVE = "salary-class"
K, T = 5, 0.15
#: The reference SSE on this benchmark: 58 one-hot columns summed column by column (commit
#: 6240c36), which the kernel must not exceed. (That encoding rounds the one-hot value as
#: ``eye / sqrt(2) * scale``; on the current encoding the column sum gives the current kernel's
#: labels, SSE 0.0687557: check with ``--column-sum-check``.)
SSE_BEFORE = 0.0687731


def anjana_hierarchies(frame):  # type: ignore[no-untyped-def]
    """Generalization hierarchies for anjana: age in 5/10/20-year bands then ``*``; education in
    school / college / advanced then ``*``; marital-status in married / not married then ``*``;
    sex, race and native-country straight to ``*``."""
    import numpy as np

    ages = np.sort(frame["age"].unique())
    band = {w: [f"[{a // w * w}, {a // w * w + w})" for a in ages] for w in (5, 10, 20)}
    education = sorted(frame["education"].unique())
    advanced = {"Masters", "Doctorate", "Prof-school"}
    college = {"Bachelors", "Some-college", "Assoc-acdm", "Assoc-voc"}
    marital = sorted(frame["marital-status"].unique())

    def flat(column: str) -> dict:
        values = sorted(frame[column].unique())
        return {0: values, 1: ["*"] * len(values)}

    return {
        "age": {0: list(ages), 1: band[5], 2: band[10], 3: band[20], 4: ["*"] * len(ages)},
        "education": {
            0: education,
            1: [
                "advanced" if e in advanced else "college" if e in college else "school"
                for e in education
            ],
            2: ["*"] * len(education),
        },
        "marital-status": {
            0: marital,
            1: ["married" if m.startswith("Married") else "not-married" for m in marital],
            2: ["*"] * len(marital),
        },
        "sex": flat("sex"),
        "race": flat("race"),
        "native-country": flat("native-country"),
    }


def side_anjana(csv: str) -> dict:
    import pandas as pd
    from anjana.anonymity import t_closeness

    frame = pd.read_csv(csv)[[*QUASI_IDENTIFIERS, SENSITIVE]]
    hierarchies = anjana_hierarchies(frame)
    start, wall = time.process_time(), time.perf_counter()
    out = t_closeness(frame, [], QUASI_IDENTIFIERS, SENSITIVE, K, T, 0, hierarchies)
    cpu, wall = time.process_time() - start, time.perf_counter() - wall
    starred = [q for q in QUASI_IDENTIFIERS if len(out) and (out[q] == "*").all()]
    return {"cpu": cpu, "wall": wall, "rows": len(out), "generalized_to_star": starred}


def side_tclose(csv: str, column_sum_check: bool = False) -> dict:
    import pandas as pd
    from adult_example import EDUCATION  # this folder is on sys.path when run as a script

    import tclose
    from tclose.kernels import _compiled

    calls = []
    compiled = _compiled.t_first_compiled
    if column_sum_check:  # keep the kernel's arguments, to rerun them on the column sum after

        def spy(x, stratum, sizes):  # type: ignore[no-untyped-def]
            labels = compiled(x, stratum, sizes)
            calls.append((x, stratum, sizes, labels))
            return labels

        _compiled.t_first_compiled = spy  # t_first imports it from there when it runs

    frame = pd.read_csv(csv)[[*QUASI_IDENTIFIERS, SENSITIVE]]
    specs = {q: "nominal" for q in QUASI_IDENTIFIERS}
    specs["age"] = "numeric"
    specs["education"] = {"type": "ordinal", "categories": EDUCATION}
    start, wall = time.process_time(), time.perf_counter()
    result = tclose.anonymize(
        frame,
        quasi_identifiers=specs,
        confidential={SENSITIVE: "nominal"},
        k=K,
        t=T,
        algorithm="t-first",
    )
    cpu, wall = time.process_time() - start, time.perf_counter() - wall
    report = result.report
    same = [
        bool((_compiled.t_first_column_sum(x, stratum, sizes) == labels).all())
        for x, stratum, sizes, labels in calls
    ]
    return {
        "labels_equal_column_sum": same or None,
        "cpu": cpu,
        "wall": wall,
        "sse": report["utility"]["sse"],
        "k_achieved": report["privacy"]["k_achieved"],
        "t_achieved": report["privacy"]["t_achieved"][SENSITIVE],
        "verified": report.get("verification", {}).get("passed"),
        "kernel": report["timings"]["kernel"],
    }


def run_child(python: str, side: str, csv: str) -> dict:
    """Run one side in a fresh interpreter; add its whole-process CPU and peak RSS (MB),
    from the rusage of exactly this child (fork + exec + wait4)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become the side's interpreter, stdout into the pipe
        os.close(read)
        os.dup2(write, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        # tclose alone, as installed: no third-party plugins that this machine's environment
        # may hold (some import SQLAlchemy: +14 MB), as in bench_startup.py.
        env = {**os.environ, "TCLOSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
        os.execve(python, [python, __file__, "--side", side, "--csv", csv], env)
    os.close(write)
    with os.fdopen(read) as pipe:
        stdout = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    if status != 0:
        raise RuntimeError(f"the {side} side failed (status {status}); run it with --side {side}")
    figures = json.loads(stdout.strip().splitlines()[-1])
    figures["process_cpu"] = usage.ru_utime + usage.ru_stime
    figures["peak_rss_mb"] = usage.ru_maxrss / 1024
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", default="../shared/data/adult_uci.csv")
    parser.add_argument("--anjana-python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--column-sum-check",
        action="store_true",
        help="only run tclose once and compare its labels with the column-sum kernel's",
    )
    parser.add_argument("--side", choices=["tclose", "anjana"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.column_sum_check:
        figures = side_tclose(args.csv, column_sum_check=True)
        print(
            f"SSE {figures['sse']:.7f}; labels identical to the column-sum kernel "
            f"(t_first_column_sum, no look-ups) on the same x: {figures['labels_equal_column_sum']}"
        )
        return
    if args.side:
        run = side_tclose if args.side == "tclose" else side_anjana
        print(json.dumps(run(args.csv)))
        return
    csv = str(Path(args.csv).resolve())
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores; {K=} {T=}; {csv}")
    print("third-party tclose plugin autoload disabled (TCLOSE_DISABLE_PLUGIN_AUTOLOAD=1)")
    runs: dict[str, list[dict]] = {"tclose": [], "anjana": []}
    for _ in range(args.repeats):
        runs["tclose"].append(run_child(sys.executable, "tclose", csv))
        try:
            runs["anjana"].append(run_child(args.anjana_python, "anjana", csv))
        except RuntimeError as error:
            print(f"anjana did not run ({error}); is it installed for {args.anjana_python}?")
            break
    med = {
        side: {
            key: statistics.median(r[key] for r in rs)
            for key in ("cpu", "wall", "process_cpu", "peak_rss_mb")
        }
        for side, rs in runs.items()
        if rs
    }
    last = runs["tclose"][-1]
    print(
        f"tclose t-first: call CPU {med['tclose']['cpu']:.2f} s (kernel {last['kernel']:.2f} s "
        f"wall), process CPU {med['tclose']['process_cpu']:.2f} s, peak RSS "
        f"{med['tclose']['peak_rss_mb']:.0f} MB; SSE {last['sse']:.6f} (one-hot reference: "
        f"{SSE_BEFORE}), k achieved {last['k_achieved']}, t achieved {last['t_achieved']:.4f}, "
        f"verified {last['verified']}"
    )
    if "anjana" in med:
        a = med["anjana"]
        print(
            f"anjana t_closeness: call CPU {a['cpu']:.2f} s, process CPU {a['process_cpu']:.2f} s,"
            f" peak RSS {a['peak_rss_mb']:.0f} MB; QIs generalized to '*': "
            f"{runs['anjana'][-1]['generalized_to_star']}"
        )
        t = med["tclose"]
        print(
            f"ratio tclose / anjana: call CPU {t['cpu'] / a['cpu']:.2f}x, process CPU "
            f"{t['process_cpu'] / a['process_cpu']:.2f}x, peak RSS "
            f"{t['peak_rss_mb'] / a['peak_rss_mb']:.2f}x"
        )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
