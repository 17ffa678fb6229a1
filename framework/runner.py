"""One run, phase by phase: read → encode → fit → partition → write staging → verify → publish.

The runner is the only place that knows the order of the phases. Whatever fails, the source is
never written to, and the target is either the verified new table or exactly what it was before.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import report as report_module
from .attributes import EncodedTable, encode_confidential, encode_table
from .columns import check_column_fates, resolve_key, with_key
from .config import AttributeSpec, Config
from .connector import Database, Session, capability, joining
from .errors import ConfigError, DataError, VerificationError
from .guards import refuse_foreign_file, refuse_overflow, refuse_same_table
from .interfaces import Algorithm, Distance
from .interrupts import Deferral
from .measures import measure_configured, measure_published
from .options import validate_options
from .partition import cluster_rows
from .progress import phase_counts
from .published import PublishedScan, add_linkage_check, linkage_advice, scan_published
from .registry import Registry, dialect_of, load_registry
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
    options = validate_options(
        algorithm.name, algorithm.options_schema, config.algorithm_options, "algorithm.options"
    )
    if algorithm.requires_t and config.t is None:
        raise ConfigError(
            f"==> At privacy ==> At key: t\nAlgorithm {algorithm.name} needs "
            f"privacy.t (a number in (0, 1])."
        )
    if config.t is not None and not algorithm.requires_t:
        raise t_not_enforced(algorithm.name, registry, "==> At privacy ==> At key: t\n")
    return Resolved(algorithm, options, resolve_distances(config.attributes, registry))


def t_not_enforced(name: str, registry: Registry, where: str = "") -> ConfigError:
    """The error for a ``t`` asked of an algorithm that does not enforce t-closeness."""
    enforcing = sorted(a for a, p in registry.algorithms.items() if p.obj.requires_t)
    return ConfigError(
        f"{where}Algorithm {name} does not enforce t-closeness, so privacy.t would not hold in "
        f"the published table. Remove t (k-anonymity only), or choose an algorithm that "
        f"enforces it: {', '.join(enforcing)}."
    )


def resolve_distances(
    attributes: Mapping[str, AttributeSpec], registry: Registry
) -> dict[str, tuple[Distance, dict]]:
    """The distance plugin and validated options of every confidential attribute."""
    distances = {}
    for attribute in attributes.values():
        if attribute.role != "confidential":
            continue
        path = f"attributes.{attribute.name}.distance"
        assert attribute.distance is not None  # validation requires one for confidential
        distance = registry.get("distance", attribute.distance, path)
        if attribute.type not in distance.attribute_types:
            raise ConfigError(
                f"==> At {path}\nDistance {distance.name} does not accept {attribute.type} "
                f"attributes (it accepts: {', '.join(distance.attribute_types)})."
            )
        distances[attribute.name] = (
            distance,
            validate_options(
                distance.name,
                distance.options_schema,
                attribute.distance_options,
                f"attributes.{attribute.name}.distance_options",
            ),
        )
    return distances


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


def _read_inputs(
    database, config: Config, progress: Callable[..., None] | None = None, line: str = ""
) -> tuple[np.ndarray, EncodedTable, set]:
    """Pass 1: the row keys and the encoded QI and confidential columns of the kept rows, and
    the keys of the rows set aside by ``missing: exclude-rows``."""
    from tclose.connectors.sql import TableName

    columns = config.quasi_identifiers + config.confidential
    frames = _chunks(
        database.read(
            TableName.parse(config.source.table),
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
        else pd.DataFrame(columns=["__key__", *columns])
    )
    keys = frame["__key__"].to_numpy()
    if len(keys) and (pd.isna(frame["__key__"]).any() or len(pd.unique(keys)) != len(keys)):
        raise DataError(
            f"The row key of {config.source.table} is not unique and non-null; "
            f"name a unique, non-null column as source.key."
        )
    frame.index = pd.Index(keys, name="key")  # error messages name rows by their key
    encoded = encode_table(frame, list(config.attributes.values()))
    return keys[~encoded.excluded], encoded, set(keys[encoded.excluded].tolist())


def _database_values(values: np.ndarray, spec) -> np.ndarray:
    """Published values as the driver takes them: integers for rounded QIs, ``date`` and
    ``datetime`` objects for date QIs, strings (or ``None``) for categories, floats otherwise."""
    if spec.round:
        return np.rint(values).astype(np.int64)
    if spec.type == "date":
        return values.astype("datetime64[D]").astype(object)
    if spec.type == "datetime":
        return values.astype("datetime64[us]").astype(object)
    return values


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
        progress: called with a line of text at the start of each phase, then again with the
            same line and keyword counts ``done=`` (rows so far) and ``total=`` (``None`` when
            unknown) while a phase streams rows (reading, verifying).

    Returns:
        the :class:`RunResult`; ``published`` is true when the target now holds the verified table.

    Raises:
        ConfigError: exit code 2; DataError: exit code 3; VerificationError: exit code 1;
        KeyboardInterrupt: on SIGINT (and SIGTERM under the CLI), with attribute ``published``
        telling whether the target was replaced before it took effect (signals are deferred from
        the publish until the report and audit row are written).
    """
    deferral = Deferral()
    try:
        return _run(config, registry, dry_run, report_path, progress, deferral)
    except BaseException as error:
        # Any exception (KeyboardInterrupt too) says whether the table was published.
        published = deferral.published or bool(getattr(error, "published", False))
        error.published = published  # type: ignore[attr-defined]
        raise
    finally:
        deferral.end(deferral.published)


