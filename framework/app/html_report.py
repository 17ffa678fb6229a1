"""The audit report as one self-contained HTML page, with its plots drawn as inline SVG.

:func:`render_html` reads nothing but the report mapping (the content of the audit JSON), so a
page can be rebuilt from a JSON file at any time (``tclose report run.json -o run.html``). The page
loads no external asset (no script, font, stylesheet or image) and, like the JSON, holds only
aggregates: counts, binned histograms, per-attribute and per-class statistics.

Plots: the cluster size histogram, the EMD of every class against ``t`` (a histogram per
confidential attribute), the information loss per quasi-identifier, and the original versus the
published distribution of every quasi-identifier.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from tclose.app.html_parts import CSS as _CSS
from tclose.app.html_parts import escape
from tclose.app.html_parts import nice_ticks as _nice_ticks
from tclose.app.html_parts import number as _number
from tclose.app.html_parts import table as _table
from tclose.core.report_checks import stated_verdict
from tclose.hookspecs import hookimpl

_WIDTH, _HEIGHT = 460, 210
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 12, 12, 42
_ORIGINAL, _PUBLISHED, _LIMIT = "#9aa5b1", "#2f6fb0", "#c0392b"


@hookimpl
def register_report_writers(register: Any) -> None:
    """The ``html`` writer of the report (``report.html``): :func:`render_html`."""
    register("html", render_html)


def render_html(report: Mapping[str, Any]) -> str:
    """The report as a complete HTML document (a string), with inline SVG plots."""
    target = report.get("target", {})
    title = f"tclose audit report: {target.get('table') or 'in-memory data'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body><main>",
        f"<h1>{escape(title)}</h1>",
        _subtitle(report),
        _verdict(report),
        _warnings(report),
        "<h2>Summary</h2>",
        _summary_table(report),
        "<h2>Verification</h2>",
        _checks_table(report),
        "<h2>Privacy</h2>",
        _definitions(report),
        '<div class="grid">',
        _cluster_plot(report),
        *_emd_plots(report),
        "</div>",
        _risk_section(report),
        "<h2>Information loss</h2>",
        '<div class="grid">',
        _sse_plot(report),
        "</div>",
        _utility_details(report),
        _distribution_section(report),
        "<h2>Lineage</h2>",
        _lineage(report),
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p)


# --- sections --------------------------------------------------------------------------------


def _subtitle(report: Mapping[str, Any]) -> str:
    run = report.get("run", {})
    tool = report.get("tool", {})
    bits = [
        f"run {run['id']}" if run.get("id") else "",
        f"started {run['started']}" if run.get("started") else "",
        f"tclose {tool.get('version', '?')}",
    ]
    return f"<small>{escape(' · '.join(b for b in bits if b))}</small>"


def _verdict(report: Mapping[str, Any]) -> str:
    passed, _failed = stated_verdict(report.get("verification", {}))
    run = report.get("run", {})
    table = report.get("target", {}).get("table")
    if not passed:
        text, css = "Verification FAILED: nothing was published; the target is unchanged.", "bad"
    elif run.get("published"):
        text, css = f"Verified and published as {table}.", "ok"
    elif run.get("dry_run"):
        text, css = "Verified; not published (dry run).", "neutral"
    else:
        text, css = "Verified (in-memory result, nothing published).", "ok"
    return f'<div class="verdict {css}">{escape(text)}</div>'


def _summary_table(report: Mapping[str, Any]) -> str:
    privacy = report.get("privacy", {})
    clusters = report.get("clusters", {})
    source = report.get("source", {})
    target = report.get("target", {})
    algorithm = report.get("algorithm", {})
    t_achieved = privacy.get("t_achieved") or {}
    t_text = ", ".join(f"{c}: {_number(v)}" for c, v in t_achieved.items()) or "-"
    enforced = "" if privacy.get("t_enforced", True) else " (not enforced by this algorithm)"
    rows = [
        (
            "Rows",
            f"{_number(source.get('rows'))} read, {_number(target.get('rows'))} written, "
            f"{_number(source.get('rows_set_aside', 0))} set aside, "
            f"{_number(source.get('rows_suppressed', 0))} suppressed as outliers",
        ),
        (
            "k",
            f"requested {_number(privacy.get('k'))}, achieved "
            f"{_number(privacy.get('k_achieved'))} (smallest class)",
        ),
        (
            "t",
            f"requested {_number(privacy.get('t'))}{enforced}; achieved (largest class EMD) "
            f"{t_text}",
        ),
        (
            "Clusters",
            f"{_number(clusters.get('count'))} (sizes {_number(clusters.get('min'))} to "
            f"{_number(clusters.get('max'))}, mean {_number(clusters.get('mean'))})",
        ),
        ("Information loss", f"normalized SSE {_number(report.get('utility', {}).get('sse'))}"),
        ("Algorithm", f"{algorithm.get('name')} {json.dumps(algorithm.get('options', {}))}"),
        (
            "Distances",
            ", ".join(f"{c}: {d}" for c, d in privacy.get("distance", {}).items()) or "-",
        ),
    ]
    return _table(("", ""), rows, header=False)


def _checks_table(report: Mapping[str, Any]) -> str:
    checks = report.get("verification", {}).get("checks", [])
    if not checks:
        return "<p>The verifier did not run.</p>"
    rows = []
    for check in checks:
        mark = (
            '<span class="pass">PASS</span>'
            if check.get("passed") is True
            else '<span class="fail">FAIL</span>'
        )
        extra = {
            k: v for k, v in check.items() if k not in ("name", "passed", "expected", "actual")
        }
        rows.append(
            (
                mark,
                escape(str(check.get("name"))),
                escape(_number(check.get("expected"))),
                escape(_number(check.get("actual"))),
                escape(", ".join(f"{k} {_number(v)}" for k, v in extra.items())),
            )
        )
    note = escape(report.get("privacy", {}).get("emd_definition") or "")
    return _table(("", "check", "expected", "actual", "details"), rows, escaped=True) + (
        f"<p><small>{note}</small></p>" if note else ""
    )


def _cluster_plot(report: Mapping[str, Any]) -> str:
    histogram = report.get("clusters", {}).get("size_histogram") or {}
    if not histogram:
        return ""
    counts = {int(s): int(c) for s, c in histogram.items()}
    low, high = min(counts), max(counts)
    if high - low <= 40:  # a contiguous axis shows the gaps between sizes
        counts = {size: counts.get(size, 0) for size in range(low, high + 1)}
    sizes = sorted(counts.items())
    k = report.get("privacy", {}).get("k")
    svg = _category_bars(
        [str(s) for s, _ in sizes],
        [c for _, c in sizes],
        "cluster size (rows)",
        "clusters",
        marker=str(k) if k is not None else None,
    )
    return _figure(
        "Cluster sizes",
        svg,
        f"How many clusters have each size. Every cluster must have at least k = {k} "
        f"rows; the algorithm's clusters are shown (the verifier's classes are built "
        f"from the written values and can only be larger).",
    )


def _emd_plots(report: Mapping[str, Any]) -> list[str]:
    privacy = report.get("privacy", {})
    t = privacy.get("t")
    plots = []
    for column, data in (privacy.get("emd_histogram") or {}).items():
        svg = _histogram(
            data["edges"],
            [("classes", data["counts"], _PUBLISHED, 1.0)],
            f"EMD of the class ({column})",
            "classes",
            limit=t,
        )
        above = data.get("classes_above_t")
        note = (
            f"EMD between each of the {data.get('classes')} published classes and the whole "
            f"table, for the confidential attribute {column}; mean {_number(data.get('mean'))}."
        )
        if t is not None:
            note += f" The red line is t = {_number(t)}; classes above it: {_number(above)}."
        plots.append(_figure(f"t-closeness of {column}", svg, note))
    return plots


def _sse_plot(report: Mapping[str, Any]) -> str:
    per_attribute = report.get("utility", {}).get("sse_per_attribute") or {}
    if not per_attribute:
        return ""
    svg = _horizontal_bars(
        list(per_attribute),
        list(per_attribute.values()),
        "normalized SSE (mean squared change in standard deviations)",
    )
    return _figure(
        "Information loss per quasi-identifier",
        svg,
        "Mean over rows of ((original - published) / standard deviation)^2 for each "
        "quasi-identifier; their mean is the normalized SSE "
        f"{_number(report.get('utility', {}).get('sse'))}.",
    )


def _distribution_section(report: Mapping[str, Any]) -> str:
    distributions = report.get("distributions") or {}
    if not distributions:
        return ""
    legend = (
        f'<p class="legend"><span style="background:{_ORIGINAL}"></span>original'
        f'<span style="background:{_PUBLISHED};opacity:.75"></span>published</p>'
    )
    figures = []
    for column, data in distributions.items():
        if "categories" in data:
            figures.append(_category_figure(column, data))
            continue
        svg = _histogram(
            data["edges"],
            [
                ("original", data["original"], _ORIGINAL, 1.0),
                ("published", data["anonymized"], _PUBLISHED, 0.75),
            ],
            column,
            "rows",
        )
        figures.append(_figure(column, svg, ""))
    return (
        "<h2>Quasi-identifiers: original versus published</h2>"
        + legend
        + '<div class="grid">'
        + "".join(figures)
        + "</div>"
    )


def _warnings(report: Mapping[str, Any]) -> str:
    warnings = report.get("warnings") or []
    if not warnings:
        return ""
    items = "".join(f"<li>{escape(str(w))}</li>" for w in warnings)
    return f'<h2>Warnings</h2><ul class="warnings">{items}</ul>'


def _definitions(report: Mapping[str, Any]) -> str:
    """The EMD definition of each confidential attribute's distance, as the plugin gives it."""
    privacy = report.get("privacy", {})
    definitions = privacy.get("emd_definitions") or {}
    if not definitions:
        return ""
    names = privacy.get("distance") or {}
    rows = [
        (escape(column), escape(str(names.get(column, "-"))), escape(str(text)))
        for column, text in definitions.items()
    ]
    return _table(("confidential attribute", "distance", "EMD definition"), rows, escaped=True)


