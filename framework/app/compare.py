"""``tclose compare``: the configured table through several algorithms, k and t, in memory.

The source table is read once (through its connector, in its snapshot) and encoded once; every
setting is then partitioned, aggregated, verified (k and t recomputed from the would-be published
values) and measured (:mod:`tclose.measures`). Nothing is written to any database. The result is
one row per setting (information loss, risk, clusters, time) and an HTML page with the
risk–utility map, so that a data steward can pick a setting before running ``tclose run``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tclose.app.progress import terminal_text
from tclose.base.config import Config, load_config
from tclose.base.registry import Registry, dialect_of, load_registry
from tclose.connector import open_read_only
from tclose.errors import ConfigError

if TYPE_CHECKING:  # the command line imports this module for its parser: pandas etc. on use
    import numpy as np

    from tclose.base.attributes import EncodedTable
    from tclose.core.plan import Resolved

COLUMNS = (
    ("algorithm", "algorithm"),
    ("k", "k"),
    ("t", "t"),
    ("sse", "SSE"),
    ("il1s", "IL1s"),
    ("record_linkage", "linkage"),
    ("interval_disclosure", "interval"),
    ("clusters", "clusters"),
    ("classes", "classes"),
    ("t_achieved", "max EMD"),
    ("verified", "verified"),
    ("seconds", "time s"),
)


#: Printed under the table: what its columns are.
LEGEND = (
    "SSE: the normalized information loss of the published values, as a run's report gives it "
    "(utility.sse); clusters: the algorithm's groups of rows; classes: the equivalence classes "
    "of the would-be published rows, on which k and t are checked (clusters whose published "
    "quasi-identifier values coincide form one class)"
)

#: The most settings (distinct algorithms × k × t) one comparison runs.
MAX_SETTINGS = 10_000


def plan(
    config: Config, algorithms: Sequence[str], ks: Sequence[int], ts: Sequence[float | None]
) -> list[tuple[str, int, float | None]]:
    """The settings to run: every algorithm × k × t (an algorithm that does not use t, such as
    ``mdav``, runs once per k).

    Raises:
        ConfigError: more than :data:`MAX_SETTINGS` (``--k $(seq -s, 1 5000)`` with 1000 t
            would build and validate 15 million settings, minutes and gigabytes before any row
            is read).
    """
    count = len(set(algorithms)) * len(set(ks)) * len(set(ts))
    if count > MAX_SETTINGS:
        raise ConfigError(
            f"--algorithms, --k and --t make up to {count:,} settings ({len(set(algorithms))} × "
            f"{len(set(ks))} × {len(set(ts))}); a comparison runs at most {MAX_SETTINGS:,}, "
            f"each on the whole table. Give fewer values."
        )
    settings: list[tuple[str, int, float | None]] = []
    for name in algorithms:
        for k in ks:
            for t in ts:
                settings.append((name, k, t))
    return settings


def resolve_all(
    config: Config, settings: Sequence[tuple[str, int, float | None]], registry: Registry
) -> list[tuple[Resolved, int, float | None]]:
    """Validate every setting before reading anything. The configured ``algorithm.options``
    apply to the configured algorithm only; the others run with their defaults."""
    from tclose.core.plan import resolve_plugins

    resolved, seen = [], set()
    for name, k, t in settings:
        options = config.algorithm_options if name == config.algorithm else {}
        requires_t = registry.get("algorithm", name, "--algorithms: ").requires_t
        if requires_t and t is None:  # the run's message names privacy.t: here --t is the way
            raise ConfigError(
                f"--t: Algorithm {name} needs t: give --t (comma-separated values in "
                f"(0, 1]), or privacy.t in the configuration."
            )
        t_used = t if requires_t else None
        variant = dataclasses.replace(
            config, algorithm=name, algorithm_options=options, k=k, t=t_used
        )
        plugins = resolve_plugins(variant, registry)
        if (plugins.algorithm.name, k, t_used) in seen:
            continue
        seen.add((plugins.algorithm.name, k, t_used))
        resolved.append((plugins, k, t_used))
    return resolved


def run_setting(
    encoded: EncodedTable,
    config: Config,
    resolved: Resolved,
    k: int,
    t: float | None,
    registry: Registry | None = None,
    entities: np.ndarray | None = None,
) -> dict[str, Any]:
    """Suppress the outliers, partition, aggregate, measure and verify one setting (the steps
    of :mod:`tclose.core.pipeline`); one row of the comparison (``entities``: the entity code
    of every row :func:`tclose.core.pipeline.read_inputs` kept, with ``source.entity``). The
    outliers ``privacy.max_suppressed`` allows are left out first, as in a run."""
    from tclose.core import pipeline
    from tclose.core.suppression import suppression_evidence

    started = time.perf_counter()
    encoded = pipeline.suppress(encoded, k, config.max_suppressed)
    entities = pipeline.kept_entities(entities, encoded)
    pairs = None if entities is None else (str(config.entity), entities)
    clustered = pipeline.partition(
        encoded, resolved, k, t, entities=pairs, l_diversity=config.l_diversity
    )
    seconds = time.perf_counter() - started
    labels, replaced = clustered.labels, clustered.aggregated
    measures = pipeline.measure(
        encoded, clustered, config.attributes, config.interval_p, config.sampling_fraction
    )
    frame = pipeline.released_frame(clustered, encoded.confidential)
    verification = pipeline.verify_release(
        frame,
        config,
        resolved.distances,
        registry,
        k=k,
        t=pipeline.checked_t(resolved, t),
        attribute_options=encoded.distance_options,
        expected_rows=len(frame),
        expected_confidential=encoded.confidential,
        entities=entities,
        suppression=suppression_evidence(encoded, config.max_suppressed),
    )
    risk, utility = measures["risk"], measures["utility"]
    return {
        "algorithm": resolved.algorithm.name,
        "options": resolved.algorithm_options,
        "k": k,
        "t": t,
        "sse": encoded.information_loss(replaced)["sse"],
        "il1s": utility["il1s"],
        "correlation_max_diff": utility["correlation_max_diff"],
        "record_linkage": risk["record_linkage"],
        "interval_disclosure": risk["interval_disclosure"],
        "reidentification_max": risk["reidentification"]["max"],
        "clusters": int(labels.max()) + 1 if len(labels) else 0,
        "classes": len(verification.class_sizes),
        "k_achieved": verification.k_achieved,
        "t_achieved": _worst(verification.t_achieved.values()),
        "verified": bool(verification.passed),
        "seconds": round(seconds, 3),
    }


def _worst(emds: Iterable[float]) -> float | None:
    """The largest EMD; NaN if any is (``max`` keeps or drops a NaN depending on its place:
    ``max([0.3, nan])`` is 0.3), ``None`` without any."""
    values = list(emds)
    if any(math.isnan(v) for v in values):
        return math.nan
    return max(values, default=None)


def compare(
    config: Config,
    algorithms: Sequence[str],
    ks: Sequence[int],
    ts: Sequence[float | None],
    *,
    registry: Registry | None = None,
    progress: Callable[..., None] | None = None,
) -> dict[str, Any]:
    """Run every setting on the configured source table, in memory; publish nothing.

    Returns:
        ``{"source": {...}, "interval_p": p, "runs": [row, ...]}`` (rows as in
        :func:`run_setting`).

    Raises:
        ConfigError: an unknown algorithm or a bad k or t (before any row is read);
        DataError: the source cannot be read or encoded, or has fewer rows than a k.
    """
    from tclose.core.clustering import refuse_too_few_rows
    from tclose.core.pipeline import read_inputs

    registry = registry or load_registry()
    say = progress or (lambda *_args, **_counts: None)
    runs = resolve_all(config, plan(config, algorithms, ks, ts), registry)
    database = open_read_only(
        registry.connector_for(dialect_of(config.source.url)).connect(
            config.source.url, config.source.password_file
        )
    )
    line = f"reading {config.source.table}"
    say(line)
    keys, encoded, set_aside, entities = read_inputs(database, config, progress, line)
    # every k at once, before the first setting: a k too large for the table stops the command
    # before any setting runs, not after the settings before it (whose rows would be lost)
    refuse_too_few_rows(len(keys), max((k for _, k, _ in runs), default=0), len(set_aside))
    rows = []
    line = f"running {len(runs)} settings on {len(keys)} rows"
    say(line, done=0, total=len(runs))
    for done, (resolved, k, t) in enumerate(runs, start=1):
        rows.append(run_setting(encoded, config, resolved, k, t, registry, entities))
        say(line, done=done, total=len(runs))
    return {
        "source": {"table": config.source.table, "rows": len(keys)},
        "interval_p": config.interval_p,
        "runs": rows,
    }


# --- the command ---------------------------------------------------------------------------------


def add_parser(commands: Any, parents: Sequence[argparse.ArgumentParser]) -> None:
    """The ``compare`` subcommand's arguments."""
    parser = commands.add_parser(
        "compare",
        parents=list(parents),
        help="compare algorithms and values of k and t on a table (publishes nothing)",
        description="Read the configured source table once, run it in memory through every "
        "algorithm × k × t, and print information loss and disclosure risk per setting. "
        "Nothing is written to any database.",
    )
    parser.add_argument("config", help="YAML configuration file")
    parser.add_argument(
        "--algorithms", metavar="A,B", help="comma-separated algorithms (default: the config's)"
    )
    parser.add_argument(
        "--t", metavar="T,T", help="comma-separated t values (default: the config's)"
    )
    parser.add_argument(
        "--k", metavar="K,K", help="comma-separated k values (default: the config's)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--html", metavar="PATH", help="write the risk–utility map here")


