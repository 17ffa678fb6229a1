"""The audit report's model: one frozen dataclass per section, versioned.

:func:`tclose.core.report.build_report` builds a :class:`Report` from what the run's phases found
and writes it as JSON (:func:`tclose.base.schema.json_data`: members in the order of the fields,
a field holding :data:`~tclose.base.schema.ABSENT` left out). :func:`report_schema` is the JSON
Schema generated from these classes (``tclose schema report``, ``docs/schema/report.json``);
``tclose report`` and ``tclose verify --report`` check a report read back against it
(:mod:`tclose.core.report_checks`). The fields are documented in ``docs/reports.md``.

Sections that a plugin fills (an algorithm's ``info``, a connector's ``content_digest``,
``row_security``, ``staging_readers``, a criterion's check details, the configuration) are kept
as the plugin gave them, as mappings; :class:`~tclose.base.schema.Described` gives the schema of
those whose members tclose reads.

:data:`REPORT_VERSION` (``tool.report_version``) is raised when a field is removed, renamed or
changes its type; a field added keeps it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from tclose.base.schema import Absent, Described, Fragment, Judged, json_schema

#: The version of the report's model, recorded as ``tool.report_version``.
REPORT_VERSION = 1

#: A count of rows, classes or clusters: a whole number a 64-bit integer holds.
Count = Annotated[int, Fragment(minimum=0, maximum=2**63 - 1)]
#: A computed figure: ``null`` where it is undefined (docs/reports.md says when).
Figure = float | None
#: The key of ``clusters.size_histogram``: a cluster size, written as text.
ClusterSize = Annotated[str, Fragment(pattern="^[0-9]{1,18}$", description="a cluster size")]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """What wrote the report: tclose, its version and the report model's version."""

    name: str
    version: str
    report_version: int


@dataclass(frozen=True, kw_only=True)
class Run:
    """The run: its id, UTC times, outcome and where it ran."""

    id: str
    started: str
    finished: str
    dry_run: bool
    published: bool
    host: str
    python: str
    platform: str
    audited_in_publish: bool | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class Source:
    """What was read: rows, rows set aside, rows suppressed as outliers, and for a database run
    its URL, table and whether row-level security filtered the read."""

    rows: Count
    rows_set_aside: Count
    rows_set_aside_by_column: Mapping[str, Count]
    rows_suppressed: Count
    url: str | None | Absent = Absent.ABSENT
    table: str | Absent = Absent.ABSENT
    row_security: Mapping[str, Any] | None | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class ContentDigest:
    """The written table's content digest, as its connector computes it (more members allowed)."""

    algorithm: str
    columns: Sequence[str] | None
    rows: Count | Absent
    sha256: str | None
    statement: str | Absent
    types: Mapping[str, str | None] | None | Absent


@dataclass(frozen=True, kw_only=True)
class Target:
    """What was written: rows, content digest, and for a database run its URL, table, the
    accounts that could read the staging rows, and the written columns."""

    rows: Count
    content_digest: Annotated[Mapping[str, Any], Described(ContentDigest)] | Absent = Absent.ABSENT
    url: str | None | Absent = Absent.ABSENT
    table: str | Absent = Absent.ABSENT
    staging_readers: Mapping[str, Any] | None | Absent = Absent.ABSENT
    columns: Sequence[str] | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class AlgorithmRecord:
    """The algorithm, its validated options and the facts it reported (its ``info``)."""

    name: str
    options: Mapping[str, Any]
    info: Mapping[str, Any] | None


@dataclass(frozen=True, kw_only=True)
class EmdHistogram:
    """Classes per EMD bin of one confidential attribute: one more edge than counts."""

    edges: Sequence[float]
    counts: Sequence[Count]
    classes: Count
    classes_above_t: Count | None
    mean: Figure


@dataclass(frozen=True, kw_only=True)
class HierarchyRecord:
    """A hierarchy's content digest, height and number of leaves."""

    sha256: str
    height: int
    leaves: Count


@dataclass(frozen=True, kw_only=True)
class Suppression:
    """The rows left out as outliers (``privacy.max_suppressed``): the bound, the rows
    considered and suppressed, their share, why and by which rule."""

    max_suppressed: float
    rows_considered: Count
    rows: Count
    share: Figure
    reason: str
    rule: str


@dataclass(frozen=True, kw_only=True)
class Privacy:
    """What was asked (k, t), what the verifier found, with which EMD, and the rows
    suppressed as outliers."""

    k: int
    t: float | None
    k_achieved: Count | None
    t_achieved: Mapping[str, Figure]
    distance: Mapping[str, str]
    emd_definition: str
    emd_definitions: Mapping[str, str]
    t_enforced: bool
    emd_histogram: Mapping[str, EmdHistogram]
    hierarchies: Mapping[str, HierarchyRecord]
    suppression: Suppression


@dataclass(frozen=True, kw_only=True)
class Clusters:
    """The algorithm's clusters: count, smallest, mean and largest size, size → clusters."""

    count: Count
    min: Count
    mean: Figure
    max: Count
    size_histogram: Mapping[ClusterSize, Count]


