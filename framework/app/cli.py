"""The ``tclose`` command.

Exit codes: 0 published and verified (or, for ``verify``, all checks passed); 1 verification
failed, nothing published; 2 bad configuration or usage; 3 source, connection or data error;
4 internal error (a bug: one line, the traceback with ``-v``); 130 interrupted (SIGINT or SIGTERM;
the message says whether the target was published). A closed stdout (``| head``) is not an error.

Output: results on stdout; progress, warnings and errors on stderr. On a terminal the phases show
as a live line; elsewhere as plain lines. ``--quiet`` prints errors only, ``--verbose`` adds the
log of every phase. Neither ever prints a data value of a row or a password. An option that takes
a value may be given once, and not empty (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import logging
import os
import re
import sys
import time
import traceback
from importlib import resources
from pathlib import Path
from typing import IO, Any

import yaml

from tclose.app.compare import add_parser as add_compare_parser
from tclose.app.progress import ConsoleHandler, Progress, terminal_text
from tclose.base.atomic import read_text
from tclose.base.config import Config, load_config, parse_config, redact_url
from tclose.base.interrupts import terminate_as_interrupt
from tclose.base.registry import KINDS, load_registry
from tclose.base.version import __version__
from tclose.connector import ConnectorNotes
from tclose.errors import ConfigError, PluginFailure, RunInterrupted, TcloseError

log = logging.getLogger("tclose")


class _Once(argparse._StoreAction):
    """``store``, except that an option given twice is a usage error: argparse would keep the
    last value, so ``tclose compare --k 3 --k 5`` would compare k = 5 only, and ``tclose run
    --report a.json --report b.json`` write b.json only, without a word. An empty value is one
    too: ``--report ""`` (a script's unset variable) would run as if the option were not
    given."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if option_string is not None and values == "":
            # "--report $UNSET" read as no option: the config's path, or no file, silently
            raise argparse.ArgumentError(self, "is empty; give a value or leave the option out")
        given = namespace.__dict__.setdefault("_options_given", set())
        if self.dest in given and option_string is not None:
            several = (
                f" (several values go in one, comma-separated: {option_string} {self.metavar})"
                if "," in str(self.metavar)
                else ""
            )
            raise argparse.ArgumentError(self, f"given twice; give it once{several}")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """The parser of a command: its options that take a value may be given once (:class:`_Once`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The ``tclose`` argument parser: global options, then one sub-parser per command. Built
    once per process: parsing keeps no state in the parser (:class:`_Once` keeps its own in
    the namespace)."""
    noise = _Parser(add_help=False)
    quiet_or_verbose = noise.add_mutually_exclusive_group()
    quiet_or_verbose.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="print errors only"
    )
    quiet_or_verbose.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log every phase"
    )
    parser = argparse.ArgumentParser(
        prog="tclose",
        description="k-anonymity and t-closeness through microaggregation, in SQL databases.",
        epilog="Exit codes: 0 ok; 1 verification failed (nothing published); 2 bad "
        "configuration or usage; 3 source, connection or data error; 4 internal error; "
        "130 interrupted.",
        parents=[noise],
    )
    parser.add_argument("--version", action="version", version=f"tclose {__version__}")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    run = commands.add_parser("run", parents=[noise], help="anonymize, verify and publish a table")
    run.add_argument("config", help="YAML configuration file")
    run.add_argument("--report", metavar="PATH", help="write the audit JSON here")
    run.add_argument("--html", metavar="PATH", help="write the HTML audit report here")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="do everything, including verification, but publish nothing",
    )

    _add_verify_and_init(commands, noise)

    report = commands.add_parser(
        "report", parents=[noise], help="render an audit JSON as the HTML report"
    )
    report.add_argument("json", help="audit report JSON written by a run")
    report.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="HTML file to write (default: the JSON's name with .html)",
    )

    commands.add_parser(
        "plugins", parents=[noise], help="list algorithms, distances and connectors"
    )
    schema = commands.add_parser(
        "schema", parents=[noise], help="print the JSON Schema of the report or the configuration"
    )
    schema.add_argument("document", choices=SCHEMAS, help="which document's schema")

    demo = commands.add_parser(
        "demo", parents=[noise], help="anonymize a synthetic table in an embedded SQLite"
    )
    demo.add_argument("--rows", type=int, default=20_000, help="rows of the demo table")
    demo.add_argument("--dir", default="tclose-demo", help="folder for the database and report")
    add_compare_parser(commands, [noise])
    return parser


