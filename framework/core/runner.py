"""One run, phase by phase: plan → read → cluster → write staging → verify → publish → report.

The runner is the only place that knows the order of the phases. Whatever fails, the source is
never written to, and the target is either the verified new table or exactly what it was before.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from tclose.base.attributes import EncodedTable
from tclose.base.background import Background
from tclose.base.compile_notice import compile_account
from tclose.base.config import Config
from tclose.base.interrupts import Deferral
from tclose.base.notices import phase_counts
from tclose.base.registry import Registry, dialect_of, load_registry
from tclose.connector import (
    Database,
    InDatabaseJoin,
    Releases,
    Session,
    StreamAdapter,
    StreamCheck,
    StreamedValues,
    TableIdentity,
    capabilities_of,
    open_read_only,
)
from tclose.core.columns import resolve_key, with_key
from tclose.core.entities import written_entities
from tclose.core.guards import refuse_overflow
from tclose.core.pipeline import (
    Clustered,
    Timer,
    checked_t,
    encode_released,
    kept_entities,
    measure,
    partition,
    read_inputs,
    suppress_keyed,
    verify_release,
)
from tclose.core.plan import Resolved, RunPlan, build_plan, resolve_distances, resolve_name
from tclose.core.published import PublishedScan, linkage_advice, scan_published
from tclose.core.report import RunContext, build_report, finish_report, release_summary
from tclose.core.suppression import declared_suppression, suppression_evidence
from tclose.core.verify import Verification, problems
from tclose.errors import DataError, RunInterrupted, TcloseError, VerificationError
from tclose.interfaces import SuppressionFacts
from tclose.measures import measure_published
from tclose.naming import TableName

log = logging.getLogger("tclose")

#: From this many kept rows on, the measures run in a background thread while the staging table
#: is written (:meth:`Phases.cluster`); below it they run in line, before the write.
#: (At 20,000 rows a thread neither gains nor costs anything measurable; at 100,000 and
#: 1,000,000 it saves most of the write's time: ``docs/databases.md``.)
BACKGROUND_MEASURES_ROWS = 20_000
#: Whether the verification waits for the background measures (they then run beside the write
#: only); if false, only the publish and the report do. Beside the verification too (measured at
#: 1,000,000 rows, ``docs/databases.md``) the run gained nothing over the write alone, took more
#: CPU, and its peak RSS reached 942–1055 MB (the rows read back and the measures' arrays at once;
#: budget 1 GB). Worth measuring again once the verification no longer holds the GIL.
JOIN_MEASURES_BEFORE_VERIFY = True


@dataclass
class RunResult:
    """What a run did."""

    report: dict[str, Any]
    published: bool
    verification: Verification | None = None
    labels: np.ndarray | None = field(default=None, repr=False)


def _database_values(values: np.ndarray, spec) -> np.ndarray:
    """Published values as the driver takes them: integers for rounded QIs, ``date`` and
    ``datetime`` objects for date QIs, strings (or ``None``) for categories, floats otherwise."""
    if spec.round:  # exact int64 means of an integer column, else rounded float means
        return values if values.dtype.kind == "i" else np.rint(values).astype(np.int64)
    if spec.type == "date":
        return values.astype("datetime64[D]").astype(object)
    if spec.type == "datetime":  # the nearest microsecond (half of one: the later), in integers
        nanoseconds = values.astype("datetime64[ns]").astype(np.int64)
        micro = nanoseconds // 1000 + (nanoseconds % 1000 >= 500)
        return micro.astype("datetime64[us]").astype(object)
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

    The phases, in order: :func:`tclose.core.plan.build_plan` (every decision, before any row is
    read), then :meth:`Phases.read`, :meth:`Phases.cluster` (with the measures),
    :meth:`Phases.write`, :meth:`Phases.verify`, :meth:`Phases.publish` and :meth:`Phases.report`.
    From :data:`BACKGROUND_MEASURES_ROWS` rows on, the measures are computed in a background
    thread beside the write and joined before the verification (:meth:`Phases.join_measures`);
    the outcome, errors included, is the same as in line.

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
        ConfigError: exit code 2; DataError: exit code 3; VerificationError: exit code 1 (with
        the run's ``report``); each with ``published``. RunInterrupted (a KeyboardInterrupt): on
        SIGINT (and SIGTERM under the CLI), with ``published`` telling whether the target was
        replaced before it took effect (signals are deferred from the publish until the report
        and audit row are written).
    """
    deferral = Deferral()
    try:
        return _run(config, registry or load_registry(), dry_run, report_path, progress, deferral)
    except (TcloseError, RunInterrupted) as error:
        error.published = error.published or deferral.published
        raise
    except KeyboardInterrupt as interrupt:
        raise RunInterrupted(str(interrupt), published=deferral.published) from interrupt
    finally:
        deferral.end(deferral.published)


