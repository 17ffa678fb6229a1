"""The plugin manager: built-ins, third-party entry points, and the registry of what they provide."""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from . import hookspecs
from .errors import ConfigError, PluginError

#: Built-in plugin modules, registered before any third-party plugin.
DEFAULT_PLUGINS = (
    "tclose.plugins.emd_ordered",
    "tclose.plugins.nominal_ranking",
    "tclose.plugins.mdav",
    "tclose.plugins.t_first",
    "tclose.plugins.merge",
    "tclose.plugins.k_first",
    "tclose.plugins.auto",
    "tclose.connectors.sqlite",
    "tclose.connectors.postgresql",
    "tclose.connectors.mysql",
    "tclose.plugins.audit_table",
)

KINDS = ("algorithm", "distance", "connector")


@dataclass(frozen=True)
class Provided:
    """One registered plugin object and who provides it."""

    kind: str
    name: str
    obj: Any
    provider: str
    version: str
    plugin: str


@dataclass
class Registry:
    """Everything the loaded plugins registered, by kind and name."""

    algorithms: dict[str, Provided] = field(default_factory=dict)
    distances: dict[str, Provided] = field(default_factory=dict)
    connectors: dict[str, Provided] = field(default_factory=dict)
    manager: pluggy.PluginManager | None = None

    def table(self, kind: str) -> dict[str, Provided]:
        tables = {"algorithm": self.algorithms, "distance": self.distances}
        tables["connector"] = self.connectors
        return tables[kind]

    def get(self, kind: str, name: str, path: str) -> Any:
        """The plugin object of ``kind`` named ``name``; ``path`` is the YAML path for messages."""
        table = self.table(kind)
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            raise ConfigError(
                f"==> At {path}\nUnknown {kind} {name!r}. Available: {known}. "
                f"Run 'tclose plugins' to list them."
            )
        return table[name].obj

    def connector_for(self, dialect: str) -> Any:
        """The connector serving SQLAlchemy ``dialect`` (e.g. ``"postgresql"``)."""
        for provided in self.connectors.values():
            if dialect in provided.obj.dialects:
                return provided.obj
        known = sorted(d for p in self.connectors.values() for d in p.obj.dialects)
        raise ConfigError(f"No connector serves the database dialect {dialect!r}. Known: {known}.")

    def versions(self, names: Iterable[tuple[str, str]]) -> dict[str, str]:
        """``{"kind:name": "provider version"}`` for the (kind, name) pairs a run used."""
        out = {}
        for kind, name in names:
            provided = self.table(kind)[name]
            out[f"{kind}:{name}"] = f"{provided.provider} {provided.version}"
        return out


def _provider_of(manager: pluggy.PluginManager, plugin: object) -> tuple[str, str]:
    for registered, distribution in manager.list_plugin_distinfo():
        if registered is plugin:
            return distribution.project_name, distribution.version
    from . import __version__

    return "tclose", __version__


def load_registry(extra_plugins: Iterable[object] = (), entry_points: bool = True) -> Registry:
    """Build the plugin manager and collect every registered algorithm, distance and connector.

    Args:
        extra_plugins: plugin objects or modules to register after the built-ins (used by tests and
            by applications embedding tclose).
        entry_points: whether to load third-party plugins from the ``tclose`` entry-point group.

    Raises:
        PluginError: two plugins register the same name (the message names both).
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for module_name in DEFAULT_PLUGINS:
        manager.register(importlib.import_module(module_name), name=module_name)
    if entry_points:
        manager.load_setuptools_entrypoints(hookspecs.PROJECT)
    for plugin in extra_plugins:
        manager.register(plugin)

    registry = Registry(manager=manager)
    hooks = {
        "algorithm": manager.hook.register_algorithms,
        "distance": manager.hook.register_distances,
        "connector": manager.hook.register_connectors,
    }
    for kind, hook in hooks.items():
        table = registry.table(kind)
        for impl in reversed(hook.get_hookimpls()):  # registration order
            provider, version = _provider_of(manager, impl.plugin)
            plugin_name = impl.plugin_name

            def register(
                obj: Any,
                *,
                _kind=kind,
                _table=table,
                _plugin=plugin_name,
                _provider=provider,
                _version=version,
            ) -> None:
                name = obj.name
                if name in _table:
                    raise PluginError(
                        f"Two plugins register the {_kind} {name!r}: "
                        f"{_table[name].provider} (plugin {_table[name].plugin}) and "
                        f"{_provider} (plugin {_plugin}). Uninstall or rename one of them."
                    )
                if _kind == "connector":
                    for other in _table.values():
                        shared = set(other.obj.dialects) & set(obj.dialects)
                        if shared:
                            raise PluginError(
                                f"Two connectors claim the dialect {sorted(shared)[0]!r}: "
                                f"{other.name} (plugin {other.plugin}) and {name} (plugin "
                                f"{_plugin}). Uninstall one of them."
                            )
                _table[name] = Provided(_kind, name, obj, _provider, _version, _plugin)

            impl.function(register=register)
    return registry