def _run(
    config: Config,
    registry: Registry | None,
    dry_run: bool,
    report_path: str | None,
    progress: Callable[..., None] | None,
    deferral: Deferral,
) -> RunResult:
    from tclose.connectors.sql import ROW_COLUMN, STAGING_MARK, TableName

    registry = registry or load_registry()
    resolved = resolve_plugins(config, registry)
    timer = Timer()
    started = time.time()
    say = progress or (lambda *_args, **_counts: None)

    source_connector = registry.connector_for(dialect_of(config.source.url))
    source_db = source_connector.connect(config.source.url, config.source.password_file)
    target_spec = config.target
    target_db = (
        source_db
        if target_spec.url == config.source.url
        and target_spec.password_file == config.source.password_file
        else registry.connector_for(dialect_of(target_spec.url)).connect(
            target_spec.url, target_spec.password_file
        )
    )
    source_name = TableName.parse(config.source.table)
    target_name = TableName.parse(target_spec.table)
    run_id = uuid.uuid4().hex
    target_db.check_table_name(target_name)
    staging_name = target_db.owned_name(target_name, STAGING_MARK, run_id)
    refuse_same_table(
        source_db,
        source_name,
        target_db,
        target_name,
        TableName.parse(config.report_table) if config.report_table else None,
    )
    refuse_foreign_file(report_path or config.report_json, "json")
    refuse_foreign_file(config.report_html, "html")

    source_table = source_db.table(source_name)
    for column in config.attributes:
        if column not in source_table.c:
            raise DataError(
                f"Column {column!r} (attributes.{column}) does not exist in table "
                f"{source_name}. Its columns are: {', '.join(source_table.c.keys())}."
            )
    key = resolve_key(source_db, source_table, config.source.key)
    check_column_fates(config, list(source_table.c.keys()), key)
    config = with_key(config, key)
    if target_db.exists(target_name) and target_spec.if_exists == "fail" and not dry_run:
        raise DataError(
            f"The target table {target_name} already exists and target.if_exists is "
            f"'fail'. Set if_exists: replace, or choose another target table."
        )

    dropped = set(config.identifiers)
    if not config.keep_key and config.source.key:
        dropped.add(config.source.key)
    output_columns = [c.name for c in source_table.columns if c.name not in dropped]
    rounded = [a.name for a in config.attributes.values() if a.round]
    # Numeric QIs are written as double precision (or integers when rounded); QIs of other types
    # keep their source column type.
    numeric = [c for c in config.quasi_identifiers if config.attributes[c].type == "numeric"]
    staging_table = target_db.staging_table(
        staging_name, source_table, output_columns, numeric, rounded, source_db.dialect
    )
    staging_table.info.update(target=target_name, run_id=run_id)
    staging_table.comment = f"tclose run {run_id}"  # kept by the published table where supported

    # Same database: one session reads, joins, verifies and publishes in one snapshot. Otherwise
    # the target session (staging table created first, so that a missing permission fails before
    # any work) and a read-only source session whose snapshot serves both passes.
    def make_report(published: bool, audited_in_publish: bool = False) -> dict[str, Any]:
        """The audit report of this run (variables of the phases, read when called)."""
        report = report_module.build_report(
            config,
            registry,
            resolved,
            n_read,
            labels,
            partition,
            verification,
            encoded,
            replaced,
            timer.seconds,
            started,
            published=published,
            dry_run=dry_run,
            source_url=source_db.redacted_url,
            target_url=target_db.redacted_url,
            output_columns=[ROW_COLUMN, *output_columns],
            measures=measures,
        )
        report["run"]["id"] = run_id  # the id in the owned names (and the table's comment)
        if audited_in_publish:
            report["run"]["audited_in_publish"] = True
        return report

    def record_in_publish(connection: Any) -> None:
        """The ``run_publishing`` hooks, inside the publishing transaction."""
        draft = make_report(True, audited_in_publish=True)
        assert registry.manager is not None  # record_publish below is None without a manager
        registry.manager.hook.run_publishing(report=draft, config=config, connection=connection)

    record_publish = (
        record_in_publish
        if registry.manager is not None
        and registry.manager.hook.run_publishing.get_hookimpls()
        and capability(target_db, "publishes_in_transaction")
        else None
    )
    audited_in_publish = False
    joined = target_db is source_db and capability(source_db, "joins_in_snapshot")
    published = False
    verification = None
    failure: VerificationError | None = None
    with ExitStack() as sessions:
        if joined:
            source = target = sessions.enter_context(source_db.session(staging_table))
        else:
            target = sessions.enter_context(target_db.session(staging_table))
            source = sessions.enter_context(source_db.session(read_only=True))

        line = f"reading {source_name}"
        say(line)
        with timer.phase("read"):
            keys, encoded, set_aside = _read_inputs(source, config, progress, line)
        n = len(keys)
        n_read = n + int(encoded.excluded.sum())

        kernel_line = f"partitioning {n} rows with {resolved.algorithm.name}"
        say(kernel_line)
        with timer.phase("kernel"), phase_counts(say, kernel_line):
            labels, partition, _fitted = cluster_rows(
                encoded.x,
                encoded.confidential,
                encoded.distance_options,
                resolved,
                config.k,
                config.t,
            )
        replaced = encoded.aggregate(labels)
        refuse_overflow(replaced, config.attributes, keys)
        say("measuring disclosure risk and utility")
        with timer.phase("measures"):
            measures = measure_configured(
                encoded, replaced, config.attributes, config.interval_p, labels
            )
        written = {c: _database_values(v, config.attributes[c]) for c, v in replaced.items()}
        rng = np.random.default_rng(
            config.seed if config.seed is not None else secrets.randbits(64)
        )
        new_rows = rng.permutation(n).astype(np.int64) + 1

        say(f"writing staging table {staging_name}")
        with timer.phase("write"):
            if joined:
                joining(source).fill_joined(
                    source_table, config.source.key, staging_table, keys, new_rows, labels, written
                )
            else:
                target.fill_streamed(
                    staging_table,
                    _transformed_chunks(
                        source,
                        config,
                        source_name,
                        output_columns,
                        keys,
                        new_rows,
                        written,
                        set_aside,
                    ),
                )
                source.close()  # the snapshot is no longer needed; release it before publishing

        try:
            say("verifying the written rows")
            with timer.phase("verify"):
                verification = _verify_staging(
                    target, staging_name, config, resolved, n, encoded.confidential, progress
                )
            if not verification.passed:
                failed = ", ".join(c["name"] for c in verification.failures())
                raise VerificationError(
                    f"Verification of the written table failed ({failed}); nothing was published "
                    f"and {target_name} is unchanged." + linkage_advice(verification.checks),
                    verification.checks,
                )
            if not dry_run:
                say(f"publishing {target_name}")
                deferral.start()  # from here an interrupt waits until the outcome is recorded
                with timer.phase("publish"):
                    target.publish(
                        staging_name,
                        target_name,
                        replace=target_spec.if_exists == "replace",
                        before_commit=record_publish,
                    )
                audited_in_publish = record_publish is not None
                published = deferral.published = True
        except VerificationError as error:
            failure = error
    # Reported once the sessions have ended (a failed verification has rolled back the staging).
    report = make_report(published, audited_in_publish)
    report_module.finish(report, registry, config, report_path)
    if failure is not None:
        failure.report = report
        raise failure
    return RunResult(report, published, verification, labels)


