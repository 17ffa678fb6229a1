"""One run, phase by phase: read → encode → fit → partition → write staging → verify → publish.

The runner is the only place that knows the order of the phases. Whatever fails, the source is
never written to, and the target is either the verified new table or exactly what it was before.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import report as report_module
from .config import Config, redact_url
from .encoding import aggregate, dense_labels, information_loss, numeric_column, standardize
from .errors import ConfigError, DataError, TcloseError, VerificationError
from .interfaces import Algorithm, Distance, Partition
from .options import validate_options
from .registry import Registry, load_registry
from .verify import Verification, verify_rows

log = logging.getLogger("tclose")


@dataclass
class Resolved:
    """The plugins a configuration names, with their validated options."""

    algorithm: Algorithm
    algorithm_options: dict[str, Any]
    distances: dict[str, tuple[Distance, dict[str, Any]]]


@dataclass
class RunResult:
    """What a run did."""

    report: dict[str, Any]
    published: bool
    verification: Verification | None = None
    labels: np.ndarray | None = field(default=None, repr=False)


class Timer:
    """Seconds spent per phase, in the order the phases ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        log.info("%s ...", name)
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - start, 4)
            log.info("%s done in %.2f s", name, self.seconds[name])


def resolve_plugins(config: Config, registry: Registry) -> Resolved:
    """Find the algorithm and distances the configuration names and validate their options."""
    algorithm = registry.get("algorithm", config.algorithm, "algorithm.name")
    options = validate_options(algorithm.name, algorithm.options_schema,
                               config.algorithm_options, "algorithm.options")
    if algorithm.requires_t and config.t is None:
        raise ConfigError(f"==> At privacy ==> At key: t\nAlgorithm {algorithm.name} needs "
                          f"privacy.t (a number in (0, 1]).")
    return Resolved(algorithm, options, resolve_distances(config, registry))


def resolve_distances(config: Config, registry: Registry) -> dict[str, tuple[Distance, dict]]:
    """The distance plugin and validated options of every confidential attribute."""
    distances = {}
    for attribute in config.attributes.values():
        if attribute.role != "confidential":
            continue
        path = f"attributes.{attribute.name}.distance"
        distance = registry.get("distance", attribute.distance, path)
        if attribute.type not in distance.attribute_types:
            raise ConfigError(
                f"==> At {path}\nDistance {distance.name} does not accept {attribute.type} "
                f"attributes (it accepts: {', '.join(distance.attribute_types)})."
            )
        distances[attribute.name] = (
            distance,
            validate_options(distance.name, distance.options_schema, attribute.distance_options,
                             f"attributes.{attribute.name}.distance_options"),
        )
    return distances


def partition_rows(
    quasi: np.ndarray,
    confidential: Mapping[str, np.ndarray],
    resolved: Resolved,
    k: int,
    t: float | None,
) -> tuple[np.ndarray, Partition, list[Any]]:
    """Fit the distances and run the algorithm; returns dense labels, the raw partition and the
    fitted distances."""
    n = quasi.shape[0]
    if n < k:
        raise DataError(f"The table has {n} rows, fewer than k = {k}: no k-anonymous release "
                        f"is possible. Lower k or add rows.")
    fitted = []
    for column, values in confidential.items():
        distance, options = resolved.distances[column]
        model = distance.fit(values, options)
        model.column = column
        fitted.append(model)
    x = standardize(quasi)
    partition = resolved.algorithm.partition(x, fitted, k, t, resolved.algorithm_options)
    labels = np.asarray(partition.labels)
    if labels.shape != (n,):
        raise VerificationError(
            f"Algorithm {resolved.algorithm.name} returned {labels.shape} labels for {n} rows."
        )
    return dense_labels(labels), partition, fitted


def _read_inputs(database, config: Config) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    from tclose.connectors.sql import TableName

    columns = config.quasi_identifiers + config.confidential
    frames = list(database.read(TableName.parse(config.source.table), columns,
                                key=config.source.key, chunk_size=config.source.chunk_size))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["__key__", *columns])
    keys = frame["__key__"].to_numpy()
    if len(keys) and (pd.isna(frame["__key__"]).any() or len(pd.unique(keys)) != len(keys)):
        raise DataError(f"The row key of {config.source.table} is not unique and non-null; "
                        f"name a unique, non-null column as source.key.")
    quasi = np.column_stack(
        [numeric_column(frame[c], c, "quasi-identifier") for c in config.quasi_identifiers]
    ) if len(frame) else np.zeros((0, len(config.quasi_identifiers)))
    confidential = {c: numeric_column(frame[c], c, "confidential") for c in config.confidential}
    return keys, quasi, confidential