def _run(
    config: Config,
    registry: Registry,
    dry_run: bool,
    report_path: str | None,
    progress: Callable[..., None] | None,
    deferral: Deferral,
) -> RunResult:
    """The phases of :func:`run`, in order."""
    started = time.time()
    plan = build_plan(config, registry, dry_run=dry_run, report_path=report_path)
    phases = Phases(plan, registry, progress, started)
    failure: VerificationError | None = None
    with phases.sessions() as (source, target):
        phases.read(source)
        phases.cluster()
        with phases.measures_first():
            phases.write(source, target)
            try:
                phases.verify(target)
                if not dry_run:
                    phases.publish(target, deferral)
            except VerificationError as error:
                failure = error
    # Reported once the sessions have ended (a failed verification has rolled back the staging).
    report = phases.report(report_path)
    if failure is not None:
        failure.report = report
        raise failure
    return RunResult(report, phases.context.published, phases.context.verification, phases.labels)


#: The ``risk``/``utility`` measures and the release summary (:func:`_measure_release`).
_Measured = tuple[dict[str, dict[str, Any]], dict[str, Any]]


def _compile_accounted(function: Callable[[], _Measured]) -> tuple[_Measured, float]:
    """``function()`` and the seconds Numba spent compiling kernels for it in this thread."""
    with compile_account() as compiling:
        value = function()
    return value, compiling.seconds


