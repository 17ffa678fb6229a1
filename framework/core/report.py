"""The audit report: what was done, with what, and what the verifier found.

The report holds counts, parameters, digests, timings and aggregate statistics only: never a data
value of an individual row, never a password (URLs are redacted, the configuration is copied with
its URLs redacted). Distributions are binned counts over "nice" bin edges (multiples of 1, 2, 2.5
or 5 times a power of ten), so the exact smallest and largest value of a column do not appear
either. The fields are documented in ``docs/reports.md``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import platform
import socket
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tclose.base.atomic import write_atomically
from tclose.base.attributes import MISSING, EncodedTable
from tclose.base.config import criterion_keys, json_document, redact_url
from tclose.base.jsonsafe import finite_report, to_json
from tclose.base.redaction import redacted_document
from tclose.base.registry import dialect_of
from tclose.base.schema import ABSENT, Absent, json_data
from tclose.base.version import __version__
from tclose.core.criteria import hierarchy_digests
from tclose.core.entities import entity_warnings
from tclose.core.report_model import (
    REPORT_VERSION,
    AlgorithmRecord,
    AttributeRecord,
    AttributeRisk,
    CategoryDistribution,
    Clusters,
    EmdHistogram,
    HierarchyRecord,
    Moments,
    NumericDistribution,
    PopulationRisk,
    Privacy,
    Reidentification,
    Report,
    Risk,
    Run,
    Source,
    Suppression,
    Target,
    Tool,
    Uniqueness,
    Utility,
    VerificationRecord,
)
from tclose.core.suppression import full_table_sse, suppression_facts
from tclose.errors import ConfigError, DataError, PluginError
from tclose.interfaces import EMD_TOLERANCE

if TYPE_CHECKING:
    from tclose.base.config import Config
    from tclose.base.registry import Registry
    from tclose.core.plan import Resolved
    from tclose.core.verify import Verification
    from tclose.interfaces import Partition

log = logging.getLogger("tclose")

EMD_DEFINITION = (
    "EMD between each class's distribution of a confidential attribute and the whole published "
    "column, with the attribute's distance (its definition: privacy.emd_definitions); a class "
    f"passes when EMD <= t + {EMD_TOLERANCE:g}"
)


def distance_definition(distance: Any) -> str:
    """The EMD definition a distance plugin gives (its ``definition``), or a plain fallback for
    a plugin that gives none."""
    text = getattr(distance, "definition", None)
    if isinstance(text, str) and text.strip():
        return text.strip()
    return f"{distance.name}: the plugin gives no definition of its EMD (see its documentation)"


def holds_one_value(values: np.ndarray) -> bool:
    """Whether a non-empty column holds a single value, as ``pd.unique`` counts values (NaN
    is one value, ``-0.0`` equals ``0.0``); numbers and datetimes are compared without turning
    them into Python objects."""
    if values.dtype.kind in "biufcmM":
        first = values[0]
        if values.dtype.kind in "fcmM" and np.isnan(first):
            return bool(np.isnan(values).all())
        return bool((values == first).all())
    return len(pd.unique(values.astype(object))) == 1


def constant_warnings(encoded: EncodedTable) -> list[str]:
    """A warning for each confidential attribute that holds a single value in every row."""
    warnings = []
    for column, values in encoded.confidential.items():
        if len(values) and holds_one_value(np.asarray(values)):
            warnings.append(
                f"The confidential attribute {column} has a single value in all {len(values)} "
                f"rows: its EMD is 0 in every class, so t-closeness says nothing about it, and "
                f"the release discloses that value for every row."
            )
    return warnings


SSE_DEFINITION = (
    "sse = 1/n * sum_rows 1/d * sum_QIs delta(original, published), the paper's normalized SSE; "
    "delta = ((a - a') / std_original)^2 for numeric and date QIs (NED squared), "
    "((rank - rank') / (c - 1))^2 for ordinal QIs, the 0/1 or hierarchical distance for nominal "
    "QIs; sse_sst = sse over the sse of one single cluster"
)
#: Number of bins aimed at by the distribution histograms (the nice edges give 10 to 25).
HISTOGRAM_BINS = 20


def cluster_statistics(labels: np.ndarray) -> dict[str, Any]:
    """Count, min, mean, max and a size histogram of the clusters given by dense labels."""
    sizes = np.bincount(labels) if len(labels) else np.zeros(0, dtype=np.int64)
    values, counts = np.unique(sizes, return_counts=True)
    return {
        "count": int(len(sizes)),
        "min": int(sizes.min()) if len(sizes) else 0,
        "mean": float(sizes.mean()) if len(sizes) else 0.0,
        "max": int(sizes.max()) if len(sizes) else 0,
        "size_histogram": {str(int(v)): int(c) for v, c in zip(values, counts, strict=True)},
    }


def nice_edges(
    low: float, high: float, bins: int = HISTOGRAM_BINS, integer: bool = False
) -> np.ndarray:
    """Bin edges covering ``[low, high]`` at a round step (1, 2, 2.5 or 5 times a power of ten).

    The first edge is ``low`` rounded down to the step and the last is ``high`` rounded up, so the
    edges do not disclose the exact extremes. ``integer`` data get a step of at least 1. Where no
    round step can be computed (a span near the smallest subnormal, or edges past the largest
    float) the edges are ``[low, high]``, one bin. The edges are always finite, increasing, and
    hold every value of ``[low, high]``.

    >>> nice_edges(3, 97, bins=10).tolist()
    [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    >>> nice_edges(0.12, 0.31, bins=4).tolist()
    [0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
    """
    low, high = float(low), float(high)
    with np.errstate(all="ignore"):
        try:
            edges = _round_step_edges(low, high, bins, integer)
        except (OverflowError, ValueError):  # log10(0), int(inf): no round step fits
            edges = None
        if edges is None or not _covering(edges, low, high):
            edges = np.array([low, high] if high > low else [low, np.nextafter(low, math.inf)])
            if not np.isfinite(edges[-1]):
                edges = np.array([np.nextafter(low, -math.inf), low])
    return edges


def _round_step_edges(low: float, high: float, bins: int, integer: bool) -> np.ndarray:
    """The edges of :func:`nice_edges` at a round step (may raise, or not cover the range,
    where the span underflows or the edges overflow)."""
    span = float(high) - float(low)
    if span == math.inf:  # values near the float limit: the span overflows, its fraction not
        raw = float(high) / max(bins, 1) - float(low) / max(bins, 1)
        span = raw * max(bins, 1)
    if not math.isfinite(span) or span <= 0:
        span = abs(float(low)) or 1.0
    raw = span / max(bins, 1) if math.isfinite(span) else raw
    power = 10.0 ** math.floor(math.log10(raw))
    step = next((power * f for f in (1, 2, 2.5, 5, 10) if power * f >= raw * (1 - 1e-12)), None)
    if step is None:  # the power of ten underflowed to 0 (raw is a few subnormals)
        raise ValueError("no round step")
    if integer:
        step = max(1.0, float(math.ceil(step)))
    start = math.floor(low / step + 1e-9) * step
    stop = math.ceil(high / step - 1e-9) * step
    start -= step if start > low else 0.0  # the tolerance must not cut off an extreme value
    stop += step if stop < high else 0.0
    if stop <= start:
        stop = start + step
    count = int(round(stop / step - start / step))
    edges = (start / 2 + step / 2 * np.arange(count + 1)) * 2  # halves: no overflow near 1e308
    # Round away the float noise (0.30000000000000004) 12 digits below the step; skipped where
    # the scaling by 10**decimals would overflow.
    decimals = 12 - math.floor(math.log10(step))
    if decimals <= 300 and np.abs(edges).max() * 10.0**decimals < 1e300:
        edges = np.round(edges, decimals)
        if edges[0] > low:  # rounded past an extreme value by less than the noise
            edges = np.insert(edges, 0, np.round(edges[0] - step, decimals))
        if edges[-1] < high:
            edges = np.append(edges, np.round(edges[-1] + step, decimals))
    return edges


def _covering(edges: np.ndarray, low: float, high: float) -> bool:
    """Whether ``edges`` are finite, strictly increasing and hold ``[low, high]``."""
    return bool(
        np.all(np.isfinite(edges))
        and np.all(np.diff(edges) > 0)
        and edges[0] <= low
        and edges[-1] >= high
    )


def bin_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(values, edges)[0]``, exactly, in linear time for the evenly spaced edges of
    :func:`nice_edges` (``np.histogram`` sorts the values when given edges: 30 ms per 1M values).

    Bins are ``[edges[i], edges[i + 1])``, the last one closed; values outside
    ``[edges[0], edges[-1]]`` (and NaN) are not counted. Each value's bin is guessed from the
    mean step, then moved one bin at a time until its edges hold it, so uneven edges (any
    increasing sequence) only cost more passes.

    >>> bin_counts(np.array([0.0, 0.5, 1.0, 2.0, 3.0, 7.0]), np.array([0.0, 1.0, 2.0, 3.0])).tolist()
    [2, 1, 2]
    """
    bins = len(edges) - 1
    inside = values
    if not (len(values) and values.min() >= edges[0] and values.max() <= edges[-1]):
        inside = values[(values >= edges[0]) & (values <= edges[-1])]  # also drops NaN
    with np.errstate(over="ignore"):  # a span past the largest float: guessed as the top bin
        step = edges[-1] / bins - edges[0] / bins
        guess = np.floor((inside - edges[0]) / step) if step > 0 and np.isfinite(step) else None
    if guess is not None:
        index = np.clip(guess, 0, bins - 1, out=guess).astype(np.intp)
    else:
        index = np.zeros(len(inside), dtype=np.intp)
    while True:
        below = inside < edges[index]
        above = (inside >= edges[index + 1]) & (index < bins - 1)
        if not (below.any() or above.any()):
            return np.bincount(index, minlength=bins)
        index += above.astype(np.intp) - below


def category_frequencies(qi: Any, published: np.ndarray, k: int | None) -> dict[str, list]:
    """Rows per category of an ordinal or nominal QI, original and published, in the category
    order. Categories with fewer than ``k`` original rows that do not appear in the release are
    pooled into one ``(N rare categories)`` entry, so the report names no rare original value."""
    names = pd.Series(published, dtype=object).fillna(MISSING).astype(str)
    codes = pd.Categorical(names, categories=qi.categories).codes
    m = len(qi.categories)
    before = np.bincount(qi.codes, minlength=m)
    after = np.bincount(codes[codes >= 0], minlength=m)
    rare = (before < (k or 1)) & (after == 0)
    keep = ~rare
    categories = [c for c, kept in zip(qi.categories, keep) if kept]
    original, anonymized = before[keep].tolist(), after[keep].tolist()
    if rare.any():
        categories.append(f"({int(rare.sum())} rare categories)")
        original.append(int(before[rare].sum()))
        anonymized.append(0)
    return {"categories": categories, "original": original, "anonymized": anonymized}


def distributions(
    encoded: EncodedTable,
    anonymized: Mapping[str, np.ndarray],
    bins: int = HISTOGRAM_BINS,
    k: int | None = None,
) -> dict[str, dict[str, list]]:
    """Counts of every quasi-identifier before and after anonymization: numeric and date QIs
    binned on shared edges (dates in nanoseconds since the epoch), ordinal and nominal QIs per
    category (:func:`category_frequencies`).

    Returns column → ``{"edges": [...], "original": [...], "anonymized": [...]}`` (numbers) or
    ``{"categories": [...], "original": [...], "anonymized": [...]}`` (categories).
    """
    result = {}
    for qi in encoded.quasi_identifiers:
        if qi.values is None:
            result[qi.name] = category_frequencies(qi, anonymized[qi.name], k)
            continue
        column = qi.name
        before = qi.values
        after = np.asarray(anonymized[column])
        if qi.type != "numeric":
            after = after.astype("datetime64[ns]").astype(np.int64)
        after = after.astype(np.float64)
        if len(before) == 0:
            continue
        integer = bool(np.all(before == np.rint(before)))
        low = min(float(before.min()), float(after.min()))
        high = max(float(before.max()), float(after.max()))
        edges = nice_edges(low, high, bins, integer)
        result[column] = {
            "edges": edges.tolist(),
            "original": bin_counts(before, edges).tolist(),
            "anonymized": bin_counts(after, edges).tolist(),
        }
    return result


def emd_histograms(
    class_emds: Mapping[str, np.ndarray], t: float | None, bins: int = HISTOGRAM_BINS
) -> dict[str, dict[str, Any]]:
    """Per confidential attribute: a histogram of the EMD of every class, and how many exceed t.

    The edges run from 0 to ``max(t, largest EMD)`` rounded up, so ``t`` always lies on the axis.
    """
    result = {}
    for column, emds in class_emds.items():
        emds = np.asarray(emds, dtype=np.float64)
        top = max(float(emds.max()) if len(emds) else 0.0, t or 0.0, 1e-6)
        edges = nice_edges(0.0, top, bins)
        result[column] = {
            "edges": edges.tolist(),
            "counts": bin_counts(emds, edges).tolist(),
            "classes": int(len(emds)),
            "classes_above_t": int((emds > t + EMD_TOLERANCE).sum()) if t is not None else None,
            "mean": float(emds.mean()) if len(emds) else 0.0,
        }
    return result


@dataclass
class RunContext:
    """What a run knows when its report is built: the one argument of :func:`build_report`.

    The runner and :func:`tclose.anonymize` fill it phase by phase; the report reads it when it
    is built (a failed verification is reported too, so ``verification`` may fail).

    Attributes:
        registry: the plugins loaded for the run (their versions are recorded).
        resolved: the algorithm and distances the run used.
        k: the k asked for.
        t: the t asked for, or ``None``.
        max_suppressed: the largest share of rows that may be left out as outliers
            (``privacy.max_suppressed``).
        started: start of the run, seconds since the epoch.
        timings: seconds per phase, in the order the phases ran (filled by the runner's timer).
        rows_read: rows read from the source, including any set aside by ``missing:
            exclude-rows`` (counted in ``source.rows_set_aside``, never published).
        encoded: the encoded source columns (:func:`tclose.base.attributes.encode_table`).
        labels: dense cluster label of every kept row.
        partition: the algorithm's answer (its ``info`` is recorded).
        aggregated: QI column → published values of the kept rows.
        measures: the ``risk`` section and the ``utility`` additions
            (:func:`tclose.measures.measure_configured`).
        summary: the release's :func:`release_summary`, if already computed (else
            :func:`build_report` computes it).
        verification: the verifier's verdict on the written rows (``None`` if it did not run).
        published: whether the target now holds the verified table.
        dry_run: whether publishing was skipped on purpose.
        audited_in_publish: whether the ``run_publishing`` hooks ran in the publish transaction.
        config: the run's configuration; ``None`` for :func:`tclose.anonymize` (then the
            database parts are left out).
        run_id: the run's id (default: a fresh one).
        source_url: the source URL, redacted.
        target_url: the target URL, redacted.
        output_columns: the columns of the written table, in order (names only).
        row_security: whether row-level security filtered the read of the source
            (:class:`tclose.connector.RowSecurity`; ``None``: not known).
        staging_readers: the other accounts that could read the staging rows
            (:class:`tclose.connector.StagingReaders`; ``None``: none could).
    """

    registry: Registry
    resolved: Resolved
    k: int
    t: float | None
    max_suppressed: float = 0.0
    started: float = field(default_factory=time.time)
    timings: dict[str, float] = field(default_factory=dict)
    rows_read: int = 0
    encoded: EncodedTable | None = field(default=None, repr=False)
    labels: np.ndarray | None = field(default=None, repr=False)
    partition: Partition | None = field(default=None, repr=False)
    aggregated: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    measures: Mapping[str, Mapping[str, Any]] | None = field(default=None, repr=False)
    summary: Mapping[str, Any] | None = field(default=None, repr=False)
    verification: Verification | None = None
    published: bool = False
    dry_run: bool = False
    audited_in_publish: bool = False
    config: Config | None = None
    run_id: str | None = None
    source_url: str | None = None
    target_url: str | None = None
    output_columns: Sequence[str] | None = None
    row_security: Mapping[str, Any] | None = None
    staging_readers: Mapping[str, Any] | None = None


def release_summary(
    encoded: EncodedTable,
    aggregated: Mapping[str, np.ndarray],
    labels: np.ndarray,
    k: int | None,
) -> dict[str, Any]:
    """The parts of the report that depend on the release alone, not on its verification,
    measures or timings: ``clusters`` (:func:`cluster_statistics`), ``utility`` (the SSE and its
    definition), ``distributions`` (:func:`distributions`) and ``warnings``
    (:func:`constant_warnings`).

    A run computes it once, beside the write (:attr:`RunContext.summary`), rather than in each
    of its two builds of the report: at 1M rows it takes ~0.4 s.
    """
    loss = encoded.information_loss(aggregated)
    one_cluster = encoded.information_loss(encoded.aggregate(np.zeros(len(labels), dtype=np.int64)))
    return {
        "clusters": cluster_statistics(labels),
        "utility": {
            "sse": loss["sse"],
            "sse_raw": loss["sse"] * len(labels) * len(encoded.quasi_identifiers),
            "sse_sst": loss["sse"] / one_cluster["sse"] if one_cluster["sse"] else 0.0,
            "sse_per_attribute": loss["sse_per_attribute"],
            "definition": SSE_DEFINITION,
        },
        "distributions": distributions(encoded, aggregated, k=k),
        "warnings": constant_warnings(encoded),
    }


def build_report(context: RunContext) -> dict[str, Any]:
    """The audit report as JSON-ready data: :func:`build_report_model`, written as JSON
    (:func:`tclose.base.schema.json_data`) with every figure that is not a finite number
    written as ``null`` and named in ``warnings`` (:func:`tclose.base.jsonsafe.finite_report`)."""
    return finite_report(json_data(build_report_model(context)))


def build_report_model(context: RunContext) -> Report:
    """The audit report (:class:`tclose.core.report_model.Report`) from what the run knows
    (:class:`RunContext`; its encoding, labels and partition must be set)."""
    encoded, labels, partition = context.encoded, context.labels, context.partition
    assert encoded is not None and labels is not None and partition is not None
    verification = context.verification
    summary = context.summary or release_summary(encoded, context.aggregated, labels, context.k)
    finished = time.time()
    measures = context.measures or {}
    return Report(
        tool=Tool(name="tclose", version=__version__, report_version=REPORT_VERSION),
        run=_run_section(context, finished),
        config_sha256=context.config.digest() if context.config is not None else None,
        source=_source_section(context, encoded),
        target=_target_section(context),
        algorithm=AlgorithmRecord(
            name=context.resolved.algorithm.name,
            options=context.resolved.algorithm_options,
            info=partition.info,
        ),
        privacy=_privacy_section(context),
        clusters=Clusters(**summary["clusters"]),
        utility=_utility_section(encoded, summary["utility"], measures.get("utility", {})),
        distributions={
            column: (CategoryDistribution if "categories" in data else NumericDistribution)(**data)
            for column, data in summary["distributions"].items()
        },
        warnings=[*summary["warnings"], *_database_warnings(context)],
        verification=_verification_section(verification),
        timings=_timings(context.timings, finished - context.started),
        plugins=context.registry.versions(_plugins_used(context)),
        risk=_risk_section(measures["risk"]) if "risk" in measures else ABSENT,
        attributes=_attributes_section(context.config),
        config=(
            json_document(redacted_document(context.config.document))
            if context.config is not None
            else ABSENT
        ),
    )


def _run_section(context: RunContext, finished: float) -> Run:
    """The ``run`` section: id, times, outcome and where it ran."""
    return Run(
        id=context.run_id or uuid.uuid4().hex,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(context.started)),
        finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished)),
        dry_run=context.dry_run,
        published=context.published,
        host=socket.gethostname(),
        python=platform.python_version(),
        platform=sys.platform,
        audited_in_publish=True if context.audited_in_publish else ABSENT,
    )


