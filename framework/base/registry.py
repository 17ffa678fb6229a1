"""The plugin manager: built-ins, third-party entry points, and the registry of what they provide."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from tclose import hookspecs
from tclose.base.version import __version__
from tclose.connector import Connector
from tclose.errors import ConfigError, PluginError
from tclose.interfaces import BUILT_IN_CRITERIA

#: Built-in plugin modules, registered before any third-party plugin.
DEFAULT_PLUGINS = (
    "tclose.plugins.emd_ordered",
    "tclose.plugins.nominal_ranking",
    "tclose.plugins.mdav",
    "tclose.plugins.t_first",
    "tclose.plugins.merge",
    "tclose.plugins.k_first",
    "tclose.plugins.auto",
    "tclose.connectors.builtin",  # every built-in connector, imported on first connect
    "tclose.plugins.audit_table",
    "tclose.app.html_report",  # the html writer of the report (hook register_report_writers)
)

KINDS = ("algorithm", "distance", "connector")

#: Set to ``1`` (or ``true``/``yes``) to load no third-party plugin except those named in
#: :data:`PLUGINS_ENV` (like pytest's ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``).
DISABLE_AUTOLOAD_ENV = "TCLOSE_DISABLE_PLUGIN_AUTOLOAD"
#: Comma-separated entry-point names loaded even when autoload is disabled.
PLUGINS_ENV = "TCLOSE_PLUGINS"

log = logging.getLogger("tclose")


@dataclass(frozen=True)
class BrokenPlugin:
    """A ``tclose`` entry point that could not be loaded, and why (the rest still load)."""

    entry_point: str
    value: str
    distribution: str
    version: str
    error: str

    def describe(self) -> str:
        """One line naming the entry point, its distribution and the error."""
        return (
            f"plugin entry point {self.entry_point!r} ({self.value}) of distribution "
            f"{self.distribution} {self.version} failed to load: {self.error}"
        )


@dataclass(frozen=True)
class Provided:
    """One registered plugin object and who provides it."""

    kind: str
    name: str
    obj: Any
    provider: str
    version: str
    plugin: str


def dialect_of(url: str) -> str:
    """The SQLAlchemy dialect of a database URL, as :meth:`Registry.connector_for` takes it:
    the scheme without its driver (``"postgresql"`` for ``postgresql+psycopg://...``)."""
    return url.split("://", 1)[0].split("+", 1)[0]


@dataclass
class Registry:
    """Everything the loaded plugins registered, by kind and name."""

    algorithms: dict[str, Provided] = field(default_factory=dict)
    distances: dict[str, Provided] = field(default_factory=dict)
    connectors: dict[str, Provided] = field(default_factory=dict)
    #: third-party criteria (hook ``register_criteria``), instances, in registration order.
    criteria: dict[str, Provided] = field(default_factory=dict)
    manager: pluggy.PluginManager | None = None
    broken: list[BrokenPlugin] = field(default_factory=list)

    def table(self, kind: str) -> dict[str, Provided]:
        tables = {"algorithm": self.algorithms, "distance": self.distances}
        tables["connector"] = self.connectors
        tables["criterion"] = self.criteria
        return tables[kind]

    def get(self, kind: str, name: str, where: Sequence[str] | str) -> Any:
        """The plugin object of ``kind`` named ``name``; ``where`` it was given: its key path
        in the configuration, or a text opening the message
        (:meth:`~tclose.errors.ConfigError.given_at`)."""
        table = self.table(kind)
        if name not in table:
            known = ", ".join(sorted(table)) or "none"
            broken = "".join(f"\nNote: {b.describe()}" for b in self.broken)
            raise ConfigError.given_at(
                where,
                f"Unknown {kind} {name!r}. Available: {known}. "
                f"Run 'tclose plugins' to list them.{broken}",
            )
        return table[name].obj

    def connector_for(self, dialect: str) -> Connector:
        """The connector serving SQLAlchemy ``dialect`` (e.g. ``"postgresql"``): the one that
        names it, else the one serving ``"*"`` (the generic connector ``sqlalchemy``) if
        SQLAlchemy has a dialect of that name (its package installed)."""
        for provided in self.connectors.values():
            if dialect in provided.obj.dialects:
                return provided.obj
        for provided in self.connectors.values():
            if "*" in provided.obj.dialects and _sqlalchemy_dialect_exists(dialect):
                return provided.obj
        known = sorted(d for p in self.connectors.values() for d in p.obj.dialects)
        broken = "".join(f"\nNote: {b.describe()}" for b in self.broken)
        raise ConfigError(
            f"No connector serves the database dialect {dialect!r}, and SQLAlchemy has no "
            f"dialect of that name (install the package that provides it). Known: "
            f"{known}.{broken}"
        )

    def default_distance(self, attribute_type: str, path: Sequence[str] = ("distance",)) -> str:
        """The name of the distance a confidential attribute of ``attribute_type`` gets when it
        names none: the first registered distance (built-ins first) whose optional
        ``default_for`` lists the type. ``path``: the key path of the attribute's distance."""
        for name, provided in self.distances.items():
            if attribute_type in getattr(provided.obj, "default_for", ()):
                return name
        raise ConfigError(
            f"No distance plugin is the default for {attribute_type} attributes; "
            f"name one (available: {', '.join(sorted(self.distances)) or 'none'}).",
            path=path,
        )

    def versions(self, names: Iterable[tuple[str, str]]) -> dict[str, str]:
        """``{"kind:name": "provider version"}`` for the (kind, name) pairs a run used."""
        out = {}
        for kind, name in names:
            provided = self.table(kind)[name]
            out[f"{kind}:{name}"] = f"{provided.provider} {provided.version}"
        return out


def _criterion(obj: Any, plugin: str) -> Any:
    """The criterion ``obj`` registers (an instance of it when it is a class).

    Raises:
        PluginError: a class that cannot be made without arguments; no ``name`` (a text
            without ``:``), a built-in criterion's, or no ``check``.
    """
    try:
        criterion = obj() if isinstance(obj, type) else obj
    except Exception as error:  # noqa: BLE001 - any failure of third-party code, named
        raise PluginError(
            f"Plugin {plugin} registers the criterion class {obj.__qualname__}, which cannot be "
            f"made without arguments: {type(error).__name__}: {error}. Register an instance."
        ) from error
    name = getattr(criterion, "name", None)
    if not isinstance(name, str) or not name or ":" in name:
        problem = f"a name that is not a non-empty text without ':' ({name!r})"
    elif name in BUILT_IN_CRITERIA:
        problem = f"the name {name!r} of a built-in criterion"
    elif not callable(getattr(criterion, "check", None)):
        problem = "no method check(evidence)"
    else:
        return criterion
    raise PluginError(
        f"Plugin {plugin} registers a criterion ({type(criterion).__qualname__}) with "
        f"{problem}. Rename or fix it."
    )


def _sqlalchemy_dialect_exists(name: str) -> bool:
    """Whether SQLAlchemy can load a dialect called ``name`` (built in, or an installed
    package's ``sqlalchemy.dialects`` entry point); its driver need not be installed."""
    from sqlalchemy.dialects import registry
    from sqlalchemy.exc import NoSuchModuleError

    try:
        registry.load(name)
    except (NoSuchModuleError, ImportError):
        return False
    return True


def _provider_of(distributions: list[tuple[object, str, str]], plugin: object) -> tuple[str, str]:
    """(distribution, version) that provides ``plugin``: its entry point's, tclose for the
    built-ins, else the installed distribution of its module's top-level package, else
    ``module <name>`` and ``(not installed)``. An application's plugin (``extra_plugins``) is
    thus recorded as its own, not as tclose's."""
    for registered, name, version in distributions:
        if registered is plugin:
            return name, version
    module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    if module in DEFAULT_PLUGINS:
        return "tclose", __version__
    for name in importlib.metadata.packages_distributions().get(module.split(".")[0], []):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return name, importlib.metadata.version(name)
    return f"module {module}", "(not installed)"


def _allowed_entry_points() -> tuple[bool, list[str]]:
    """(autoload, allow-list) from :data:`DISABLE_AUTOLOAD_ENV` and :data:`PLUGINS_ENV`."""
    disabled = os.environ.get(DISABLE_AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes")
    names = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    return not disabled, names


def _load_entry_points(
    manager: pluggy.PluginManager,
) -> tuple[list[tuple[object, str, str]], list[BrokenPlugin]]:
    """Register the ``tclose`` entry points the environment allows; an entry point that fails to
    import is returned as a :class:`BrokenPlugin` (and logged) instead of stopping the others."""
    autoload, wanted = _allowed_entry_points()
    loaded: list[tuple[object, str, str]] = []
    broken: list[BrokenPlugin] = []
    if not autoload and not wanted:
        return loaded, broken  # not even the installed distributions' metadata is read
    seen: set[str] = set()
    for dist in list(importlib.metadata.distributions()):
        for ep in dist.entry_points:
            if ep.group != hookspecs.PROJECT or ep.name in seen:
                continue
            if not autoload and ep.name not in wanted:
                continue
            seen.add(ep.name)
            dist_name, dist_version = dist.metadata["Name"] or "?", dist.version or "?"
            try:
                plugin = ep.load()
                manager.register(plugin, name=ep.name)
            except Exception as error:  # any import or hook-validation failure of third-party code
                problem = BrokenPlugin(
                    ep.name, ep.value, dist_name, dist_version, f"{type(error).__name__}: {error}"
                )
                log.warning("%s", problem.describe())
                broken.append(problem)
                continue
            loaded.append((plugin, dist_name, dist_version))
    for name in wanted:
        if name not in seen:
            problem = BrokenPlugin(
                name,
                "?",
                "?",
                "?",
                f"{PLUGINS_ENV} names it but no installed distribution "
                f"provides it in the {hookspecs.PROJECT!r} entry-point group",
            )
            log.warning("%s", problem.describe())
            broken.append(problem)
    return loaded, broken


def load_registry(extra_plugins: Iterable[object] = (), entry_points: bool = True) -> Registry:
    """Build the plugin manager and collect every registered algorithm, distance and connector.

    Args:
        extra_plugins: plugin objects or modules to register after the built-ins (used by tests and
            by applications embedding tclose).
        entry_points: whether to load third-party plugins from the ``tclose`` entry-point group
            (all of them, or, when ``TCLOSE_DISABLE_PLUGIN_AUTOLOAD=1``, only the entry-point
            names listed in ``TCLOSE_PLUGINS``). An entry point that fails to import does not stop
            the others: it is logged and listed in :attr:`Registry.broken`.

    Raises:
        PluginError: two plugins register the same name (the message names both).
    """
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for module_name in DEFAULT_PLUGINS:
        manager.register(importlib.import_module(module_name), name=module_name)
    distributions: list[tuple[object, str, str]] = []
    broken: list[BrokenPlugin] = []
    if entry_points:
        distributions, broken = _load_entry_points(manager)
    for plugin in extra_plugins:
        manager.register(plugin)

    registry = Registry(manager=manager, broken=broken)
    hooks = {
        "algorithm": manager.hook.register_algorithms,
        "distance": manager.hook.register_distances,
        "connector": manager.hook.register_connectors,
        "criterion": manager.hook.register_criteria,
    }
    for kind, hook in hooks.items():
        table = registry.table(kind)
        for impl in reversed(hook.get_hookimpls()):  # registration order
            provider, version = _provider_of(distributions, impl.plugin)
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
                if _kind == "criterion":
                    obj = _criterion(obj, _plugin)
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
