"""Loading third-party plugins from entry points: autoload can be disabled and
an allow-list opted into (``TCLOSE_DISABLE_PLUGIN_AUTOLOAD``, ``TCLOSE_PLUGINS``), and an entry
point that fails to import is named with its distribution without breaking the other plugins.

The distributions here are real: a folder on ``sys.path`` with a module and a ``.dist-info``
holding ``METADATA`` and ``entry_points.txt``, found by :mod:`importlib.metadata`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.base.registry import DISABLE_AUTOLOAD_ENV, PLUGINS_ENV, load_registry

GOOD = """
import tclose


class Identity:
    name = "loading-good"
    options_schema = {}
    requires_t = False

    def partition(self, x, distances, k, t, options):
        raise NotImplementedError


@tclose.hookimpl
def register_algorithms(register):
    register(Identity())
"""

BROKEN = """
import tclose
import tclose_missing_dependency_xyz  # not installed: importing this plugin fails


@tclose.hookimpl
def register_algorithms(register):
    raise AssertionError("never reached")
"""


def _distribution(root: Path, dist: str, module: str, code: str, entry_point: str) -> None:
    info = root / f"{dist.replace('-', '_')}-1.2.dist-info"
    info.mkdir(parents=True)
    (root / f"{module}.py").write_text(code, encoding="utf-8")
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(f"[tclose]\n{entry_point} = {module}\n", "utf-8")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two distributions on sys.path: ``tclose-good`` (entry point ``good``) and
    ``tclose-broken`` (entry point ``broken``, whose module fails to import). Autoload is on."""
    root = tmp_path / "site"
    _distribution(root, "tclose-good", "tclose_loading_good", GOOD, "good")
    _distribution(root, "tclose-broken", "tclose_loading_broken", BROKEN, "broken")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv(DISABLE_AUTOLOAD_ENV, raising=False)
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    return root


def test_the_suite_runs_without_autoload():
    import os

    assert os.environ[DISABLE_AUTOLOAD_ENV] == "1"


def test_a_broken_entry_point_is_named_and_the_others_still_load(installed, caplog):
    registry = load_registry()

    assert registry.algorithms["loading-good"].provider == "tclose-good"
    assert "t-first" in registry.algorithms
    [broken] = registry.broken
    assert (broken.entry_point, broken.distribution, broken.version) == (
        "broken",
        "tclose-broken",
        "1.2",
    )
    assert "tclose_missing_dependency_xyz" in broken.error
    assert "ModuleNotFoundError" in broken.error
    assert "'broken'" in caplog.text and "tclose-broken 1.2" in caplog.text


def test_tclose_plugins_lists_the_rest_and_the_broken_one(installed, capsys):
    assert main(["plugins"]) == 0

    out = capsys.readouterr().out
    assert "loading-good" in out and "tclose-good 1.2" in out and "t-first" in out
    broken_section = out.split("broken (not loaded):", 1)[1]
    assert "broken" in broken_section and "tclose-broken 1.2" in broken_section
    assert "tclose_missing_dependency_xyz" in broken_section


def test_a_run_that_does_not_need_it_works(installed, sqlite_run, capsys):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "mdav"}
    document["privacy"] = {"k": 3}

    assert main(["run", str(sqlite_run.write(document))]) == 0

    err = capsys.readouterr().err
    assert "plugin entry point 'broken'" in err and "tclose-broken 1.2" in err
    assert "discharges_anon" in sqlite_run.tables()


def test_a_run_that_needs_it_fails_naming_the_entry_point(installed, sqlite_run, capsys):
    document = sqlite_run.config()
    document["algorithm"] = {"name": "from-the-broken-plugin"}
    document["privacy"] = {"k": 3}

    assert main(["run", str(sqlite_run.write(document))]) == 2

    err = capsys.readouterr().err
    assert "Unknown algorithm 'from-the-broken-plugin'" in err
    assert "Note: plugin entry point 'broken'" in err and "tclose-broken 1.2" in err
    assert "discharges_anon" not in sqlite_run.tables()


@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_autoload_disabled_loads_no_entry_point(installed, monkeypatch, value):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, value)

    registry = load_registry()

    assert "loading-good" not in registry.algorithms
    assert registry.broken == []  # the broken module is not even imported
    assert "t-first" in registry.algorithms


def test_the_allow_list_loads_only_the_named_entry_points(installed, monkeypatch):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    monkeypatch.setenv(PLUGINS_ENV, " good , ")

    registry = load_registry()

    assert registry.algorithms["loading-good"].provider == "tclose-good"
    assert registry.broken == []


def test_an_allow_listed_name_that_is_not_installed_is_reported(installed, monkeypatch, capsys):
    monkeypatch.setenv(DISABLE_AUTOLOAD_ENV, "1")
    monkeypatch.setenv(PLUGINS_ENV, "good,not-installed")

    assert main(["plugins"]) == 0

    out = capsys.readouterr().out
    assert "loading-good" in out
    assert "not-installed" in out.split("broken (not loaded):", 1)[1]


def test_entry_points_false_ignores_the_allow_list(installed, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, "good")
    registry = load_registry(entry_points=False)
    assert "loading-good" not in registry.algorithms and registry.broken == []


def test_an_unknown_dialect_names_the_broken_entry_point(installed):
    from tclose.errors import ConfigError

    with pytest.raises(ConfigError, match="dialect 'nosuchdb'") as error:
        load_registry().connector_for("nosuchdb")
    assert "Note: plugin entry point 'broken'" in str(error.value)
