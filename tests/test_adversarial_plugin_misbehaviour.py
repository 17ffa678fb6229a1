"""Adversarial: plugins that misbehave the way research prototypes do.

tests/test_adversarial_plugins.py and tests/test_adversarial_block_plugins.py cover wrong answers
and ordinary exceptions. Here: ``BaseException`` subclasses, exceptions whose ``str()`` fails or
holds the data, errors of tclose that claim success, state kept across calls and blocks (options,
``info``, cached fits), output on stdout, labels and ``info`` that only look valid, distances
that write into their input or the verifier's classes, give broken arrays or under-report their
EMD. Whatever the plugin does, nothing unverified is published, the source is untouched, and the
error names the plugin, never blaming tclose or a built-in.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tclose
import tclose.app.cli
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.errors import DataError, TcloseError
from tclose.interfaces import Partition

sys.path.insert(0, str(Path(__file__).parent))
import block_plugins_helpers as helpers  # noqa: E402
import test_adversarial_block_plugins as blocks  # noqa: E402
import test_adversarial_plugins as rogue  # noqa: E402

published = rogue.published


@pytest.fixture
def blocked_published(sqlite_run, monkeypatch, capsys):
    """A target published by an honest blocked run (serial); its rows and the source's."""
    assert blocks._run(sqlite_run, monkeypatch, "none", workers=1) == 0, capsys.readouterr().err
    for name in ("r.json", "r.html", "attempts"):
        (sqlite_run.tmp_path / name).unlink()
    return sqlite_run.rows("discharges_anon"), sqlite_run.rows("discharges")


class _Rogue:
    """Algorithm ``rogue``: ``partition(x, distances, k)`` gives its answer."""

    name = "rogue"
    options_schema: dict = {}
    requires_t = True

    def __init__(self, partition):
        self._partition = partition

    def partition(self, x, distances, k, t, options):
        return self._partition(x, distances, k)


def _registry_with(*plugins):
    """Built-ins plus ``plugins`` (distances and algorithms, told apart by ``fit``)."""

    class Plugin:
        @tclose.hookimpl
        def register_distances(self, register):
            for plugin in plugins:
                if hasattr(plugin, "fit"):
                    register(plugin)

        @tclose.hookimpl
        def register_algorithms(self, register):
            for plugin in plugins:
                if not hasattr(plugin, "fit"):
                    register(plugin)

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


def _use(monkeypatch, registry):
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)