def run(
    config: Config,
    *,
    registry: Registry | None = None,
    dry_run: bool = False,
    report_path: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Anonymize the configured source table into the target table.

    Args:
        config: a validated configuration.
        registry: the plugins to use (default: built-ins and installed third-party plugins).
        dry_run: do everything, including verification, but publish nothing.
        report_path: where to write the audit JSON (overrides ``report.json``).
        progress: called with a line of text at the start of each phase.

    Returns:
        the :class:`RunResult`; ``published`` is true when the target now holds the verified table.

    Raises:
        ConfigError: exit code 2; DataError: exit code 3; VerificationError: exit code 1.
    """
    from tclose.connectors.sql import ROW_COLUMN, STAGING_SUFFIX, TableName

    registry = registry or load_registry()
    resolved = resolve_plugins(config, registry)
    timer = Timer()
    started = time.time()
    say = progress or (lambda _line: None)

    source_connector = registry.connector_for(_dialect(config.source.url))
    source_db = source_connector.connect(config.source.url, config.source.password_file)
    target_spec = config.target
    target_db = (
        source_db
        if target_spec.url == config.source.url
        and target_spec.password_file == config.source.password_file
        else registry.connector_for(_dialect(target_spec.url)).connect(
            target_spec.url, target_spec.password_file)
    )
    source_name = TableName.parse(config.source.table)
    target_name = TableName.parse(target_spec.table)
    staging_name = target_name.with_suffix(STAGING_SUFFIX)
    if target_db is source_db and str(source_name) == str(target_name):
        raise ConfigError("==> At target ==> At key: table\nThe target table is the source "
                          "table; tclose never modifies its source. Choose another name.")

    source_table = source_db.table(source_name)
    for column in config.attributes:
        if column not in source_table.c:
            raise DataError(
                f"Column {column!r} (attributes.{column}) does not exist in table "
                f"{source_name}. Its columns are: {', '.join(source_table.c.keys())}."
            )
    if target_db.exists(target_name) and target_spec.if_exists == "fail" and not dry_run:
        raise DataError(f"The target table {target_name} already exists and target.if_exists is "
                        f"'fail'. Set if_exists: replace, or choose another target table.")
    leftover = target_db.drop_if_exists(staging_name)
    if leftover:
        log.warning("dropped a leftover staging table %s from an interrupted run", staging_name)

    say(f"reading {source_name}")
    with timer.phase("read"):
        keys, quasi, confidential = _read_inputs(source_db, config)
    n = len(keys)

    say(f"partitioning {n} rows with {resolved.algorithm.name}")
    with timer.phase("kernel"):
        labels, partition, _fitted = partition_rows(quasi, confidential, resolved, config.k,
                                                    config.t)
    rounded = [a.name for a in config.attributes.values() if a.round]
    replaced = aggregate(quasi, labels, config.quasi_identifiers, rounded)

    dropped = set(config.identifiers)
    if not config.keep_key and config.source.key:
        dropped.add(config.source.key)
    output_columns = [c for c in source_table.c.keys() if c not in dropped]
    rng = np.random.default_rng(config.seed if config.seed is not None
                                else secrets.randbits(64))
    new_rows = rng.permutation(n).astype(np.int64) + 1

    say(f"writing staging table {staging_name}")
    with timer.phase("write"):
        if target_db is source_db:
            source_db.write_joined(source_name, config.source.key, staging_name, keys, new_rows,
                                   replaced, output_columns, rounded, config.source.chunk_size)
        else:
            chunks = _transformed_chunks(source_db, config, source_name, output_columns, keys,
                                         new_rows, replaced, ROW_COLUMN)
            target_db.write_streamed(staging_name, source_table, chunks, output_columns,
                                     list(replaced), rounded, config.source.chunk_size)

    published = False
    verification = None
    try:
        say("verifying the written rows")
        with timer.phase("verify"):
            verification = _verify_staging(target_db, staging_name, config, resolved, n,
                                           confidential)
        if not verification.passed:
            failed = ", ".join(c["name"] for c in verification.failures())
            raise VerificationError(
                f"Verification of the written table failed ({failed}); nothing was published "
                f"and {target_name} is unchanged.", verification.checks)
        if not dry_run:
            say(f"publishing {target_name}")
            with timer.phase("publish"):
                target_db.publish(staging_name, target_name,
                                  replace=target_spec.if_exists == "replace")
            published = True
    except BaseException as error:
        target_db.drop_if_exists(staging_name)
        if isinstance(error, VerificationError):
            report = report_module.build_report(
                config, registry, resolved, n, labels, partition, verification, quasi, replaced,
                timer.seconds, started, published=False, dry_run=dry_run,
                source_url=source_db.redacted_url, target_url=target_db.redacted_url,
                output_columns=[ROW_COLUMN, *output_columns])
            report_module.finish(report, registry, config, report_path)
            error.report = report
        raise
    else:
        if dry_run:
            target_db.drop_if_exists(staging_name)

    report = report_module.build_report(
        config, registry, resolved, n, labels, partition, verification, quasi, replaced,
        timer.seconds, started, published=published, dry_run=dry_run,
        source_url=source_db.redacted_url, target_url=target_db.redacted_url,
        output_columns=[ROW_COLUMN, *output_columns])
    report_module.finish(report, registry, config, report_path)
    return RunResult(report, published, verification, labels)


def _dialect(url: str) -> str:
    scheme = url.split("://", 1)[0]
    return scheme.split("+", 1)[0]


def _transformed_chunks(source_db, config: Config, source_name, output_columns, keys, new_rows,
                        replaced, row_column) -> Iterator[pd.DataFrame]:
    """Stream the source again in key order and yield output chunks (cross-database targets)."""
    passthrough = [c for c in output_columns if c not in replaced]
    position = 0
    for chunk in source_db.read(source_name, passthrough, key=config.source.key,
                                chunk_size=config.source.chunk_size):
        size = len(chunk)
        expected_keys = keys[position:position + size]
        if size and not np.array_equal(chunk["__key__"].to_numpy(), expected_keys):
            raise DataError(f"The source table {source_name} changed while it was being read "
                            f"(rows near position {position}). Nothing was published.")
        out = pd.DataFrame({row_column: new_rows[position:position + size]})
        for column in output_columns:
            out[column] = (replaced[column][position:position + size] if column in replaced
                           else chunk[column].to_numpy())
        position += size
        yield out
    if position != len(keys):
        raise DataError(f"The source table {source_name} changed while it was being read "
                        f"({position} rows on the second pass, {len(keys)} on the first).")


def verify_published(
    config: Config,
    registry: Registry | None = None,
    *,
    against_source: bool = False,
    expected_rows: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Verification:
    """Re-check the published target table of ``config`` from its rows (``tclose verify``).

    Only the target table is read (streamed): the classes are rebuilt from its written
    quasi-identifier values, and k and t are recomputed with the configured distances. The
    algorithm plugin need not be installed: t is checked whenever ``privacy.t`` is set, unless the
    configured algorithm is installed and declares that it does not enforce t (``mdav``).

    Args:
        config: the configuration of the run that published the table.
        registry: the plugins (for the distances and the connector).
        against_source: also read the source table, and check the row count and every
            confidential attribute's multiset against it (needs access to the source).
        expected_rows: a row count to check when the source is not read (e.g. ``target.rows``
            of the run's audit report).
        progress: called with a line of text at the start of each phase.
    """
    from tclose.connectors.sql import TableName

    registry = registry or load_registry()
    say = progress or (lambda _line: None)
    distances = resolve_distances(config, registry)
    provided = registry.algorithms.get(config.algorithm)
    t_checked = config.t if provided is None or provided.obj.requires_t else None
    source_confidential = None
    if against_source:
        source_db = registry.connector_for(_dialect(config.source.url)).connect(
            config.source.url, config.source.password_file)
        say(f"reading the source table {config.source.table}")
        keys, _quasi, source_confidential = _read_inputs(source_db, config)
        expected_rows = len(keys)
    target_db = registry.connector_for(_dialect(config.target.url)).connect(
        config.target.url, config.target.password_file)
    say(f"reading the published table {config.target.table}")
    frame = _read_written(target_db, TableName.parse(config.target.table), config)
    say("verifying")
    return verify_rows(frame, config.quasi_identifiers, distances, config.k, t_checked,
                       expected_rows, source_confidential)


def _read_written(database, table, config: Config) -> pd.DataFrame:
    """The QI and confidential columns of a written table, streamed in chunks and concatenated."""
    columns = config.quasi_identifiers + config.confidential
    frames = list(database.read(table, columns, key="tclose_row", with_key=False,
                                chunk_size=config.source.chunk_size))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    for column in config.confidential:
        frame[column] = numeric_column(frame[column], column, "confidential")
    return frame


def _verify_staging(database, staging, config: Config, resolved: Resolved, n: int,
                    source_confidential: Mapping[str, np.ndarray]) -> Verification:
    """Read the written table back (QI and confidential columns, streamed) and verify it."""
    frame = _read_written(database, staging, config)
    t_enforced = config.t if resolved.algorithm.requires_t else None
    return verify_rows(frame, config.quasi_identifiers, resolved.distances, config.k,
                       t_enforced, n, source_confidential)


def describe_error(error: TcloseError) -> str:
    """The message of ``error`` with any URL password redacted."""
    return redact_url(str(error))