def _numbers(text: str | None, default: Any, kind: type, option: str) -> list:
    if text is None:
        return [default]
    values = []
    for part in text.split(","):
        try:
            values.append(kind(part.strip()))
        except ValueError:
            raise ConfigError(
                f"--{option} takes comma-separated numbers; got {part.strip()!r}."
            ) from None
    return values


def _names(text: str | None, default: str) -> list[str]:
    if text is None:
        return [default]
    names = [part.strip() for part in text.split(",")]
    if not all(names):  # ",," ran no setting at all (exit 0), "a,,b" dropped the empty one
        raise ConfigError(
            f"--algorithms takes comma-separated algorithm names; got {text!r}, with an empty "
            f"one. Name each algorithm (e.g. --algorithms t-first,merge), or leave the option "
            f"out for the configuration's."
        )
    return names


def command(args: argparse.Namespace, progress: Callable[..., None] | None) -> int:
    """``tclose compare``: exit 0 when every setting verified, 1 otherwise."""
    from tclose.core.guards import refuse_foreign_file, refuse_unwritable

    config = load_config(args.config)
    # before the runs: the page never replaces a file that is not one (the source database...)
    refuse_unwritable(args.html, "page", "--html: ")  # first: a name too long makes exists() raise
    refuse_foreign_file(args.html, "html", "--html: ", page="map")
    algorithms = _names(args.algorithms, config.algorithm)
    ks = _numbers(args.k, config.k, int, "k")
    ts = _numbers(args.t, config.t, float, "t")
    for k in ks:
        if k < 1:
            raise ConfigError(f"The 'k' parameter must be an integer >= 1. Got {k!r} instead.")
    for t in ts:
        if t is not None and not 0 < t <= 1:
            raise ConfigError(f"The 't' parameter must be in (0, 1]. Got {t!r} instead.")
    result = compare(config, algorithms, ks, ts, progress=progress)
    if progress is not None and hasattr(progress, "close"):
        progress.close()
    if args.html:
        from tclose.base.atomic import write_atomically

        try:
            write_atomically(args.html, render_html(result))
        except OSError as error:
            raise ConfigError(f"Cannot write {args.html}: {error.strerror}.") from None
    if args.json:
        from tclose.base.jsonsafe import finite_report, to_json

        print(to_json(finite_report(result)), end="")  # strict JSON: a NaN EMD as null
    elif not args.quiet:
        print(terminal_text(format_table(result["runs"])))
        print(textwrap.fill(LEGEND, 100))
        if args.html:
            print(terminal_text(f"risk–utility map: {args.html}"))
    return 0 if all(r["verified"] for r in result["runs"]) else 1


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The runs as an aligned text table."""
    cells = [[title for _, title in COLUMNS]]
    cells += [[_cell(row[key]) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
        for line in cells
    )


# --- the HTML page -------------------------------------------------------------------------------


def render_html(result: dict[str, Any]) -> str:
    """A self-contained page: the risk–utility map (inline SVG) and the table of runs."""
    from tclose.app.html_parts import CSS, escape, table

    source = result.get("source", {})
    title = f"tclose compare: {source.get('table')} ({source.get('rows')} rows)"
    rows = [[_cell(run[key]) for key, _ in COLUMNS] for run in result["runs"]]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body><main>",
            f"<h1>{escape(title)}</h1>",
            "<p>Each point is one setting run in memory on the source table (nothing was "
            "published). Lower left is better: little information lost (normalized SSE, "
            "x axis) and few people re-identified by record linkage (y axis).</p>",
            risk_utility_map(result["runs"]),
            "<h2>Runs</h2>",
            table([title for _, title in COLUMNS], rows),
            f"<p><small>Interval disclosure with p = {result.get('interval_p')}; definitions "
            "in docs/reports.md.</small></p>",
            "</main></body></html>",
        ]
    )


def risk_utility_map(runs: Sequence[dict[str, Any]], width: int = 640, height: int = 400) -> str:
    """Scatter plot: SSE on x, record linkage on y, one labelled point per run."""
    from tclose.app.html_parts import escape, nice_ticks, number

    left, right, top, bottom = 60, 20, 16, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [float(r["sse"]) for r in runs]
    ys = [float(r["record_linkage"]) for r in runs]
    x_ticks = nice_ticks(max(xs + [1e-9]) * 1.1)
    y_ticks = nice_ticks(max(ys + [1e-9]) * 1.1)
    x_top = x_ticks[-1] if x_ticks[-1] > 0 else 1.0
    y_top = y_ticks[-1] if y_ticks[-1] > 0 else 1.0
    x_top = max(x_top, max(xs + [0.0]))
    y_top = max(y_top, max(ys + [0.0]))

    def px(v: float) -> float:
        return left + plot_w * v / x_top

    def py(v: float) -> float:
        return top + plot_h - plot_h * v / y_top

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="risk-utility map" '
        f'font-family="system-ui,sans-serif" font-size="11"><title>risk-utility map</title>'
    ]
    for tick in x_ticks:
        out.append(
            f'<line x1="{px(tick):.1f}" x2="{px(tick):.1f}" y1="{top}" y2="{top + plot_h}" '
            f'stroke="#e3e7eb"/><text x="{px(tick):.1f}" y="{top + plot_h + 14}" '
            f'text-anchor="middle">{escape(number(tick))}</text>'
        )
    for tick in y_ticks:
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" '
            f'stroke="#e3e7eb"/><text x="{left - 4}" y="{py(tick) + 4:.1f}" '
            f'text-anchor="end">{escape(number(tick))}</text>'
        )
    for run, x, y in zip(runs, xs, ys):
        label = f"{run['algorithm']} k={run['k']}" + (f" t={run['t']:g}" if run["t"] else "")
        colour = "#2f6fb0" if run["verified"] else "#c0392b"
        out.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="5" fill="{colour}">'
            f"<title>{escape(label)}: SSE {x:.4f}, linkage {y:.4f}</title></circle>"
            f'<text x="{px(x) + 7:.1f}" y="{py(y) - 6:.1f}">{escape(label)}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        "information loss (normalized SSE)</text>"
        f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">risk (record linkage)</text></svg>'
    )
    return "".join(out)
