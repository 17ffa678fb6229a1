"""Reports and plugin answers as strict JSON: NumPy values as Python's, no NaN or infinity,
no text a database's JSON type refuses; and the dotted path that names a place in them.

RFC 8259 JSON has no NaN or infinity, and PostgreSQL's ``jsonb`` refuses a NUL character or a
lone surrogate: a report is written, stored in an audit table and read back by other tools, so
each of these is either refused where it enters (a plugin's ``info``) or replaced and named in
the report's ``warnings`` (:func:`finite_report`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


#: Characters a JSON text may escape but PostgreSQL's ``jsonb`` refuses (``\u0000``, and a
#: surrogate that is not half of a pair, which strict parsers such as serde_json refuse too).
UNSTORABLE_TEXT = re.compile("[\x00\ud800-\udfff]")


def unstorable_text(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``(steps, text)`` of every key or text in ``value`` holding a NUL character or a lone
    surrogate (:data:`UNSTORABLE_TEXT`), depth first; a key is named by its own steps."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and UNSTORABLE_TEXT.search(key):
                yield (*at, key), key
            yield from unstorable_text(item, (*at, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from unstorable_text(item, (*at, index))
    elif isinstance(value, str) and UNSTORABLE_TEXT.search(value):
        yield at, value


def dotted(steps: Sequence[Any]) -> str:
    """Keys and indexes as a path: ``("a", "b", 2, "c")`` → ``a.b[2].c``."""
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else str(step)
    return text


def finite_report(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` as strict JSON data (a copy: NumPy numbers and arrays as Python's, tuples as
    lists), with every NaN or infinity replaced by ``null`` and every other value JSON has no
    type for (a plugin option's ``Path`` default, a date) by its text, each named by a sentence
    in ``warnings``. The report must stay strict JSON (RFC 8259 has no NaN, and PostgreSQL's
    ``jsonb`` refuses the whole document) and must never be lost once the table is published.
    The configuration, the plugin options given and an algorithm's ``info`` are refused before
    the run when they hold one, so a value found here comes from a figure tclose or a distance
    plugin computed (e.g. an EMD that is NaN), or from a plugin's option default; see
    docs/reports.md."""
    data: dict[str, Any] = _jsonable(report)
    notes = []
    for steps, value in list(_unholdable(data)):
        *parents, last = steps
        node: Any = data
        for step in parents:
            node = node[step]
        if isinstance(value, float):
            node[last] = None
            notes.append(
                f"{dotted(steps)} was not a finite number ({value!r}) and is written as null"
            )
        else:
            node[last] = str(value)
            notes.append(f"{dotted(steps)} was a {type(value).__name__} and is written as its text")
    if notes:
        data.setdefault("warnings", []).extend(
            f"{note}: JSON cannot hold it (a bug in tclose or in a plugin; please report it)."
            for note in notes
        )
    return data


def _unholdable(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(steps, value)`` of every NaN, infinity or value of a type JSON does not have in
    ``value`` (JSON data of dicts and lists, as :func:`_jsonable` returns), depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _unholdable(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unholdable(item, (*at, index))
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield at, value
    elif not (value is None or isinstance(value, (str, int))):
        yield at, value


def to_json(report: Mapping[str, Any]) -> str:
    """The report as indented, strict JSON text (the content of ``report.json``).

    Raises:
        ValueError: the report holds a NaN or an infinity, which RFC 8259 JSON cannot hold (the
            message names where); :func:`build_report` never returns one.
    """
    data = _jsonable(report)
    for steps, value in _unholdable(data):
        if isinstance(value, float):  # another type is json.dumps's TypeError, as ever
            raise ValueError(
                f"{dotted(steps)} is {value!r}, a number JSON cannot hold (no NaN or infinity)"
            )
    return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