def _add_verify_and_init(commands: Any, noise: argparse.ArgumentParser) -> None:
    """The ``verify`` and ``init`` commands and their arguments."""
    verify = commands.add_parser(
        "verify",
        parents=[noise],
        help="re-check a published target table from its rows",
        description="Recompute k and t of the published target table from its rows and compare "
        "them with the configuration. Only the target table is read unless --source is given.",
    )
    verify.add_argument("config", help="YAML configuration file of the run")
    verify.add_argument(
        "--source",
        action="store_true",
        help="also compare the row count and the confidential values with the "
        "source table (needs access to it)",
    )
    verify.add_argument(
        "--report",
        metavar="JSON",
        help="the run's audit report: also check its configuration digest and "
        "its row count against the table",
    )

    init = commands.add_parser(
        "init",
        parents=[noise],
        help="write a YAML skeleton for a table",
        description="Inspect a table's definition (no rows are read) and write a commented "
        "YAML configuration with every column; then choose the roles.",
    )
    init.add_argument("url", help="SQLAlchemy database URL, e.g. sqlite:///demo.db")
    init.add_argument("table", help="table name, optionally schema.table")
    init.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    init.add_argument("--password-file", metavar="FILE", help="file holding the password")
    init.add_argument("--force", action="store_true", help="overwrite an existing FILE")


# --- commands ---------------------------------------------------------------------------------


#: What the equivalence classes are, beside the clusters (the run's summary, ``tclose verify``).
CLASSES_EXPLAINED = (
    "the published rows grouped by equal quasi-identifier values, rebuilt by the verifier; "
    "k and t are checked on the classes; clusters whose published quasi-identifier values "
    "coincide form one class"
)


def _wrapped(text: str, indent: int) -> str:
    """``text`` wrapped at 100 columns, its continuation lines indented by ``indent``."""
    import textwrap

    return "\n".join(textwrap.wrap(text, 100, subsequent_indent=" " * indent))


def _figure(value: float | None, spec: str) -> str:
    """``value`` formatted, or ``-`` for a figure the report holds as null (not finite)."""
    return "-" if value is None else format(value, spec)


def _summary(report: dict, seconds: float) -> str:
    privacy = report["privacy"]
    t_achieved = (
        ", ".join(f"{c} {_figure(v, '.4f')}" for c, v in privacy["t_achieved"].items()) or "-"
    )
    clusters = report["clusters"]
    suppressed = report["source"].get("rows_suppressed") or 0
    left_out = f", {suppressed} suppressed as outliers" if suppressed else ""
    full = report["utility"].get("sse_full_table")
    lines = [
        f"rows:      {report['source']['rows']} read, {report['target']['rows']} written{left_out}",
        f"clusters:  {clusters['count']} (sizes {clusters['min']}..{clusters['max']}, "
        f"mean {_figure(clusters['mean'], '.2f')}): the algorithm's groups of rows",
    ]
    classes = next(
        (c.get("classes") for c in report["verification"]["checks"] if c["name"] == "k_anonymity"),
        None,
    )
    if classes is not None:
        lines.append(_wrapped(f"classes:   {classes} equivalence classes: {CLASSES_EXPLAINED}", 11))
    lines += [
        f"k:         requested {privacy['k']}, achieved {privacy['k_achieved']}",
        f"t:         requested {privacy['t']}, achieved (largest EMD) {t_achieved}",
        f"SSE:       {_figure(report['utility']['sse'], '.4f')} (normalized information loss, "
        f"utility.sse)"
        + (f"; full table {_figure(full, '.4f')} (utility.sse_full_table)" if suppressed else ""),
        f"verified:  {'yes' if report['verification']['passed'] else 'NO'}",
        f"time:      {seconds:.2f} s",
    ]
    if report.get("risk"):
        from tclose.measures import risk_summary  # pandas: not on the path of `tclose plugins`

        lines.insert(-2, risk_summary(report["risk"]))
    compiling = report.get("timings", {}).get("compile") or 0.0
    if compiling:
        lines.append(
            f"compiling: {compiling:.2f} s of it, Numba kernels compiled for this machine "
            "(once: later runs load them from the cache)"
        )
    return "\n".join(lines)