def _source_section(context: RunContext, encoded: EncodedTable) -> Source:
    """The ``source`` section: rows read, set aside and suppressed as outliers
    (:mod:`tclose.core.suppression`); where from, for a database run."""
    config = context.config
    security = dict(context.row_security) if context.row_security is not None else None
    return Source(
        rows=context.rows_read,
        rows_set_aside=int(encoded.excluded.sum()),
        rows_set_aside_by_column=encoded.excluded_by,
        rows_suppressed=suppression_facts(encoded, context.max_suppressed)["rows"],
        url=context.source_url if config is not None else ABSENT,
        table=config.source.table if config is not None else ABSENT,
        row_security=security if config is not None else ABSENT,
    )


def _target_section(context: RunContext) -> Target:
    """The ``target`` section: rows written (as the verifier counted them), the content digest
    of the written table, and for a database run where it went and its columns."""
    config, verification = context.config, context.verification
    rows = context.rows_read
    if verification is not None:
        rows = next((c.actual for c in verification.results if c.name == "row_count"), rows)
    digest = verification.content_digest if verification is not None else None
    readers = dict(context.staging_readers) if context.staging_readers is not None else None
    columns = context.output_columns
    return Target(
        rows=rows,
        content_digest=digest if digest is not None else ABSENT,
        url=context.target_url if config is not None else ABSENT,
        table=config.target.table if config is not None else ABSENT,
        staging_readers=readers if config is not None else ABSENT,
        columns=list(columns) if config is not None and columns is not None else ABSENT,
    )


