"""The example third-party plugin (examples/tclose-sortagg), installed as a distribution, runs a
YAML configuration through its entry point. CI installs it (.ci/run); locally the tests skip
unless it is installed (`python3 -m pip install ./examples/tclose-sortagg`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tclose.app.cli import main
from tclose.base.registry import load_registry
from tclose.testing import check_algorithm

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tclose-sortagg"


@pytest.fixture(scope="module", autouse=True)
def _installed(require_example):
    require_example("tclose-sortagg", "plugin")


@pytest.fixture(autouse=True)
def _opted_in(monkeypatch):
    """The suite disables plugin autoload (conftest.py); these tests load the example by name."""
    monkeypatch.setenv("TCLOSE_PLUGINS", "sortagg")


def test_entry_point_registers_the_algorithm_with_its_distribution():
    provided = load_registry().algorithms["principal-sort"]
    assert (provided.provider, provided.version) == ("tclose-sortagg", "0.1.0")
    assert provided.plugin == "sortagg"


def test_example_config_runs_through_the_entry_point(sqlite_run, tmp_path):
    document = yaml.safe_load((EXAMPLE / "config.yaml").read_text(encoding="utf-8"))
    document["source"]["url"] = f"sqlite:///{sqlite_run.db}"
    document["report"] = {"json": str(tmp_path / "r.json"), "html": str(tmp_path / "r.html")}

    assert main(["run", str(sqlite_run.write(document))]) == 0

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["algorithm"]["name"] == "principal-sort"
    assert report["plugins"]["algorithm:principal-sort"] == "tclose-sortagg 0.1.0"
    assert report["verification"]["passed"] is True
    assert report["privacy"]["k_achieved"] >= 5
    assert report["privacy"]["t_achieved"]["charge"] <= 0.2 + 1e-9
    assert "discharges_sortagg" in sqlite_run.tables()
    assert "principal-sort" in (tmp_path / "r.html").read_text()


def test_example_config_runs_in_blocks_on_the_pool_with_no_code_of_its_own(sqlite_run, tmp_path):
    document = yaml.safe_load((EXAMPLE / "config.yaml").read_text(encoding="utf-8"))
    document["source"]["url"] = f"sqlite:///{sqlite_run.db}"
    document["report"] = {"json": str(tmp_path / "r.json"), "html": str(tmp_path / "r.html")}
    document["algorithm"]["options"].update(blocks=3, executor="local", workers=2, refine=True)

    assert main(["run", str(sqlite_run.write(document))]) == 0

    report = json.loads((tmp_path / "r.json").read_text())
    info = report["algorithm"]["info"]
    assert info["blocks"] == 3 and info["executor"] == "local" and "refine" in info
    assert report["verification"]["passed"] is True
    assert report["privacy"]["k_achieved"] >= 5
    assert report["privacy"]["t_achieved"]["charge"] <= 0.2 + 1e-9


def test_installed_plugin_passes_the_conformance_suite():
    algorithm = load_registry().algorithms["principal-sort"].obj
    assert check_algorithm(algorithm) > 0
