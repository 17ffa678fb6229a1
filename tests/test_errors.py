"""The error classes declare what the runner attaches to them (``published``, ``report``)."""

from __future__ import annotations

import pickle

import pytest

from tclose.base.config import parse_config
from tclose.core.runner import run
from tclose.errors import ConfigError, DataError, RunInterrupted, TcloseError, VerificationError


def test_declared_attributes():
    assert DataError("x").published is False and DataError("x", published=True).published
    assert ConfigError("x").exit_code == 2 and VerificationError("x").exit_code == 1
    failure = VerificationError("x", [{"name": "k_anonymity", "passed": False}])
    assert failure.report is None and failure.checks[0]["name"] == "k_anonymity"
    copy = pickle.loads(pickle.dumps(DataError("x", published=True)))  # e.g. from a worker
    assert copy.published and str(copy) == "x"
    interrupt = RunInterrupted("signal SIGTERM", published=True)
    assert isinstance(interrupt, KeyboardInterrupt) and interrupt.published


def test_a_failed_verification_carries_the_report(sqlite_run, singletons_registry):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "singletons"}  # clusters of one row: k fails
    with pytest.raises(VerificationError) as raised:
        run(parse_config(document), registry=singletons_registry)
    assert raised.value.published is False
    report = raised.value.report
    assert report is not None and report["verification"]["passed"] is False
    assert report["run"]["published"] is False
    assert "discharges_anon" not in sqlite_run.tables()


def test_an_interrupt_says_whether_the_run_published(sqlite_run, monkeypatch):
    from tclose.connectors.sql import Session

    def interrupt(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Session, "publish", interrupt)
    with pytest.raises(RunInterrupted) as raised:
        run(parse_config(sqlite_run.config()))
    assert raised.value.published is False and not isinstance(raised.value, TcloseError)
    assert "discharges_anon" not in sqlite_run.tables()
