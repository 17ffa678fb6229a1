"""The configuration file's model: one frozen dataclass per section, with every key it takes.

:mod:`tclose.base.config` takes its declared keys from these classes (a key the parser reads is
a field here, and the reverse), and ``tclose schema config`` prints the JSON Schema generated
from them (``docs/schema/config.json``). The parser checks more than the schema says (a URL's
scheme, a hierarchy's leaves, plugin options against the plugins); the schema tells an editor
or a CI job which keys exist, which are required, and their types. Keys are documented in
``docs/configuration.md``.

The keys a registered criterion declares in ``config_keys`` (``source.entity``, ``privacy.l``)
are no fields here: the parser accepts those of the installed criteria
(:func:`tclose.base.config.criterion_keys`), and :func:`config_schema` adds them to their
sections from the criteria's ``config_options``. ``tclose schema config`` prints the schema with
the keys of the installed plugins; ``docs/schema/config.json`` holds it with the plugins tclose
ships (``TCLOSE_DISABLE_PLUGIN_AUTOLOAD=1 TCLOSE_PLUGINS=diversity tclose schema config``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from tclose.base.schema import Absent, Fragment, json_schema
from tclose.interfaces import Option

#: A positive number (``weight``, ``interval_p``).
Positive = Annotated[float, Fragment(exclusiveMinimum=0)]


@dataclass(frozen=True, kw_only=True)
class SourceDocument:
    """The table to read: its database URL and name, its key, the file of the password."""

    CLOSED: ClassVar[bool] = True
    url: str
    table: str
    key: str | None | Absent = Absent.ABSENT
    password_file: str | None | Absent = Absent.ABSENT
    chunk_size: Annotated[int, Fragment(minimum=1)] | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class TargetDocument:
    """The table to publish (in the source's database without ``url``)."""

    CLOSED: ClassVar[bool] = True
    url: str | Absent = Absent.ABSENT
    table: str
    if_exists: Literal["fail", "replace"] | Absent = Absent.ABSENT
    password_file: str | None | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class AttributeDocument:
    """One column: its role and type, and how it is compared and published."""

    CLOSED: ClassVar[bool] = True
    role: Literal["identifier", "quasi_identifier", "confidential", "other"]
    type: Literal["numeric", "ordinal", "nominal", "date", "datetime"] | Absent = Absent.ABSENT
    distance: str | None | Absent = Absent.ABSENT
    distance_options: Mapping[str, Any] | None | Absent = Absent.ABSENT
    round: bool | Absent = Absent.ABSENT
    categories: Sequence[Any] | None | Absent = Absent.ABSENT
    hierarchy: Any | Absent = Absent.ABSENT
    missing: Literal["error", "category", "exclude-rows"] | Absent = Absent.ABSENT
    weight: Positive | Absent = Absent.ABSENT
    allow_unique: bool | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class PrivacyDocument:
    """The privacy model: k, t (omitted: k-anonymity only), and the largest share of rows
    left out as outliers."""

    CLOSED: ClassVar[bool] = True
    k: Annotated[int, Fragment(minimum=1)]
    t: Annotated[float, Fragment(exclusiveMinimum=0, maximum=1)] | None | Absent = Absent.ABSENT
    max_suppressed: Annotated[float, Fragment(minimum=0, exclusiveMaximum=0.5)] | Absent = (
        Absent.ABSENT
    )


@dataclass(frozen=True, kw_only=True)
class AlgorithmDocument:
    """The algorithm plugin and its options (checked against the plugin's schema)."""

    CLOSED: ClassVar[bool] = True
    name: str
    options: Mapping[str, Any] | None | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class ReportDocument:
    """The report's files, its audit table, interval disclosure's half-width, and the
    sampling fraction population uniqueness assumes."""

    CLOSED: ClassVar[bool] = True
    json: str | None | Absent = Absent.ABSENT
    html: str | None | Absent = Absent.ABSENT
    table: str | None | Absent = Absent.ABSENT
    interval_p: Positive | Absent = Absent.ABSENT
    sampling_fraction: Annotated[float, Fragment(exclusiveMinimum=0, maximum=1)] | Absent = (
        Absent.ABSENT
    )


@dataclass(frozen=True, kw_only=True)
class OutputDocument:
    """What the published table keeps beside the anonymized columns."""

    CLOSED: ClassVar[bool] = True
    keep_key: bool | Absent = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class ConfigDocument:
    """A tclose run configuration (YAML)."""

    CLOSED: ClassVar[bool] = True
    source: SourceDocument
    target: TargetDocument
    attributes: Mapping[str, AttributeDocument]
    privacy: PrivacyDocument
    algorithm: AlgorithmDocument | None | Absent = Absent.ABSENT
    report: ReportDocument | None | Absent = Absent.ABSENT
    output: OutputDocument | None | Absent = Absent.ABSENT


def keys_of(model: type) -> set[str]:
    """The keys a section of the configuration takes: its model's fields."""
    return {f.name for f in dataclasses.fields(model)}


#: The model of each section whose keys a criterion may declare (``section.key``).
SECTIONS: Mapping[str, type] = {
    "source": SourceDocument,
    "target": TargetDocument,
    "privacy": PrivacyDocument,
    "report": ReportDocument,
}

#: The JSON type of each :class:`~tclose.interfaces.Option` value type.
_OPTION_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def config_schema(criterion_keys: Mapping[str, Option | None] | None = None) -> dict[str, Any]:
    """The JSON Schema of a configuration (``tclose schema config``): :class:`ConfigDocument`,
    its sections also declaring the ``criterion_keys`` (dotted key → the
    :class:`~tclose.interfaces.Option` that validates it, or ``None``; see
    :func:`tclose.base.config.criterion_keys`), each an optional property of its section
    (``null`` allowed, as the parser reads it as not given).

    Raises:
        ValueError: a criterion key whose section is not one of :data:`SECTIONS`.
    """
    schema = json_schema(ConfigDocument, title="tclose run configuration")
    for key, option in sorted((criterion_keys or {}).items()):
        section, _, name = key.partition(".")
        if section not in SECTIONS or not name:
            raise ValueError(f"criterion key {key!r} names no section of the configuration")
        properties = schema["$defs"][SECTIONS[section].__name__]["properties"]
        properties[name] = _option_schema(option)
    return schema


def _option_schema(option: Option | None) -> dict[str, Any]:
    """The schema of a criterion key's value: its option's type (and ``null``), choices, bounds
    and sentence; any value without an option."""
    if option is None:
        return {}
    kind = _OPTION_TYPES.get(option.type)
    schema: dict[str, Any] = {"type": [kind, "null"]} if kind else {}
    if option.doc:
        schema["description"] = option.doc
    if option.choices is not None:
        schema["enum"] = [*option.choices, None]
    if option.min is not None:
        schema["minimum"] = option.min
    if option.max is not None:
        schema["maximum"] = option.max
    return schema