def _privacy_section(context: RunContext) -> Privacy:
    """The ``privacy`` section: what was asked, what the verifier found, with which EMD, and
    the rows left out as outliers, why and by which rule (:mod:`tclose.core.suppression`)."""
    verification, resolved, t = context.verification, context.resolved, context.t
    assert context.encoded is not None
    class_emds = verification.class_emds if verification is not None else {}
    return Privacy(
        k=context.k,
        t=t,
        k_achieved=verification.k_achieved if verification else None,
        t_achieved=verification.t_achieved if verification else {},
        distance={c: d.name for c, (d, _) in resolved.distances.items()},
        emd_definition=EMD_DEFINITION,
        emd_definitions={c: distance_definition(d) for c, (d, _) in resolved.distances.items()},
        t_enforced=bool(resolved.algorithm.requires_t and t is not None),
        emd_histogram={c: EmdHistogram(**h) for c, h in emd_histograms(class_emds, t).items()},
        hierarchies={
            c: HierarchyRecord(**h)
            for c, h in hierarchy_digests(
                context.config.attributes if context.config else {}
            ).items()
        },
        suppression=Suppression(**suppression_facts(context.encoded, context.max_suppressed)),
    )


def _utility_section(
    encoded: EncodedTable, sse: Mapping[str, Any], measured: Mapping[str, Any]
) -> Utility:
    """The ``utility`` section: the SSE of the release summary, the SSE of the whole table
    (:func:`tclose.core.suppression.full_table_sse`), then the measures' figures."""
    moments = measured.get("moments")
    return Utility(
        **sse,
        sse_full_table=full_table_sse(encoded, sse["sse_per_attribute"]),
        **{
            **measured,
            **({"moments": {c: Moments(**m) for c, m in moments.items()}} if moments else {}),
        },
    )