def _category_figure(column: str, data: Mapping[str, Any]) -> str:
    labels = [str(c) for c in data["categories"]]
    original = _category_bars(labels, data["original"], column, "rows (original)")
    published = _category_bars(labels, data["anonymized"], column, "rows (published)")
    return _figure(
        column,
        original + published,
        "Rows per category, original (first) and published (second); categories with fewer "
        "than k rows in the original that vanished from the release are pooled.",
    )


def _digest_rows(digest: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The content digest, and the command that recomputes it when the database gave one."""
    if not digest.get("sha256"):
        return []
    rows = [("Content SHA-256", f"{digest['sha256']} ({digest.get('algorithm', '-')})")]
    if digest.get("statement"):
        command = shlex.quote(digest["statement"])
        rows.append(
            (
                "Recompute it with",
                f"PGCLIENTENCODING=UTF8 psql <connection> -X -q -c {command} | sha256sum",
            )
        )
    return rows


def _lineage(report: Mapping[str, Any]) -> str:
    source = report.get("source", {})
    target = report.get("target", {})
    run = report.get("run", {})
    rows = [
        ("Source", f"{source.get('table', '-')} at {source.get('url', '-')}"),
        ("Target", f"{target.get('table', '-')} at {target.get('url', '-')}"),
        ("Written columns", ", ".join(target.get("columns", [])) or "-"),
        ("Config SHA-256", report.get("config_sha256") or "-"),
        *_digest_rows(target.get("content_digest") or {}),
        (
            "Host",
            f"{run.get('host', '-')} ({run.get('platform', '-')}), Python {run.get('python', '-')}",
        ),
        ("Run", f"{run.get('started', '-')} to {run.get('finished', '-')}"),
    ]
    parts = [_table(("", ""), rows, header=False)]
    plugins = report.get("plugins") or {}
    if plugins:
        parts.append("<h3>Plugins</h3>")
        parts.append(_table(("plugin", "provided by"), list(plugins.items())))
    timings = report.get("timings") or {}
    if timings:
        parts.append("<h3>Timings</h3>")
        parts.append(
            _table(
                ("phase", "seconds"),
                [(p, _number(s)) for p, s in timings.items()],
                numeric_last=True,
            )
        )
    info = report.get("algorithm", {}).get("info")
    if info:
        parts.append("<h3>Algorithm facts</h3>")
        parts.append(_table(("fact", "value"), [(k, _number(v)) for k, v in info.items()]))
    if report.get("config") is not None:
        parts.append("<h3>Configuration (URLs redacted)</h3>")
        parts.append(f"<pre>{escape(json.dumps(report['config'], indent=2, default=str))}</pre>")
    return "\n".join(parts)


def _percent(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.2f} %"


def _risk_section(report: Mapping[str, Any]) -> str:
    """Disclosure risk: the figures, a sentence each, and one bar chart of the shares at risk."""
    risk = report.get("risk")
    if not risk:
        return ""
    rows = _risk_rows(risk)
    bars = _share_bars([r[0] for r in rows], [r[1] for r in rows])
    parts = [
        "<h2>Disclosure risk</h2>",
        "<p>Measured on the source rows and the rows actually published (definitions and "
        "sources in docs/reports.md).</p>",
        _table(("measure", "value", "what it means"), [(m, _percent(v), w) for m, v, w in rows]),
        '<div class="grid">',
        _figure("Shares of people at risk", bars, "0 % is no risk; 100 % would be every person."),
        "</div>",
        _attribute_disclosure(risk.get("attribute") or {}),
    ]
    return "\n".join(p for p in parts if p)


def _risk_rows(risk: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(measure, share, what it means) of the four risk figures; a figure the report holds as
    null says why instead (``risk.not_computed``), and draws no bar."""
    reid = risk.get("reidentification", {})
    p = risk.get("interval_p")
    largest = reid.get("max")
    smallest = round(1 / largest) if largest and 1e-300 < largest <= 1 else None
    rows = [
        (
            "Record linkage",
            risk.get("record_linkage"),
            "An intruder who knows a person's original quasi-identifiers and links them to the "
            "nearest published row picks that person's own row for this share of the people.",
        ),
        (
            f"Interval disclosure (p = {_number(p)})",
            risk.get("interval_disclosure"),
            f"For this share of the people every published numeric quasi-identifier lies within "
            f"{_number(p)} standard deviations of the true value: publishing it almost "
            f"discloses the true value.",
        ),
        (
            "Re-identification (prosecutor), largest",
            reid.get("max"),
            f"Every published row shares its quasi-identifiers with at least {_number(smallest)} "
            f"rows, so an intruder who knows a person is in the table finds the right row with "
            f"at most this probability.",
        ),
        (
            "Re-identification (prosecutor), mean",
            reid.get("mean"),
            "The same chance averaged over all people.",
        ),
    ]
    reasons = risk.get("not_computed") or {}
    for index, name in ((0, "record_linkage"), (1, "interval_disclosure")):
        if rows[index][1] is None:  # not a 0 % bar: the page says why there is no figure
            why = reasons.get(name, "not computed for this release")
            rows[index] = (rows[index][0], None, f"Not computed: {why}.")
    return rows


def _attribute_disclosure(attribute: Mapping[str, Any]) -> str:
    """The attribute-disclosure table of the confidential attributes, with what it means."""
    if not attribute:
        return ""
    table = _table(
        ("attribute", "distinct l", "entropy l", "beta (β-likeness)"),
        [
            (c, _number(a["distinct_l"]), _number(a["entropy_l"]), _number(a["beta"]))
            for c, a in attribute.items()
        ],
    )
    return "\n".join(
        [
            "<h3>Attribute disclosure (confidential attributes)</h3>",
            table,
            "<p>Distinct l: in every class the attribute takes at least l different values. "
            "Entropy l: every class is at least as uncertain as l equally likely values. Beta: "
            "the largest relative increase, in any class, of a value's share over its share in "
            "the whole table (what an intruder learns by finding a person's class; large for "
            "attributes whose values are almost all distinct, such as amounts).</p>",
        ]
    )


def _utility_details(report: Mapping[str, Any]) -> str:
    """IL1s, correlations, moments and category frequencies, with a sentence each."""
    utility = report.get("utility", {})
    if "il1s" not in utility:
        return ""
    rows = [
        (
            "IL1s",
            _number(utility.get("il1s")),
            "Mean distance between an original and a published numeric quasi-identifier, in "
            "standard deviations divided by √2 (sdcMicro's IL1s); 0 is no change.",
        ),
        (
            "Largest correlation change",
            _number(utility.get("correlation_max_diff")),
            "No Pearson correlation between two numeric attributes (quasi-identifiers and "
            "confidential) changed by more than this (correlations range from -1 to 1).",
        ),
    ]
    reasons = utility.get("not_computed") or {}
    for index, name in enumerate(("il1s", "correlation_max_diff")):
        if utility.get(name) is None:
            why = reasons.get(name, "not computed for this release")
            rows[index] = (rows[index][0], "-", f"Not computed: {why}.")
    parts = [_table(("measure", "value", "what it means"), rows)]
    moments = utility.get("moments") or {}
    if moments:
        parts.append(
            "<p>Relative change of each numeric quasi-identifier's mean and variance "
            "(microaggregation keeps means and shrinks variances):</p>"
        )
        parts.append(
            _table(
                ("attribute", "mean", "variance"),
                [(c, _percent(m["mean"]), _percent(m["variance"])) for c, m in moments.items()],
            )
        )
    variation = utility.get("categorical_total_variation") or {}
    if variation:
        parts.append(
            "<p>Total variation between the original and the published category frequencies "
            "(the share of rows whose category would have to change to restore them):</p>"
        )
        parts.append(_table(("attribute", "total variation"), list(variation.items())))
    return "\n".join(parts)


# --- HTML helpers ----------------------------------------------------------------------------


def _figure(title: str, svg: str, note: str) -> str:
    caption = f"<p>{escape(note)}</p>" if note else ""
    return f'<div class="plot"><h3>{escape(title)}</h3>{svg}{caption}</div>'


# --- SVG plots -------------------------------------------------------------------------------


def _svg_open(label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{escape(label)}" '
        f'font-family="system-ui,sans-serif" font-size="11">'
        f"<title>{escape(label)}</title>"
    )


def _y_axis(top: float, y_label: str) -> list[str]:
    """Horizontal grid lines with tick labels, and the rotated y label."""
    plot_h = _HEIGHT - _TOP - _BOTTOM
    out = []
    for tick in _nice_ticks(top):
        y = _TOP + plot_h - plot_h * tick / top if top else _TOP + plot_h
        out.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#e3e7eb"/>'
        )
        out.append(
            f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_number(tick))}</text>"
        )
    mid = _TOP + plot_h / 2
    out.append(
        f'<text x="12" y="{mid:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {mid:.1f})">{escape(y_label)}</text>'
    )
    out.append(
        f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{_TOP + plot_h}" '
        f'y2="{_TOP + plot_h}" stroke="#6b7785"/>'
    )
    return out