def _transformed_chunks(
    source, config: Config, source_name, output_columns, keys, new_rows, replaced, set_aside: set
) -> Iterator[list[tuple]]:
    """Stream the source again (in its snapshot, key order) and yield output rows: tuples of
    ``tclose_row`` and the output columns, pass-through values exactly as the driver gave them.

    The keys of the second pass must be those of the first, row for row: the snapshot guarantees
    it, and a mismatch is reported as :class:`DataError` rather than written. Rows whose key is
    in ``set_aside`` are skipped.
    """
    passthrough = [c for c in output_columns if c not in replaced]
    slot = {c: i + 1 for i, c in enumerate(passthrough)}  # position in a read row (key first)
    position = 0
    for rows in source.read_rows(
        source_name, passthrough, key=config.source.key, chunk_size=config.source.chunk_size
    ):
        if set_aside:
            rows = [r for r in rows if r[0] not in set_aside]
        size = len(rows)
        expected = keys[position : position + size]
        if size != len(expected) or any(r[0] != k for r, k in zip(rows, expected.tolist())):
            raise DataError(
                f"The source table {source_name} changed while it was being read "
                f"(rows near position {position}). Nothing was published."
            )
        columns = [new_rows[position : position + size].tolist()]
        for column in output_columns:
            if column in replaced:
                columns.append(replaced[column][position : position + size].tolist())
            else:
                index = slot[column]
                columns.append([r[index] for r in rows])
        position += size
        yield list(zip(*columns))
    if position != len(keys):
        raise DataError(
            f"The source table {source_name} changed while it was being read "
            f"({position} rows on the second pass, {len(keys)} on the first)."
        )


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
    say = progress or (lambda *_args, **_counts: None)
    distances = resolve_distances(config.attributes, registry)
    provided = registry.algorithms.get(config.algorithm)
    t_checked = config.t if provided is None or provided.obj.requires_t else None
    source_confidential = None
    if against_source:
        source_db = registry.connector_for(dialect_of(config.source.url)).connect(
            config.source.url, config.source.password_file
        )
        say(f"reading the source table {config.source.table}")
        source_table = source_db.table(TableName.parse(config.source.table))
        config = with_key(config, resolve_key(source_db, source_table, config.source.key))
        keys, encoded, _set_aside = _read_inputs(source_db, config)
        source_confidential = encoded.confidential
        expected_rows = len(keys)
    target_db = registry.connector_for(dialect_of(config.target.url)).connect(
        config.target.url, config.target.password_file
    )
    say(f"reading the published table {config.target.table}")
    kept_key = config.source.key if against_source and config.keep_key else None
    linked = [kept_key] if kept_key is not None else []
    frame, extra, scan = _read_written(
        target_db, TableName.parse(config.target.table), config, extra_columns=linked
    )
    say("verifying")
    verification = verify_rows(
        frame,
        config.quasi_identifiers,
        with_attribute_options(distances, extra),
        config.k,
        t_checked,
        expected_rows,
        source_confidential,
    )
    if against_source:
        verification.measures = measure_published(
            encoded, keys, frame, config.attributes, config.interval_p, config.source.key
        )
    return _with_scan(verification, scan)