def _outcome(report: dict, config: Config, published: bool) -> str:
    target = report["target"]
    columns = target.get("columns") or []
    what = (
        f"table {config.target.table}: {target['rows']} rows, {len(columns)} columns "
        f"({', '.join(columns)})"
    )
    if published:
        return f"published: {what}"
    return f"dry run, nothing published; would write {what}"


def _run(args: argparse.Namespace, progress: Progress | None) -> int:
    from tclose.core.runner import run

    config = load_config(args.config)
    if args.html:
        config = dataclasses.replace(config, report_html=args.html)
    _check_writable(args.report or config.report_json, "report.json")
    _check_writable(config.report_html, "report.html")
    started = time.perf_counter()
    result = run(config, dry_run=args.dry_run, report_path=args.report, progress=progress)
    if progress is not None:
        progress.close()
    if not args.quiet:
        _echo(_summary(result.report, time.perf_counter() - started))
        for warning in result.report.get("warnings", []):
            _echo(f"warning:   {warning}")
        _echo(_outcome(result.report, config, result.published))
        for label, path in (
            ("report", args.report or config.report_json),
            ("HTML report", config.report_html),
        ):
            if path:
                _echo(f"{label}: {path}")
    return 0


def _verify(args: argparse.Namespace, progress: Progress | None) -> int:
    from tclose.core.runner import verify_with_report

    config = load_config(args.config)
    report = _read_report(args.report) if args.report else None
    table = config.target.table
    verification = verify_with_report(
        config,
        load_registry(),
        report=report,
        against_source=args.source,
        progress=progress,
        reading_again=lambda: _echo(
            f"note  {table} was published again while it was read: reading again"
        ),
    )
    if progress is not None:
        progress.close()
    sizes = verification.class_sizes
    _echo(f"table {table}: {sum(sizes)} rows, {len(sizes)} classes")
    _echo(_wrapped(f"      classes: {CLASSES_EXPLAINED}", 6))
    _print_checks(verification, config)
    for note in _verify_notes(verification, report, args.source):
        _echo(f"note  {note}")
    if verification.run_id is not None:
        _echo(f"run   published by tclose run {verification.run_id} (the table's run mark)")
        _rebuild_audit_record(config, verification, report)
    _echo("verdict: " + ("verified" if verification.passed else "NOT verified"))
    return 0 if verification.passed else 1


def _print_checks(verification: Any, config: Config) -> None:
    """One line per check (``PASS``/``FAIL``, with the problem of a failed one), then the t of
    each confidential column measured but not enforced, then the measures against the
    source."""
    from tclose.measures import measure_lines

    for check in verification.results:
        mark = "PASS" if check.passed else "FAIL"
        actual = f"{check.actual:.6g}" if isinstance(check.actual, float) else check.actual
        _echo(f"{mark}  {check.name}: expected {_expected(check)}, got {actual}")
        if not check.passed and check.problem:
            _echo(f"      {check.problem}")
    enforced = {check.name for check in verification.results}
    for column, t in verification.t_achieved.items():
        if f"t_closeness:{column}" not in enforced:
            _echo(f"info  t of {column} (measured, not enforced by {config.algorithm}): {t:.4f}")
    for text in measure_lines(verification.measures):
        _echo(text)


def _verify_notes(verification: Any, report: dict | None, with_source: bool) -> list[str]:
    """The notes of ``tclose verify``: what it cannot detect, a report whose run the table does
    not name."""
    notes = undetectable_changes(report is not None, with_source)
    recorded_run = ((report or {}).get("run") or {}).get("id")
    if report is not None and recorded_run and verification.run_id is None:
        notes.append(
            f"the report names run {recorded_run}, but the table carries no run mark (its "
            f"comment was removed, or its database keeps none): the run id was not compared."
        )
    return notes