@dataclass(frozen=True, kw_only=True)
class Moments:
    """Relative change of a numeric quasi-identifier's mean and variance."""

    mean: Figure
    variance: Figure


@dataclass(frozen=True, kw_only=True)
class Utility:
    """Information loss: the normalized SSE of the published rows and of the whole table
    (suppressed rows included), and the measures of a run that computed them."""

    sse: Figure
    sse_raw: Figure
    sse_sst: Figure
    sse_per_attribute: Mapping[str, Figure]
    definition: str
    sse_full_table: Figure
    il1s: Figure | Absent = Absent.ABSENT
    correlation_max_diff: Figure | Absent = Absent.ABSENT
    moments: Mapping[str, Moments] | Absent = Absent.ABSENT
    categorical_total_variation: Mapping[str, Figure] | Absent = Absent.ABSENT
    measure_definitions: Mapping[str, str] | Absent = Absent.ABSENT
    not_computed: Mapping[str, str] | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class CategoryDistribution:
    """Rows per category of an ordinal or nominal quasi-identifier, original and published."""

    categories: Sequence[str]
    original: Sequence[Count]
    anonymized: Sequence[Count]


@dataclass(frozen=True, kw_only=True)
class NumericDistribution:
    """Binned counts of a numeric or date quasi-identifier on shared edges."""

    edges: Sequence[float]
    original: Sequence[Count]
    anonymized: Sequence[Count]


@dataclass(frozen=True, kw_only=True)
class CheckRecord:
    """One check of the verifier, then its details (more members allowed)."""

    name: str
    passed: bool | None
    expected: Any | Absent
    actual: Any | Absent


@dataclass(frozen=True, kw_only=True)
class VerificationRecord:
    """The verifier's verdict (``null`` reads as not verified), its checks, and the facts of
    the linkage check."""

    passed: bool | None
    checks: Sequence[Annotated[Mapping[str, Any], Described(CheckRecord)]]
    allowed_unique: Sequence[str] | Absent = Absent.ABSENT
    linkage_columns: Sequence[str] | Absent = Absent.ABSENT
    linkable_rows: Count | Absent = Absent.ABSENT
    linking_columns: Sequence[str] | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class AttributeRisk:
    """Attribute disclosure of one confidential attribute (or ``overall``)."""

    distinct_l: Figure
    entropy_l: Figure
    beta: Figure


@dataclass(frozen=True, kw_only=True)
class Reidentification:
    """Prosecutor risk: largest and mean, and the share of records at the largest."""

    max: Figure
    mean: Figure
    records_at_max: Figure


@dataclass(frozen=True, kw_only=True)
class Uniqueness:
    """Sample uniques and the estimated population uniques, as a count and a share."""

    sample_uniques: Count
    population_uniques: Figure
    population_uniqueness: Figure


@dataclass(frozen=True, kw_only=True)
class PopulationRisk:
    """Population uniqueness (Zayatz's model) of the release and of the original QI values,
    with the sampling fraction and population size it assumed."""

    model: str
    sampling_fraction: float
    population_size: Count
    release: Uniqueness
    source: Uniqueness


@dataclass(frozen=True, kw_only=True)
class Risk:
    """Disclosure risk of the release (tclose.measures)."""

    record_linkage: Figure
    interval_disclosure: Figure
    interval_p: Figure
    attribute: Mapping[str, AttributeRisk]
    reidentification: Reidentification
    population: PopulationRisk
    classes: Count
    definitions: Mapping[str, str]
    not_computed: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class AttributeRecord:
    """A configured column's role and type."""

    role: str
    type: str


#: ``timings``: seconds per phase in the order they ran, ``compile`` and ``total``.
Timings = Annotated[
    Mapping[str, Figure],
    Fragment(properties={"compile": {"type": "number"}}),
]


@dataclass(frozen=True, kw_only=True)
class Report:
    """The audit report of a run (docs/reports.md)."""

    tool: Tool
    run: Run
    config_sha256: Annotated[
        str | None, Judged("a SHA-256 in hex or null; the config_sha256 check judges any value")
    ]
    source: Source
    target: Target
    algorithm: AlgorithmRecord
    privacy: Privacy
    clusters: Clusters
    utility: Utility
    distributions: Mapping[str, CategoryDistribution | NumericDistribution]
    warnings: Sequence[str]
    verification: VerificationRecord
    timings: Timings
    plugins: Mapping[str, str]
    risk: Risk | Absent = Absent.ABSENT
    attributes: Mapping[str, AttributeRecord] | Absent = Absent.ABSENT
    config: Mapping[str, Any] | Absent = Absent.ABSENT


@functools.cache
def report_schema() -> dict[str, Any]:
    """The JSON Schema of a report (``tclose schema report``), generated from :class:`Report`."""
    return json_schema(Report, title=f"tclose audit report, version {REPORT_VERSION}")
