"""Adversarial: an algorithm plugin that misbehaves.

Researchers add algorithms as plugins. Whatever a plugin returns or does, the run never publishes
a release that is not k-anonymous and t-close, fails with an error that names the plugin, leaves
the target as it was, and writes no report of a release that does not exist.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tclose
import tclose.app.cli
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.interfaces import Partition


def _registry(partition):
    """Built-ins plus algorithm ``rogue``, whose ``partition`` is ``partition(x, distances, k)``."""

    class Rogue:
        name = "rogue"
        options_schema: dict = {}
        requires_t = True

        def partition(self, x, distances, k, t, options):
            return partition(x, distances, k)

    class Plugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(Rogue())

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


def _groups(x, _distances, k):
    """Honest labels: rows in the order of the first QI, k (the last cluster up to 2k - 1) per
    cluster."""
    order = np.argsort(x[:, 0], kind="stable")
    labels = np.empty(len(x), dtype=np.int64)
    labels[order] = np.minimum(np.arange(len(x)) // k, len(x) // k - 1)
    return labels


def _honest(x, distances, k):
    return Partition(_groups(x, distances, k))


def _run(sqlite_run, monkeypatch, partition, t=1.0, extra=()):
    """Exit code of ``tclose run`` with algorithm ``rogue`` (k = 3) into an existing target."""
    registry = _registry(partition)
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["privacy"]["t"] = t
    document["target"]["if_exists"] = "replace"
    document["report"] = {
        "json": str(sqlite_run.tmp_path / "r.json"),
        "html": str(sqlite_run.tmp_path / "r.html"),
    }
    return main(["-q", "run", str(sqlite_run.write(document)), *extra])


@pytest.fixture
def published(sqlite_run, monkeypatch, capsys):
    """A target published by an honest run; returns its rows (the report files removed)."""
    assert _run(sqlite_run, monkeypatch, _honest) == 0, capsys.readouterr().err
    for name in ("r.json", "r.html"):
        (sqlite_run.tmp_path / name).unlink()
    return sqlite_run.rows("discharges_anon")


def _refused(sqlite_run, capsys, before, code, code_expected, verified=False):
    """The error text, after checking that the run failed as expected and changed nothing (and
    wrote no report, or, when the verifier refused the rows, a report that says so)."""
    err = capsys.readouterr().err
    assert code == code_expected, err
    assert "algorithm 'rogue'" in err.lower(), err
    assert "internal error" not in err and "a bug in tclose" not in err
    assert sqlite_run.tables() == {"discharges", "discharges_anon"}
    assert sqlite_run.rows("discharges_anon") == before
    if verified:
        report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
        assert not report["verification"]["passed"] and not report["run"]["published"]
    else:
        assert not (sqlite_run.tmp_path / "r.json").exists()
        assert not (sqlite_run.tmp_path / "r.html").exists()
    return err


BAD_LABELS = {
    "short": lambda x, d, k: Partition(_groups(x, d, k)[:-1]),
    "long": lambda x, d, k: Partition(np.append(_groups(x, d, k), 0)),
    "two_dimensional": lambda x, d, k: Partition(_groups(x, d, k).reshape(-1, 1)),
    "none": lambda x, d, k: Partition(None),
    "all_nan": lambda x, d, k: Partition(np.full(len(x), np.nan)),
    "some_nan": lambda x, d, k: Partition(
        np.where(np.arange(len(x)) < k, np.nan, _groups(x, d, k))
    ),
    "inf": lambda x, d, k: Partition(np.where(np.arange(len(x)) < 1, np.inf, _groups(x, d, k))),
    "integral_floats": lambda x, d, k: Partition(_groups(x, d, k).astype(float)),
    "fractional": lambda x, d, k: Partition(_groups(x, d, k) + np.linspace(0, 0.5, len(x))),
    "strings": lambda x, d, k: Partition(_groups(x, d, k).astype(str)),
    "objects": lambda x, d, k: Partition(np.array([object()] * len(x))),
    "booleans": lambda x, d, k: Partition(np.arange(len(x)) % 2 == 0),
    "ragged": lambda x, d, k: Partition([[0]] * (len(x) - 1) + [[0, 1]]),
}


@pytest.mark.parametrize("case", list(BAD_LABELS))
def test_labels_that_are_not_one_integer_per_row_are_refused(
    sqlite_run, monkeypatch, capsys, published, case
):
    """Labels must be integers, one per row. NaN labels were one cluster (all NaN: the whole
    table, published with exit 0), float, string and boolean labels were clusters, object labels
    an internal error blaming tclose."""
    code = _run(sqlite_run, monkeypatch, BAD_LABELS[case])
    err = _refused(sqlite_run, capsys, published, code, 1)
    assert "labels" in err


def test_clusters_smaller_than_k_fail_verification_naming_the_plugin(
    sqlite_run, monkeypatch, capsys, published
):
    """The verifier rebuilds the classes from the written rows, finds classes of 2 rows, and its
    error names the plugin."""
    code = _run(sqlite_run, monkeypatch, lambda x, d, k: Partition(np.arange(len(x)) // (k - 1)))
    err = _refused(sqlite_run, capsys, published, code, 1, verified=True)
    assert "k_anonymity" in err


def test_clusters_above_t_fail_verification_naming_the_plugin(
    sqlite_run, monkeypatch, capsys, published
):
    """The verifier rebuilds the classes from the written rows and finds EMD above t; the error
    names the algorithm whose output it refused."""
    code = _run(sqlite_run, monkeypatch, _honest, t=0.05)
    err = _refused(sqlite_run, capsys, published, code, 1, verified=True)
    assert "t_closeness" in err


def test_a_result_that_is_not_a_partition_is_refused(sqlite_run, monkeypatch, capsys, published):
    """A result that is not a partition is a plugin failure naming the plugin, never an internal
    error of tclose."""
    code = _run(sqlite_run, monkeypatch, _groups)
    err = _refused(sqlite_run, capsys, published, code, 1)
    assert "Partition" in err


def test_a_plugin_that_raises_is_named(sqlite_run, monkeypatch, capsys, published):
    """A plugin that raises is named with its error, never reported as a bug in tclose."""
    code = _run(sqlite_run, monkeypatch, lambda x, d, k: 1 / 0)
    err = _refused(sqlite_run, capsys, published, code, 4)
    assert "ZeroDivisionError: division by zero" in err and "-v" in err
    code = _run(sqlite_run, monkeypatch, lambda x, d, k: 1 / 0, extra=["-v"])
    assert code == 4
    assert "Traceback" in capsys.readouterr().err


def test_a_plugin_that_changes_its_input_in_place_is_refused(
    sqlite_run, monkeypatch, capsys, published
):
    """``x`` is the framework's own array, on which the report's disclosure risk is measured: a
    plugin that changes it in place (zeroes it) is refused, never published with a record-linkage
    risk 16 times too small."""

    def zeroing(x, distances, k):
        labels = _groups(x, distances, k)
        x[:, 0] = 0.0
        return Partition(labels)

    code = _run(sqlite_run, monkeypatch, zeroing)
    err = _refused(sqlite_run, capsys, published, code, 1)
    assert "in place" in err


def test_info_that_is_not_json_is_refused_before_publishing(
    sqlite_run, monkeypatch, capsys, published
):
    """An ``info`` that JSON cannot hold is refused before publishing, naming the plugin: never a
    published table without its audit report."""

    def with_object(x, distances, k):
        return Partition(_groups(x, distances, k), info={"centroids": object()})

    code = _run(sqlite_run, monkeypatch, with_object)
    err = _refused(sqlite_run, capsys, published, code, 1)
    assert "info" in err and "JSON" in err


GOOD_LABELS = {
    "negative": lambda x, d, k: Partition(-_groups(x, d, k) - 5),
    "sparse_uint64": lambda x, d, k: Partition(
        _groups(x, d, k).astype(np.uint64) * np.uint64(2**40) + np.uint64(2**63)
    ),
    "list": lambda x, d, k: Partition(list(_groups(x, d, k))),
    "int8": lambda x, d, k: Partition((_groups(x, d, k) % 100).astype(np.int8)),
    "numpy_info": lambda x, d, k: Partition(_groups(x, d, k), info={"n": np.int64(3)}),
}


@pytest.mark.parametrize("case", list(GOOD_LABELS))
def test_any_integers_are_labels(sqlite_run, monkeypatch, capsys, case):
    """Labels need not be dense, positive or int64 (the runner renumbers them): published,
    with the clusters the labels say."""
    assert _run(sqlite_run, monkeypatch, GOOD_LABELS[case]) == 0, capsys.readouterr().err
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    assert report["clusters"]["min"] >= 3 and report["privacy"]["k_achieved"] >= 3
    expected = len(np.unique(np.asarray(GOOD_LABELS[case](np.zeros((400, 1)), [], 3).labels)))
    assert report["clusters"]["count"] == expected


@pytest.mark.parametrize("case", ["all_nan", "strings", "short"])
def test_labels_of_a_block_are_checked_as_the_runner_checks_them(case):
    """In a blocked run the framework renumbers each block's labels before the runner sees them, so
    it checks them first as the runner does: NaN, string or too few labels from the wrapped plugin
    are refused, never renumbered into clusters."""
    from tclose.blocks.framed import run_algorithm
    from tclose.errors import VerificationError
    from tclose.interfaces import Problem

    class Rogue:
        name = "rogue"
        options_schema: dict = {}
        requires_t = False

        def partition(self, x, distances, k, t, options):
            return BAD_LABELS[case](x, distances, k)

    x = np.arange(40, dtype=float).reshape(-1, 1)
    with pytest.raises(VerificationError, match=r"Algorithm 'rogue' \(.*Rogue\) returned"):
        run_algorithm(Rogue(), Problem(x, [], 3, None, {"blocks": 3, "workers": 1}))


def test_the_verifier_rebuilds_the_classes_from_the_written_rows(
    sqlite_run, monkeypatch, capsys, published
):
    """Honest labels and centroids, but one written row changed between the write and the
    verification: the verifier trusts neither the algorithm's clusters nor the values the
    runner meant to write; it rebuilds the classes from the rows it reads back."""
    verify = tclose.core.runner.Phases.verify

    def tampered(self, target):  # in the run's own transaction: the staging table is its own
        target.connection.exec_driver_sql(
            f'UPDATE "{self.plan.staging.name}" SET zip = zip + 0.5 WHERE tclose_row = 1'
        )
        return verify(self, target)

    monkeypatch.setattr(tclose.core.runner.Phases, "verify", tampered)
    code = _run(sqlite_run, monkeypatch, _honest)
    err = _refused(sqlite_run, capsys, published, code, 1, verified=True)
    assert "k_anonymity" in err
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    assert report["clusters"]["min"] >= 3  # the algorithm's clusters were fine
    (check,) = [c for c in report["verification"]["checks"] if c["name"] == "k_anonymity"]
    assert check["actual"] == 1


@pytest.mark.parametrize("status", [0, 1, None])
def test_a_plugin_that_calls_sys_exit_does_not_end_the_run(
    sqlite_run, monkeypatch, capsys, published, status
):
    """``sys.exit(0)`` in a plugin (a researcher's script left in) ended ``tclose run`` with
    exit status 0, "published and verified", with nothing published and no report."""

    def exiting(x, distances, k):
        raise SystemExit(status)

    code = _run(sqlite_run, monkeypatch, exiting)
    err = _refused(sqlite_run, capsys, published, code, 4)
    assert "SystemExit" in err


def test_a_distance_plugin_that_raises_is_named(sqlite_run, monkeypatch, capsys, published):
    """A distance plugin that raises is named with its error, never reported as a bug in tclose."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Boom(OrderedEMDDistance):
        name = "boom"

        def fit(self, values, options):
            raise KeyError("no such thing")

    class Plugin:
        @tclose.hookimpl
        def register_distances(self, register):
            register(Boom())

    registry = load_registry(extra_plugins=[Plugin()], entry_points=False)
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "boom"
    document["target"]["if_exists"] = "replace"
    code = main(["-q", "run", str(sqlite_run.write(document))])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Distance 'boom' (" in err and "KeyError" in err and "a bug in tclose" not in err
    assert sqlite_run.rows("discharges_anon") == published


def test_a_plugin_that_changes_its_options_does_not_change_the_report(
    sqlite_run, monkeypatch, capsys
):
    """The report records the options the run validated, whatever the plugin writes into the mapping
    it gets."""

    def rewriting(x, distances, k):
        return Partition(_groups(x, distances, k))

    registry = _registry(rewriting)
    rogue = registry.algorithms["rogue"].obj
    honest = rogue.partition

    def partition(x, distances, k, t, options):
        options["k"] = 1000  # e.g. left over from a parameter sweep
        return honest(x, distances, k, t, options)

    rogue.partition = partition
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config(algorithm={"name": "rogue", "options": {}})
    document["privacy"]["t"] = 1.0
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0, capsys.readouterr().err
    report = json.loads((sqlite_run.tmp_path / "r.json").read_text())
    from tclose.blocks.framed import STEPS

    framework = {n: o.default for step in STEPS.values() for n, o in step.items()}
    assert report["algorithm"]["options"] == framework  # the defaults of blocks and refine


def test_a_distance_plugin_that_sorts_its_input_in_place_is_named(
    sqlite_run, monkeypatch, capsys, published
):
    """``values.sort()`` in a distance's ``fit`` (a careless way to get the order): the run's
    confidential column is read-only, and the error names the distance, not tclose."""
    from tclose.plugins.emd_ordered import OrderedEMDDistance

    class Sorting(OrderedEMDDistance):
        name = "sorting"

        def fit(self, values, options):
            values.sort()
            return super().fit(values, options)

    class Plugin:
        @tclose.hookimpl
        def register_distances(self, register):
            register(Sorting())

    registry = load_registry(extra_plugins=[Plugin()], entry_points=False)
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "sorting"
    document["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 4
    err = capsys.readouterr().err
    assert "Distance 'sorting' (" in err and "read-only" in err
    assert sqlite_run.rows("discharges_anon") == published