def _x_label(text: str) -> str:
    return (
        f'<text x="{(_LEFT + _WIDTH - _RIGHT) / 2:.1f}" y="{_HEIGHT - 6}" '
        f'text-anchor="middle">{escape(text)}</text>'
    )


def _histogram(
    edges: Sequence[float],
    series: Sequence[tuple[str, Sequence[int], str, float]],
    x_label: str,
    y_label: str,
    limit: float | None = None,
) -> str:
    """Bars over numeric bins; several series are overlaid; ``limit`` draws a red vertical line."""
    low, high = float(edges[0]), float(edges[-1])
    if limit is not None:
        high = max(high, float(limit))
    span = (high - low) or 1.0
    plot_w = _WIDTH - _LEFT - _RIGHT
    plot_h = _HEIGHT - _TOP - _BOTTOM
    top = max([max(counts, default=0) for _, counts, _, _ in series] + [1])

    def x_of(value: float) -> float:
        return _LEFT + plot_w * (value - low) / span

    out = [_svg_open(f"histogram of {x_label}"), *_y_axis(top, y_label)]
    for name, counts, color, opacity in series:
        for i, count in enumerate(counts):
            if not count:
                continue
            x0, x1 = x_of(edges[i]), x_of(edges[i + 1])
            height = plot_h * count / top
            out.append(
                f'<rect x="{x0 + 0.5:.1f}" y="{_TOP + plot_h - height:.1f}" '
                f'width="{max(x1 - x0 - 1, 0.5):.1f}" height="{height:.1f}" '
                f'fill="{color}" fill-opacity="{opacity}">'
                f"<title>{escape(name)}: {count:,} in [{_number(edges[i])}, "
                f"{_number(edges[i + 1])})</title></rect>"
            )
    step = max(1, math.ceil((len(edges) - 1) / 6))
    for i in range(0, len(edges), step):
        x = x_of(edges[i])
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP + plot_h}" '
            f'y2="{_TOP + plot_h + 4}" stroke="#6b7785"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">'
            f"{escape(_number(float(edges[i])))}</text>"
        )
    if limit is not None:
        x = x_of(float(limit))
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
            f'stroke="{_LIMIT}" stroke-width="2" stroke-dasharray="5 3"/>'
        )
        out.append(
            f'<text x="{x - 4:.1f}" y="{_TOP + 10}" text-anchor="end" fill="{_LIMIT}">'
            f"t = {escape(_number(float(limit)))}</text>"
        )
    out.append(_x_label(x_label))
    out.append("</svg>")
    return "".join(out)