def published_run_id(config: Config, registry: Registry | None = None) -> str | None:
    """The id of the run that published ``config``'s target, from the table's comment
    (PostgreSQL, MySQL; on SQLite from a constraint name in its definition); ``None`` if the
    table carries none. With it, the audit record of a run killed between its publish and its
    report can be found or rebuilt."""
    from tclose.connectors.sql import TableName

    registry = registry or load_registry()
    database = registry.connector_for(dialect_of(config.target.url)).connect(
        config.target.url, config.target.password_file
    )
    comment = getattr(database, "table_comment", lambda _name: None)(
        TableName.parse(config.target.table)
    )
    if comment and comment.startswith("tclose run "):
        return comment.removeprefix("tclose run ").strip()
    return None


def _read_written(
    database: Database | Session,
    table,
    config: Config,
    progress: Callable[..., None] | None = None,
    line: str = "",
    total: int | None = None,
    extra_columns: Sequence[str] = (),
) -> tuple[pd.DataFrame, dict[str, dict], PublishedScan]:
    """One streamed read of a written table (:func:`tclose.published.scan_published`): its QI
    and confidential columns (and ``extra_columns``), confidential columns encoded as their
    distances expect (with the options they add), and the scan (content digest, linking
    pass-through columns)."""
    scan = scan_published(database, table, config, progress, line, total, extra_columns)
    frame = scan.frame
    extra = {}
    for column in config.confidential:
        frame[column], extra[column] = encode_confidential(frame[column], config.attributes[column])
    return frame, extra, scan


def _with_scan(verification: Verification, scan: PublishedScan) -> Verification:
    """The verdict with the linkage check and the content digest of the scan."""
    add_linkage_check(verification, scan.linking, scan.allowed_unique)
    verification.content_digest = scan.digest
    return verification


def with_attribute_options(
    distances: Mapping[str, tuple[Distance, dict]], extra: Mapping[str, dict]
) -> dict[str, tuple[Distance, dict]]:
    """Each distance's configured options, plus those its attribute adds (hierarchy,
    categories; see :func:`tclose.attributes.encode_confidential`)."""
    return {c: (d, {**o, **extra.get(c, {})}) for c, (d, o) in distances.items()}


def _verify_staging(
    database: Session,
    staging,
    config: Config,
    resolved: Resolved,
    n: int,
    source_confidential: Mapping[str, np.ndarray],
    progress: Callable[..., None] | None = None,
) -> Verification:
    """Read the written table back (QI and confidential columns, streamed) and verify it."""
    frame, extra, scan = _read_written(
        database, staging, config, progress, "verifying the written rows", n
    )
    t_enforced = config.t if resolved.algorithm.requires_t else None
    verification = verify_rows(
        frame,
        config.quasi_identifiers,
        with_attribute_options(resolved.distances, extra),
        config.k,
        t_enforced,
        n,
        source_confidential,
    )
    return _with_scan(verification, scan)