def _rebuild_audit_record(config: Any, verification: Any, report: dict | None) -> None:
    """Have the plugins that record runs (hook ``rebuild_run_record``, e.g. ``report.table``)
    add the record of the table's run if they lack it (a run killed between its publish and
    its report); a failure to write it is a warning, never the verdict."""
    if not config.report_table:
        return
    import sqlalchemy as sa

    from tclose.base.registry import dialect_of
    from tclose.core.plan import resolve_name

    run_id = verification.run_id
    try:
        target = config.target
        registry = load_registry()
        database = registry.connector_for(dialect_of(target.url))
        audit = resolve_name(
            database.connect(target.url, target.password_file), config.report_table, "report.table"
        )
        config = dataclasses.replace(config, report_table=audit.qualified)  # as the run did
        assert registry.manager is not None  # load_registry makes one
        rebuilt = registry.manager.hook.rebuild_run_record(
            config=config, run_id=run_id, verification=verification, report=report
        )
    except (TcloseError, sa.exc.SQLAlchemyError) as error:
        first = redact_url(str(error)).splitlines()[0] if str(error) else ""
        _echo(
            f"warning: could not rebuild the audit record of run {run_id} in "
            f"{config.report_table}: {type(error).__name__}: {first}",
            file=sys.stderr,
        )
        return
    if any(rebuilt):
        _echo(
            f"audit rebuilt the audit record of run {run_id} in {config.report_table} "
            "(its row was missing: the run ended between its publish and its report, or is "
            "writing its record now, which then replaces this one)"
        )


def undetectable_changes(with_report: bool, with_source: bool) -> list[str]:
    """What ``tclose verify`` cannot detect without ``--report`` (and ``--source``), plainly."""
    notes = []
    if not with_source:
        notes.append(
            "the source was not read: row count and confidential values were not compared "
            "with it (use --source)."
        )
    if not with_report and not with_source:
        notes.append(
            "without --report or --source, a changed, added or removed row or value that "
            "keeps k and t within bounds is detected only against the database's own record "
            "of the release (check release, where a registry records it), which whoever may "
            "write the table and its registry can rewrite (use --report REPORT.json to compare "
            "the content digest)."
        )
    if with_source and not with_report:
        notes.append(
            "without --report, a changed quasi-identifier or pass-through value, or a value "
            "moved to another row, that keeps k, t, the row count and each confidential "
            "column's values CANNOT be detected: --source compares only those, no published "
            "row with its source row (use --report REPORT.json to compare the content digest)."
        )
    return notes


def _expected(check: Any) -> str:
    if check.name == "k_anonymity":
        return f">= {check.expected}"
    if check.name.startswith("t_closeness:"):
        return f"<= {check.expected}"
    return str(check.expected)


def _read_report(path: str) -> dict[str, Any]:
    """The audit report at ``path``: a JSON object that fits the report's schema
    (:func:`tclose.core.report_checks.report_problem`: what ``tclose report`` renders and
    ``verify --report`` reads).

    Raises:
        ConfigError: the file cannot be read, is not UTF-8 or not JSON (also: a key twice in
            one object, which parsers read differently; nesting too deep for the parser; a
            number of more than 4300 digits), or does not fit the schema (a report emptied to
            ``null`` by hand must not pass for no report at all, and a field of the wrong type
            must not crash the command or skip a check).
    """
    from tclose.core.report_checks import report_problem

    try:
        text = read_text(path)
    except OSError as error:
        raise ConfigError(f"Cannot read the report {path}: {error.strerror}.") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path} is not an audit report (not UTF-8 text: byte {error.start})."
        ) from None
    try:
        report = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path} is not an audit report (invalid JSON at line {error.lineno})."
        ) from None
    except RecursionError:
        raise ConfigError(f"{path} is not an audit report (JSON nested too deep).") from None
    except ValueError as error:  # a key twice, or an integer past Python's 4300 digits
        reason = error.args[0] if isinstance(error, _DuplicateKey) else "a number too long"
        raise ConfigError(f"{path} is not an audit report ({reason}).") from None
    if _depth(report) > MAX_REPORT_DEPTH:
        raise ConfigError(
            f"{path} is not an audit report (JSON nested more than {MAX_REPORT_DEPTH} deep)."
        )
    problem = report_problem(report)
    if problem:
        raise ConfigError(f"{path} is not an audit report: {problem}.")
    return report