def _category_bars(
    categories: Sequence[str],
    values: Sequence[float],
    x_label: str,
    y_label: str,
    marker: str | None = None,
) -> str:
    """Vertical bars, one per category; the bar of category ``marker`` has a red outline."""
    plot_w = _WIDTH - _LEFT - _RIGHT
    plot_h = _HEIGHT - _TOP - _BOTTOM
    top = max(list(values) + [1])
    width = min(plot_w / max(len(categories), 1), 48.0)
    out = [_svg_open(f"bar chart of {y_label} by {x_label}"), *_y_axis(top, y_label)]
    step = max(1, math.ceil(len(categories) / 12))
    for i, (category, value) in enumerate(zip(categories, values, strict=True)):
        x = _LEFT + i * width
        height = plot_h * value / top
        stroke = f' stroke="{_LIMIT}" stroke-width="2"' if category == marker else ""
        out.append(
            f'<rect x="{x + 1:.1f}" y="{_TOP + plot_h - height:.1f}" '
            f'width="{max(width - 2, 0.5):.1f}" height="{height:.1f}" '
            f'fill="{_PUBLISHED}"{stroke}><title>{escape(category)}: '
            f"{escape(_number(value))}</title></rect>"
        )
        if i % step == 0:
            out.append(
                f'<text x="{x + width / 2:.1f}" y="{_TOP + plot_h + 16}" '
                f'text-anchor="middle">{escape(category)}</text>'
            )
    out.append(_x_label(x_label))
    out.append("</svg>")
    return "".join(out)