class Phases:
    """The phases of one run of a :class:`~tclose.core.plan.RunPlan`, sharing what they produce.

    Each phase says its line to ``progress``, times itself under its ``timings`` name and
    records what the report needs in :attr:`context` (:class:`tclose.core.report.RunContext`).
    """

    def __init__(
        self,
        plan: RunPlan,
        registry: Registry,
        progress: Callable[..., None] | None,
        started: float,
    ) -> None:
        self.plan = plan
        self.progress = progress
        self.say = progress or (lambda *_args, **_counts: None)
        config = plan.config
        self.context = RunContext(
            registry,
            plan.resolved,
            config.k,
            config.t,
            max_suppressed=config.max_suppressed,
            started=started,
            dry_run=plan.dry_run,
            config=config,
            run_id=plan.run_id,
            source_url=plan.source_db.redacted_url,
            target_url=plan.target_db.redacted_url,
            output_columns=plan.columns,
            row_security=plan.row_security,
            staging_readers=plan.staging_readers,
        )
        self.timer = Timer(self.context.timings)
        self.keys = np.zeros(0)
        self.set_aside: set = set()
        self.labels = np.zeros(0, dtype=np.int64)
        #: the entity codes of the kept rows (``source.entity``), else ``None``
        self.entities: np.ndarray | None = None
        self.database_values: dict[str, np.ndarray] = {}
        #: the measures (and the seconds they compiled kernels) while they run in the background
        #: (:meth:`join_measures`)
        self._measures: Background[tuple[_Measured, float]] | None = None

    @contextmanager
    def sessions(self) -> Iterator[tuple[Any, Any]]:
        """The source and target sessions. Same database (:data:`~tclose.core.plan.JOIN`): one
        session reads, joins, verifies and publishes in one snapshot. Otherwise the target
        session (staging table created first, so that a missing permission fails before any
        work) and a read-only source session whose snapshot serves both passes."""
        plan = self.plan
        with ExitStack() as stack:
            if plan.joined:
                source = target = stack.enter_context(plan.source_db.session(plan.staging_table))
            else:
                target = stack.enter_context(plan.target_db.session(plan.staging_table))
                source = stack.enter_context(plan.source_db.session(read_only=True))
            yield source, target

    def read(self, source: Any) -> None:
        """Pass 1: the keys and encoded columns of the source rows (streamed), less the
        outliers ``privacy.max_suppressed`` leaves out."""
        line = f"reading {self.plan.source}"
        self.say(line)
        with self.timer.phase("read"):
            self.keys, encoded, self.set_aside, self.entities = read_inputs(
                source, self.plan.config, self.progress, line, self.plan.source
            )
            self.keys, encoded = suppress_keyed(
                self.keys, encoded, self.plan.config, self.set_aside
            )
            self.entities = kept_entities(self.entities, encoded)
        self.context.encoded = encoded
        self.context.rows_read = len(encoded.excluded)

    def cluster(self) -> None:
        """Fit the distances, partition the rows, aggregate the QIs and measure the release: in
        line below :data:`BACKGROUND_MEASURES_ROWS` kept rows, else in a background thread that
        :meth:`join_measures` waits for (the ``measures`` timing is then recorded there)."""
        context, config, encoded = self.context, self.plan.config, self.context.encoded
        assert encoded is not None
        line = f"partitioning {len(self.keys)} rows with {context.resolved.algorithm.name}"
        self.say(line)
        with self.timer.phase("kernel"), phase_counts(self.say, line):
            clustered = partition(
                encoded,
                context.resolved,
                config.k,
                config.t,
                entities=None if self.entities is None else (str(config.entity), self.entities),
                l_diversity=config.l_diversity,
            )
        self.labels = context.labels = clustered.labels
        context.partition, context.aggregated = clustered.partition, clustered.aggregated
        refuse_overflow(context.aggregated, config.attributes, self.keys)
        self.database_values = {
            c: _database_values(v, config.attributes[c]) for c, v in context.aggregated.items()
        }
        measures = functools.partial(_measure_release, encoded, clustered, config)
        if len(self.keys) >= BACKGROUND_MEASURES_ROWS:
            log.info("measures ... (in the background, beside the write)")
            self._measures = Background(
                functools.partial(_compile_accounted, measures), "tclose-measures"
            )
            return
        self.say("measuring disclosure risk and utility")
        with self.timer.phase("measures"):
            context.measures, context.summary = measures()

    @contextmanager
    def measures_first(self) -> Iterator[None]:
        """Within the block, an error (not an interrupt) waits for measures running in the
        background: if they failed, their error is the one raised, as when they ran first."""
        try:
            yield
        except Exception:
            self.join_measures()
            raise

    def join_measures(self) -> None:
        """Wait for the measures running in the background, if any; record them and their
        timings (``measures``: their own duration; ``measures_wait``: how long the run waited
        for them). Raises their error if they failed."""
        pending = self._measures
        if pending is None:
            return
        if not pending.done:
            self.say("measuring disclosure risk and utility")
        (self.context.measures, self.context.summary), compiling = pending.result()
        self._measures = None
        assert pending.seconds is not None
        self.timer.record("measures", pending.seconds, after="kernel", compiling=compiling)
        self.timer.record("measures_wait", pending.waited)
        log.info("measures done in %.2f s (%.2f s waited)", pending.seconds, pending.waited)

    def write(self, source: Any, target: Any) -> None:
        """Fill the staging table: joined in the source's database, or streamed from a second
        pass over the source snapshot. Either way the target's session numbers the rows
        (``tclose_row``) and stores them in their content order, a function of the published
        values alone."""
        plan, config = self.plan, self.plan.config
        self.say(f"writing staging table {plan.staging}")
        with self.timer.phase("write"):
            if plan.joined:
                cast(InDatabaseJoin, source).fill_joined(
                    plan.source_table,
                    config.source.key,
                    plan.staging_table,
                    self.keys,
                    self.labels,
                    self.database_values,
                )
                return
            passthrough = [c for c in plan.output_columns if c not in self.database_values]
            if capabilities_of(source).stream_check:  # values the stream cannot carry
                checker = cast(StreamCheck, source)
                checker.refuse_unstreamable(plan.source, passthrough, plan.target_db.dialect)
            chunks: Generator[list[tuple], None, None] = _transformed_chunks(
                source,
                config,
                plan.source,
                plan.output_columns,
                self.keys,
                self.database_values,
                self.set_aside,
                _streamed_values(source, plan, passthrough),
            )
            try:
                target.fill_streamed(plan.staging_table, chunks)
            finally:
                chunks.close()  # its cursor on the source, before the source's session ends
            source.close()  # the snapshot is no longer needed; release it before publishing

    def verify(self, target: Any) -> None:
        """Read the staging table back and verify it; :class:`VerificationError` if it fails."""
        plan, encoded = self.plan, self.context.encoded
        assert encoded is not None
        if JOIN_MEASURES_BEFORE_VERIFY:
            self.join_measures()
        self.say("verifying the written rows")
        with self.timer.phase("verify"):
            verification = _verify_staging(
                target,
                plan.staging,
                plan.config,
                self.context.registry,
                plan.resolved,
                len(self.keys),
                encoded.confidential,
                self.progress,
                published_as=plan.target,
                entities=None if self.entities is None else (self.database_values, self.entities),
                suppression=suppression_evidence(encoded, plan.config.max_suppressed),
            )
        self.context.verification = verification
        if not verification.passed:
            failed = ", ".join(c.name for c in verification.failures())
            raise VerificationError(
                f"Verification of the written table failed ({failed}) for the output of "
                f"algorithm {plan.resolved.algorithm.name!r}; nothing was published "
                f"and {plan.target} is unchanged."
                + problems(verification.results)
                + linkage_advice(verification.results),
                verification.checks,
            )

    def publish(self, target: Any, deferral: Deferral) -> None:
        """Replace the target by the verified staging table, atomically; from here signals wait
        until the outcome is recorded."""
        plan = self.plan
        self.join_measures()  # before signals are deferred: the draft report needs them
        self.say(f"publishing {plan.target}")
        deferral.start()
        with self.timer.phase("publish"):
            target.publish(
                plan.staging,
                plan.target,
                replace=plan.replace,
                before_commit=self._record_in_publish if plan.audit_in_publish else None,
            )
        self.context.audited_in_publish = plan.audit_in_publish
        self.context.published = deferral.published = True

    def _record_in_publish(self, connection: Any) -> None:
        """The ``run_publishing`` hooks, inside the publishing transaction."""
        draft = build_report(
            dataclasses.replace(self.context, published=True, audited_in_publish=True)
        )
        manager = self.context.registry.manager
        assert manager is not None  # audit_in_publish is false without a manager
        manager.hook.run_publishing(report=draft, config=self.plan.config, connection=connection)

    def report(self, report_path: str | None) -> dict[str, Any]:
        """Build the audit report, write its files and call the ``run_finished`` hooks."""
        self.join_measures()
        report = build_report(self.context)
        finish_report(report, self.context.registry, self.plan.config, report_path)
        return report


