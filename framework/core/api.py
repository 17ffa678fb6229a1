"""The Python API: anonymize a pandas DataFrame in memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.attributes import EncodedTable, exact_rounded_means, spelled_apart
from tclose.base.config import (
    AttributeSpec,
    Settings,
    attribute_document,
    checked_interval_p,
    checked_sampling_fraction,
    criterion_keys,
    parse_settings,
)
from tclose.base.digests import canonical
from tclose.base.registry import Registry, load_registry
from tclose.core.columns import unlisted_columns
from tclose.core.entities import entity_codes
from tclose.core.pipeline import (
    ROLES,
    Timer,
    checked_t,
    encode_frame,
    encode_released,
    measure,
    partition,
    suppress,
    verify_release,
)
from tclose.core.plan import resolve_plugins
from tclose.core.published import frame_linkage, linkage_advice
from tclose.core.report import RunContext, build_report
from tclose.core.suppression import suppression_evidence
from tclose.core.verify import Verification, problems
from tclose.errors import ConfigError, VerificationError
from tclose.measures import INTERVAL_P
from tclose.measures.population import SAMPLING_FRACTION


@dataclass
class AnonymizationResult:
    """The outcome of :func:`anonymize`.

    Attributes:
        data: the release: quasi-identifiers replaced by their cluster's aggregate, identifiers
            dropped, rows set aside by ``missing: exclude-rows`` left out, rows in their content
            order (:func:`in_content_order`) with a fresh ``RangeIndex`` (unless
            ``keep_order``). This is what may be shared.
        labels: ``int64`` cluster of every input row, aligned with the input (dense,
            ``0..L-1``; ``-1`` for a row set aside or suppressed). For analysis only: it links the clusters to
            the input rows, so it must not be shared with the release.
        report: the audit report, as in the JSON written by ``tclose run`` without the database
            parts.
    """

    data: pd.DataFrame
    labels: np.ndarray
    report: dict[str, Any]


def anonymize(
    df: pd.DataFrame,
    quasi_identifiers: Sequence[str] | Mapping[str, Any],
    confidential: Sequence[str] | Mapping[str, Any] = (),
    k: int = 2,
    t: float | None = None,
    algorithm: str | None = None,
    *,
    identifiers: Sequence[str] | None = (),
    other: Sequence[str] | Mapping[str, Any] = (),
    keep_order: bool = False,
    registry: Registry | None = None,
    interval_p: float = INTERVAL_P,
    max_suppressed: float = 0.0,
    sampling_fraction: float = SAMPLING_FRACTION,
    **options: Any,
) -> AnonymizationResult:
    """Make ``df`` k-anonymous (and t-close) by microaggregation, in memory.

    Every column of ``df`` must have exactly one role: quasi-identifier, confidential, identifier
    (dropped) or other (published unchanged); an unlisted column is a :class:`ConfigError`.

    Args:
        df: the table.
        quasi_identifiers: QI columns; a list means numeric attributes, a mapping gives each
            column its type (``{"age": "numeric"}``) or its full YAML attribute spec. An ordered
            ``pd.Categorical`` declared ``ordinal`` keeps its category order.
        confidential: confidential columns, same forms as ``quasi_identifiers``.
        k: minimum class size (an ``int`` or NumPy integer).
        t: t-closeness level in ``(0, 1]``, or ``None`` for k-anonymity only.
        algorithm: a registered algorithm name; by default ``t-first`` when ``t`` is given,
            else ``mdav``. An algorithm that does not enforce t (``mdav``) refuses a ``t``.
        identifiers: direct identifiers, dropped from the output.
        other: columns published unchanged (a list, or a mapping to their YAML spec, e.g.
            ``{"notes": {"allow_unique": True}}`` for a column whose values may be unique).
        keep_order: keep the input's row order and index in ``data`` (for analysis only: such
            a frame links back to the input row by row; do not share it).
        registry: the plugins to use (default: built-ins and installed plugins).
        interval_p: half-width of interval disclosure in standard deviations (report ``risk``).
        max_suppressed: the largest share of rows left out as outliers, in ``[0, 0.5)``
            (``privacy.max_suppressed``, :mod:`tclose.core.suppression`): they are not in
            ``data`` and their ``labels`` are ``-1``.
        sampling_fraction: the share of the population ``df`` is a sample of, in ``(0, 1]``,
            for the population-uniqueness estimate (``report.sampling_fraction``).
        **options: the algorithm's options (as under ``algorithm.options`` in YAML), and the
            keys registered criteria declare (``config_keys``), by their name in their section:
            ``l=3`` for ``privacy.l``, ``l_kind="entropy"`` for ``privacy.l_kind``,
            ``entity="nr"`` for ``source.entity`` (a column of ``df`` with no role, or an
            identifier: every class then holds rows of ``k`` distinct entities, and the column
            is not in ``data``).

    Returns:
        an :class:`AnonymizationResult`; its ``data`` has been verified (k and t recomputed from
        the output rows, no row unique on its pass-through columns taken together).

    Raises:
        ConfigError: bad arguments. DataError: unusable data (NULLs, text, n < k).
        VerificationError: the output failed verification (rows that their pass-through columns
            single out, or a bug in the algorithm plugin).
    """
    _check_arguments(df, keep_order, options)
    # Rows are numbered by position from here on: the index (person ids, say) reaches neither a
    # message nor the release. A shallow copy: the input frame is never written.
    index, df = df.index, df.set_axis(pd.RangeIndex(len(df)), axis=0)
    fractions = (
        checked_interval_p(interval_p),
        checked_sampling_fraction(sampling_fraction, path=("sampling_fraction",)),
    )
    registry = registry or load_registry()
    identifiers = list(attribute_document(identifiers, "identifier"))  # None, a name, a list
    roles = (quasi_identifiers, confidential, identifiers, other)
    settings = _settings(df, roles, (k, t, max_suppressed), algorithm, options, registry)
    context = RunContext(
        registry,
        resolve_plugins(settings, registry),
        settings.k,
        settings.t,
        max_suppressed=settings.max_suppressed,
        rows_read=len(df),
    )
    encoded, entities = _partitioned(df, settings, context, fractions)
    entity = [settings.entity] if settings.entity and settings.entity not in identifiers else []
    data = _release(df, encoded.left_out, [*identifiers, *entity], context, settings.attributes)
    if keep_order:
        data.index = index[~encoded.left_out]
    data, row_entities = _in_order(data, entities, keep_order)
    with Timer(context.timings).phase("verify"):
        context.verification = _verify_release(data, settings, context, row_entities)
    report = build_report(context)
    _refuse_unverified(context, report)
    assert context.labels is not None
    return AnonymizationResult(data, _input_labels(encoded.left_out, context.labels), report)


def _check_arguments(df: Any, keep_order: Any, options: Mapping[str, Any]) -> None:
    """:class:`ConfigError` for arguments of :func:`anonymize` that no settings could mean."""
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"anonymize() takes a pandas DataFrame; got {type(df).__name__}.")
    if "seed" in options:
        raise ConfigError(
            "anonymize() takes no seed: the release is in the order of its content "
            "(in_content_order), the same for the same rows, so nothing orders it at random "
            "and nothing kept could link its rows to the input's. Remove seed=."
        )
    if not isinstance(keep_order, (bool, np.bool_)):  # "false" would keep the order, and link
        raise ConfigError(f"keep_order must be True or False; got {keep_order!r}.")


def _partitioned(
    df: pd.DataFrame, settings: Settings, context: RunContext, fractions: tuple[float, float]
) -> tuple[EncodedTable, np.ndarray | None]:
    """The steps of :mod:`tclose.core.pipeline` up to the measures (encode, suppress the
    outliers, partition and aggregate, measure), timed and recorded in ``context``; the encoded
    table and the entity codes of its partitioned rows (``source.entity``, else ``None``).
    ``fractions``: ``interval_p`` and ``sampling_fraction``."""
    timer, attributes = Timer(context.timings), settings.attributes
    with timer.phase("read"):
        encoded = encode_frame(df, attributes)
        encoded = context.encoded = suppress(encoded, settings.k, settings.max_suppressed)
        entities = _entities(df, settings.entity, encoded.left_out)
    with timer.phase("kernel"):
        clustered = partition(
            encoded,
            context.resolved,
            settings.k,
            settings.t,
            entities=None if entities is None else (str(settings.entity), entities),
            l_diversity=settings.l_diversity,
        )
    context.labels, context.partition = clustered.labels, clustered.partition
    context.aggregated = clustered.aggregated
    with timer.phase("measures"):
        context.measures = measure(encoded, clustered, attributes, *fractions)
    return encoded, entities


#: The label of the entity column while the release is put in order: not a string, so no
#: column of the frame (their labels are strings) bears it.
_ENTITY_LABEL = -1


def _entities(df: pd.DataFrame, entity: str | None, excluded: np.ndarray) -> np.ndarray | None:
    """The entity codes (:func:`tclose.core.entities.entity_codes`) of the kept rows, or
    ``None`` without ``entity``."""
    if entity is None:
        return None
    return entity_codes(df[entity][~excluded], entity)


def _in_order(
    data: pd.DataFrame, entities: np.ndarray | None, keep_order: bool
) -> tuple[pd.DataFrame, np.ndarray | None]:
    """``data`` in content order unless ``keep_order``, and the entity of each of its rows.
    The entities are ordered with the rows as their last, least significant column: only rows
    equal in every published column are ordered by them."""
    if entities is None:
        return (data if keep_order else in_content_order(data)), None
    data = data.copy()
    data[_ENTITY_LABEL] = entities
    if not keep_order:
        data = in_content_order(data)
    return data.drop(columns=[_ENTITY_LABEL]), data[_ENTITY_LABEL].to_numpy()


def _input_labels(excluded: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The cluster of every input row, ``-1`` for a row set aside or suppressed."""
    all_labels = np.full(len(excluded), -1, dtype=np.int64)
    all_labels[~excluded] = labels
    return all_labels