#: The deepest nesting of lists and objects a report read back may have. A report is about 8
#: deep (its configuration's nominal hierarchy adds its height); the audit row ``verify
#: --report`` rebuilds copies the report recursively, and a report 900 deep (which the parser
#: reads) ran out of stack there, after every check had passed: exit 4.
MAX_REPORT_DEPTH = 200


def _depth(value: Any) -> int:
    """The deepest nesting of lists and objects in parsed JSON (without recursion)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            items = node.values() if isinstance(node, dict) else node
            pending.extend((item, depth + 1) for item in items)
    return deepest


class _DuplicateKey(ValueError):
    """A key given twice in one object of a report (:func:`_unique_keys`)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict; a key given twice is an error (``json`` keeps the
    last, other parsers the first: the report would say one thing to one reader and another
    thing to another)."""
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            raise _DuplicateKey(f"the key {key[:80]!r} appears twice in one object")
        seen.add(key)
    return dict(pairs)


def _init(args: argparse.Namespace, _progress: Progress | None) -> int:
    from tclose.app.init_config import (
        PASSWORD_VARIABLE,
        inspect_table,
        refuse_output_on_database,
        skeleton,
    )
    from tclose.base.atomic import write_atomically
    from tclose.core.guards import SQLITE_HEADER, refuse_unwritable

    outline = inspect_table(args.url, args.table, args.password_file)
    columns = outline.columns
    text = skeleton(
        args.url, args.table, columns, implied_key=outline.implied_key, target=outline.target
    )
    variables = sorted(set(re.findall(r"\$\{(TCLOSE_DB_[A-Z0-9_]+)\}", text)))
    if variables:
        _echo(
            f"note: the URL's credentials were replaced by "
            f"{', '.join('${' + v + '}' for v in variables)}; set those environment "
            f"variables (the password: ${{{PASSWORD_VARIABLE}}}), or use source.password_file.",
            file=sys.stderr,
        )
    if not args.output:
        sys.stdout.write(text)
        return 0
    path = Path(args.output)
    refuse_unwritable(args.output, "file", "")  # first: a name too long makes exists() raise
    if path.exists() and not args.force:
        raise ConfigError(f"{path} already exists; choose another file or add --force.")
    if path.is_file():
        with path.open("rb") as existing:
            if existing.read(16) == SQLITE_HEADER:
                raise ConfigError(f"{path} is a SQLite database file; it is never overwritten.")
    refuse_output_on_database(path, args.url, args.password_file)
    try:
        write_atomically(path, text)
    except OSError as error:
        reason = "a file is in the way" if isinstance(error, FileExistsError) else error.strerror
        raise ConfigError(f"Cannot write {path}: {reason}.") from None
    if not args.quiet:
        _echo(
            f"wrote {path} with {len(columns)} columns of {args.table}; set their roles, then "
            f"run: tclose run --dry-run {path}"
        )
    return 0


def _report(args: argparse.Namespace, _progress: Progress | None) -> int:
    from tclose.app.html_report import render_html
    from tclose.base.atomic import write_atomically
    from tclose.core.guards import refuse_foreign_file, refuse_unwritable

    report = _read_report(args.json)
    output = args.output or str(Path(args.json).with_suffix(".html"))
    where = "-o: " if args.output else ""
    refuse_unwritable(output, "page", where)  # first: a name too long makes exists() raise
    refuse_foreign_file(output, "html", where)
    try:
        write_atomically(output, render_html(report))
    except OSError as error:
        raise ConfigError(f"{where}Cannot write the page {output}: {error.strerror}.") from None
    if not args.quiet:
        _echo(f"wrote {output}")
        _echo(f"verdict in the report: {_report_verdict(report['verification'])}")
    return 0


def _report_verdict(verification: dict[str, Any]) -> str:
    """The verdict a report states, with its failed checks (as its page shows it); ``tclose
    verify --report`` checks it against the table."""
    from tclose.core.report_checks import stated_verdict

    verified, failed = stated_verdict(verification)
    if verified:
        return f"verified ({len(verification['checks'])} checks passed)"
    return f"NOT verified (failed: {', '.join(failed) or 'no check ran'})"


def _schema(args: argparse.Namespace, _progress: Progress | None) -> int:
    """``tclose schema report|config``: the JSON Schema generated from the document's model."""
    sys.stdout.write(schema_text(args.document))
    return 0


