"""The parts every tclose page is built of: its style sheet, escaped text, tables, numbers and
axis ticks, shared by the audit report (:mod:`tclose.app.html_report`) and the risk-utility
map of ``tclose compare`` (:mod:`tclose.app.compare`)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from tclose.app.progress import terminal_text

#: The style sheet of tclose's pages (the audit report, the risk-utility map).
CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2630;
background:#f6f7f9}
main{max-width:1060px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #d5dae0;
padding-bottom:4px}h3{font-size:15px;margin:12px 0 4px}
.verdict{padding:12px 16px;border-radius:6px;margin:16px 0;font-weight:600}
.ok{background:#e3f4e8;border:1px solid #7fc69a}.bad{background:#fbe5e3;border:1px solid #e39a92}
.neutral{background:#eef2f7;border:1px solid #b6c3d3}
table{border-collapse:collapse;margin:6px 0;background:#fff}
td,th{border:1px solid #d5dae0;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.grid{display:flex;flex-wrap:wrap;gap:16px}.plot{background:#fff;border:1px solid #d5dae0;
border-radius:6px;padding:8px}.plot p{margin:2px 0 0;font-size:13px;color:#4a5663;max-width:460px}
.pass{color:#1e7b43;font-weight:600}.fail{color:#b3261e;font-weight:600}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-1px}
pre{background:#fff;border:1px solid #d5dae0;padding:8px;overflow:auto;font-size:13px}
small{color:#4a5663}
"""


def escape(text: str) -> str:
    """``text`` HTML-escaped (quotes too), with control characters and the bidirectional
    overrides (U+202E...) written as escapes (``\\u202e``), as the ``tclose`` command prints
    them: a name from the data must not reverse or hide the text after it on the page."""
    return html.escape(terminal_text(text))


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    header: bool = True,
    escaped: bool = False,
    numeric_last: bool = False,
) -> str:
    """An HTML table of ``rows`` under ``headers`` (none unless ``header``; then each row's first
    cell is a header cell), cells escaped unless ``escaped``, the last cell of each row aligned
    as a number when ``numeric_last``."""
    out = ["<table>"]
    if header:
        out.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in headers) + "</tr>")
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            text = str(cell) if escaped else escape(str(cell))
            css = ' class="num"' if numeric_last and i == len(row) - 1 else ""
            tag = "th" if not header and i == 0 else "td"
            cells.append(f"<{tag}{css}>{text}</{tag}>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def number(value: Any) -> str:
    """A short human form of a number; other values as text."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        if abs(value) >= 1e5 or abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """Round axis ticks from 0 up to at most ``top``, about ``count`` steps (``[0.0]`` for a
    ``top`` of 0 or less)."""
    if top <= 0:
        return [0.0]
    raw = top / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(power * f for f in (1, 2, 2.5, 5, 10) if power * f >= raw)
    return [step * i for i in range(int(math.floor(top / step + 1e-9)) + 1)]