def _refuse_unverified(context: RunContext, report: dict[str, Any]) -> None:
    """:class:`VerificationError` (with the report) if the release failed verification."""
    verification = context.verification
    assert verification is not None
    if verification.passed:
        return
    failed = ", ".join(c.name for c in verification.failures())
    raise VerificationError(
        f"The output of {context.resolved.algorithm.name} failed verification ({failed})."
        + problems(verification.results)
        + linkage_advice(
            verification.results,
            "identifiers=[...]",
            "pass other={column: {'allow_unique': True}}",
        ),
        verification.checks,
        report,
    )


def _settings(
    df: pd.DataFrame,
    roles: tuple[Any, Any, Any, Any],
    privacy: tuple[Any, Any, Any],
    algorithm: str | None,
    options: Mapping[str, Any],
    registry: Registry,
) -> Settings:
    """The arguments of :func:`anonymize` as the YAML document they stand for, parsed by the
    parser of ``tclose run`` (:func:`tclose.base.config.parse_settings`); every column of ``df``
    must have exactly one role. ``roles``: the QI, confidential, identifier and other columns
    as :func:`anonymize` takes them; ``privacy``: ``k``, ``t`` and ``max_suppressed``;
    ``options`` the algorithm's options and the criterion keys of ``registry``
    (:func:`tclose.base.config.criterion_keys`) by their name."""
    k, t, max_suppressed = (_plain(value) for value in privacy)
    _check_labels(df.columns)
    keys = criterion_keys(registry)
    options = dict(options)
    document: dict[str, Any] = {
        "attributes": _attributes_of(df, *roles),
        "privacy": {"k": k, "t": t, "max_suppressed": max_suppressed},
        "algorithm": {"name": algorithm or ("t-first" if t is not None else "mdav")},
    }
    for key in keys:  # privacy.l is l=..., source.entity is entity=...
        section, _, name = key.partition(".")
        if name in options:
            document.setdefault(section, {})[name] = _plain(options.pop(name))
    document["algorithm"]["options"] = options
    settings = parse_settings(document, keys=keys)
    missing = [name for name in settings.attributes if name not in df.columns]
    if missing:
        raise ConfigError(
            f"Column {missing[0]!r} is not in the DataFrame. "
            f"Its columns are: {', '.join(repr(str(c)) for c in df.columns)}."
        )
    _refuse_unknown_entity(df, settings.entity)
    unlisted = unlisted_columns(
        [*settings.attributes, *([settings.entity] if settings.entity else [])],
        [str(c) for c in df.columns],
        None,
    )
    if unlisted:
        raise ConfigError(
            f"The DataFrame has {len(unlisted)} column(s) with no role: "
            f"{', '.join(map(repr, unlisted))}. "
            f"Pass each in other=[...] to publish it unchanged, or in identifiers=[...] to drop "
            f"it."
        )
    return settings