def schema_text(document: str) -> str:
    """The JSON Schema of ``document`` (one of :data:`SCHEMAS`) as indented JSON, as ``tclose
    schema`` prints it and ``docs/schema/<document>.json`` holds it: generated from the
    configuration's model (:mod:`tclose.base.config_document`, with the keys the installed
    plugins' criteria declare) or the report's (:mod:`tclose.core.report_model`)."""
    from tclose.base.config import criterion_keys
    from tclose.base.config_document import config_schema
    from tclose.core.report_model import report_schema

    if document not in SCHEMAS:
        raise ValueError(f"no schema of {document!r}; there are: {', '.join(SCHEMAS)}")
    schema = config_schema(criterion_keys()) if document == "config" else report_schema()
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


#: The documents whose JSON Schema ``tclose schema`` prints.
SCHEMAS = ("config", "report")


def _plugins(_args: argparse.Namespace, _progress: Progress | None) -> int:
    registry = load_registry()
    for kind in KINDS:
        _echo(f"{kind}s:")
        for name, provided in sorted(registry.table(kind).items()):
            _echo(f"  {name:<16} {provided.provider} {provided.version}  ({provided.plugin})")
            noted = kind == "connector" and isinstance(provided.obj, ConnectorNotes)
            for note in provided.obj.notes() if noted else []:
                _echo(f"  {'':<16} note: {note}")
    if registry.criteria:  # the built-in criteria are the verifier's own, not plugins
        _echo("criteria:")
        for name, provided in registry.criteria.items():
            _echo(f"  {name:<16} {provided.provider} {provided.version}  ({provided.plugin})")
    if registry.broken:
        _echo("broken (not loaded):")
        for broken in registry.broken:
            _echo(
                f"  {broken.entry_point:<16} {broken.distribution} {broken.version}  {broken.error}"
            )
    return 0


def _demo(args: argparse.Namespace, progress: Progress | None) -> int:
    from tclose.app.demo import create_demo_database, refuse_foreign_demo
    from tclose.core.guards import refuse_foreign_file
    from tclose.core.runner import run

    text = resources.files("tclose.configs").joinpath("quickstart.yaml").read_text("utf-8")
    document = yaml.safe_load(text)
    k = document["privacy"]["k"]
    if args.rows < k:  # fewer rows than k make no release: refused before any file is made
        raise ConfigError(f"--rows {args.rows}: the demo needs at least k = {k} rows.")
    folder = Path(args.dir)
    database = folder / "demo.db"
    started = time.perf_counter()
    refuse_foreign_demo(database)
    refuse_foreign_file((folder / "report.json").as_posix(), "json")
    refuse_foreign_file((folder / "report.html").as_posix(), "html")
    create_demo_database(database, n_rows=args.rows)
    document["source"]["url"] = f"sqlite:///{database.as_posix()}"
    document["report"]["json"] = (folder / "report.json").as_posix()
    document["report"]["html"] = (folder / "report.html").as_posix()
    _echo(f"created {database} with {args.rows} synthetic patient discharges")
    config = parse_config(document)
    result = run(config, progress=progress)
    if progress is not None:
        progress.close()
    _echo(_summary(result.report, time.perf_counter() - started))
    _echo(f"published: table {config.target.table} in {database}")
    _echo(f"report: {config.report_json} and {config.report_html}")
    return 0


def _compare(args: argparse.Namespace, progress: Progress | None) -> int:
    from tclose.app.compare import command

    return command(args, progress)


# --- errors -----------------------------------------------------------------------------------


def _check_writable(path: str | None, key: str) -> None:
    """Fail before any work if a report file cannot be written (exit 2)."""
    from tclose.core.guards import refuse_unwritable

    refuse_unwritable(path, f"{key} file", ("report", key.split(".")[-1]))


def _with_location(error: ConfigError, config_path: str | None, config: Config | None) -> str:
    """The text of ``error`` (:meth:`~tclose.errors.ConfigError.located_text`), prefixed with
    the configuration file when the error names a place in it, with the place's YAML line
    when the error has none."""
    if error.path is None:
        return str(error)
    line = config.line_of(*error.path) if error.line is None and config is not None else None
    where = f"{config_path}: " if config_path else ""
    return where + error.located_text(line)


