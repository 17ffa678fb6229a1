"""The Python API: anonymize a pandas DataFrame in memory."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .attributes import encode_confidential, encode_table
from .config import AttributeSpec, _attributes, _Checker
from .errors import ConfigError, VerificationError
from .measures import INTERVAL_P, measure_configured
from .options import validate_options
from .partition import cluster_rows
from .registry import Registry, load_registry
from .report import build_report
from .runner import Resolved, Timer, resolve_distances, with_attribute_options
from .verify import verify_rows


@dataclass
class AnonymizationResult:
    """The outcome of :func:`anonymize`.

    Attributes:
        data: the anonymized DataFrame, in the input's row order and with the input's index
            (quasi-identifiers replaced by their cluster's aggregate, identifiers dropped, rows
            set aside by ``missing: exclude-rows`` left out).
        labels: ``int64`` cluster of every input row (dense, ``0..L-1``; ``-1`` for a row set
            aside).
        report: the audit report, as in the JSON written by ``tclose run`` without the database
            parts.
    """

    data: pd.DataFrame
    labels: np.ndarray
    report: dict[str, Any]


def _attribute_document(columns: Sequence[str] | Mapping[str, Any], role: str) -> dict[str, Any]:
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(columns, Mapping):
        document = {}
        for name, spec in columns.items():
            body = {"type": spec} if isinstance(spec, str) else dict(spec)
            body["role"] = role
            document[name] = body
        return document
    return {name: {"role": role, "type": "numeric"} for name in columns}


def anonymize(
    df: pd.DataFrame,
    quasi_identifiers: Sequence[str] | Mapping[str, Any],
    confidential: Sequence[str] | Mapping[str, Any] = (),
    k: int = 2,
    t: float | None = None,
    algorithm: str = "t-first",
    *,
    identifiers: Sequence[str] = (),
    registry: Registry | None = None,
    interval_p: float = INTERVAL_P,
    **options: Any,
) -> AnonymizationResult:
    """Make ``df`` k-anonymous (and t-close) by microaggregation, in memory.

    Args:
        df: the table.
        quasi_identifiers: QI columns; a list means numeric attributes, a mapping gives each
            column its type (``{"age": "numeric"}``) or its full YAML attribute spec.
        confidential: confidential columns, same forms as ``quasi_identifiers``.
        k: minimum class size.
        t: t-closeness level in ``(0, 1]``; required by ``t-first``, ``merge`` and ``k-first``.
        algorithm: a registered algorithm name.
        identifiers: direct identifiers, dropped from the output.
        registry: the plugins to use (default: built-ins and installed plugins).
        interval_p: half-width of interval disclosure in standard deviations (report ``risk``).
        **options: the algorithm's options (as under ``algorithm.options`` in YAML).

    Returns:
        an :class:`AnonymizationResult`; its ``data`` has been verified (k and t recomputed from
        the output rows).

    Raises:
        ConfigError: bad arguments. DataError: unusable data (NULLs, text, n < k).
        VerificationError: the output failed verification (a bug in the algorithm plugin).
    """
    registry = registry or load_registry()
    document = _attribute_document(quasi_identifiers, "quasi_identifier")
    document.update(_attribute_document(confidential, "confidential"))
    document.update({name: {"role": "identifier"} for name in identifiers})
    attributes: dict[str, AttributeSpec] = _attributes(_Checker({}), document)
    missing = [name for name in attributes if name not in df.columns]
    if missing:
        raise ConfigError(
            f"Column {missing[0]!r} is not in the DataFrame. "
            f"Its columns are: {', '.join(map(str, df.columns))}."
        )
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"The 'k' parameter must be an integer >= 1. Got {k!r} instead.")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1):
        raise ConfigError(f"The 't' parameter must be in (0, 1]. Got {t!r} instead.")

    algo = registry.get("algorithm", algorithm, "algorithm")
    algo_options = validate_options(algo.name, algo.options_schema, options, "options")
    if algo.requires_t and t is None:
        raise ConfigError(f"Algorithm {algo.name} needs t (a number in (0, 1]).")
    distances = resolve_distances(attributes, registry)
    resolved = Resolved(algo, algo_options, distances)

    qi_names = [a.name for a in attributes.values() if a.role == "quasi_identifier"]
    timer = Timer()
    started = time.time()
    with timer.phase("read"):
        encoded = encode_table(df, list(attributes.values()))
    with timer.phase("kernel"):
        labels, partition, _ = cluster_rows(
            encoded.x, encoded.confidential, encoded.distance_options, resolved, k, t
        )
    replaced = encoded.aggregate(labels)
    with timer.phase("measures"):
        measures = measure_configured(encoded, replaced, attributes, interval_p, labels)
    data = df.loc[~encoded.excluded].drop(columns=list(identifiers)).copy()
    for column, values in replaced.items():
        data[column] = values
    with timer.phase("verify"):
        written = data[qi_names].copy()
        for spec in attributes.values():
            if spec.role == "confidential":
                written[spec.name], _ = encode_confidential(data[spec.name], spec)
        checked = with_attribute_options(distances, encoded.distance_options)
        verification = verify_rows(
            written,
            qi_names,
            checked,
            k,
            t if algo.requires_t else None,
            len(data),
            encoded.confidential,
        )
    report = build_report(
        None,
        registry,
        resolved,
        len(df),
        labels,
        partition,
        verification,
        encoded,
        replaced,
        timer.seconds,
        started,
        published=False,
        k=k,
        t=t,
        measures=measures,
    )
    if not verification.passed:
        failed = ", ".join(c["name"] for c in verification.failures())
        raise VerificationError(
            f"The output of {algo.name} failed verification ({failed}).", verification.checks
        )
    all_labels = np.full(len(df), -1, dtype=np.int64)
    all_labels[~encoded.excluded] = labels
    return AnonymizationResult(data, all_labels, report)
