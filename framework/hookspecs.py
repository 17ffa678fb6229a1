"""Hook specifications: the reference of every hook a tclose plugin can implement.

A plugin is a module or object with functions decorated by :data:`hookimpl`, registered either as a
built-in (:data:`tclose.base.registry.DEFAULT_PLUGINS`) or by a third-party distribution through an
entry point in the ``tclose`` group::

    [project.entry-points.tclose]
    my_algorithms = "my_package.tclose_plugin"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from tclose.interfaces import Algorithm, Distance

PROJECT = "tclose"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorator for hook implementations in plugins: ``@tclose.hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_algorithms(register: Callable[[Algorithm], None]) -> None:
    """Register microaggregation algorithms.

    Call ``register(algorithm)`` once per algorithm. ``algorithm`` follows
    :class:`tclose.interfaces.Algorithm`: a ``name`` (used as ``algorithm.name`` in YAML), an
    ``options_schema``, ``requires_t``, and ``partition(problem)`` (a
    :class:`tclose.interfaces.Problem`) returning a :class:`tclose.interfaces.Partition`. A name
    already registered by another plugin is an error that names both plugins.
    """


@hookspec
def register_distances(register: Callable[[Distance], None]) -> None:
    """Register distances for confidential attributes.

    Call ``register(distance)`` once per distance. ``distance`` follows
    :class:`tclose.interfaces.Distance`: a ``name`` (used as ``attributes.<column>.distance``),
    the ``attribute_types`` it accepts, an ``options_schema``, and ``fit(values, options)``
    returning a :class:`tclose.interfaces.FittedDistance`. Duplicate names are errors.
    """


@hookspec
def register_connectors(register: Callable[[Any], None]) -> None:
    """Register database connectors.

    Call ``register(connector)`` once per connector. ``connector`` follows
    :class:`tclose.connector.Connector`: a ``name``, the SQLAlchemy ``dialects`` it serves (e.g.
    ``("sqlite",)``) and ``connect(url, password_file=None)`` returning a
    :class:`tclose.connector.Database`. The runner picks the connector whose dialects include the
    URL's dialect (the part before ``+`` and ``://``), else the generic connector (``"*"``).
    Duplicate names, or two connectors claiming one dialect, are errors.
    """


@hookspec
def register_criteria(register: Callable[[Any], None]) -> None:
    """Register criteria a release must meet, beside the built-in ones.

    Call ``register(criterion)`` once per criterion, with an instance or a class taking no
    argument. A criterion follows :class:`tclose.interfaces.Criterion`: a ``name`` (none of
    :data:`tclose.interfaces.BUILT_IN_CRITERIA`), ``config_keys`` (the dotted configuration
    paths it reads, e.g. ``("privacy.l",)``) and
    ``check(evidence)`` returning a :class:`tclose.interfaces.Check` named ``name`` (or
    ``name:<part>``), a list of them, or ``None``. ``evidence`` is the
    :class:`tclose.interfaces.Evidence` of the release (written rows, classes, EMDs,
    configuration, report). Its checks run in ``tclose run`` (a failed one stops the publish),
    ``tclose verify``, :func:`tclose.anonymize` and ``tclose compare``, and are listed in the
    report's ``verification.checks``. Duplicate names are errors.
    """


@hookspec
def register_report_writers(register: Callable[[str, Callable[[Any], str]], None]) -> None:
    """Register writers of the audit report in a format.

    Call ``register(name, render)`` once per format: ``render(report)`` returns the text of the
    report (the mapping of ``report.json``) in that format. ``tclose run`` writes the file of
    ``report.<name>`` with it (``report.json`` is tclose's own; the built-in
    :mod:`tclose.app.html_report` registers ``html``). A name registered twice is an error.
    """


@hookspec
def check_run(config: Any, target_database: Any, tables: dict[str, Any]) -> None:
    """Called while a run is planned, before any row is read or written.

    ``config`` is the run's configuration; ``target_database`` the target's
    :class:`tclose.connector.Database`; ``tables`` maps ``"source.table"``, ``"target.table"``
    and ``"report.table"`` to the names as resolved (``None`` when not configured). Raise
    :class:`tclose.errors.ConfigError` to refuse the run (exit 2, nothing written), e.g. when a
    table the plugin will write cannot take its rows.
    """


@hookspec
def rebuild_run_record(config: Any, run_id: str, verification: Any, report: Any) -> bool | None:
    """Called by ``tclose verify`` when the published table's run mark names run ``run_id``.

    A plugin that records runs (as ``run_finished`` does) adds the record of ``run_id`` if it
    has none (the run ended between its publish and its report), from ``verification`` (the
    :class:`tclose.core.verify.Verification` just made) and ``report`` (the run's report given
    with ``--report``, or ``None``), and returns ``True`` when it added one. ``config`` holds
    ``report_table`` as the run resolved it. An exception is shown as a warning and never
    changes the verdict.
    """


@hookspec
def run_publishing(report: dict[str, Any], config: Any, connection: Any) -> None:
    """Called inside the publishing transaction, on databases whose DDL is transactional
    (SQLite, PostgreSQL): after the verified table got the target's name, before the commit.

    ``report`` is the audit report as it will stand if the commit succeeds (``run.published`` is
    true; the ``publish`` timing is not known yet); ``config`` is the run's configuration;
    ``connection`` is the SQLAlchemy ``Connection`` of that transaction. What an implementation
    writes with it commits or rolls back together with the published table, so an audit record
    and the release it describes cannot exist one without the other. An exception here rolls the
    publish back: nothing is published and the run fails (exit 3). Not called where publishing
    commits by itself (MySQL/MariaDB ``RENAME TABLE``) nor in a dry run: there ``run_finished``
    is the only record, and the published table carries the run id.
    """


@hookspec
def run_finished(report: dict[str, Any], config: Any) -> None:
    """Called once after every run that reached verification, published or not.

    ``report`` is the same mapping that is written as the audit JSON (secrets removed);
    ``config`` is the run's :class:`tclose.base.config.Config` (it may hold credentials: never log or
    store them). Use it for audit sinks (a table, a message queue, a log). An implementation may
    accept ``report`` alone. Exceptions raised here are reported as warnings and never change the
    outcome of the run.
    """
