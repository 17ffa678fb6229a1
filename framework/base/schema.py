"""JSON Schemas from typed models, JSON data from model values, and a validator of the schemas.

A model is a frozen dataclass whose fields carry type hints; :func:`json_schema` turns it into a
JSON Schema (draft 2020-12) by one rule per kind of hint:

=================================  ============================================================
hint                               schema
=================================  ============================================================
``str``, ``bool``, ``int``,        ``{"type": "string"}``, ``"boolean"``, ``"integer"``,
``float``, ``None``                ``"number"``, ``"null"``
``Any``                            ``{}`` (any value)
``Literal["a", "b"]``              ``{"enum": ["a", "b"]}``
``X | Y``                          ``{"anyOf": [X, Y]}`` (``{"type": [...]}`` for plain types)
``Sequence[X]``, ``list[X]``,      ``{"type": "array", "items": X}``
``tuple[X, ...]``
``Mapping[str, X]``                ``{"type": "object", "additionalProperties": X}``; a key
                                   type ``Annotated[str, Fragment(...)]``: ``propertyNames``
a dataclass                        ``{"type": "object", "properties": ..., "required": ...}``,
                                   its docstring's first paragraph as ``description``
``Annotated[X, Fragment(...)]``    X's schema with the fragment's members (``minimum``, ...)
``Annotated[X, Described(M)]``     model M's schema for a free-form mapping X (a plugin's)
``Annotated[X, Judged(reason)]``   ``{"description": reason}``: any value (a check judges it)
=================================  ============================================================

A field whose hint admits :data:`ABSENT` (``X | Absent``) is not required, and
:func:`json_data` leaves it out of the object when it holds :data:`ABSENT`; every other field is
required. Objects accept members the model does not name (a newer writer's, a plugin's), unless
the model sets the class attribute ``CLOSED = True`` (``"additionalProperties": false``).

:func:`schema_problem` checks parsed JSON against the subset of JSON Schema that
:func:`json_schema` emits, and names the first problem by its JSON path.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from tclose.base.jsonsafe import dotted

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class Absent(enum.Enum):
    """The type of :data:`ABSENT`: a field left out of the JSON object (not ``null``)."""

    ABSENT = "absent"


#: The value of a field that the JSON object does not hold (see the module's documentation).
ABSENT = Absent.ABSENT


class Fragment:
    """``Annotated[X, Fragment(minimum=0)]``: members added to X's schema (``minimum``,
    ``pattern``, ``description``, ``properties``, ...)."""

    def __init__(self, **members: Any) -> None:
        self.members = members

    def __repr__(self) -> str:
        return f"Fragment({self.members!r})"


@dataclasses.dataclass(frozen=True)
class Judged:
    """``Annotated[X, Judged(reason)]``: a field whose value a check judges, whatever it is (a
    wrong value fails that check; it does not make the document unreadable): its schema accepts
    any value, and ``reason`` is its description."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Described:
    """``Annotated[Mapping[str, Any], Described(Model)]``: a free-form mapping (a plugin's, kept
    as the plugin gave it) whose schema is ``Model``'s."""

    model: type


_PLAIN = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


def json_schema(model: type, title: str | None = None) -> dict[str, Any]:
    """The JSON Schema of ``model`` (a dataclass), its models under ``$defs``, with ``title``."""
    definitions: dict[str, Any] = {}
    _schema(model, definitions)
    root = definitions.pop(model.__name__)
    head = {"$schema": SCHEMA_DIALECT, **({"title": title} if title else {})}
    return {**head, **root, "$defs": definitions}


