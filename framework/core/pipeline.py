"""The in-memory steps from a table to a verified release, the one core of ``tclose run``
(:mod:`tclose.core.runner`), :func:`tclose.anonymize` (:mod:`tclose.core.api`) and ``tclose
compare`` (:mod:`tclose.app.compare`).

The steps, in order:

1. encode: :func:`read_inputs` (a database table, streamed) or :func:`encode_frame` (a
   DataFrame) give the :class:`~tclose.base.attributes.EncodedTable` of the kept rows, from
   which :func:`suppress` (or :func:`suppress_keyed`, with the rows' keys) leaves out the
   outliers ``privacy.max_suppressed`` allows (:mod:`tclose.core.suppression`);
2. partition: :func:`partition` fits the distances, runs the algorithm (with the framework's
   blocks and refinement) and aggregates the quasi-identifiers: the published values
   (:class:`Clustered`);
3. measure: :func:`measure` computes disclosure risk and utility of those values;
4. verify: the released rows (read back from the database, the API's DataFrame, or
   :func:`released_frame` of the published values), their confidential columns encoded by
   :func:`encode_released`, are judged by :func:`verify_release` with the one verifier of
   :mod:`tclose.core.verify`.

How the published values reach their table (written through a connector, a DataFrame in its
input dtypes, nothing for ``compare``) and what is reported belong to each caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.attributes import EncodedTable, encode_confidential, encode_table
from tclose.base.compile_notice import compile_account
from tclose.base.config import AttributeSpec, Config, Settings
from tclose.core.clustering import cluster_rows, release_sse_of
from tclose.core.entities import entity_codes
from tclose.core.plan import Resolved, with_attribute_options
from tclose.core.suppression import suppress_outliers
from tclose.core.verify import Verification, gather_evidence, release_criteria, verify
from tclose.errors import DataError
from tclose.interfaces import Distance, Partition
from tclose.measures import measure_configured
from tclose.measures.population import SAMPLING_FRACTION
from tclose.naming import KEY_LABEL, TableName

log = logging.getLogger("tclose")

#: The roles of the columns a release is verified on, in the order the verifier reads them.
ROLES = ("quasi_identifier", "confidential")

#: The ``timings`` entry of the seconds spent compiling Numba kernels.
COMPILE = "compile"


class Timer:
    """Seconds spent per phase, in the order the phases ran, and under ``compile`` the seconds
    Numba spent compiling kernels in them (:mod:`tclose.base.compile_notice`), which the phases'
    own figures leave out."""

    def __init__(self, seconds: dict[str, float] | None = None) -> None:
        #: phase name → seconds (``seconds``, when given, is filled in place).
        self.seconds: dict[str, float] = seconds if seconds is not None else {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        log.info("%s ...", name)
        with compile_account() as compiling:
            try:
                yield
            finally:
                self.record(name, time.perf_counter() - start, compiling=compiling.seconds)
                log.info("%s done in %.2f s", name, self.seconds[name])

    def record(
        self, name: str, seconds: float, after: str | None = None, compiling: float = 0.0
    ) -> None:
        """Record a phase timed elsewhere (in a thread), placed right after the phase ``after``
        if it was timed (in the order the phases started, not ended); ``compiling`` of its
        ``seconds`` were Numba compiling kernels (counted under ``compile`` instead)."""
        self.seconds[COMPILE] = round(self.seconds.get(COMPILE, 0.0) + compiling, 4)
        self.seconds[name] = round(seconds - compiling, 4)
        if after in self.seconds:
            items = [(k, v) for k, v in self.seconds.items() if k != name]
            at = [k for k, _v in items].index(after) + 1
            items.insert(at, (name, self.seconds[name]))
            self.seconds.clear()
            self.seconds.update(items)


# --- 1. encode ----------------------------------------------------------------------------------


def encode_frame(frame: pd.DataFrame, attributes: Mapping[str, AttributeSpec]) -> EncodedTable:
    """The encoded quasi-identifier and confidential columns of ``frame`` (rows set aside by
    ``missing: exclude-rows`` marked in ``excluded``)."""
    return encode_table(frame, list(attributes.values()))


def _chunks(
    stream: Iterator[pd.DataFrame],
    progress: Callable[..., None] | None,
    line: str,
    total: int | None = None,
) -> list[pd.DataFrame]:
    """Collect a streamed read, reporting the rows read so far to ``progress``."""
    frames, done = [], 0
    for frame in stream:
        frames.append(frame)
        done += len(frame)
        if progress is not None:
            progress(line, done=done, total=total)
    return frames


def read_inputs(
    database: Any,
    config: Config,
    progress: Callable[..., None] | None = None,
    line: str = "",
    name: TableName | None = None,
) -> tuple[np.ndarray, EncodedTable, set, np.ndarray | None]:
    """Pass 1 over a database table: the row keys and the encoded QI and confidential columns
    of the kept rows, the keys of the rows set aside by ``missing: exclude-rows``, and the
    entity codes of the kept rows (``source.entity``, else ``None``); from table ``name`` (the
    plan's resolved source), else ``source.table`` as written.

    Raises:
        DataError: a row key that is NULL or held by more than one row, or unusable values.
    """
    entity = [config.entity] if config.entity else []
    columns = config.quasi_identifiers + config.confidential + entity
    frames = _chunks(
        database.read(
            name or TableName.parse(config.source.table),
            columns,
            key=config.source.key,
            chunk_size=config.source.chunk_size,
        ),
        progress,
        line,
    )
    frame = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=[KEY_LABEL, *columns])
    )
    # The row key (KEY_LABEL) is the first column, taken by position: a QI or confidential
    # column may bear the same name.
    keys = frame.iloc[:, 0].to_numpy()
    if len(keys) and (pd.isna(frame.iloc[:, 0]).any() or len(pd.unique(keys)) != len(keys)):
        raise DataError(_key_problem(config, frame.iloc[:, 0]))
    frame = frame.iloc[:, 1:]
    frame.index = pd.Index(keys, name="key")  # error messages name rows by their key
    entities = frame.pop(entity[0]) if entity else None  # by name: never a QI (config refuses)
    encoded = encode_frame(frame, config.attributes)
    codes = None if entities is None else entity_codes(entities[~encoded.excluded], entity[0])
    return keys[~encoded.excluded], encoded, set(keys[encoded.excluded].tolist()), codes


def suppress(encoded: EncodedTable, k: int, bound: float) -> EncodedTable:
    """``encoded`` less the outliers the share ``bound`` (``privacy.max_suppressed``) allows
    with minimum class size ``k`` (:func:`tclose.core.suppression.suppress_outliers`)."""
    return suppress_outliers(encoded, k, bound)


def kept_entities(entities: np.ndarray | None, encoded: EncodedTable) -> np.ndarray | None:
    """The entity codes of the rows :func:`suppress` left in ``encoded``: ``entities`` holds
    one code per row :func:`read_inputs` kept (``None`` without ``source.entity``)."""
    if entities is None or encoded.suppressed is None:
        return entities
    return entities[~encoded.suppressed[~encoded.excluded]]


def suppress_keyed(
    keys: np.ndarray, encoded: EncodedTable, config: Config | Settings, set_aside: set
) -> tuple[np.ndarray, EncodedTable]:
    """:func:`suppress` for the rows of :func:`read_inputs`: the keys and encoding of the rows
    left once ``privacy.max_suppressed`` left the outliers out; their keys are added to
    ``set_aside`` (never written)."""
    before = len(encoded.x)
    encoded = suppress(encoded, config.k, config.max_suppressed)
    if len(encoded.x) == before:
        return keys, encoded
    assert encoded.suppressed is not None
    suppressed = encoded.suppressed[~encoded.excluded]
    set_aside.update(keys[suppressed].tolist())
    return keys[~suppressed], encoded


def _key_problem(config: Config, keys: pd.Series) -> str:
    """The message for row keys that are NULL or repeated: how many, and the first repeated
    values (error messages name rows by their key)."""
    named = f"row key {config.source.key!r}" if config.source.key else "row key"
    problems = []
    nulls = int(keys.isna().sum())
    if nulls:
        problems.append(f"{nulls} row(s) with NULL")
    repeated = keys[keys.duplicated(keep=False) & keys.notna()]
    if len(repeated):
        values = repeated.unique()
        shown = ", ".join(str(v) for v in values[:5]) + (", ..." if len(values) > 5 else "")
        problems.append(
            f"{len(values)} value(s) held by more than one row ({len(repeated)} rows): {shown}"
        )
    return (
        f"The {named} of {config.source.table} is not unique and non-null: "
        f"{'; '.join(problems)}. Name a unique, non-null column as source.key."
    )


# --- 2. partition and published values ----------------------------------------------------------


@dataclass
class Clustered:
    """The algorithm's answer on the kept rows and the values it publishes."""

    #: dense cluster label ``0..L-1`` of every kept row.
    labels: np.ndarray = field(repr=False)
    #: the algorithm's :class:`~tclose.interfaces.Partition` (its ``info`` is reported).
    partition: Partition = field(repr=False)
    #: QI column → the published value of every kept row (its cluster's aggregate).
    aggregated: dict[str, np.ndarray] = field(repr=False)


def partition(
    encoded: EncodedTable,
    resolved: Resolved,
    k: int,
    t: float | None,
    *,
    entities: tuple[str, np.ndarray] | None = None,
    l_diversity: tuple[int, str] | None = None,
) -> Clustered:
    """Fit the distances, partition the kept rows of ``encoded`` with the resolved algorithm
    (:func:`tclose.core.clustering.cluster_rows`, which also enforces k distinct
    ``entities`` — the entity column's name and the code of every kept row — and
    ``l_diversity`` — ``(l, kind)``) and aggregate each cluster's quasi-identifiers into the
    values the release publishes. The algorithm is handed the report's SSE of a partition
    (:func:`tclose.core.clustering.release_sse_of`) as
    :attr:`Problem.release_sse <tclose.interfaces.Problem.release_sse>`.

    Raises:
        DataError: fewer kept rows than ``k`` (naming the rows set aside or suppressed).
        VerificationError: the algorithm broke its contract.
    """
    labels, answer, _fitted = cluster_rows(
        encoded.x,
        encoded.confidential,
        encoded.distance_options,
        resolved,
        k,
        t,
        int(encoded.left_out.sum()),
        release_sse_of(encoded),
        entities=entities,
        l_diversity=l_diversity,
    )
    return Clustered(labels, answer, encoded.aggregate(labels))


# --- 3. measure ---------------------------------------------------------------------------------


def measure(
    encoded: EncodedTable,
    clustered: Clustered,
    attributes: Mapping[str, AttributeSpec],
    interval_p: float,
    sampling_fraction: float = SAMPLING_FRACTION,
) -> dict[str, dict[str, Any]]:
    """The ``risk`` section and ``utility`` additions of the release
    (:func:`tclose.measures.measure_configured`); ``sampling_fraction`` is the share of the
    population the table is taken to be a sample of (``risk.population``)."""
    return measure_configured(
        encoded,
        clustered.aggregated,
        attributes,
        interval_p,
        clustered.labels,
        sampling_fraction,
    )


# --- 4. verify ----------------------------------------------------------------------------------


def released_frame(clustered: Clustered, confidential: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The rows a release would hold, as the verifier reads them: the published QI values and
    the (encoded) confidential values, row for row."""
    frame = pd.DataFrame({c: np.asarray(v) for c, v in clustered.aggregated.items()})
    for column, values in confidential.items():
        frame[column] = values
    return frame


def encode_released(
    frame: pd.DataFrame, attributes: Mapping[str, AttributeSpec]
) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """``frame`` (released rows, changed in place) with its confidential columns encoded as
    their distances expect, and the options each encoding adds to its distance's."""
    extra = {}
    for spec in attributes.values():
        if spec.role == "confidential":
            frame[spec.name], extra[spec.name] = encode_confidential(frame[spec.name], spec)
    return frame, extra


def verify_release(
    frame: pd.DataFrame,
    settings: Config | Settings,
    distances: Mapping[str, tuple[Distance, dict[str, Any]]],
    registry: Any,
    *,
    k: int,
    t: float | None,
    attribute_options: Mapping[str, dict[str, Any]] | None = None,
    **known: Any,
) -> Verification:
    """The verifier's verdict (:func:`tclose.core.verify.verify`) on released rows, against
    every criterion of :func:`tclose.core.verify.release_criteria`.

    Args:
        frame: the released rows' QI and (encoded) confidential columns.
        settings: the configuration (or the API's settings): the roles of the columns, and
            what the criteria that read it see, unless ``known`` gives another ``config``.
        distances: confidential column → its distance and configured options.
        registry: the plugins (third-party criteria).
        k: the k to check.
        t: the t to check, or ``None`` to measure the EMD only.
        attribute_options: column → options the encoding adds to its distance's.
        **known: the other facts of :class:`~tclose.core.criteria.Evidence` (``expected_rows``,
            ``expected_confidential``, ``linkage``, ``content_digest``, ``report``,
            ``suppression``, ...).
    """
    attributes = settings.attributes
    roles = {role: [a.name for a in attributes.values() if a.role == role] for role in ROLES}
    known.setdefault("config", settings)
    evidence = gather_evidence(
        frame,
        roles["quasi_identifier"],
        with_attribute_options(distances, attribute_options or {}),
        k,
        t,
        **known,
    )
    return verify(evidence, release_criteria(roles["confidential"], registry))


def checked_t(resolved: Resolved, t: float | None) -> float | None:
    """The t a release of ``resolved``'s algorithm is checked against: ``t``, or ``None`` (EMD
    measured only) when the algorithm does not enforce t-closeness."""
    return t if resolved.algorithm.requires_t else None