def _measure_release(
    encoded: EncodedTable, clustered: Clustered, config: Config
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The measures of the release (:func:`tclose.core.pipeline.measure`) and the report's
    :func:`tclose.core.report.release_summary`, computed once for both builds of the report."""
    measures = measure(
        encoded, clustered, config.attributes, config.interval_p, config.sampling_fraction
    )
    summary = release_summary(encoded, clustered.aggregated, clustered.labels, config.k)
    return measures, summary


def _streamed_values(source: Session, plan: RunPlan, passthrough: list[str]) -> Any:
    """The mapping of the pass-through values into the target's kind of database that the
    source's sessions give (:class:`tclose.connector.StreamAdapter`), or ``None``."""
    if not capabilities_of(source).adapts_streams:
        return None
    adapter = cast(StreamAdapter, source)
    return adapter.streamed_values(plan.source_table, passthrough, plan.target_db.dialect)


def _transformed_chunks(
    source: Session,
    config: Config,
    source_name: TableName,
    output_columns: Sequence[str],
    keys: np.ndarray,
    database_values: Mapping[str, np.ndarray],
    set_aside: set,
    mapped: StreamedValues | None = None,
) -> Generator[list[tuple], None, None]:
    """Stream the source again (in its snapshot, key order) and yield output rows: tuples of
    the output columns, pass-through values exactly as the driver gave them, or as ``mapped``
    (:class:`tclose.connector.StreamedValues`) maps them for the target.

    The keys of the second pass must be those of the first, row for row: the snapshot guarantees
    it, and a mismatch is reported as :class:`DataError` rather than written. Rows whose key is
    in ``set_aside`` are skipped. Once ``mapped`` finds a value the target cannot store, the
    rest is read only to count such values, and its ``refuse`` raises :class:`DataError`.
    """
    passthrough = [c for c in output_columns if c not in database_values]
    slot = {c: i + 1 for i, c in enumerate(passthrough)}  # position in a read row (key first)
    position = 0
    for rows in source.read_rows(
        source_name, passthrough, key=config.source.key, chunk_size=config.source.chunk_size
    ):
        if set_aside:
            rows = [r for r in rows if r[0] not in set_aside]
        size = len(rows)
        written = rows if mapped is None else mapped.rows(rows)
        if written is None:
            position += size
            continue
        _same_keys(written, keys[position : position + size], source_name, position)
        columns = [
            database_values[c][position : position + size].tolist()
            if c in database_values
            else [r[slot[c]] for r in written]
            for c in output_columns
        ]
        position += size
        yield list(zip(*columns))
    if position != len(keys):
        raise DataError(
            f"The source table {source_name} changed while it was being read "
            f"({position} rows on the second pass, {len(keys)} on the first)."
        )
    if mapped is not None:
        mapped.refuse()


def _same_keys(
    rows: Sequence[Sequence[Any]], expected: np.ndarray, source_name: TableName, position: int
) -> None:
    """:class:`DataError` unless ``rows`` (key first) hold the keys ``expected``, in order."""
    if len(rows) != len(expected) or any(r[0] != k for r, k in zip(rows, expected.tolist())):
        raise DataError(
            f"The source table {source_name} changed while it was being read "
            f"(rows near position {position}). Nothing was published."
        )


#: How many times ``tclose verify`` reads a table that another run publishes meanwhile.
VERIFY_ATTEMPTS = 3


def verify_published(
    config: Config,
    registry: Registry | None = None,
    *,
    against_source: bool = False,
    expected_rows: int | None = None,
    progress: Callable[[str], None] | None = None,
    digest_algorithm: str | None = None,
    report: Mapping[str, Any] | None = None,
    run_id: str | None = None,
) -> Verification:
    """Re-check the published target table of ``config`` from its rows, against every
    criterion (:func:`tclose.core.verify.release_criteria`).

    Only the target table is read (streamed), and every database is opened read-only by its
    driver (:func:`~tclose.connector.open_read_only`): the classes are rebuilt from its written
    quasi-identifier values, and k and t are recomputed with the configured distances. The
    algorithm plugin need not be installed: t is checked whenever ``privacy.t`` is set, unless the
    configured algorithm is installed and declares that it does not enforce t (``mdav``).

    Args:
        config: the configuration of the run that published the table.
        registry: the plugins (for the distances, the connector and third-party criteria).
        against_source: also read the source table, and check the row count and every
            confidential attribute's multiset against it (needs access to the source).
        expected_rows: a row count to check when the source is not read (e.g. ``target.rows``
            of the run's audit report).
        progress: called with a line of text at the start of each phase.
        digest_algorithm: the content digest to compute (a report's
            ``target.content_digest.algorithm``); by default the target database's own
            (:func:`tclose.core.published.scan_published`).
        report: the run's audit report, for the checks that compare with it (configuration,
            content, hierarchy and run-mark digests).
        run_id: the table's run mark, read before its rows (:func:`published_run_id`).
    """
    registry = registry or load_registry()
    say = progress or (lambda *_args, **_counts: None)
    distances = resolve_distances(config.attributes, registry)
    t_checked = _t_checked(config, registry)
    encoded = keys = entities = None
    configured = config  # as the run's report digests it
    suppression = declared_suppression(report)
    if against_source:
        keys, encoded, config, entities, suppression = _read_source(
            config, registry, say, suppression
        )
        expected_rows = len(keys)
    target_db = _opened_read_only(config, registry)
    say(f"reading the published table {config.target.table}")
    kept_key = config.source.key if against_source and config.keep_key else None
    target = resolve_name(target_db, config.target.table, "target.table", create=False)
    release = release_problem(target_db, target)
    frame, extra, scan = _read_written(
        target_db,
        target,
        config,
        extra_columns=[kept_key] if kept_key is not None else [],
        digest_algorithm=digest_algorithm,
    )
    say("verifying")
    measures = None  # measured before any criterion sees the frame
    if encoded is not None and keys is not None:
        measures = _source_measures(encoded, keys, frame, config)
    verification = verify_release(
        frame,
        configured,
        distances,
        registry,
        k=config.k,
        t=t_checked,
        attribute_options=extra,
        expected_rows=expected_rows,
        expected_confidential=encoded.confidential if encoded is not None else None,
        linkage=scan.linkage,
        content_digest=scan.digest,
        report=report,
        run_id=run_id,
        release=release,
        **_entities_by_key(frame, kept_key, keys, entities),
        suppression=suppression,
    )
    verification.measures = measures
    return verification


def _opened_read_only(config: Config, registry: Registry) -> Database:
    """The target's database, opened read-only by its driver: a verifier changes nothing, not
    even a file's bytes."""
    target_db = registry.connector_for(dialect_of(config.target.url)).connect(
        config.target.url, config.target.password_file
    )
    open_read_only(target_db)
    return target_db


def _t_checked(config: Config, registry: Registry) -> float | None:
    """``privacy.t``, unless the configured algorithm is installed and does not enforce t."""
    provided = registry.algorithms.get(config.algorithm)
    return config.t if provided is None or provided.obj.requires_t else None


def _entities_by_key(
    frame: pd.DataFrame, kept_key: str | None, keys: Any, entities: np.ndarray | None
) -> dict[str, Any]:
    """The ``entities`` of the evidence of a published table that kept the source key
    (``output.keep_key``), joined by key to the source's (``keys``, ``entities``); nothing
    without them. A published key the source does not hold gives an ``entity_problem``."""
    if kept_key is None or entities is None or keys is None:
        return {}
    position = pd.Index(keys).get_indexer(frame[kept_key])
    if (position < 0).any():
        return {
            "entity_problem": f"{int((position < 0).sum())} published row(s) hold a key the "
            f"source does not, so their entities cannot be known."
        }
    return {"entities": np.asarray(entities)[position]}


def _source_measures(
    encoded: EncodedTable, keys: np.ndarray, frame: pd.DataFrame, config: Config
) -> dict[str, Any]:
    """The measures of a published ``frame`` against the source (``tclose verify --source``:
    :func:`tclose.measures.measure_published`)."""
    return measure_published(
        encoded,
        keys,
        frame,
        config.attributes,
        config.interval_p,
        config.source.key,
        config.sampling_fraction,
    )


def _read_source(
    config: Config,
    registry: Registry,
    say: Callable[..., None],
    declared: SuppressionFacts | None = None,
) -> tuple[Any, EncodedTable, Config, np.ndarray | None, SuppressionFacts | None]:
    """The keys, the encoded table and the entity codes (``source.entity``, else ``None``) of
    the source rows a release holds (``tclose verify --source``), read read-only, ``config``
    with the source key resolved, and the rows the suppression rule leaves out, chosen again
    (with the count the report ``declared``)."""
    source_db = registry.connector_for(dialect_of(config.source.url)).connect(
        config.source.url, config.source.password_file
    )
    open_read_only(source_db)
    say(f"reading the source table {config.source.table}")
    source = resolve_name(source_db, config.source.table, "source.table", create=False)
    source_table = source_db.table(source)
    config = with_key(config, resolve_key(source_db, source_table, config.source.key))
    keys, encoded, _set_aside, entities = read_inputs(source_db, config, name=source)
    keys, encoded = suppress_keyed(keys, encoded, config, set())
    entities = kept_entities(entities, encoded)
    count = declared.rows if declared is not None else None
    suppression = suppression_evidence(encoded, config.max_suppressed, count)
    return keys, encoded, config, entities, suppression


def verify_with_report(
    config: Config,
    registry: Registry | None = None,
    *,
    report: Mapping[str, Any] | None = None,
    against_source: bool = False,
    progress: Callable[..., None] | None = None,
    reading_again: Callable[[], None] | None = None,
) -> Verification:
    """``tclose verify``: :func:`verify_published` of a table no run publishes meanwhile.

    The table's run mark is read before and after its rows: a run that published meanwhile
    changed it, and the rows read may be the other run's; they are read again
    (``reading_again`` is called), up to :data:`VERIFY_ATTEMPTS` times. With ``report`` (and
    without ``against_source``) the report's ``target.rows`` is the row count to check, and
    its content digest's algorithm the digest to compute.

    Raises:
        DataError: the table was published again during every read.
    """
    registry = registry or load_registry()
    target = (report or {}).get("target") or {}
    expected_rows = None if against_source else target.get("rows")
    recorded = target.get("content_digest") or {}
    try:
        run_id = published_run_id(config, registry)
    except DataError:  # e.g. no such table: the read names the problem best
        run_id = None
    for _attempt in range(VERIFY_ATTEMPTS):
        verification = verify_published(
            config,
            registry,
            against_source=against_source,
            expected_rows=expected_rows,
            progress=progress,
            digest_algorithm=recorded.get("algorithm"),
            report=report,
            run_id=run_id,
        )
        before, run_id = run_id, published_run_id(config, registry)
        if run_id == before:
            return verification
        if reading_again is not None:
            reading_again()
    raise DataError(
        f"The table {config.target.table} was published again by another run each time it "
        f"was read ({VERIFY_ATTEMPTS} times). Run tclose verify when no run publishes it."
    )


def release_problem(database: Any, name: TableName) -> tuple[str | None] | None:
    """What the ``release`` criterion judges: ``(problem,)`` from the connector's
    ``release_problem`` (:class:`tclose.connector.Releases`; ``problem`` is ``None`` when the
    table is still, in every respect the database records, the release tclose published: its
    mark, columns and rows), or ``None`` when nothing records the table as a release (a
    connector without a registry, a table tclose did not record): then there is nothing to
    compare."""
    from tclose.connector import NO_RELEASE_RECORD

    problem = (
        cast(Releases, database).release_problem(name)
        if capabilities_of(database).releases
        else NO_RELEASE_RECORD
    )
    if problem is not None and problem.startswith(NO_RELEASE_RECORD):
        return None
    return (problem,)


def published_run_id(config: Config, registry: Registry | None = None) -> str | None:
    """The id of the run that published ``config``'s target, from the table's comment
    (PostgreSQL, MySQL; on SQLite from a constraint name in its definition); ``None`` if the
    table carries none. With it, the audit record of a run killed between its publish and its
    report can be found or rebuilt."""
    registry = registry or load_registry()
    database = registry.connector_for(dialect_of(config.target.url)).connect(
        config.target.url, config.target.password_file
    )
    open_read_only(database)
    if not capabilities_of(database).table_identity:
        return None
    comment = cast(TableIdentity, database).table_comment(
        resolve_name(database, config.target.table, "target.table", create=False)
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
    digest_algorithm: str | None = None,
    published_as: TableName | None = None,
) -> tuple[pd.DataFrame, dict[str, dict], PublishedScan]:
    """One streamed read of a written table (:func:`tclose.core.published.scan_published`): its QI
    and confidential columns (and ``extra_columns``), confidential columns encoded as their
    distances expect (with the options they add), and the scan (content digest, linking
    pass-through columns)."""
    scan = scan_published(
        database,
        table,
        config,
        progress,
        line,
        total,
        extra_columns,
        digest_algorithm,
        published_as,
    )
    frame, extra = encode_released(scan.frame, config.attributes)
    return frame, extra, scan


def _verify_staging(
    database: Session,
    staging,
    config: Config,
    registry: Registry,
    resolved: Resolved,
    n: int,
    source_confidential: Mapping[str, np.ndarray],
    progress: Callable[..., None] | None = None,
    published_as: TableName | None = None,
    entities: tuple[Mapping[str, np.ndarray], np.ndarray] | None = None,
    suppression: SuppressionFacts | None = None,
) -> Verification:
    """Read the written table back (QI and confidential columns, streamed) and verify it
    against every criterion; ``published_as`` is the target it will become; ``entities``: the
    values written for every kept source row and its entity code, joined to the written rows
    (:func:`tclose.core.entities.written_entities`) for the ``k_entities`` criterion;
    ``suppression`` the rows the run left out as outliers."""
    frame, extra, scan = _read_written(
        database,
        staging,
        config,
        progress,
        "verifying the written rows",
        n,
        published_as=published_as,
    )
    return verify_release(
        frame,
        config,
        resolved.distances,
        registry,
        k=config.k,
        t=checked_t(resolved, config.t),
        attribute_options=extra,
        expected_rows=n,
        expected_confidential=source_confidential,
        linkage=scan.linkage,
        content_digest=scan.digest,
        **_entity_evidence(frame, config.quasi_identifiers, entities),
        suppression=suppression,
    )


def _entity_evidence(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    entities: tuple[Mapping[str, np.ndarray], np.ndarray] | None,
) -> dict[str, Any]:
    """The ``entities`` and ``entity_problem`` of the evidence (none without entities)."""
    if entities is None:
        return {}
    joined, problem = written_entities(frame, quasi_identifiers, *entities)
    return {"entities": joined, "entity_problem": problem}
