"""Calls into plugins, and what their answers must be: the one place that runs a plugin's
code (:func:`plugin_call`), fits a distance (:func:`fit_distance`) and checks an algorithm's
answer (:func:`checked_labels`), for the runner, the blocks, the verifier and the conformance
kit alike. A plugin that breaks its contract stops the run, named, before anything is written.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from typing import Any

import numpy as np

from tclose.base.arrays import dense_labels
from tclose.base.jsonsafe import dotted, to_json, unstorable_text
from tclose.errors import ConfigError, PluginFailure, TcloseError, VerificationError
from tclose.interfaces import FittedDistance, Partition, Problem


def checked_labels(algorithm: Any, partition: Any, n: int) -> np.ndarray:
    """The dense labels of an algorithm's answer for ``n`` rows, after checking the contract of
    :meth:`Algorithm.partition <tclose.interfaces.Algorithm.partition>`: a :class:`Partition`
    whose ``labels`` hold one integer per row (any integers: NaN, floats, strings and booleans
    are not labels) and an ``info`` that JSON can hold (it goes into the report), so that a
    broken answer stops the run, naming the plugin, before anything is written. The sizes of the
    clusters and their EMD are for the verifier, which rebuilds the classes from the written rows
    (its failure names the algorithm too). ``partition.info`` is replaced by the checked copy
    (as JSON values), which the report records.

    Raises:
        VerificationError: the answer breaks the contract; the message names the algorithm.
    """
    name = plugin_label(algorithm)
    if not isinstance(partition, Partition):
        raise VerificationError(
            f"{name} returned a {type(partition).__name__}, not a tclose.interfaces.Partition."
        )
    try:
        labels = np.asarray(partition.labels)
    except ValueError as error:  # ragged nested sequences
        raise VerificationError(f"{name} returned labels NumPy cannot read: {error}.") from None
    if labels.shape != (n,):
        raise VerificationError(f"{name} returned {labels.shape} labels for {n} rows.")
    if np.ma.is_masked(partition.labels):  # np.asarray drops the mask: rows of no cluster
        raise VerificationError(
            f"{name} returned masked labels ({int(np.ma.count_masked(partition.labels))} rows "
            f"masked): every row needs a cluster, a label is an integer (int64), one per row."
        )
    if labels.dtype.kind not in "iu":  # NumPy counts timedelta64 (NaT too) as an integer
        raise VerificationError(
            f"{name} returned labels of type {labels.dtype}: a cluster label is an integer "
            f"(int64), one per row."
        )
    try:
        text = to_json({"info": partition.info})
    except (TypeError, ValueError) as error:
        raise VerificationError(
            f"{name} returned an info that JSON cannot hold ({error}); the report records it, "
            f"as strict JSON (no NaN or infinity: use null, or a text)."
        ) from None
    except RecursionError:  # a dict or list that holds itself
        raise VerificationError(
            f"{name} returned an info that JSON cannot hold: it holds itself (or is nested "
            f"deeper than Python's recursion limit); the report records it."
        ) from None
    for steps, keys in _colliding_keys(partition.info):
        raise VerificationError(
            f"{name} returned an info whose {_escaped(dotted(('info', *steps)))} has keys that "
            f"are one text in JSON ({', '.join(_escaped(repr(k)) for k in keys)}): the report "
            f"would keep one of their values only."
        )
    snapshot = json.loads(text)["info"]
    for steps, _text in unstorable_text(snapshot):  # NumPy texts as Python's
        where = _escaped(dotted(("info", *steps)))
        raise VerificationError(
            f"{name} returned an info whose {where} holds a NUL character or "
            f"a lone surrogate, which the audit row cannot hold (PostgreSQL's jsonb refuses "
            f"it, and with it the publish); the report records the info."
        )
    # The report records what was checked, not what the plugin puts into its dict later
    # (module-level statistics that its distance's fit, called again by the verifier, fills).
    partition.info = snapshot
    return dense_labels(labels)


def _colliding_keys(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], list]]:
    """``(steps, keys)`` of every dict in ``value`` whose keys ``keys`` are one JSON text
    (``1`` and ``"1"``: JSON keys are texts), depth first. ``value`` is known to be finite."""
    if isinstance(value, dict):
        texts: dict[str, list] = {}
        for key, item in value.items():
            texts.setdefault(str(key), []).append(key)
            yield from _colliding_keys(item, (*at, str(key)))
        for keys in texts.values():
            if len(keys) > 1:
                yield at, keys
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _colliding_keys(item, (*at, index))


def read_only(values: np.ndarray) -> np.ndarray:
    """A read-only view of ``values``, for a plugin that must not change them (the run's
    confidential column is also what the verifier compares the written values with): a plugin
    that writes into it fails, naming itself, instead of changing what the run checks."""
    view = np.asarray(values).view()
    view.flags.writeable = False
    return view


def _escaped(text: str) -> str:
    """``text`` with its control characters and lone surrogates as escapes, for a message."""
    return text.encode("unicode_escape", "backslashreplace").decode("ascii")


#: What :func:`fit_distance` requires of a fitted distance (:class:`FittedDistance`).
_FITTED_MEMBERS = ("codes", "m", "global_counts", "ranks", "cluster_emd", "emd_of_counts")


def fit_distance(
    distance: Any, column: str, values: np.ndarray, options: Mapping[str, Any], where: str = ""
) -> FittedDistance:
    """``distance.fit`` on a read-only view of ``values`` (:func:`read_only`), its ``column``
    set, checked to be a fitted distance.

    Raises:
        PluginFailure: ``fit`` raised (:func:`plugin_call`; ``where`` says when), or returned
            something that is not a :class:`FittedDistance` (``None``: a forgotten ``return``)
            or cannot take its ``column``; the message names the distance.
        ConfigError: ``fit`` refused ``options``, located at the column's
            ``distance_options`` (:func:`options_of`).
    """
    with plugin_call(distance, "Distance", where), options_of(column):
        model = distance.fit(read_only(values), options)
        used = getattr(model, "column", None)
        if used is not None:  # the runner sets it: this one was fitted before
            raise PluginFailure(
                f"{plugin_label(distance, 'Distance')} answered fit on {column!r}{where} with a "
                f"fitted distance it had given before (for {used!r}; a cache?): fit must fit "
                f"the values it is given, which are other rows when the verifier calls it "
                f"(a bug in the plugin)."
            )
        model.column = column
    missing = [member for member in _FITTED_MEMBERS if not hasattr(model, member)]
    if missing:
        raise PluginFailure(
            f"{plugin_label(distance, 'Distance')} returned a {type(model).__name__} from fit"
            f"{where}, not a fitted distance (it has no {', '.join(missing)}: see "
            f"tclose.interfaces.FittedDistance; a bug in the plugin)."
        )
    problem = _fitted_problem(model, len(values))
    if problem:
        raise PluginFailure(
            f"{plugin_label(distance, 'Distance')} fitted on {column!r}{where} {problem} (see "
            f"tclose.interfaces.FittedDistance; a bug in the plugin)."
        )
    return model


def _fitted_problem(model: Any, n: int) -> str | None:
    """What is wrong with the arrays of a fitted distance of ``n`` rows that the algorithms
    (t-first's strata, the blocks) rely on, or ``None``: ``codes`` ``(n,)`` integers in
    ``0..m-1``, ``global_counts`` their histogram, ``ranks`` a permutation of ``0..n-1``."""
    try:
        m = int(model.m)
        codes, ranks = np.asarray(model.codes), np.asarray(model.ranks)
        counts = np.asarray(model.global_counts)
    except (TypeError, ValueError) as error:
        return f"has members NumPy cannot read ({error})"
    for member, array in (("codes", codes), ("ranks", ranks)):
        if array.shape != (n,) or array.dtype.kind not in "iu":
            return f"gave {member} of shape {array.shape} and type {array.dtype}, not {n} integers"
    if n and (codes.min() < 0 or codes.max() >= m):
        return f"gave codes outside 0..m-1 (m = {m})"
    if not np.array_equal(counts, np.bincount(codes, minlength=m)):
        return "gave global_counts that are not the counts of its codes"
    if n and (ranks.min() < 0 or ranks.max() >= n or not (np.bincount(ranks) == 1).all()):
        return "gave ranks that are not a permutation of 0..n-1 (ties must be broken by row)"
    return None


def plugin_label(plugin: Any, kind: str = "Algorithm") -> str:
    """``Algorithm 'name' (module.Class)``: how messages name a plugin."""
    cls = type(plugin)
    return f"{kind} {getattr(plugin, 'name', '?')!r} ({cls.__module__}.{cls.__qualname__})"


@contextmanager
def options_of(column: str) -> Iterator[None]:
    """A :class:`ConfigError` raised within (a distance plugin refusing its options when it
    fits ``column``) is located at ``attributes.<column>.distance_options``."""
    try:
        yield
    except ConfigError as error:
        raise error.at("attributes", column, "distance_options") from None


#: The exit codes of errors (``tclose.errors``): a plugin's ``TcloseError`` must have one.
_ERROR_EXIT_CODES = (1, 2, 3, 4)


@contextmanager
def plugin_call(plugin: Any, kind: str = "Algorithm", where: str = "") -> Iterator[None]:
    """Within the block, an exception of ``plugin`` that is not a :class:`TcloseError` (a clear
    error of its own), a ``MemoryError`` (no bug) or a ``KeyboardInterrupt`` (Ctrl-C, SIGTERM)
    is a :class:`PluginFailure` naming it and ``where`` it happened (e.g. ``" in block 2 of 4
    (100 rows)"``), the exception chained; any ``BaseException`` included (``sys.exit(0)``
    would end tclose with 0, a ``GeneratorExit`` escaped it with Python's exit status 1). What
    the plugin prints goes to stderr: stdout holds the command's results. A plugin's own
    ``TcloseError`` passes as it is, but never marked ``published``, and one whose exit code
    is not an error's (0 would say "published and verified") is a :class:`PluginFailure`."""
    try:
        with redirect_stdout(sys.stderr):
            yield
    except TcloseError as error:
        error.published = False  # nothing is published while a plugin runs
        if error.exit_code not in _ERROR_EXIT_CODES:  # 0 said "published and verified"
            raise PluginFailure(
                f"{plugin_label(plugin, kind)} failed{where}: {type(error).__name__}: "
                f"{_message(error)}, with exit code {error.exit_code!r}, which is not an "
                f"error's (1 to 4; a bug in the plugin)."
            ) from error
        raise
    except (MemoryError, KeyboardInterrupt):
        raise
    except BaseException as error:
        raise PluginFailure(
            f"{plugin_label(plugin, kind)} failed{where}: {type(error).__name__}: "
            f"{_message(error)} (a bug in the plugin; run with -v for the traceback)."
        ) from error


def _message(error: BaseException, limit: int = 300) -> str:
    """``str(error)`` on one line, cut to ``limit`` characters (a plugin's message may hold a
    whole array of the data); a message whose ``str()`` raises is said to be unprintable."""
    try:
        text = " ".join(str(error).split())
    except Exception:
        return "(its message cannot be shown: str() of it raised)"
    return text if len(text) <= limit else text[:limit] + "..."


def call_hook(method: Callable[..., Any], problem: Problem, *more: Any) -> Any:
    """``method(problem, *more)``; a method of the five-value form (its required positional
    parameters beyond ``more`` are not one ``problem``) gets ``x, distances, k, t, options``
    (a copy) in place of ``problem``, and the block's ``strata`` as a keyword if it takes one."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the documented form
        return method(problem, *more)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.kind in positional and p.default is p.empty]
    if len(required) <= 1 + len(more):
        return method(problem, *more)
    values = (problem.x, problem.distances, problem.k, problem.t, dict(problem.options))
    takes_strata = any(p.name == "strata" for p in parameters)
    keywords = {"strata": problem.strata} if takes_strata else {}
    return method(*values, *more, **keywords)