def _refuse_unknown_entity(df: pd.DataFrame, entity: str | None) -> None:
    """:class:`ConfigError` when ``entity`` is not a column of ``df`` (naming a column spelled
    alike in another case: names are compared exactly)."""
    if entity is None or entity in df.columns:
        return
    alike = [c for c in df.columns if c.casefold() == entity.casefold()]
    hint = f" Did you mean {alike[0]!r}? Column names are compared exactly." if alike else ""
    raise ConfigError(f"The entity column {entity!r} (entity=) is not in the DataFrame.{hint}")


def _check_labels(columns: pd.Index) -> None:
    """:class:`ConfigError` unless every column label is a string and no two are equal (a
    column is named by its label in the roles, the report and the release)."""
    not_strings = [c for c in columns if not isinstance(c, str)]
    if not_strings:
        shown = ", ".join(f"{c!r} ({type(c).__name__})" for c in not_strings[:5])
        raise ConfigError(
            f"The DataFrame's column labels must be strings; {len(not_strings)} are not: "
            f"{shown}. Rename them, e.g. df.columns = df.columns.astype(str)."
        )
    counts = columns.value_counts()
    doubled = counts[counts > 1]
    if len(doubled):
        shown = ", ".join(f"{n} columns named {c!r}" for c, n in doubled.items())
        raise ConfigError(f"The DataFrame has {shown}; a column has exactly one name.")


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds (``np.int64(5)`` → ``5``)."""
    return value.item() if isinstance(value, np.generic) else value


def _attributes_of(
    df: pd.DataFrame,
    quasi_identifiers: Sequence[str] | Mapping[str, Any],
    confidential: Sequence[str] | Mapping[str, Any],
    identifiers: Sequence[str],
    other: Sequence[str] | Mapping[str, Any],
) -> dict[str, Any]:
    """The ``attributes`` document of the API's arguments; an ordered ``pd.Categorical``
    declared ``ordinal`` without ``categories`` brings its category order."""
    parts = [
        attribute_document(quasi_identifiers, "quasi_identifier"),
        attribute_document(confidential, "confidential"),
        attribute_document(identifiers, "identifier"),
        attribute_document(other, "other"),
    ]
    document: dict[str, Any] = {}
    for part in parts:
        for name, body in part.items():
            if name in document:
                raise ConfigError(
                    f"Column {name!r} is given two roles ({document[name]['role']} and "
                    f"{body['role']}); a column has exactly one role."
                )
            document[name] = body
    for name, body in document.items():
        if name not in df.columns:
            continue
        dtype = df[name].dtype
        ordered = isinstance(dtype, pd.CategoricalDtype) and dtype.ordered
        if body.get("type") == "ordinal" and ordered and "categories" not in body:
            body["categories"] = [str(c) for c in dtype.categories]
    return document


def _verify_release(
    data: pd.DataFrame,
    settings: Settings,
    context: RunContext,
    entities: np.ndarray | None = None,
) -> Verification:
    """The verifier's verdict on the released frame: every criterion
    (:func:`tclose.core.verify.release_criteria`) on its rows, their classes and EMDs, the
    source's confidential values, the linkage of its pass-through columns and the entity of
    every row (``entities``, aligned with ``data``)."""
    encoded, resolved, attributes = context.encoded, context.resolved, settings.attributes
    assert encoded is not None
    columns = [a.name for role in ROLES for a in attributes.values() if a.role == role]
    released, _ = encode_released(data[columns].copy(), attributes)
    return verify_release(
        released,
        settings,
        resolved.distances,
        context.registry,
        k=context.k,
        t=checked_t(resolved, context.t),
        attribute_options=encoded.distance_options,
        expected_rows=len(data),
        expected_confidential=encoded.confidential,
        linkage=frame_linkage(data, attributes),
        entities=entities,
        suppression=suppression_evidence(encoded, settings.max_suppressed),
    )


def _release(
    df: pd.DataFrame,
    excluded: np.ndarray,
    identifiers: Sequence[str],
    context: RunContext,
    attributes: Mapping[str, AttributeSpec],
) -> pd.DataFrame:
    """The published frame: identifiers dropped, QIs replaced (in their input dtype where it is
    a category, bool or other non-numeric dtype, a rounded integer or a zoned date-time), rows
    in the input's order (:func:`_in_order` puts them in content order); every dtype's
    metadata from the published rows alone
    (:func:`_metadata_of_published_rows`). ``context``: the published values (``aggregated``)
    and the cluster of each kept row (``labels``)."""
    aggregated, labels = context.aggregated, context.labels
    assert labels is not None
    data = df.iloc[np.flatnonzero(~excluded)].drop(columns=list(identifiers)).copy()
    data.attrs = {}  # the input's metadata is not the release's
    for column, values in aggregated.items():
        kind = attributes[column].type
        if kind in ("ordinal", "nominal"):
            values = _in_input_type(df[column], values)
        elif kind == "numeric" and attributes[column].round:
            values = _rounded_in_input_type(data[column], labels, values)
        elif kind == "datetime" and getattr(df[column].dtype, "tz", None) is not None:
            values = pd.DatetimeIndex(values).tz_localize("UTC").tz_convert(df[column].dtype.tz)
        data[column] = values
    return _metadata_of_published_rows(data)


def _metadata_of_published_rows(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` with every column's dtype metadata derived from its own rows: a ``category``
    column names only the values it holds (in the input's category order, ``ordered`` kept),
    never a value of a row that is not published, of a value the aggregation replaced or of a
    domain declared beyond the rows (a category list is data: each names a value someone
    held)."""
    for column in data.columns:
        if isinstance(data[column].dtype, pd.CategoricalDtype):
            data[column] = data[column].cat.remove_unused_categories()
    return data