def _config_if_loadable(path: str | None) -> Config | None:
    if not path:
        return None
    try:
        return load_config(path)
    except TcloseError:
        return None


def _configure_logging(args: argparse.Namespace, progress: Progress | None) -> None:
    level = logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING
    handler = ConsoleHandler(progress or Progress(sys.stderr, live=False))
    if progress is None:  # --quiet: the handler's display takes no notices (errors only)
        handler.progress.close()
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.handlers = [handler]
    log.setLevel(level)
    log.propagate = False


def _say_interrupted(args: argparse.Namespace, published: bool) -> None:
    """The truthful line after an interrupt (SIGINT or SIGTERM)."""
    if published:
        target = _config_if_loadable(getattr(args, "config", None))
        name = target.target.table if target is not None and target.target else "the target"
        message = (
            f"interrupted after publishing: {name} holds the new verified table; its report and "
            f"audit row were written before stopping."
        )
    elif args.command == "run":
        message = "interrupted: nothing was published; the target is as it was."
    else:
        message = "interrupted."
    with contextlib.suppress(OSError):
        _echo(message, file=sys.stderr)


def _internal_error(error: Exception, verbose: bool) -> int:
    """Report a bug (exit 4): one line, the traceback only with ``-v``."""
    text = " ".join(redact_url(str(error)).split())[:300]
    with contextlib.suppress(OSError):
        if verbose:
            trace = "".join(traceback.format_exception(error))
            _echo(redact_url(trace), file=sys.stderr, end="")
        _echo(
            f"internal error: {type(error).__name__}: {text} (a bug in tclose; "
            f"{'' if verbose else 'run with -v for the traceback, and '}please report it)",
            file=sys.stderr,
        )
    return 4


def _echo(*values: object, file: IO[str] | None = None, end: str = "\n") -> None:
    """``print`` for every line the command shows: control characters that names from the data
    may hold are written as escapes (:func:`tclose.app.progress.terminal_text`)."""
    print(terminal_text(" ".join(str(v) for v in values)), file=file, end=end)


def _stdout_closed() -> int:
    """The reader of stdout went away (``tclose plugins | head -1``): stop silently."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tclose`` console script; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return 2 if exit_.code not in (0, None) else 0
    args.quiet = getattr(args, "quiet", False)
    args.verbose = getattr(args, "verbose", False)
    progress = None if args.quiet else Progress(sys.stderr)
    saved = (list(log.handlers), log.propagate, log.level)
    _configure_logging(args, progress)
    handlers = {
        "run": _run,
        "verify": _verify,
        "init": _init,
        "report": _report,
        "plugins": _plugins,
        "schema": _schema,
        "demo": _demo,
        "compare": _compare,
    }
    config_path = getattr(args, "config", None)
    try:
        with terminate_as_interrupt():
            code = handlers[args.command](args, progress)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except TcloseError as error:
        if progress is not None:
            progress.close()
        message = redact_url(str(error))
        if isinstance(error, ConfigError):
            located = _with_location(error, config_path, _config_if_loadable(config_path))
            message = redact_url(located)
        if args.verbose and isinstance(error, PluginFailure) and error.__cause__ is not None:
            _echo("".join(traceback.format_exception(error.__cause__)), file=sys.stderr, end="")
        _echo(f"error: {message}", file=sys.stderr)
        if args.command == "run" and not isinstance(error, ConfigError) and not error.published:
            _echo(
                "Nothing was published: the source is untouched and the target is as it was.",
                file=sys.stderr,
            )
        return error.exit_code
    except KeyboardInterrupt as interrupt:  # a run raises RunInterrupted, which says more
        if progress is not None:
            progress.close()
        _say_interrupted(args, isinstance(interrupt, RunInterrupted) and interrupt.published)
        return 130
    except Exception as error:  # a bug: exit 4, one line, the traceback only with -v
        if progress is not None:
            progress.close()
        return _internal_error(error, args.verbose)
    finally:
        if progress is not None:  # it shows no notice after main returns (idempotent)
            progress.close()
        log.handlers, log.propagate, log.level = saved
