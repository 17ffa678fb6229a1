"""The shapes that plugins implement and the runner relies on.

Kernels see NumPy arrays only. An algorithm receives the encoded quasi-identifier matrix and one
fitted distance per confidential attribute, and returns a cluster label for every row. A distance
is fitted once on a confidential column and then answers EMD questions about groups of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: Tolerance used for every comparison of an EMD against ``t`` (``emd <= t + EMD_TOLERANCE``).
#: EMDs are sums of floating-point fractions; the tolerance absorbs their rounding only.
EMD_TOLERANCE = 1e-9


@runtime_checkable
class FittedDistance(Protocol):
    """A confidential attribute's ground distance, fitted on the whole column.

    Attributes:
        name: the distance's registered name (e.g. ``"emd-ordered"``).
        codes: ``int64`` array of shape ``(n,)``: the index of each row's value among the ``m``
            distinct values, in the distance's order (ascending for ordered distances).
        m: number of distinct values.
        global_counts: ``int64`` array of shape ``(m,)``: how many rows hold each value.
        ranks: ``int64`` array of shape ``(n,)``, a permutation of ``0..n-1``: the position of each
            row in the total order used to stratify records (t-first). Ties in the value are broken
            by row index, so the order is deterministic.
        column: the confidential column's name; set by the runner after :meth:`Distance.fit`
            (``None`` when fitted outside a run).
    """

    name: str
    codes: np.ndarray
    m: int
    global_counts: np.ndarray
    ranks: np.ndarray
    column: str | None

    def cluster_emd(self, labels: np.ndarray) -> np.ndarray:
        """EMD between each cluster and the whole column.

        Args:
            labels: ``int64`` array of shape ``(n,)`` with dense labels ``0..L-1``.

        Returns:
            ``float64`` array of shape ``(L,)``; entry ``c`` is the EMD of cluster ``c``.
        """
        ...

    def emd_of_counts(self, counts: np.ndarray) -> np.ndarray:
        """EMD between groups given as value histograms and the whole column.

        Args:
            counts: array of shape ``(m,)`` or ``(g, m)``: how many rows of each group hold each
                value.

        Returns:
            a ``float64`` scalar array for one group, or shape ``(g,)`` for ``g`` groups.
        """
        ...


@dataclass(frozen=True)
class Option:
    """One option of a plugin, as declared in its ``options_schema``.

    Attributes:
        type: the Python type the value must have (``int``, ``float``, ``str``, ``bool``); an
            ``int`` is accepted where ``float`` is declared.
        default: the value used when the option is not given.
        doc: one sentence for ``tclose plugins`` and the docs.
        choices: the allowed values, if the option is an enumeration.
        min: the smallest allowed value (inclusive), for numbers.
        max: the largest allowed value (inclusive), for numbers.
    """

    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None


@dataclass
class Partition:
    """An algorithm's answer.

    Attributes:
        labels: ``int64`` array of shape ``(n,)``: the cluster of every input row. Labels need not
            be dense; the runner renumbers them.
        info: facts worth reporting (e.g. ``{"k_effective": 49, "merges": 3}``); JSON-serializable.
    """

    labels: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Strata:
    """A block's global strata: ``stratum`` ``int64 (n_b,)`` per row, ``sizes`` ``int64 (k',)``
    rows of each stratum in the block."""

    stratum: np.ndarray
    sizes: np.ndarray


@dataclass(frozen=True)
class Problem:
    """What an algorithm is asked to solve: cluster the rows of ``x``.

    Attributes:
        x: ``float64`` array ``(n, d)``: quasi-identifiers, standardized (z-scores).
        distances: one fitted distance per confidential attribute, in config order. In a block
            (:meth:`BlockHooks.partition_block`), views over the block's rows that measure every
            EMD against the **whole table**.
        k: minimum cluster size, ``1 <= k <= n``.
        t: t-closeness level in ``(0, 1]``, or ``None`` (no ``t`` asked, or an algorithm that
            does not enforce it).
        options: the algorithm's own validated options, defaults filled in (the framework's
            block and refinement options are not among them: the framework applies those).
        strata: in a block of a stratified plan, the block's :class:`Strata`; else ``None``.
        solver: set by the framework: runs another registered algorithm on a problem
            (:meth:`solve`); ``None`` outside a run of the framework.
        release_sse: set by the framework when ``x`` holds the whole table's rows: the report's
            ``utility.sse`` of the release that labels ``(n,)`` of these rows would publish
            (:meth:`tclose.base.attributes.EncodedTable.information_loss` of the aggregated QIs,
            as the report computes it); ``None`` in a block or outside a run.
    """

    x: np.ndarray
    distances: Sequence[FittedDistance]
    k: int
    t: float | None
    options: Mapping[str, Any] = field(default_factory=dict)
    strata: Strata | None = None
    solver: Callable[[str, Problem, Mapping[str, Any]], Partition] | None = field(
        default=None, repr=False, compare=False
    )
    release_sse: Callable[[np.ndarray], float] | None = field(
        default=None, repr=False, compare=False
    )

    def required_t(self, algorithm: str) -> float:
        """``t``, for an algorithm that enforces it; a clear error when it is ``None``.

        Raises:
            ValueError: ``t`` is ``None``; the message names ``algorithm``.
        """
        if self.t is None:
            raise ValueError(
                f"Algorithm {algorithm!r} enforces t-closeness: t is required, not None."
            )
        return self.t

    def solve(self, algorithm: str, **options: Any) -> Partition:
        """The partition the registered ``algorithm`` makes of this problem's rows, run as the
        framework runs it (blocks, refinement): its default options, then ``options``; the
        framework's block options of this run are passed on.

        Raises:
            RuntimeError: the problem was built outside the framework (no ``solver``).
        """
        if self.solver is None:
            raise RuntimeError(
                f"Problem.solve({algorithm!r}) needs the framework's solver: run the algorithm "
                f"through tclose (tclose.anonymize, tclose.blocks.framed.run_algorithm)."
            )
        return self.solver(algorithm, self, options)


@runtime_checkable
class Algorithm(Protocol):
    """A microaggregation algorithm plugin.

    Attributes:
        name: the name used in YAML (``algorithm.name``).
        options_schema: option name → :class:`Option`; unknown options are rejected before
            :meth:`partition` is called, and defaults are filled in. The framework adds its
            block options (:data:`tclose.blocks.split.BLOCK_OPTIONS`) and refinement options
            (:data:`tclose.kernels.refinement.REFINE_OPTIONS`) and applies them around
            :meth:`partition` (:mod:`tclose.blocks.framed`); an option the algorithm declares
            itself under one of their names is its own, and the framework then leaves that group
            to it.
        requires_t: whether the algorithm needs ``t`` (``mdav`` does not).
        framework_steps: optional; the framework's steps applied around :meth:`partition`,
            among ``"blocks"`` and ``"refine"`` (default: both). An algorithm that solves other
            algorithms (``auto``) declares ``()``: its block options go on to the algorithms it
            solves (:meth:`Problem.solve`).
    """

    name: str
    options_schema: Mapping[str, Option]
    requires_t: bool

    def partition(self, problem: Problem) -> Partition:
        """Cluster the rows of ``problem.x``.

        Returns:
            a :class:`Partition` in which every cluster has at least ``problem.k`` rows and, if
            ``problem.t`` is given, an EMD of at most ``t`` for every confidential attribute.
        """
        ...


@dataclass(frozen=True)
class BlockPlan:
    """What an algorithm needs of the whole table before its blocks run
    (:meth:`BlockHooks.block_plan`).

    Attributes:
        clusters: clusters the unblocked run would make (``blocks: auto`` sizes blocks by it; an
            explicit ``blocks`` is clipped to it).
        strata: ``k' > 0``: stratified blocks, with the rows cut into ``k'`` global strata of
            consecutive ranks of ``stratify_by`` (sizes: ``strata_sizes``); every block then holds
            whole clusters' worth of each stratum, and the block's problem carries its
            :class:`Strata`. ``0``: plain blocks of a multiple of ``k`` rows (principal-axis
            bisection), and ``strata=None``.
        stratify_by: the distance whose ranks form the strata (default: the first distance).
        strata_sizes: ``int64 (k',)`` the strata sizes (default: ``floor(n/k')`` each, the
            remainder in the central stratum or strata, as t-first).
        distances: whether blocks need the distances (views measuring EMD against the whole
            table); ``False`` ships only the QIs.
        info: facts put first in the partition's ``info``.
    """

    clusters: int
    strata: int = 0
    stratify_by: FittedDistance | None = None
    strata_sizes: np.ndarray | None = None
    distances: bool = True
    info: dict[str, Any] = field(default_factory=dict)


class BlockHooks(Protocol):
    """Optional members of an :class:`Algorithm` for blocked runs (:mod:`tclose.blocks.service`).

    The framework runs every algorithm in blocks when its block options ask for more than one
    (see :data:`Algorithm.framework_steps`). Every member below is optional; the service falls
    back to the default named in each. The service never looks at the name.

    Attributes:
        block_preload: modules the local pool's fork server imports before it forks the workers
            (e.g. one that loads compiled kernels); default: none.
    """

    block_preload: tuple[str, ...]

    def block_plan(self, problem: Problem) -> BlockPlan:
        """What the blocks need of the whole table, computed once on the driver: the clusters
        of the unblocked run, which sizes the blocks; stratified blocks with ``k'`` global
        strata (e.g. t-first's cluster size) or plain blocks of multiples of ``k`` rows; whether
        the blocks need the distances; facts for ``info``. Default: ``floor(n / k)`` clusters,
        plain blocks, with distances."""
        ...

    def partition_block(self, problem: Problem) -> Partition:
        """Cluster one block, on a worker: ``problem.x`` the block's QIs, ``problem.distances``
        views measuring every EMD against the **whole table** (so a cluster within ``t`` here is
        within ``t`` in the published table), ``problem.strata`` the block's :class:`Strata`
        for stratified plans. ``info`` is handed to :meth:`finish_blocks`. Default:
        :meth:`Algorithm.partition` (labels of either are renumbered dense)."""
        ...

    def finish_blocks(
        self, problem: Problem, partition: Partition, block_infos: Sequence[Mapping[str, Any]]
    ) -> Partition:
        """The global step, on the driver, with the whole table's ``problem``: ``partition``
        holds the blocks' clusters (those of block ``b`` numbered after blocks ``0..b-1``) and
        the plan's ``info``; ``block_infos`` the blocks' ``info`` in block order. The built-ins
        that enforce ``t`` run the merge loop on the whole table here if a cluster exceeds
        ``t``. Default: none (the blocks' clusters are the answer)."""
        ...


@runtime_checkable
class Distance(Protocol):
    """A distance plugin: fits a :class:`FittedDistance` on a confidential column.

    Attributes:
        name: the name used in YAML (``attributes.<col>.distance``).
        attribute_types: the attribute types it accepts (``"numeric"``, ``"ordinal"``, ...).
        options_schema: option name → :class:`Option`.
        definition: one paragraph defining the EMD this distance computes, shown per attribute
            in the audit report (``privacy.emd_definitions``). Optional: a plugin without it is
            still accepted, and the report says that the plugin gives no definition.
        default_for: optional, the attribute types for which it is the default distance (used
            when a confidential attribute names no distance; the first registered plugin that
            claims a type wins, built-ins first: see ``Registry.default_distance``).
    """

    name: str
    attribute_types: tuple[str, ...]
    options_schema: Mapping[str, Option]

    def fit(self, values: np.ndarray, options: Mapping[str, Any]) -> FittedDistance:
        """Fit on the whole confidential column (``values`` of shape ``(n,)``)."""
        ...


#: The names of the built-in criteria (:mod:`tclose.core.criteria`); a third-party criterion's
#: name is none of them.
BUILT_IN_CRITERIA = (
    "row_count",
    "suppression",
    "k_anonymity",
    "t_closeness",
    "confidential_multiset",
    "linkage",
    "config_sha256",
    "content_digest",
    "hierarchy_sha256",
    "run_id",
    "release",
)


@dataclass(frozen=True)
class Check:
    """One verdict of one criterion: whether the release meets it, what was expected, what was
    found, and the ``details`` that explain it (serialised after the four fields, in order)."""

    name: str
    passed: bool
    expected: Any
    actual: Any
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def problem(self) -> str | None:
        """The sentence saying why a failed check cannot be trusted at all (``details``'
        ``problem``), or ``None``."""
        return self.details.get("problem")

    def as_dict(self) -> dict[str, Any]:
        """The check as the report records it: ``name``, ``passed``, ``expected``, ``actual``,
        then the details."""
        return {
            "name": self.name,
            "passed": bool(self.passed),
            "expected": self.expected,
            "actual": self.actual,
            **self.details,
        }


@dataclass(frozen=True)
class LinkageFacts:
    """The pass-through columns taken together (``columns``), the rows unique on them
    (``linkable_rows``), and the pass-through columns left out (``allowed_unique``)."""

    columns: tuple[str, ...]
    linkable_rows: int
    allowed_unique: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuppressionFacts:
    """The rows left out as outliers (``privacy.max_suppressed``): ``rows`` of the
    ``considered`` rows (read and not set aside by ``missing: exclude-rows``), as the run chose
    them or as the verifier chose them again from the source; ``declared``: the count a run's
    report declares, when the verifier recomputed ``rows`` itself (else ``None``)."""

    rows: int
    considered: int
    declared: int | None = None


@dataclass(frozen=True)
class Evidence:
    """Everything the criteria judge, gathered once per verification.

    Attributes:
        frame: the written rows' quasi-identifier and confidential columns (confidential
            columns encoded as their distances take them).
        quasi_identifiers: the QI column names.
        confidential: the confidential column names, in the configuration's order.
        classes: the equivalence class of every row (rows with equal written QI values).
        class_sizes: the rows of every class.
        k: the k to check.
        t: the t to check, ``None`` when it is only measured (no t, or an algorithm that does
            not enforce it).
        distances: confidential column → the name of its distance.
        class_emds: confidential column → the EMD of every class (columns of an empty table
            have none).
        emd_problems: confidential column → (how many EMDs are not a finite number >= 0, the
            sentence saying so or ``None``).
        expected_rows: the rows the written table must hold, ``None`` when not known.
        expected_confidential: confidential column → the source's values, ``None`` when not
            known.
        linkage: the linkage of the pass-through columns, ``None`` when not examined.
        content_digest: the written table's content digest, when read from a database.
        config: the configuration (:class:`tclose.base.config.Config`), ``None`` for the
            Python API and ``tclose compare``.
        report: the run's audit report (``tclose verify --report``), else ``None``.
        run_id: the run mark of the published table (``tclose verify``), else ``None``.
        suppression: the rows left out as outliers (:class:`SuppressionFacts`), ``None``
            when not known.
        release: ``(problem,)`` when a trusted registry records the table as a release
            (``tclose verify``): ``problem`` says how the table differs from what tclose
            published, ``None`` when it does not; ``None`` when nothing records it.
        entities: the entity (``source.entity``) of every written row, aligned with ``frame``,
            read from the source and joined to the written rows (in a run by their published
            quasi-identifier values, in ``tclose verify --source`` by the kept source key);
            ``None`` when not known.
        entity_problem: why the written rows could not be joined to the source's entities
            (a sentence), else ``None``.
    """

    frame: pd.DataFrame
    quasi_identifiers: tuple[str, ...]
    confidential: tuple[str, ...]
    classes: np.ndarray
    class_sizes: np.ndarray
    k: int
    t: float | None
    distances: Mapping[str, str] = field(default_factory=dict)
    class_emds: Mapping[str, np.ndarray] = field(default_factory=dict)
    emd_problems: Mapping[str, tuple[int, str | None]] = field(default_factory=dict)
    expected_rows: int | None = None
    expected_confidential: Mapping[str, np.ndarray] | None = None
    linkage: LinkageFacts | None = None
    content_digest: Mapping[str, Any] | None = None
    config: Any = None
    report: Mapping[str, Any] | None = None
    run_id: str | None = None
    release: tuple[str | None] | None = None
    entities: np.ndarray | None = None
    entity_problem: str | None = None
    suppression: SuppressionFacts | None = None

    @property
    def rows(self) -> int:
        """The number of written rows."""
        return len(self.frame)


@runtime_checkable
class Criterion(Protocol):
    """A guarantee a release must meet.

    ``name`` names the criterion (its checks are named after it); ``config_keys`` lists the
    dotted configuration paths it reads (``privacy.l``, say): the configuration and
    :func:`tclose.anonymize` accept them (``privacy: {l: 3}``, ``anonymize(..., l=3)``), and
    their values are found in ``evidence.config.criteria`` (dotted key → value, only the keys
    given). An optional ``config_options`` (dotted key → :class:`Option`) validates a key's
    value (type, choices, range); a key without one takes any value. ``check(evidence)``
    returns a :class:`Check`, a list of checks (one per column, say), or ``None`` when the
    evidence does not allow the criterion (no report, no source).
    """

    name: str
    config_keys: tuple[str, ...]

    def check(self, evidence: Evidence) -> Check | Sequence[Check] | None: ...