def _schema(hint: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """The schema of one type hint (the table of the module's documentation)."""
    if hint is Any:
        return {}
    if _plain(hint):
        return {"type": _PLAIN[hint]}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _model_schema(hint, definitions)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _annotated(args[0], args[1:], definitions)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return _union([a for a in args if a is not Absent], definitions)
    if origin in (list, tuple, Sequence):
        return {"type": "array", "items": _schema(args[0], definitions)}
    if origin in (dict, Mapping):
        return _mapping(args[0], args[1], definitions)
    raise TypeError(f"no JSON Schema for the type hint {hint!r}")


def _plain(hint: Any) -> bool:
    """Whether ``hint`` is one of the plain types of :data:`_PLAIN` (an ``Annotated`` hint
    with a mapping in it cannot be looked up: it is not hashable)."""
    return isinstance(hint, type) and hint in _PLAIN


def _annotated(hint: Any, extras: Sequence[Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """``Annotated[hint, ...]``: a :class:`Described` model or a :class:`Judged` field
    replaces ``hint``'s schema; a :class:`Fragment` adds to it."""
    schema = _schema(hint, definitions)
    for extra in extras:
        if isinstance(extra, Described):
            schema = _schema(extra.model, definitions)
        elif isinstance(extra, Judged):
            schema = {"description": extra.reason}
        elif isinstance(extra, Fragment):
            schema = {**schema, **extra.members}
    return schema


def _union(options: Sequence[Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """``X | Y``: a list of types when every option is a plain type, else ``anyOf``."""
    if len(options) == 1:
        return _schema(options[0], definitions)
    if all(_plain(o) for o in options):
        return {"type": [_PLAIN[o] for o in options]}
    return {"anyOf": [_schema(o, definitions) for o in options]}


def _mapping(key: Any, value: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """``Mapping[str, X]``: an object of X, its keys constrained by an annotated key type."""
    schema: dict[str, Any] = {"type": "object"}
    members = _schema(value, definitions)
    if members:
        schema["additionalProperties"] = members
    names = _schema(key, definitions)
    if names != {"type": "string"}:
        schema["propertyNames"] = names
    return schema


def _model_schema(model: type, definitions: dict[str, Any]) -> dict[str, Any]:
    """A dataclass as an object of its fields, defined once under ``$defs``."""
    name = model.__name__
    if name not in definitions:
        definitions[name] = {}  # a model that refers to itself finds its name
        hints = typing.get_type_hints(model, include_extras=True)
        fields = [f for f in dataclasses.fields(model) if f.init]
        schema: dict[str, Any] = {"type": "object"}
        doc = inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        if doc:
            schema["description"] = doc
        schema["properties"] = {f.name: _schema(hints[f.name], definitions) for f in fields}
        schema["required"] = [f.name for f in fields if not _may_be_absent(hints[f.name])]
        if getattr(model, "CLOSED", False):
            schema["additionalProperties"] = False
        definitions[name] = schema
    return {"$ref": f"#/$defs/{name}"}


def _may_be_absent(hint: Any) -> bool:
    """Whether a field's hint admits :data:`ABSENT` (directly or under ``Annotated``)."""
    if typing.get_origin(hint) is typing.Annotated:
        return _may_be_absent(typing.get_args(hint)[0])
    return Absent in typing.get_args(hint) or hint is Absent


def json_data(value: Any) -> Any:
    """``value`` as JSON data: a dataclass as an object of its fields in their order (those
    holding :data:`ABSENT` left out), mappings as dicts, sequences as lists, the rest as is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: json_data(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not ABSENT
        }
    if isinstance(value, Mapping):
        return {key: json_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_data(item) for item in value]
    return value


# --- the validator -------------------------------------------------------------------------------


def schema_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """The first way parsed JSON ``value`` differs from ``schema`` (a schema of
    :func:`json_schema`, its ``$defs`` resolved), in one sentence naming the JSON path and
    never a value; ``None`` when it conforms."""
    return _problem(value, schema, schema.get("$defs", {}), ())


def _problem(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any], at: tuple) -> Any:
    """The first problem of ``value`` (at ``at``) against ``schema``, or ``None``."""
    if "$ref" in schema:
        return _problem(value, defs[schema["$ref"].rsplit("/", 1)[-1]], defs, at)
    if "anyOf" in schema:
        return _any_of(value, schema["anyOf"], defs, at)
    if not _fits(value, schema):
        return f"{_named(at)} is {json_kind(value)}, not {describe(schema, defs)}"
    if isinstance(value, dict):
        return _object_problem(value, schema, defs, at)
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            problem = _problem(item, schema["items"], defs, (*at, index))
            if problem:
                return problem
    return None


def _any_of(value: Any, options: Sequence[Any], defs: Mapping[str, Any], at: tuple) -> Any:
    """``None`` when one option fits; else the problem of the option ``value`` looks most like:
    an object holding all the option's required members, else the last option but ``null``."""
    problems = [_problem(value, option, defs, at) for option in options]
    if any(p is None for p in problems):
        return None
    kinds = [_resolved(o, defs) for o in options]
    looks_like = [
        i
        for i, kind in enumerate(kinds)
        if isinstance(value, dict)
        and kind.get("type") == "object"
        and all(name in value for name in kind.get("required", ()))
    ]
    others = [i for i, kind in enumerate(kinds) if kind.get("type") != "null"]
    return problems[(looks_like or others or [len(options) - 1])[-1]]


def _object_problem(
    value: dict, schema: Mapping[str, Any], defs: Mapping[str, Any], at: tuple
) -> Any:
    """Each member against its schema, in the value's order, then the missing members: a
    member of the wrong type is named before a section left out."""
    names = schema.get("propertyNames")
    properties = schema.get("properties", {})
    others = schema.get("additionalProperties", {})
    for key, item in value.items():
        if names is not None and not _fits(key, names):
            return f"{_named(at)} has the key {key[:40]!r}, not {describe(names, defs)}"
        inner = properties.get(key, others)
        if inner is False:
            return f"{_named(at)} has the member {key[:40]!r}, which it does not take"
        problem = _problem(item, inner, defs, (*at, key)) if inner is not True else None
        if problem:
            return problem
    for name in schema.get("required", ()):
        if name not in value:
            return f"it has no {name} section" if not at else f"{dotted((*at, name))} is missing"
    return None


def _resolved(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema``, or the definition its ``$ref`` names."""
    if "$ref" in schema:
        return defs[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` has the type, value and bounds ``schema`` names (not its members)."""
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_KINDS[kind](value) for kind in kinds):
            return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf):
            return False
        if value <= schema.get("exclusiveMinimum", -math.inf):
            return False
    if isinstance(value, str) and "pattern" in schema:
        return re.search(schema["pattern"], value) is not None
    return True


def is_number(value: Any) -> bool:
    """A JSON number a float can hold (an integer of 400 digits cannot)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, float) or (isinstance(value, int) and abs(value) <= sys.float_info.max)


_KINDS = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": is_number,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
_NAMES = {
    "null": ["null"],
    "boolean": ["true", "false"],
    "string": ["a string"],
    "number": ["a number"],
    "array": ["a list"],
    "object": ["an object"],
}


def describe(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """What ``schema`` accepts, in words: ``a string or null``, ``true, false or null``, ``a
    whole number from 0 to 2**63 - 1``; a schema's own ``description`` for a pattern."""
    schema = _resolved(schema, defs or {})
    if "pattern" in schema and "description" in schema:
        return str(schema["description"])
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    kinds = schema.get("type")
    if kinds is None:
        return "anything"
    words: list[str] = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        words += [_integer_words(schema)] if kind == "integer" else _NAMES[kind]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _integer_words(schema: Mapping[str, Any]) -> str:
    """An integer's words, with its bounds when it has both."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is None or high is None:
        return "a whole number"
    shown = "2**63 - 1" if high == 2**63 - 1 else str(high)
    return f"a whole number from {low} to {shown}"


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number" if is_number(value) else "a number too large for a float"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _named(at: tuple) -> str:
    """The JSON path ``at``, or ``it`` for the document itself."""
    return dotted(at) or "it"