def _alike(attribute):
    """A ``partition(x, distances, k)`` whose clusters hold rows of like values of confidential
    attribute number ``attribute`` (``k`` consecutive ranks each): far above any small ``t``."""

    def partition(x, distances, k):
        order = np.argsort(distances[attribute].ranks, kind="stable")
        labels = np.empty(len(x), dtype=np.int64)
        labels[order] = np.minimum(np.arange(len(x)) // k, len(x) // k - 1)
        return Partition(labels)

    return partition


def _raising(error):
    def partition(x, distances, k):
        raise error

    return partition


# --- BaseException subclasses and exceptions that cannot be printed -----------------------------


@pytest.mark.parametrize("fault", ["generator_exit", "base_exception", "unprintable"], ids=str)
def test_a_plugin_raising_what_is_not_an_exception_is_a_plugin_failure(
    sqlite_run, monkeypatch, capsys, published, fault
):
    """``GeneratorExit``, a ``BaseException`` of the plugin's own, or an exception whose ``str()``
    raises: each is the plugin's failure, exit 4, naming it (never Python's traceback with exit 1,
    "verification failed", nor an internal error blaming tclose)."""
    errors = {
        "generator_exit": GeneratorExit(),
        "base_exception": helpers._Abort("the plugin gave up"),
        "unprintable": helpers._Unprintable("secret 4242"),
    }
    code = rogue._run(sqlite_run, monkeypatch, _raising(errors[fault]))
    err = rogue._refused(sqlite_run, capsys, published, code, 4)
    assert type(errors[fault]).__name__ in err and "a bug in the plugin" in err, err
    assert "4242" not in err


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
@pytest.mark.parametrize("fault", ["generator_exit", "base_exception", "unprintable"])
def test_the_same_in_a_block(sqlite_run, monkeypatch, capsys, blocked_published, workers, fault):
    code = blocks._run(sqlite_run, monkeypatch, fault, workers=workers)
    err = blocks._refused(sqlite_run, capsys, blocked_published, code, 4)
    blocks._named(err)
    assert "4242" not in err


def test_a_long_exception_message_is_cut(sqlite_run, monkeypatch, capsys, published):
    """A prototype's ``ValueError(f"bad input {x}")`` put the whole array (here 1 MB of it)
    on the screen; the message is cut as an internal error's is (the traceback, with -v, has
    it all)."""
    code = rogue._run(sqlite_run, monkeypatch, _raising(ValueError("7" * 1_000_000)))
    err = rogue._refused(sqlite_run, capsys, published, code, 4)
    assert "ValueError: 777" in err and len(err) < 2_000, len(err)


# --- State kept across calls and blocks ---------------------------------------------------------


@pytest.mark.parametrize("workers", [2, 1], ids=["pool", "in-process"])
def test_every_block_gets_the_options_as_validated(
    sqlite_run, monkeypatch, capsys, blocked_published, workers
):
    """A ``partition_block`` that pops its options changed them for the next block run in the
    same process: in process (or on a worker that ran two blocks) the second block got other
    options than the first, and the run depended on the executor."""
    code = blocks._run(
        sqlite_run, monkeypatch, "pops_options", workers=workers, name="faulty-native"
    )
    assert code == 0, capsys.readouterr().err
    assert helpers.attempts(sqlite_run.tmp_path / "attempts") == blocks.BLOCKS


# --- Output on stdout ---------------------------------------------------------------------------


def test_a_plugin_printing_does_not_write_into_the_results(
    sqlite_run, monkeypatch, capsys, published
):
    """stdout holds the run's results (the summary, ``tclose init``'s YAML); a plugin's
    ``print`` was mixed into them. It goes to stderr."""

    def printing(x, distances, k):
        print("rogue: debugging output")
        return rogue._honest(x, distances, k)

    assert rogue._run(sqlite_run, monkeypatch, printing) == 0
    out, err = capsys.readouterr()
    assert "debugging output" not in out and "debugging output" in err


def test_a_plugin_printing_in_a_block_does_not_write_into_the_results(
    sqlite_run, monkeypatch, capsys
):
    """The same in a block run in this process (a pool's workers run the same code, but their
    output escapes pytest's capture)."""
    assert blocks._run(sqlite_run, monkeypatch, "prints", workers=1) == 0
    out, err = capsys.readouterr()
    assert "debugging output" not in out and "debugging output" in err


# --- State kept after the answer ----------------------------------------------------------------

STATS: dict = {}  # a prototype's module-level statistics, shared by its algorithm and distance


def test_an_info_the_plugin_changes_after_its_answer_is_reported_as_checked(
    sqlite_run, monkeypatch, capsys
):
    """``info`` is checked (JSON it can hold) when ``partition`` returns, and the report is
    written after publishing. An algorithm that returns its module-level statistics as ``info``,
    which its distance's ``fit`` (called again by the verifier) then fills with NaN and a NumPy
    array, must leave neither a published table without its report nor a report of an info
    that was never checked."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Counting(OrderedEMDDistance):
        name = "counting"

        def fit(self, values, options):
            STATS["spread"] = float("nan")
            STATS["values"] = np.asarray(values)
            return super().fit(values, options)

    class Stateful:
        name = "stateful"
        options_schema: dict = {}
        requires_t = True

        def partition(self, x, distances, k, t, options):
            STATS.clear()
            STATS["clusters"] = len(x) // k
            return Partition(rogue._groups(x, distances, k), info=STATS)

    _use(monkeypatch, _registry_with(Counting(), Stateful()))
    document = sqlite_run.config(algorithm={"name": "stateful", "options": {}})
    document["privacy"]["t"] = 1.0
    document["attributes"]["charge"]["distance"] = "counting"
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    code = main(["-q", "run", str(sqlite_run.write(document))])
    assert code == 0, capsys.readouterr().err
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    assert report["algorithm"]["info"] == {"clusters": len(sqlite_run.rows("discharges")) // 3}


# --- EMD: the verifier measures it itself -------------------------------------------------------


@pytest.mark.parametrize(
    "column, attribute",
    [
        ("charge", {"role": "confidential", "type": "numeric", "distance": "emd-ordered"}),
        ("ward", {"role": "confidential", "type": "nominal", "distance": "nominal-ranking"}),
    ],
    ids=["emd-ordered", "nominal-ranking"],
)
def test_an_algorithm_that_rigs_its_distances_is_caught_by_the_verifier(
    sqlite_run, monkeypatch, capsys, column, attribute
):
    """An algorithm that makes its fitted distances answer 0 for every cluster (an instance's
    ``cluster_emd`` and ``emd_of_counts`` replaced, its counts zeroed where it can) and returns
    clusters of one confidential value each: the verifier fits every built-in distance again on
    the written rows, so it measures the real EMD and refuses the release."""

    def rigging(x, distances, k):
        for fitted in distances:
            fitted.cluster_emd = lambda labels: np.zeros(int(np.max(labels)) + 1)
            fitted.emd_of_counts = lambda counts: np.zeros(np.shape(counts)[:-1])
            if fitted.global_counts.flags.writeable:
                fitted.global_counts[:] = 0
        return _alike(0)(x, distances, k)

    _use(monkeypatch, _registry_with(_Rogue(rigging)))
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["attributes"]["charge"] = {"role": "other"}
    document["attributes"][column] = attribute
    document["privacy"]["t"] = 0.05
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"t_closeness:{column}" in err and "algorithm 'rogue'" in err.lower(), err
    assert "discharges_anon" not in sqlite_run.tables()
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    assert not report["run"]["published"] and report["privacy"]["t_achieved"][column] > 0.05


def test_a_distance_plugin_is_the_definition_of_t_and_the_report_says_whose(
    sqlite_run, monkeypatch, capsys
):
    """A third-party distance defines t for its attributes (docs/plugins.md, "Distances"): the
    verifier has no other definition to measure it by, so one that under-reports its EMD (here
    0 for every class) gets the release published. What the report must do is say so: the t
    check and ``privacy.emd_definitions`` name that distance, and ``plugins`` its provider,
    never tclose's built-ins."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Lying(OrderedEMDDistance):
        name = "lying"
        definition = ""  # gives none

        def fit(self, values, options):
            fitted = super().fit(values, options)
            fitted.cluster_emd = lambda labels: np.zeros(int(np.max(labels)) + 1)
            return fitted

    _use(monkeypatch, _registry_with(Lying()))
    document = sqlite_run.config(algorithm={"name": "mdav", "options": {}})
    document["attributes"]["charge"]["distance"] = "lying"
    document["privacy"].pop("t")
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0, capsys.readouterr().err
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    assert report["privacy"]["t_achieved"]["charge"] == 0.0  # the plugin's word
    definition = report["privacy"]["emd_definitions"]["charge"]
    assert definition.startswith("lying: the plugin gives no definition"), definition
    provider = report["plugins"]["distance:lying"]
    assert provider == "module tests.test_adversarial_plugin_misbehaviour (not installed)", provider


@pytest.mark.parametrize("where", ["run", "verify"])
def test_a_distance_that_sorts_a_nominal_column_in_place_is_named(
    sqlite_run, monkeypatch, capsys, published, where
):
    """A nominal distance that sorts its values in place (``values.sort()``, a careless way to
    get their order). The run's nominal column, and the verifier's, were writable arrays: the
    sort went through and the run published (exit 0), its EMDs measured on the values of other
    rows than the classes' (the report's measured t was not the release's; with ``t``, a
    reordering could pass classes above it). Both are read-only now and the error names the
    distance."""
    from tclose.plugins.nominal_ranking import NominalRankingDistance

    calls = []

    class Sorting(NominalRankingDistance):
        name = "sorting"

        def fit(self, values, options):
            calls.append(1)
            if where == "run" or len(calls) > 1:
                values.sort()
            return super().fit(values, options)

    _use(monkeypatch, _registry_with(Sorting()))
    document = sqlite_run.config(algorithm={"name": "mdav", "options": {}})
    document["privacy"].pop("t")
    document["attributes"]["ward"] = {
        "role": "confidential",
        "type": "nominal",
        "distance": "sorting",
    }
    document["target"]["if_exists"] = "replace"
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'sorting' (" in err and "read-only" in err, err
    assert sqlite_run.rows("discharges_anon") == published


def _holding_itself() -> dict:
    info: dict = {"rounds": []}
    info["rounds"].append(info)  # a prototype's "parent" link
    return info


@pytest.mark.parametrize(
    "info, expected",
    [
        (_holding_itself(), "holds itself"),
        ({"sizes": {3: 10, "3": 12}}, r"info\.sizes has keys that are one text in JSON \(3, '3'\)"),
        ({True: 1, "True": 2}, "one text in JSON"),
    ],
    ids=["cycle", "int_and_text_key", "bool_and_text_key"],
)
def test_an_info_the_report_cannot_record_faithfully_is_refused(info, expected):
    """An info that holds itself was a ``RecursionError`` (an internal error blaming tclose);
    keys that JSON writes as one text (``3`` and ``"3"``) were merged in the report, one value
    silently lost."""
    from tclose.base.plugin_calls import checked_labels
    from tclose.errors import VerificationError

    labels = np.arange(6) // 3
    with pytest.raises(VerificationError, match=r"Algorithm 'rogue' \(.*\) returned an info"):
        try:
            checked_labels(_Rogue(rogue._honest), Partition(labels, info), 6)
        except VerificationError as error:
            assert re.search(expected, str(error)), str(error)
            raise


def test_an_info_is_recorded_as_json_values():
    """NumPy numbers, arrays, tuples and keys that are not texts: recorded as JSON has them."""
    from tclose.base.plugin_calls import checked_labels

    partition = Partition(np.arange(6) // 3, {"n": np.int64(3), "c": np.arange(2), (1, 2): (3,)})
    checked_labels(_Rogue(rogue._honest), partition, 6)
    assert partition.info == {"n": 3, "c": [0, 1], "(1, 2)": [3]}
    assert type(partition.info["n"]) is int


@pytest.mark.parametrize("answer", ["none", "frozen"])
def test_a_distance_whose_fit_answers_no_fitted_distance_is_named(
    sqlite_run, monkeypatch, capsys, published, answer
):
    """``fit`` returning ``None`` (a forgotten ``return``), or a fitted distance that cannot
    take its ``column`` (a frozen dataclass): an internal error blaming tclose
    (``AttributeError`` when the runner set ``column``)."""
    import dataclasses

    from tclose.plugins.emd_ordered import OrderedEMDDistance

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        name: str = "forgetful"

    class Forgetful(OrderedEMDDistance):
        name = "forgetful"

        def fit(self, values, options):
            super().fit(values, options)
            return None if answer == "none" else Frozen()

    _use(monkeypatch, _registry_with(Forgetful()))
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "forgetful"
    document["target"]["if_exists"] = "replace"
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'forgetful' (" in err and "bug in tclose" not in err, err
    assert sqlite_run.rows("discharges_anon") == published


@pytest.mark.parametrize(
    "labels",
    [
        np.ma.masked_array(np.arange(6) // 3, mask=[0, 0, 0, 0, 0, 1]),
        np.array([0, 0, 0, 1, 1, "NaT"], dtype="timedelta64[ns]"),
        (np.arange(6) // 3).astype("timedelta64[s]"),
    ],
    ids=["masked", "timedelta_with_nat", "timedelta"],
)
def test_labels_that_only_look_like_integers_are_refused(labels):
    """A masked array (masked rows: "no cluster", whose values under the mask mean nothing),
    timedelta64 labels (NumPy files timedelta64 under ``np.integer``) and ``NaT`` are refused as
    labels."""
    from tclose.base.plugin_calls import checked_labels
    from tclose.errors import VerificationError

    algorithm = _Rogue(rogue._honest)
    with pytest.raises(VerificationError, match=r"Algorithm 'rogue' \(.*\) returned .*labels"):
        checked_labels(algorithm, Partition(labels), 6)


def test_a_distance_that_rewrites_the_classes_changes_no_other_column_s_check(
    sqlite_run, monkeypatch, capsys, published
):
    """The verifier hands every confidential column's distance the same class of every row.
    A plugin distance whose ``cluster_emd`` sorted or zeroed that array in place (a careless
    way to group rows) changed the classes the next column's built-in distance measured
    (zeroed: one class), and the run failed blaming ``emd-ordered`` for giving 1 EMD for 133
    classes (a reordering that keeps the count measures other classes than the release's).
    The classes are read-only: the error names the plugin."""
    from tclose.plugins.nominal_ranking import NominalRankingDistance

    class Lumping(NominalRankingDistance):
        name = "lumping"

        def fit(self, values, options):
            fitted = super().fit(values, options)
            honest = fitted.cluster_emd

            def cluster_emd(labels):
                emds = honest(labels)
                labels[:] = 0
                return emds

            fitted.cluster_emd = cluster_emd
            return fitted

    _use(monkeypatch, _registry_with(Lumping(), _Rogue(_alike(1))))
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    del document["attributes"]["ward"]  # first, so that its check comes before charge's
    document["attributes"] = {
        "ward": {"role": "confidential", "type": "nominal", "distance": "lumping"},
        **document["attributes"],
    }
    document["privacy"]["t"] = 0.1
    document["target"]["if_exists"] = "replace"
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'lumping' (" in err and "read-only" in err, err
    assert sqlite_run.rows("discharges_anon") == published


@pytest.mark.parametrize("fault", ["one_based_ranks", "counts", "codes"])
def test_a_distance_whose_fitted_arrays_break_their_contract_is_named(
    sqlite_run, monkeypatch, capsys, published, fault
):
    """``ranks`` from 1 (as ``scipy.stats.rankdata`` gives them), ``global_counts`` that are not
    the counts of the codes, codes past ``m``: t-first failed on them ("Algorithm 't-first' ...
    failed: ValueError: ranks must be a permutation", a built-in blamed for the distance's bug)
    or computed its EMDs on them. The fitted distance is checked after ``fit``
    and the error names it."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Careless(OrderedEMDDistance):
        name = "careless"

        def fit(self, values, options):
            fitted = super().fit(values, options)
            if fault == "one_based_ranks":  # as scipy.stats.rankdata gives them
                fitted.ranks = fitted.ranks + 1
            elif fault == "counts":
                fitted.global_counts = fitted.global_counts + 1
            else:
                fitted.codes = fitted.codes + fitted.m
            return fitted

    _use(monkeypatch, _registry_with(Careless()))
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "careless"
    document["target"]["if_exists"] = "replace"
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'careless' (" in err and "fitted on 'charge'" in err, err
    assert "t-first" not in err, err
    assert sqlite_run.rows("discharges_anon") == published


def test_a_distance_that_caches_its_fit_is_not_measured_on_the_run_s_rows(
    sqlite_run, monkeypatch, capsys, published
):
    """A distance that memoizes ``fit`` (keyed by the column's length: a research shortcut)
    answered the verifier's fit on the written rows with its fit of the source's rows, in
    another order: the verifier measured every class's EMD on the values of other rows, found
    at most 0.427 and published (exit 0) a release whose classes reach 0.497 > t = 0.45. A fit
    that returns a fitted distance the runner already named is refused."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Caching(OrderedEMDDistance):
        name = "caching"

        def __init__(self):
            self.cache = {}

        def fit(self, values, options):
            if len(values) not in self.cache:
                self.cache[len(values)] = super().fit(values, options)
            return self.cache[len(values)]

    _use(monkeypatch, _registry_with(Caching(), _Rogue(_alike(0))))
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["attributes"]["charge"]["distance"] = "caching"
    document["privacy"]["t"] = 0.45
    document["target"]["if_exists"] = "replace"
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'caching' (" in err and "given before" in err, err
    assert sqlite_run.rows("discharges_anon") == published


class _Finished(TcloseError):
    """A prototype's own "error" to stop early, with an exit code meaning success."""

    exit_code = 0


@pytest.mark.parametrize(
    "error",
    [_Finished("stopping early"), DataError("refused", published=True)],
    ids=["exit_code_0", "published"],
)
def test_a_tclose_error_of_a_plugin_cannot_claim_success(
    sqlite_run, monkeypatch, capsys, published, error
):
    """A plugin may end the run with a ``TcloseError`` of its own (its message, its exit code), but
    never with exit 0, nor drop the "Nothing was published" line by marking it ``published``:
    nothing is published while a plugin runs."""
    code = rogue._run(sqlite_run, monkeypatch, _raising(error))
    err = capsys.readouterr().err
    assert code != 0 and "Nothing was published" in err, err
    assert sqlite_run.rows("discharges_anon") == published
    assert not (sqlite_run.tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "answer",
    [
        lambda x: Partition(np.zeros(len(x), dtype=np.int64), _holding_itself()),
        lambda x: Partition(np.zeros(len(x), dtype="timedelta64[s]")),
    ],
    ids=["info_holding_itself", "timedelta_labels"],
)
def test_the_conformance_suite_refuses_what_the_runner_refuses(answer):
    """``check_algorithm`` crashed with a ``RecursionError`` on an info that holds itself, and
    passed timedelta labels that a run refuses."""
    from tclose.testing import ConformanceError, check_algorithm

    with pytest.raises(ConformanceError, match="returned"):
        check_algorithm(_Rogue(lambda x, distances, k: answer(x)))