def _risk_section(risk: Mapping[str, Any]) -> Risk:
    """The ``risk`` section from the measures' (:func:`tclose.measures.measure_release`)."""
    return Risk(
        **{
            **risk,
            "attribute": {c: AttributeRisk(**a) for c, a in risk["attribute"].items()},
            "reidentification": Reidentification(**risk["reidentification"]),
            "population": _population_risk(risk["population"]),
        }
    )


def _population_risk(population: Mapping[str, Any]) -> PopulationRisk:
    """``risk.population`` from the measures' (:func:`tclose.measures.population_risk`)."""
    return PopulationRisk(
        **{
            **population,
            "release": Uniqueness(**population["release"]),
            "source": Uniqueness(**population["source"]),
        }
    )


def _attributes_section(config: Config | None) -> Mapping[str, AttributeRecord] | Absent:
    """Every configured column's role and type (a database run only)."""
    if config is None:
        return ABSENT
    return {
        name: AttributeRecord(role=a.role, type=a.type) for name, a in config.attributes.items()
    }


def _plugins_used(context: RunContext) -> list[tuple[str, str]]:
    """The (kind, name) of every plugin the run used: algorithm, distances, connectors."""
    used = [("algorithm", context.resolved.algorithm.name)]
    used += [("distance", d.name) for d, _ in context.resolved.distances.values()]
    used += [("criterion", name) for name in getattr(context.registry, "criteria", {})]
    if context.config is not None:
        for url in (context.config.source.url, context.config.target.url):
            with contextlib.suppress(ConfigError):  # no connector known: nothing to record
                connector = context.registry.connector_for(dialect_of(url))
                used.append(("connector", connector.name))
    return used