def _share_bars(labels: Sequence[str], values: Sequence[float | None]) -> str:
    """Horizontal bars of shares on a fixed 0 to 100 % axis; ``None`` (a figure not computed)
    draws no bar and reads ``not computed``."""
    left, row = 190, 24
    height = _TOP + row * len(labels) + 30
    plot_w = _WIDTH - left - _RIGHT - 50
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="shares at risk" '
        f'font-family="system-ui,sans-serif" font-size="11"><title>shares at risk</title>'
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = _TOP + i * row
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{escape(label)}</text>')
        out.append(
            f'<rect x="{left}" y="{y + 3}" width="{plot_w}" height="{row - 6}" fill="#eef1f4"/>'
        )
        if value is None:
            out.append(f'<text x="{left + 6}" y="{y + 15}">not computed</text>')
            continue
        width = plot_w * min(max(float(value), 0.0), 1.0)
        out.append(
            f'<rect x="{left}" y="{y + 3}" width="{max(width, 0.5):.1f}" height="{row - 6}" '
            f'fill="{_LIMIT}"><title>{escape(label)}: {_percent(value)}</title></rect>'
        )
        out.append(f'<text x="{left + plot_w + 4}" y="{y + 15}">{_percent(value)}</text>')
    out.append("</svg>")
    return "".join(out)


def _horizontal_bars(labels: Sequence[str], values: Sequence[float], x_label: str) -> str:
    """One horizontal bar per label, values on the x axis."""
    left = 130
    row = 22
    height = _TOP + row * len(labels) + 40
    plot_w = _WIDTH - left - _RIGHT - 50
    top = max([float(v or 0.0) for v in values] + [1e-12])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="{escape(x_label)}" '
        f'font-family="system-ui,sans-serif" font-size="11"><title>{escape(x_label)}</title>'
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = _TOP + i * row
        width = plot_w * float(value or 0.0) / top
        out.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">{escape(label)}</text>')
        out.append(
            f'<rect x="{left}" y="{y + 3}" width="{max(width, 0.5):.1f}" height="{row - 6}"'
            f' fill="{_PUBLISHED}"><title>{escape(label)}: {escape(_number(value))}'
            f"</title></rect>"
        )
        out.append(f'<text x="{left + width + 4:.1f}" y="{y + 14}">{escape(_number(value))}</text>')
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    out.append("</svg>")
    return "".join(out)