def in_content_order(data: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``data`` in their content order, with a fresh ``RangeIndex``: the order of
    :func:`anonymize`'s release, a function of the values alone (the index and the order the
    rows come in play no part).

    Rows are sorted column by column, in column order. Numbers (NumPy integer, boolean and
    float dtypes) by value, missing first and ``-0.0`` before ``0.0``; date-times and
    durations by their integer ticks, ``NaT`` first; categories by their code; values of
    any other dtype by the ``repr`` of their Python value (``1``, ``1.0``, ``True`` and
    ``'1'`` apart; a zoned date-time in UTC). Rows that tie hold the same values.

    >>> in_content_order(pd.DataFrame({"a": [2, 1, 2], "b": ["y", "z", "x"]}))
       a  b
    0  1  z
    1  2  x
    2  2  y
    """
    keys: list[np.ndarray] = []
    for column in data.columns:
        keys += _order_keys(data[column])
    order = np.lexsort(keys[::-1]) if keys else np.arange(len(data))
    return data.iloc[order].reset_index(drop=True)


def _order_keys(values: pd.Series) -> list[np.ndarray]:
    """The sort keys of one column for :func:`in_content_order`, most significant first."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        return [values.to_numpy()]
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        numbers = values.to_numpy()
        missing = np.isnan(numbers)
        return [~missing, np.where(missing, 0.0, numbers), ~np.signbit(numbers)]
    if isinstance(dtype, pd.CategoricalDtype):
        return [values.cat.codes.to_numpy()]
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        return [np.asarray(values.array.asi8)]
    texts = np.array([repr(canonical(v)) for v in values.astype(object)], dtype=object)
    return [pd.factorize(texts, sort=True)[0]]