def _database_warnings(context: RunContext) -> list[str]:
    """The warnings of a database run: a source read through row-level security, staging rows
    other accounts could read, and an entity-like column without ``source.entity``
    (:func:`tclose.core.entities.entity_warnings`)."""
    if context.config is None:
        return []
    warnings = []
    security = context.row_security
    if security and (security.get("applies") or security.get("unknown")):
        warnings.append(row_security_warning(security))
    readers = context.staging_readers
    if readers is not None and (_narrow_readers(readers) or not readers.get("checked")):
        warnings.append(staging_readers_warning(readers))
    known = "source.entity" in criterion_keys(context.registry)
    return [*warnings, *entity_warnings(context.config, known)]


def _narrow_readers(readers: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The accounts of ``target.staging_readers`` whose grant does not reach every database:
    one that does (``SELECT ON *.*``) may read the source itself, so the staging rows tell it
    nothing new; the others are warned of."""
    return [a for a in readers.get("accounts", []) if not a.get("every_database")]


def staging_readers_warning(readers: Mapping[str, Any]) -> str:
    """The warning of staging rows other accounts could read (``target.staging_readers``):
    those whose grant does not reach every database, or that nobody could check."""
    if not readers.get("checked"):
        return (
            "Whether other accounts could read the unverified staging rows was not checked: "
            "this account may not read the server's grant tables (mysql.user, mysql.db, "
            "mysql.tables_priv, mysql.roles_mapping). Grant it SELECT on them to be told."
        )
    accounts = ", ".join(f"{a['account']} ({a['through']})" for a in _narrow_readers(readers))
    return (
        f"Other accounts could read the unverified staging rows while the run checked them "
        f"(from a READ UNCOMMITTED session): {accounts}. Their grants reach the staging "
        f"database; revoke them (or narrow a database pattern) to keep staging rows private."
    )


def row_security_warning(security: Mapping[str, Any]) -> str:
    """The warning of a source read through row-level security (``source.row_security``), or
    of one that may be: its database cannot tell (``unknown``)."""
    tables = ", ".join(
        f"{t.get('table')} (for role {t.get('role')})" for t in security.get("tables", [])
    )
    if not security.get("applies"):
        return (
            f"Whether row-level security filtered the source is unknown: "
            f"{security.get('unknown')}, so policies may have hidden rows from role "
            f"{security.get('role')} and the release may not cover the whole table. Read the "
            f"source through views of tables only, or as a role no policy filters (a "
            f"BYPASSRLS role), to know."
        )
    return (
        f"The source was read through row-level security: the policies of {tables} filter "
        f"its rows, so the release covers only the rows role {security.get('role')} sees, not "
        f"the whole table. To publish every row, read it as a role they do not filter (a "
        f"BYPASSRLS role, or the table's owner unless it forces row-level security)."
    )


def _verification_section(verification: Verification | None) -> VerificationRecord:
    """The verifier's verdict and checks and, from its ``linkage`` check, the pass-through
    columns left out of it (``allowed_unique``), those taken together (``linkage_columns``),
    the rows unique on them (``linkable_rows``) and, when there are such rows, the columns that
    single them out (``linking_columns``)."""
    if verification is None:
        return VerificationRecord(passed=False, checks=[])
    linkage = next((c.details for c in verification.results if c.name == "linkage"), None)
    if linkage is None:
        return VerificationRecord(passed=bool(verification.passed), checks=verification.checks)
    return VerificationRecord(
        passed=bool(verification.passed),
        checks=verification.checks,
        allowed_unique=linkage.get("allowed_unique", []),
        linkage_columns=linkage.get("columns", []),
        linkable_rows=linkage.get("linkable_rows", 0),
        linking_columns=linkage.get("linking_columns", []),
    )


def write_json(report: dict[str, Any], path: str | Path) -> None:
    """Write the report as indented JSON, creating parent folders (atomically: a full disk
    leaves the previous file, never a truncated one)."""
    write_atomically(path, to_json(report))


def report_writers(registry: Registry) -> dict[str, Callable[[Mapping[str, Any]], str]]:
    """Format → the writer of the report's text in it: ``json`` (:func:`tclose.base.jsonsafe.to_json`),
    and those the plugins register (hook ``register_report_writers``: ``html``, built in).

    Raises:
        PluginError: two plugins register one format.
    """
    writers: dict[str, Callable[[Mapping[str, Any]], str]] = {"json": to_json}

    def register(name: str, render: Callable[[Mapping[str, Any]], str]) -> None:
        if name in writers:
            raise PluginError(f"Two plugins register a writer of the report in {name!r}.")
        writers[name] = render

    if registry.manager is not None:
        registry.manager.hook.register_report_writers(register=register)
    return writers


def finish_report(
    report: dict[str, Any], registry: Registry, config: Config, report_path: str | None
) -> None:
    """Write the configured report files and call the ``run_finished`` hook.

    ``report_path`` overrides ``report.json``; ``report.html`` is written when configured, by
    the writer a plugin registers (:func:`report_writers`).
    """
    writers = report_writers(registry)
    for path, name in ((report_path or config.report_json, "json"), (config.report_html, "html")):
        if not path:
            continue
        try:
            if name not in writers:
                raise OSError(0, f"no plugin writes the report in {name}")
            write_atomically(path, writers[name](report))
        except OSError as error:
            published = bool(report.get("run", {}).get("published"))
            raise DataError(
                f"Cannot write the report {path}: {error.strerror}. "
                + ("The table WAS published and verified; " if published else "")
                + "fix the path and run `tclose verify` to record the verdict again.",
                published=published,
            ) from None
        log.info("wrote the report %s", path)
    if registry.manager is not None:
        try:
            registry.manager.hook.run_finished(report=report, config=config)
        except Exception as error:  # an audit sink must not change the outcome
            log.warning("a run_finished hook failed: %s", redact_url(str(error)))


def _timings(phases: dict[str, float], total: float) -> dict[str, float]:
    """The phases' seconds in the order they ran, then ``compile`` (the seconds Numba spent
    compiling kernels within them, which their own figures leave out; 0 when every kernel came
    from the cache) and ``total``."""
    timings = dict(phases)
    compiling = timings.pop("compile", 0.0)
    return {**timings, "compile": compiling, "total": round(total, 4)}
