"""Adversarial: a distance plugin whose EMDs are not numbers the verifier can compare with t.

The distance plugin *is* the definition of t for its attributes, but its EMDs are still figures
the verifier checks: an EMD is a distance between two distributions, so it is a finite number
>= 0. A plugin returning ``-inf`` (or a negative EMD) for every class would make a plain
``worst <= t`` hold, and so could a ``-inf`` next to a ``NaN`` (``max`` of the two): the
verifier fails such EMDs, so no release unchecked for t-closeness is published.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import tclose
import tclose.app.cli
import tclose.core.runner
from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.core.verify import verify_rows
from tclose.errors import VerificationError
from tclose.interfaces import EMD_TOLERANCE
from tclose.plugins.emd_ordered import OrderedEMDDistance


class _Rigged(OrderedEMDDistance):
    """emd-ordered, but every class's EMD is replaced by ``rig(honest EMDs)``."""

    default_for = ()

    def __init__(self, name, rig):
        self.name = name
        self.rig = rig

    def fit(self, values, options):
        fitted = super().fit(values, options)
        honest = fitted.cluster_emd
        fitted.cluster_emd = lambda labels: self.rig(np.asarray(honest(labels), dtype=float))
        return fitted


RIGS = {
    "minus-inf": lambda emds: np.full(len(emds), -np.inf),
    "negative": lambda emds: -emds - 0.5,
    # one class NaN, the others -inf: max() is NaN or -inf depending on the order
    "nan-and-minus-inf": lambda emds: np.where(np.arange(len(emds)) == 0, np.nan, -np.inf),
    "plus-inf-first": lambda emds: np.where(np.arange(len(emds)) == 0, np.inf, 0.0),
}


def _registry(name, rig):
    class Plugin:
        @tclose.hookimpl
        def register_distances(self, register):
            register(_Rigged(name, rig))

    return load_registry(extra_plugins=[Plugin()], entry_points=False)


def _frame():
    """Two classes of three rows (QI ``q``), confidential ``c``."""
    return pd.DataFrame({"q": [1, 1, 1, 2, 2, 2], "c": np.array([1, 2, 3, 4, 5, 6], np.int64)})


def _t_check(rig, t=0.2):
    verification = verify_rows(_frame(), ["q"], {"c": (_Rigged("rigged", rig), {})}, 3, t, 6)
    check = next(c for c in verification.checks if c["name"] == "t_closeness:c")
    return verification, check


@pytest.mark.parametrize("rig", sorted(RIGS))
def test_the_t_check_fails_on_an_emd_that_is_not_a_finite_number_at_least_0(rig):
    verification, check = _t_check(RIGS[rig])
    assert check["passed"] is False and verification.passed is False
    assert check["invalid_emds"] >= 1
    problem = check["problem"]
    assert "'c'" in problem and "'rigged'" in problem
    assert f"{check['invalid_emds']} of 2 classes" in problem
    assert "finite number >= 0" in problem


def test_every_invalid_emd_is_counted():
    _, check = _t_check(RIGS["minus-inf"])
    assert check["invalid_emds"] == 2
    _, check = _t_check(RIGS["plus-inf-first"], t=1.0)
    assert check["invalid_emds"] == 1 and "1 of 2 classes" in check["problem"]


def test_a_rounding_error_below_0_is_0():
    """An EMD computed as a sum of differences can come out a few ulps below 0; within the
    tolerance used against t it is 0, and a release with such classes is t-close."""
    verification, check = _t_check(lambda emds: np.full(len(emds), -EMD_TOLERANCE / 2))
    assert check["passed"] is True and verification.passed is True
    assert "problem" not in check and check["invalid_emds"] == 0


def test_a_wrong_number_of_emds_fails_the_check():
    """A distance that answers for fewer classes than there are would hide the others."""
    _, check = _t_check(lambda emds: emds[:1])
    assert check["passed"] is False
    assert "1 EMD(s) for 2 classes" in check["problem"] and "'rigged'" in check["problem"]


