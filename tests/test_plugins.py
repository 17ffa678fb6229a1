"""The plugin system: registration, third-party plugins, duplicates, options, hook documentation."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

import tclose
from tclose import hookspecs
from tclose.base.config import load_config
from tclose.base.options import validate_options
from tclose.base.registry import DEFAULT_PLUGINS, load_registry
from tclose.core.runner import run
from tclose.errors import ConfigError, PluginError
from tclose.interfaces import Option, Partition


class SortedBlocks:
    """A throwaway third-party algorithm: sort on the first QI, cut into blocks of k' rows."""

    name = "sorted-blocks"
    options_schema = {"size_factor": Option(int, 1, "Blocks of k * size_factor rows.", min=1)}
    requires_t = False

    def partition(self, x, distances, k, t, options):
        size = k * options["size_factor"]
        order = np.argsort(x[:, 0], kind="stable")
        labels = np.empty(len(x), dtype=np.int64)
        blocks = max(1, len(x) // size)
        labels[order] = np.minimum(np.arange(len(x)) // size, blocks - 1)
        return Partition(labels, {"blocks": blocks})


class ThirdPartyPlugin:
    @tclose.hookimpl
    def register_algorithms(self, register):
        register(SortedBlocks())


class FinishedSink:
    def __init__(self):
        self.reports = []

    @tclose.hookimpl
    def run_finished(self, report):
        self.reports.append(report)


def test_builtins_are_registered_with_provider_and_version():
    registry = load_registry(entry_points=False)
    assert {"t-first", "mdav", "merge", "k-first"} <= set(registry.algorithms)
    assert "emd-ordered" in registry.distances
    assert {"sqlite", "postgresql", "mysql"} <= set(registry.connectors)
    provided = registry.algorithms["t-first"]
    assert provided.provider == "tclose" and provided.version == tclose.__version__
    assert registry.connector_for("sqlite").name == "sqlite"


def test_third_party_algorithm_runs_from_yaml(sqlite_run):
    sink = FinishedSink()
    registry = load_registry(extra_plugins=[ThirdPartyPlugin(), sink], entry_points=False)
    document = sqlite_run.config()
    document["algorithm"] = {"name": "sorted-blocks", "options": {"size_factor": 2}}
    document["privacy"] = {"k": 3}  # it does not enforce t, so t is not asked for
    config = load_config(sqlite_run.write(document))

    result = run(config, registry=registry)

    assert result.published
    assert result.report["algorithm"]["name"] == "sorted-blocks"
    assert result.report["algorithm"]["info"]["blocks"] == 400 // 6
    assert result.report["privacy"]["k_achieved"] >= 6
    assert sink.reports and sink.reports[0]["verification"]["passed"]


def test_third_party_option_is_validated_by_its_schema(sqlite_run):
    registry = load_registry(extra_plugins=[ThirdPartyPlugin()], entry_points=False)
    document = sqlite_run.config()
    document["algorithm"] = {"name": "sorted-blocks", "options": {"size_factor": 0}}
    with pytest.raises(ConfigError, match="'size_factor' option of sorted-blocks must be in"):
        run(load_config(sqlite_run.write(document)), registry=registry)


def test_duplicate_name_is_rejected_naming_both_plugins():
    class Duplicate:
        @tclose.hookimpl
        def register_algorithms(self, register):
            clone = SortedBlocks()
            clone.name = "t-first"
            register(clone)

    with pytest.raises(PluginError) as error:
        load_registry(extra_plugins=[Duplicate()], entry_points=False)
    message = str(error.value)
    assert "'t-first'" in message and "tclose.plugins.t_first" in message
    assert "Duplicate" in message or "test_plugins" in message or "plugin" in message


def test_algorithm_that_breaks_k_is_caught_by_verification(sqlite_run):
    class Broken(SortedBlocks):
        name = "broken"

        def partition(self, x, distances, k, t, options):
            labels = np.zeros(len(x), dtype=np.int64)
            labels[0] = 1  # a singleton cluster
            return Partition(labels)

    class BrokenPlugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(Broken())

    from tclose.errors import VerificationError

    registry = load_registry(extra_plugins=[BrokenPlugin()], entry_points=False)
    document = sqlite_run.config()
    document["algorithm"] = {"name": "broken"}
    document["privacy"] = {"k": 3}  # it does not enforce t, so t is not asked for
    with pytest.raises(VerificationError, match="k_anonymity"):
        run(load_config(sqlite_run.write(document)), registry=registry)
    assert sqlite_run.tables() == {"discharges"}


def test_validate_options_messages():
    schema = {
        "partner": Option(str, "nearest", "doc", choices=("nearest", "min-emd")),
        "candidates": Option(int, 5, "doc", min=1),
        "weight": Option(float, 1.0, "doc", min=0.0, max=1.0),
    }
    assert validate_options("merge", schema, None, "algorithm.options") == {
        "partner": "nearest",
        "candidates": 5,
        "weight": 1.0,
    }
    assert validate_options("merge", schema, {"weight": 1}, "p")["weight"] == 1.0
    with pytest.raises(ConfigError, match=r"The 'candidates' option of merge must be in"):
        validate_options("merge", schema, {"candidates": 0}, "p")
    with pytest.raises(ConfigError, match=r"must be of type int. Got 'x' instead"):
        validate_options("merge", schema, {"candidates": "x"}, "p")
    with pytest.raises(ConfigError, match=r"must be one of"):
        validate_options("merge", schema, {"partner": "best"}, "p")
    with pytest.raises(ConfigError, match=r"Unknown option 'other' for merge"):
        validate_options("merge", schema, {"other": 1}, "p")


def _hook_names():
    return [
        name
        for name, value in vars(hookspecs).items()
        if callable(value) and hasattr(value, "tclose_spec")
    ]


def test_every_hook_has_reference_documentation():
    names = _hook_names()
    assert set(names) >= {
        "register_algorithms",
        "register_distances",
        "register_connectors",
        "run_finished",
    }
    for name in names:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert len(doc.split()) >= 20, f"hook {name} lacks reference documentation"


def test_every_hook_is_exercised_by_a_test():
    tests = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    for name in _hook_names():
        assert f"def {name}(" in tests, f"no test implements hook {name}"


def test_default_plugins_are_importable_modules():
    import importlib

    for module in DEFAULT_PLUGINS:
        assert importlib.import_module(module).__doc__


class ConnectorPlugin:
    """Exercises ``register_connectors``: a second connector claiming its own dialect."""

    @tclose.hookimpl
    def register_connectors(self, register):
        class Dummy:
            name = "dummy"
            dialects = ("dummydb",)

            def connect(self, url, password_file=None):
                raise NotImplementedError

        register(Dummy())


class DistancePlugin:
    """Exercises ``register_distances``: an alias of emd-ordered under another name."""

    @tclose.hookimpl
    def register_distances(self, register):
        from tclose.plugins.emd_ordered import OrderedEMDDistance

        alias = OrderedEMDDistance()
        alias.name = "emd-alias"
        register(alias)


def test_connector_and_distance_plugins_register():
    registry = load_registry(
        extra_plugins=[ConnectorPlugin(), DistancePlugin()], entry_points=False
    )
    assert registry.connector_for("dummydb").name == "dummy"
    assert "emd-alias" in registry.distances
    with pytest.raises(ConfigError, match="No connector serves"):
        registry.connector_for("nosuchdb")


def _hook_reference(name: str) -> str:
    """The block docs/plugins.md must hold for hook ``name`` (its signature and docstring)."""
    hook = getattr(hookspecs, name)
    signature = str(inspect.signature(hook)).replace("'", "")
    return f"### `{name}{signature}`\n\n```text\n{inspect.getdoc(hook)}\n```\n"


def test_every_hook_docstring_is_in_docs_plugins_md():
    docs = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text("utf-8")
    for name in _hook_names():
        block = _hook_reference(name)
        assert block in docs, f"docs/plugins.md lacks (or has an old copy of):\n{block}"


def test_two_connectors_claiming_one_dialect_are_rejected():
    class Claims:
        @tclose.hookimpl
        def register_connectors(self, register):
            class Other:
                name = "other-sqlite"
                dialects = ("sqlite",)

                def connect(self, url, password_file=None):
                    raise NotImplementedError

            register(Other())

    with pytest.raises(PluginError, match="Two connectors claim the dialect 'sqlite'"):
        load_registry(extra_plugins=[Claims()], entry_points=False)
