"""The ``tclose`` command.

Exit codes: 0 published and verified (or, for ``verify``, all checks passed); 1 verification
failed, nothing published; 2 bad configuration or usage; 3 source, connection or data error.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from importlib import resources
from pathlib import Path

from . import __version__
import yaml

from .config import load_config, parse_config
from .errors import TcloseError
from .registry import KINDS, load_registry

log = logging.getLogger("tclose")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tclose",
        description="k-anonymity and t-closeness through microaggregation, in SQL databases.",
    )
    parser.add_argument("--version", action="version", version=f"tclose {__version__}")
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    noise.add_argument("-v", "--verbose", action="store_true", help="log every phase")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="anonymize, verify and publish a table")
    run.add_argument("config", help="YAML configuration file")
    run.add_argument("--report", metavar="PATH", help="write the audit JSON here")
    run.add_argument("--dry-run", action="store_true",
                     help="do everything, including verification, but publish nothing")

    verify = commands.add_parser("verify", help="re-check a published target table")
    verify.add_argument("config", help="YAML configuration file of the run")

    commands.add_parser("plugins", help="list algorithms, distances and connectors")

    demo = commands.add_parser("demo", help="anonymize a synthetic table in an embedded SQLite")
    demo.add_argument("--rows", type=int, default=20_000, help="rows of the demo table")
    demo.add_argument("--dir", default="tclose-demo", help="folder for the database and report")
    return parser


def _summary(report: dict, seconds: float) -> str:
    privacy = report["privacy"]
    t_achieved = ", ".join(f"{c} {v:.4f}" for c, v in privacy["t_achieved"].items()) or "-"
    clusters = report["clusters"]
    lines = [
        f"rows:      {report['source']['rows']} read, {report['target']['rows']} written",
        f"clusters:  {clusters['count']} (sizes {clusters['min']}..{clusters['max']}, "
        f"mean {clusters['mean']:.2f})",
        f"k:         requested {privacy['k']}, achieved {privacy['k_achieved']}",
        f"t:         requested {privacy['t']}, achieved (largest EMD) {t_achieved}",
        f"SSE:       {report['utility']['sse']:.4f} (normalized)",
        f"verified:  {'yes' if report['verification']['passed'] else 'NO'}",
        f"time:      {seconds:.2f} s",
    ]
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from .runner import run

    config = load_config(args.config)
    started = time.perf_counter()
    result = run(config, dry_run=args.dry_run, report_path=args.report,
                 progress=None if args.quiet else lambda line: log.info(line))
    if not args.quiet:
        where = f"{config.target.table}" if result.published else "nothing (dry run)"
        print(_summary(result.report, time.perf_counter() - started))
        print(f"published: {where}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from .runner import verify_published

    config = load_config(args.config)
    verification = verify_published(config)
    for check in verification.checks:
        mark = "PASS" if check["passed"] else "FAIL"
        print(f"{mark}  {check['name']}: expected {check['expected']}, got {check['actual']}")
    print("verdict: " + ("verified" if verification.passed else "NOT verified"))
    return 0 if verification.passed else 1


def _plugins(_args: argparse.Namespace) -> int:
    registry = load_registry()
    for kind in KINDS:
        print(f"{kind}s:")
        for name, provided in sorted(registry.table(kind).items()):
            print(f"  {name:<16} {provided.provider} {provided.version}  ({provided.plugin})")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import create_demo_database
    from .runner import run

    folder = Path(args.dir)
    database = folder / "demo.db"
    started = time.perf_counter()
    create_demo_database(database, n_rows=args.rows)
    text = resources.files("tclose.configs").joinpath("quickstart.yaml").read_text("utf-8")
    document = yaml.safe_load(text)
    document["source"]["url"] = f"sqlite:///{database.as_posix()}"
    document["report"]["json"] = (folder / "report.json").as_posix()
    print(f"created {database} with {args.rows} synthetic patient discharges")
    config = parse_config(document)
    result = run(config)
    print(_summary(result.report, time.perf_counter() - started))
    print(f"published: table {config.target.table} in {database}; "
          f"report: {config.report_json}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tclose`` console script; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 2 if exit_.code not in (0, None) else 0
    level = logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(message)s", stream=sys.stderr)
    handlers = {"run": _run, "verify": _verify, "plugins": _plugins, "demo": _demo}
    try:
        return handlers[args.command](args)
    except TcloseError as error:
        from .config import redact_url

        print(f"error: {redact_url(str(error))}", file=sys.stderr)
        return error.exit_code