def test_a_measured_only_t_of_invalid_emds_is_not_a_figure():
    """Without t (mdav) there is no check, but the measured t is not ``-inf``: it is NaN,
    which the report writes as null with a warning."""
    verification = verify_rows(
        _frame(), ["q"], {"c": (_Rigged("rigged", RIGS["minus-inf"]), {})}, 3, None, 6
    )
    assert verification.passed is True
    assert np.isnan(verification.t_achieved["c"])


def _use(monkeypatch, registry):
    monkeypatch.setattr(tclose.app.cli, "load_registry", lambda: registry)
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)


@pytest.mark.parametrize("rig", ["minus-inf", "negative"])
def test_a_run_with_such_a_distance_publishes_nothing(sqlite_run, monkeypatch, capsys, rig):
    """A run with such a distance publishes nothing (exit 1), and its report holds no ``-Infinity``
    nor a negative t."""
    honest = sqlite_run.config()
    honest["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(sqlite_run.write(honest, "honest.yaml"))]) == 0
    before = sqlite_run.rows("discharges_anon")
    _use(monkeypatch, _registry("rigged", RIGS[rig]))
    document = sqlite_run.config()
    document["attributes"]["charge"]["distance"] = "rigged"
    document["target"]["if_exists"] = "replace"
    document["report"] = {"json": str(sqlite_run.tmp_path / "r.json")}
    capsys.readouterr()
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 1
    err = capsys.readouterr().err
    assert "t_closeness:charge" in err and "Nothing was published" in err
    assert re.search(r"Distance 'rigged' \(\S+_Rigged\) gave \d+ of \d+ classes of 'charge'", err)
    assert sqlite_run.rows("discharges_anon") == before
    assert sqlite_run.tables() == {"discharges", "discharges_anon"}
    text = (sqlite_run.tmp_path / "r.json").read_text()
    report = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the report"))
    assert report["run"]["published"] is False
    check = next(c for c in report["verification"]["checks"] if c["name"] == "t_closeness:charge")
    assert check["passed"] is False and check["invalid_emds"] > 0


def test_tclose_verify_with_such_a_distance_does_not_verify(sqlite_run, monkeypatch, capsys):
    """An auditor's ``tclose verify`` uses the configured distance too: it fails and says
    why."""
    document = sqlite_run.config()
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    _use(monkeypatch, _registry("rigged", RIGS["minus-inf"]))
    document["attributes"]["charge"]["distance"] = "rigged"
    capsys.readouterr()
    assert main(["-q", "verify", str(sqlite_run.write(document, "audit.yaml"))]) == 1
    out = capsys.readouterr().out
    assert "FAIL  t_closeness:charge" in out and "verdict: NOT verified" in out
    assert re.search(r"Distance 'rigged' \(\S+_Rigged\) gave \d+ of \d+ classes", out)


def test_the_api_refuses_such_a_release():
    frame = pd.DataFrame(
        {"age": np.arange(60) % 17, "charge": np.arange(60, dtype=np.int64) * 7 % 23}
    )
    registry = _registry("rigged", RIGS["minus-inf"])
    with pytest.raises(VerificationError, match=r"Distance 'rigged' \(\S+_Rigged\) gave \d+ of"):
        tclose.anonymize(
            frame,
            ["age"],
            {"charge": {"type": "numeric", "distance": "rigged"}},
            k=3,
            t=0.3,
            registry=registry,
        )


def test_a_distance_that_raises_while_verifying_is_a_plugin_failure_naming_it():
    """Not an internal error: a :class:`PluginFailure` (exit 4) naming the distance, where it
    failed and the exception, chained."""
    from tclose.errors import PluginFailure

    def broken(emds):
        raise ZeroDivisionError("no EMD today")

    with pytest.raises(PluginFailure) as failure:
        verify_rows(_frame(), ["q"], {"c": (_Rigged("broken", broken), {})}, 3, 0.2, 6)
    message = str(failure.value)
    assert "Distance 'broken'" in message and "while verifying 'c'" in message
    assert "ZeroDivisionError: no EMD today" in message
    assert isinstance(failure.value.__cause__, ZeroDivisionError)
