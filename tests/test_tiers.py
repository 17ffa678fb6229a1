"""The two tiers of the suite: the README's ``python3 -m pytest`` runs every test but the slow
tier (``-m "not slow"`` in pyproject.toml), ``python3 -m pytest -m slow`` runs the slow tier
alone; together they are the whole suite. The default tier keeps the tests on the PostgreSQL and
MariaDB servers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Files of the slow tier, a file of the default tier with tests on both servers, and a file with
#: one test marked slow among others.
FILES = [
    "tests/test_adversarial_exits.py",
    "tests/test_rule_file_links.py",
    "tests/test_db_roundtrip.py",
    "tests/test_lint.py",
]


def _collected(*options: str) -> set[str]:
    """The test ids pytest selects from :data:`FILES` with ``options``."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + [*options, *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


@pytest.fixture(scope="module")
def tiers() -> dict[str, set[str]]:
    """The tests of :data:`FILES` that each command selects."""
    return {
        "default": _collected(),
        "slow": _collected("-m", "slow"),
        "every": _collected("-m", ""),
    }


def test_the_tiers_split_the_suite(tiers):
    assert tiers["default"] and tiers["slow"]
    assert tiers["default"].isdisjoint(tiers["slow"])
    assert tiers["default"] | tiers["slow"] == tiers["every"]


def test_the_slow_tier_is_the_guarantee_files_and_the_tests_marked_slow(tiers):
    for prefix in ("tests/test_adversarial_", "tests/test_rule_"):
        files = {t for t in tiers["every"] if t.startswith(prefix)}
        assert files and files <= tiers["slow"], prefix
    guarantees = {
        t for t in tiers["slow"] if t.startswith(("tests/test_adversarial_", "tests/test_rule_"))
    }
    assert tiers["slow"] - guarantees == {"tests/test_lint.py::test_mypy_is_clean"}


def test_the_default_tier_runs_on_both_servers(tiers):
    for server in ("postgresql", "mysql"):
        assert any(t.endswith(f"[{server}]") for t in tiers["default"]), server
