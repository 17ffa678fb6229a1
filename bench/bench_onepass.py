#!/usr/bin/env python3
"""The verification's read of a published PostgreSQL table: one pass against two.

``scan_published`` (what the verify phase reads: the QI and confidential columns, the content
digest, the linkage check) in process, on a table published by ``tclose run`` from
``bench/bench_roundtrip.py``'s source (``bench_rt_<rows>``, created if missing and kept), with the
session's ``read_with_digest`` (one binary ``COPY``, hashed and cut by NumPy) and without it
(``read`` of the columns, then ``content_digest``: two passes). Interleaved, in one
session each time; checks that both give the same frame, digest and linking columns, and prints
medians of wall and process CPU time, and of the parts (the columns' read, the digest alone, the
one pass). The published table (``--target``) is dropped at the end unless ``--keep``.

Usage::

    python bench/bench_onepass.py [--rows 1000000] [--repeats 5] [--target NAME] [--keep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_roundtrip import URL, create, drop, run_config  # noqa: E402


def timed(function: Callable[[], object]) -> tuple[object, float, float]:
    """(result, wall s, process CPU s)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", default=None, help="default: bench_onepass_<rows>")
    parser.add_argument("--keep", action="store_true", help="keep the published table")
    args = parser.parse_args()
    source, target = f"bench_rt_{args.rows}", args.target or f"bench_onepass_{args.rows}"
    create(source, args.rows)

    from tclose.base.config import load_config
    from tclose.connectors.postgresql import PostgreSQLSession
    from tclose.naming import TableName

    with tempfile.TemporaryDirectory() as tmp:
        config_path = run_config(Path(tmp), source)
        document = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        document["target"]["table"] = target
        config_path.write_text(yaml.safe_dump(document), encoding="utf-8")
        env = {**os.environ, "TCLOSE_DISABLE_PLUGIN_AUTOLOAD": "1"}
        command = [sys.executable, "-m", "tclose", "run", str(config_path), "-q"]
        try:
            subprocess.run(command, check=True, env=env)
            config = load_config(config_path)
            measure(config, TableName(None, target), args.repeats, PostgreSQLSession)
        finally:
            if not args.keep:
                drop(target)


def measure(config, table, repeats: int, session_class) -> None:
    """Time and compare the two reads (see the module docstring) and print the medians."""
    from tclose.base.registry import load_registry
    from tclose.core.published import scan_published

    database = load_registry().connector_for("postgresql").connect(URL)
    one_pass = session_class.read_with_digest
    wanted = config.quasi_identifiers + config.confidential

    def scan(kind: str):
        session_class.read_with_digest = one_pass if kind == "one pass" else None
        try:
            with database.session(read_only=True) as session:
                return timed(lambda: scan_published(session, table, config))
        finally:
            session_class.read_with_digest = one_pass

    def parts() -> dict[str, tuple[float, float]]:
        with database.session(read_only=True) as session:
            written = session.table(table)
            found = {
                "read (columns)": timed(
                    lambda: list(session.read(table, wanted, "tclose_row", with_key=False))
                ),
                "digest alone": timed(lambda: session.content_digest(written)),
                "one pass": timed(lambda: list(session.read_with_digest(table, wanted, {}))),
            }
        return {name: (wall, cpu) for name, (_, wall, cpu) in found.items()}

    load_before = os.getloadavg()
    (one, _, _), (two, _, _) = scan("one pass"), scan("two passes")
    pd.testing.assert_frame_equal(one.frame, two.frame, check_exact=True)
    assert one.digest == two.digest and one.linking == two.linking
    times: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeats):
        for kind in ("two passes", "one pass"):
            _, wall, cpu = scan(kind)
            times.setdefault(f"scan_published, {kind}", []).append((wall, cpu))
        for name, figures in parts().items():
            times.setdefault(name, []).append(figures)
    load = ", ".join(f"{a:.2f}->{b:.2f}" for a, b in zip(load_before, os.getloadavg()))
    print(f"{len(one.frame)} rows of {table}; same frame, digest and linking; load {load}")
    print(f"medians of {repeats}, interleaved:")
    for name, values in times.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        runs = ", ".join(f"{w:.2f}" for w, _ in values)
        print(f"  {name:<28} wall {wall:5.2f} s  CPU {cpu:5.2f} s  (walls: {runs})")


if __name__ == "__main__":
    main()