def _rounded_in_input_type(kept: pd.Series, labels: np.ndarray, published: np.ndarray) -> Any:
    """A rounded QI (``round: true``) of integers in the input's dtype (``int8``, ``uint64``,
    ``Int64``, ...): each cluster's exact mean rounded half to even (as ``np.rint``), computed
    in integers, so values beyond ``2**53`` are not rounded through ``float64`` (a mean is
    never outside its members' range, so it always fits the dtype). ``kept``: the input values
    of the published rows; ``published``: their float means, returned for a non-integer QI."""
    dtype = kept.dtype
    numpy_dtype = getattr(dtype, "numpy_dtype", getattr(dtype, "subtype", dtype))
    if not isinstance(numpy_dtype, np.dtype) or numpy_dtype.kind not in "iu" or not len(kept):
        return published
    wide = np.uint64 if numpy_dtype.kind == "u" else np.int64
    values = kept.to_numpy(dtype=numpy_dtype).astype(wide)
    means = exact_rounded_means(values, labels, int(labels.max()) + 1)
    return pd.array(means.astype(numpy_dtype)[labels], dtype=dtype)


def _in_input_type(original: pd.Series, published: np.ndarray) -> Any:
    """Published category labels (strings, ``None`` for NULL) as the input's values and dtype
    (a ``category`` dtype's list is then cut to the values shown,
    :func:`_metadata_of_published_rows`)."""
    lookup = {str(v): v for v in pd.unique(original.dropna())}
    if not set(pd.unique(published[pd.notna(published)])) <= lookup.keys():  # 0.0 and -0.0
        present = original.dropna()
        lookup.update(spelled_apart(present.map(str).to_numpy(dtype=object), present, lookup))
    values = [None if v is None else lookup.get(v, v) for v in published]
    dtype = original.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return pd.Categorical(values, categories=dtype.categories, ordered=dtype.ordered)
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        complete = all(v is not None for v in values)
        return np.array(values, dtype=dtype if complete else object)
    try:
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError):
        return np.array(values, dtype=object)
