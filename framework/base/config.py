"""Loading and validating the YAML configuration of a run.

Errors read as a path into the document, with the file line where known::

    ==> At attributes.age ==> At key: type (line 7)
    Unknown attribute type 'numerc'. Allowed: numeric.

``${VAR}`` in a URL is replaced by the environment variable ``VAR``; a missing variable is an error
that names it. Passwords never appear in messages: URLs are shown redacted.
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import hashlib
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from tclose.base.atomic import read_text
from tclose.base.config_document import (
    AlgorithmDocument,
    AttributeDocument,
    ConfigDocument,
    OutputDocument,
    PrivacyDocument,
    ReportDocument,
    SourceDocument,
    TargetDocument,
    keys_of,
)
from tclose.base.options import validate_options
from tclose.base.redaction import (  # noqa: F401 (re-exported)
    URL_SCHEME,
    redact_url,
    redacted_document,
    remember_secret,
)
from tclose.errors import ConfigError
from tclose.interfaces import Option

ROLES = ("identifier", "quasi_identifier", "confidential", "other")
#: Attribute types understood by the encoder.
ATTRIBUTE_TYPES = ("numeric", "ordinal", "nominal", "date", "datetime")
MISSING_POLICIES = ("error", "category", "exclude-rows")
IF_EXISTS = ("fail", "replace")

_TOP_KEYS = keys_of(ConfigDocument)
_SOURCE_KEYS = keys_of(SourceDocument)
_TARGET_KEYS = keys_of(TargetDocument)
_ATTRIBUTE_KEYS = keys_of(AttributeDocument)
_PRIVACY_KEYS = keys_of(PrivacyDocument)
_ALGORITHM_KEYS = keys_of(AlgorithmDocument)
_REPORT_KEYS = keys_of(ReportDocument)
_OUTPUT_KEYS = keys_of(OutputDocument)
_URL_SCHEME = re.compile(URL_SCHEME)
_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class AttributeSpec:
    """One column's role in the run, as configured under ``attributes``."""

    name: str
    role: str
    type: str = "numeric"
    #: the distance plugin of a confidential attribute; ``None``: the default for its type,
    #: declared by the distance plugins (:meth:`tclose.base.registry.Registry.default_distance`).
    distance: str | None = None
    distance_options: dict[str, Any] = field(default_factory=dict)
    round: bool = False
    categories: tuple[str, ...] | None = None
    hierarchy: Any = None
    missing: str = "error"
    weight: float = 1.0
    #: ``role: other`` only: the column is left out of the linkage check (which judges the
    #: pass-through columns together), so its values may single out rows.
    allow_unique: bool = False


@dataclass(frozen=True)
class TableSpec:
    """A table in a database: ``source`` or ``target``."""

    url: str
    table: str
    key: str | None = None
    password_file: str | None = None
    if_exists: str = "fail"
    chunk_size: int = 50_000


class CriterionValues:
    """The values of the criterion keys the framework itself enforces, read from ``criteria``
    (the keys registered criteria declare, dotted key → value, only those given:
    ``{"privacy.l": 3, "source.entity": "nr"}``)."""

    criteria: dict[str, Any]

    @property
    def entity(self) -> str | None:
        """``source.entity``: the column naming the person, household or firm of a row."""
        return self.criteria.get("source.entity")

    @property
    def l_diversity(self) -> tuple[int, str] | None:
        """``(privacy.l, privacy.l_kind)``, or ``None`` without ``privacy.l``."""
        return l_diversity_of(self.criteria)


@dataclass
class Config(CriterionValues):
    """A validated run configuration (plugin options are checked later, against the registry)."""

    source: TableSpec
    target: TableSpec
    attributes: dict[str, AttributeSpec]
    k: int
    t: float | None
    algorithm: str
    algorithm_options: dict[str, Any]
    report_json: str | None = None
    report_html: str | None = None
    #: audit table in the target database that gets one row per run (``report.table``).
    report_table: str | None = None
    #: half-width of interval disclosure in standard deviations (``report.interval_p``).
    interval_p: float = 0.05
    keep_key: bool = False
    #: the largest share of rows left out as outliers (``privacy.max_suppressed``,
    #: :mod:`tclose.core.suppression`).
    max_suppressed: float = 0.0
    #: the share of the population the table is a sample of (``report.sampling_fraction``),
    #: assumed by the population-uniqueness estimate (:mod:`tclose.measures.population`).
    sampling_fraction: float = 0.01
    document: dict[str, Any] = field(default_factory=dict)
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    #: the values of the keys registered criteria declare (:func:`criterion_keys`), dotted key
    #: → value, only the keys given (``{"privacy.l": 3, "source.entity": "nr"}``).
    criteria: dict[str, Any] = field(default_factory=dict)

    @property
    def quasi_identifiers(self) -> list[str]:
        return [a.name for a in self.attributes.values() if a.role == "quasi_identifier"]

    @property
    def confidential(self) -> list[str]:
        return [a.name for a in self.attributes.values() if a.role == "confidential"]

    @property
    def identifiers(self) -> list[str]:
        return [a.name for a in self.attributes.values() if a.role == "identifier"]

    def line_of(self, *path: str) -> int | None:
        """The 1-based line of ``path`` in the YAML file, if it came from one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def digest(self) -> str:
        """SHA-256 of the configuration as written (canonical JSON, URLs redacted)."""
        return config_digest(self.document)

    def digest_as_recorded(self, recorded: str | None) -> str:
        """:meth:`digest`, or, if ``recorded`` is the digest of this configuration with other
        drivers named in its URLs (:func:`driver_variants`), ``recorded``: the same release,
        checked through another driver."""
        digests = [config_digest(v) for v in driver_variants(self.document)]
        return recorded if recorded in digests else digests[0]


#: The drivers a URL may name for a dialect whose connector takes several (``mysql+pymysql``,
#: ``mysql``), and the dialect names of one kind of database (``mysql``, ``mariadb``): a
#: report's configuration digest does not depend on which of them a URL names.
DRIVER_SPELLINGS = {
    dialect: ("", "+mariadbconnector", "+mysqldb", "+pymysql") for dialect in ("mysql", "mariadb")
}
_DRIVER_URL = re.compile(r"^(?P<dialect>[A-Za-z0-9_]+)(?P<driver>\+[A-Za-z0-9_]+)?(?=://)")


def driver_variants(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``document`` and every copy of it whose ``source.url`` and ``target.url`` name another
    of the drivers of their dialect (:data:`DRIVER_SPELLINGS`), ``document`` first."""
    variants: list[Mapping[str, Any]] = [document]
    for section in ("source", "target"):
        url = (document.get(section) or {}).get("url")
        found = _DRIVER_URL.match(url) if isinstance(url, str) else None
        if url is None or found is None or found["dialect"].lower() not in DRIVER_SPELLINGS:
            continue
        rest = url[found.end() :]
        spellings = [
            f"{dialect}{driver}{rest}"
            for dialect in DRIVER_SPELLINGS
            for driver in DRIVER_SPELLINGS[dialect]
        ]
        variants = [
            {**variant, section: {**variant[section], "url": spelled}}
            for variant in variants
            for spelled in [variant[section]["url"], *(u for u in spellings if u != url)]
        ]
    return variants


def config_digest(document: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of ``document`` as canonical JSON (:func:`json_document`), with every
    ``url`` redacted."""

    scrubbed = json_document(redacted_document(document, remembered=False))
    canonical = json.dumps(scrubbed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def json_document(document: Any) -> Any:
    """A YAML document as JSON data, as the configuration digest has always read it: keys as
    JSON writes them (``1`` → ``"1"``, ``true`` → ``"true"``; a YAML date as its text), and a
    value JSON has no type for (a YAML date or timestamp, ``!!binary``, ``!!set``) as its
    Python text (``str``). The report's ``config`` is this, so that it can always be written:
    an unquoted date in ``categories`` made the report fail after the publish, and a key ``1``
    beside text keys failed the digest (sorting ``1`` and ``"a"``)."""
    if isinstance(document, Mapping):
        return {_json_key(k): json_document(v) for k, v in document.items()}
    if isinstance(document, (list, tuple)):
        return [json_document(v) for v in document]
    if document is None or isinstance(document, (str, int, float)):
        return document
    return str(document)


def _json_key(key: Any) -> str:
    """``key`` as ``json.dumps`` writes a mapping key (``str`` for the types it refuses)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    return str(key)


def expand_env(text: str, path: tuple[str, ...]) -> str:
    """Replace each ``${VAR}`` in ``text`` by the environment variable's value.

    In a URL, a value that lands in the user and password part or in the query string is
    percent-encoded (so ``@``, ``:`` or ``/`` in a password stay in the password) and remembered
    as a secret; elsewhere (host, port, path, or a whole URL in one variable) it is inserted as
    it is.
    """
    encoded = _encoded_spans(text) if path[-1:] == ("url",) else []

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(
                f"The environment variable {name} used in {'.'.join(path)} is not set. "
                f"Set it, or write the value in the file.",
                path=path,
            )
        raw = os.environ[name]
        if any(start <= match.start() < end for start, end in encoded):
            remember_secret(raw)
            return quote(raw, safe="")
        return raw

    return _ENV_PATTERN.sub(value, text)


def _encoded_spans(url: str) -> list[tuple[int, int]]:
    """Where ``${VAR}`` values must be percent-encoded in a URL template: its userinfo
    (``scheme://USER:PASSWORD@``) and its query string."""
    spans = []
    scheme_end = url.find("://")
    if scheme_end >= 0:
        start = scheme_end + 3
        authority_end = len(url)
        for stop in ("/", "?"):
            found = url.find(stop, start)
            if found >= 0:
                authority_end = min(authority_end, found)
        at = url.rfind("@", start, authority_end)
        if at >= 0:
            spans.append((start, at))
    query = url.find("?")
    if query >= 0:
        spans.append((query, len(url)))
    return spans


def _line_map(root: yaml.Node | None) -> dict[tuple[str, ...], int]:
    """Map every mapping key path of the composed YAML document ``root`` to its 1-based line."""
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key_path = (*path, str(key_node.value))
                lines[key_path] = key_node.start_mark.line + 1
                walk(value_node, key_path)

    if root is not None:
        walk(root, ())
    return lines


class _Checker:
    """Validation helpers that know the document's line numbers."""

    def __init__(self, lines: dict[tuple[str, ...], int]) -> None:
        self.lines = lines

    def fail(self, path: tuple[str, ...], message: str) -> ConfigError:
        line = None
        probe = path
        while probe and line is None:
            line = self.lines.get(probe)
            probe = probe[:-1]
        return ConfigError(message, path=path, line=line)

    def mapping(
        self,
        value: Any,
        path: tuple[str, ...],
        allowed: set[str] | None,
        required: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(
                path,
                f"Expected a mapping of keys to values here, got {_kind(value)}. Write it as "
                f"'key: value' lines indented under the key, or as {{key: value, ...}}.",
            )
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(
                        (*path, str(key)),
                        f"Unknown key {key!r}. Allowed keys here: {', '.join(sorted(allowed))}.",
                    )
        for key in required:
            if key not in value or value[key] is None:
                raise self.fail((*path, key), f"The key {key!r} is required here; add it.")
        return dict(value)

    def string(self, value: Any, path: tuple[str, ...]) -> str:
        if not isinstance(value, str) or not value:
            hint = (
                " YAML reads an unquoted number, date, yes/no/on/off or true/false as such: "
                "quote a name that looks like one ('2024', 'on')."
                if isinstance(value, (bool, int, float, dt.date))
                else ""
            )
            raise self.fail(
                path, f"Expected a non-empty text value here, got {_kind(value)}.{hint}"
            )
        return value

    def boolean(self, value: Any, path: tuple[str, ...]) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"Expected true or false, got {value!r}.")
        return value

    def choice(self, value: Any, path: tuple[str, ...], choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(path, f"Expected one of {', '.join(choices)}; got {value!r}.")
        return value


def _kind(value: Any) -> str:
    """A value's kind, for messages: ``a list``, ``nothing (null)``, ``the number 5``."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value!r}" if value else "an empty text"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def _first_found(
    value: Any,
    path: tuple[str, ...],
    describe: Callable[[Any], str | None],
    keys: bool = False,
) -> tuple[tuple[str, ...], str] | None:
    """The key path and description of the first item of ``value`` (a YAML document or part of
    one) that ``describe`` describes (it answers ``None`` for the others), depth first: every
    value that is neither a mapping nor a list, and every key too when ``keys``. An item of a
    list is named by the list's key and its position, a key by its own path."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            step = (*path, str(key))
            what = describe(key) if keys else None
            if what:
                return step, f"the key {what}"
            found = _first_found(item, step, describe, keys)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _first_found(item, path, describe, keys)
            if found:
                where, what = found
                return where, f"{what} (item {index + 1} of the list)" if where == path else what
    else:
        what = describe(value)
        if what:
            return path, what
    return None


def _non_finite(value: Any) -> str | None:
    """``repr`` of ``value`` if it is a NaN or an infinity (NumPy numbers too), else ``None``."""
    if (
        isinstance(value, numbers.Real)
        and not isinstance(value, numbers.Integral)
        and not math.isfinite(float(value))
    ):
        return repr(float(value))
    return None


def refuse_non_finite(checker: _Checker, value: Any, path: tuple[str, ...]) -> None:
    """A :class:`ConfigError` naming the key of the first NaN or infinity in ``value``: YAML
    reads ``.nan``, ``.inf`` and ``-.inf`` as numbers, which compare false with everything (a
    ``t`` of NaN would pass ``emd > t`` for every class) and which the audit report, strict
    JSON, cannot hold."""
    found = _first_found(value, path, _non_finite)
    if found:
        where, what = found
        raise checker.fail(
            where,
            f"Expected a finite number, got {what}: NaN and infinity (.nan, .inf in YAML) are "
            f"not numbers a run can use, and the audit report (JSON) cannot hold them.",
        )


def _with_nul(value: Any) -> str | None:
    """``repr`` of ``value`` (which shows a NUL as ``\\x00``) if it is a text holding a NUL
    character, else ``None``."""
    return repr(value) if isinstance(value, str) and "\0" in value else None


def refuse_nul(checker: _Checker, value: Any, path: tuple[str, ...]) -> None:
    """A :class:`ConfigError` naming the first key or text of ``value`` that holds a NUL
    character (YAML's ``"\\0"`` escape). PostgreSQL's ``text`` and ``jsonb`` cannot hold one,
    and the audit row records the configuration in the publishing transaction: such a text
    failed a run on PostgreSQL only at its publish, after all the work, with the driver's
    message (and on SQLite at the publish too, for the audit table's name)."""
    found = _first_found(value, path, _with_nul, keys=True)
    if found:
        where, what = found
        raise checker.fail(
            where,
            f"Expected a text without a NUL character, got {what}: PostgreSQL text (and the "
            f"audit report, stored as jsonb) cannot hold a NUL, so the run would fail when it "
            f"publishes. Remove the \\0.",
        )


def _as_text(value: Any) -> str:
    """A hint when ``value`` is a number YAML read as text: YAML 1.1 (PyYAML) reads ``1e-3``
    (an exponent without a dot) as text, so ``t: 1e-3`` alone would read as a refusal of
    0.001 ("Got '1e-3'")."""
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if not math.isfinite(number):
        return ""
    mantissa, _, exponent = value.strip().lower().partition("e")
    if exponent and ("." not in mantissa or exponent[0] not in "+-"):
        sign = "" if exponent[0] in "+-" else "+"
        dotted = mantissa if "." in mantissa else f"{mantissa}.0"
        return (
            f" YAML 1.1 reads a number with an exponent as text unless it has a dot and a "
            f"signed exponent: write {dotted}e{sign}{exponent}."
        )
    plain = value.strip()
    if re.fullmatch(r"[-+]?[0-9][0-9_]*", plain):  # 08 and 1_0 are text to YAML 1.1 too
        plain = str(int(plain.replace("_", ""), 10))
    elif "_" in plain:
        plain = repr(number)
    return f" It is text (quoted?): write {plain} without quotes."


def _table_spec(
    checker: _Checker,
    raw: Any,
    path: str,
    is_source: bool,
    default_url: str | None = None,
    default_password_file: str | None = None,
    extra: set[str] | None = None,
) -> TableSpec:
    keys = (_SOURCE_KEYS if is_source else _TARGET_KEYS) | (extra or set())
    required = ("url", "table") if is_source else ("table",)
    spec = checker.mapping(raw, (path,), keys, required)
    url = spec.get("url", default_url)
    url = expand_env(checker.string(url, (path, "url")), (path, "url"))
    if not _URL_SCHEME.match(url):
        raise checker.fail(
            (path, "url") if "url" in spec else ("source", "url"),
            "Expected a database URL starting with its scheme, such as "
            "postgresql+psycopg://user@host/db, sqlite:///file.db or parquet:///file.parquet "
            "(the value is not shown: it may hold a password).",
        )
    # A target without its own url is in the source's database, reached with its credentials.
    password_file = spec.get("password_file", default_password_file if "url" not in spec else None)
    if password_file is not None:
        checker.string(password_file, (path, "password_file"))
        if not Path(password_file).is_file():
            where = (
                (path, "password_file") if "password_file" in spec else ("source", "password_file")
            )
            raise checker.fail(
                where,
                "No such file. It names the file that holds the password (its value is not "
                "shown, in case it is a password written in place of the file's path).",
            )
    chunk_size = spec.get("chunk_size", 50_000)
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise checker.fail(
            (path, "chunk_size"), f"Expected a positive integer, got {chunk_size!r}."
        )
    return TableSpec(
        url=url,
        table=checker.string(spec["table"], (path, "table")),
        key=checker.string(spec["key"], (path, "key")) if spec.get("key") is not None else None,
        password_file=password_file,
        if_exists=checker.choice(spec.get("if_exists", "fail"), (path, "if_exists"), IF_EXISTS),
        chunk_size=chunk_size,
    )


def _type_details(
    checker: _Checker,
    spec: dict[str, Any],
    path: tuple[str, ...],
    role: str,
    attr_type: str,
    base: Path | None,
) -> dict[str, Any]:
    """Validate categories, hierarchy, missing and weight of one attribute."""
    details: dict[str, Any] = {}
    categories = _categories_detail(checker, spec.get("categories"), path, attr_type)
    if categories is not None:
        details["categories"] = categories
    hierarchy = spec.get("hierarchy")
    if hierarchy is not None:
        details["hierarchy"] = _hierarchy_detail(
            checker, hierarchy, path, attr_type, categories or (), base
        )
    details["missing"] = _missing_detail(checker, spec.get("missing", "error"), path, attr_type)
    weight = spec.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
        raise checker.fail(
            (*path, "weight"), f"Expected a positive number, got {weight!r}.{_as_text(weight)}"
        )
    if "weight" in spec and role != "quasi_identifier":
        raise checker.fail((*path, "weight"), "'weight' applies to quasi-identifiers only.")
    details["weight"] = float(weight)
    return details


def _categories_detail(
    checker: _Checker, categories: Any, path: tuple[str, ...], attr_type: str
) -> tuple[str, ...] | None:
    """The ``categories`` of an attribute, as texts in their order (``None`` when not given)."""
    if categories is None:
        return None
    if attr_type not in ("ordinal", "nominal"):
        raise checker.fail(
            (*path, "categories"), "'categories' applies to ordinal and nominal attributes only."
        )
    if (
        not isinstance(categories, list)
        or not categories
        or len(set(map(str, categories))) != len(categories)
    ):
        raise checker.fail(
            (*path, "categories"), "Expected a non-empty list of distinct values, in order."
        )
    return tuple(str(c) for c in categories)


def _hierarchy_detail(
    checker: _Checker,
    hierarchy: Any,
    path: tuple[str, ...],
    attr_type: str,
    categories: Sequence[str],
    base: Path | None,
) -> Any:
    """The :class:`~tclose.base.hierarchy.Hierarchy` of a nominal attribute, whose leaves hold
    every one of its ``categories``."""
    from tclose.base.attributes import MISSING
    from tclose.base.hierarchy import Hierarchy

    where = (*path, "hierarchy")
    if attr_type != "nominal":
        raise checker.fail(where, "'hierarchy' applies to nominal attributes only.")
    try:
        tree = Hierarchy.load(hierarchy, where, base)
    except ConfigError as error:
        raise checker.fail(where, error.problem) from None
    if MISSING in tree.parent:
        raise checker.fail(
            where,
            f"The hierarchy names the value {MISSING!r}, which is how tclose names NULL "
            f"(missing: category puts it under the root, at distance 1 from every value). "
            f"Rename that value.",
        )
    leaves = set(tree.leaves)
    outside = [c for c in categories if c not in leaves and c != MISSING]
    if outside:
        raise checker.fail(
            (*path, "categories"),
            f"{len(outside)} of the categories are not leaves of the attribute's hierarchy "
            f"({', '.join(map(repr, outside[:5]))}{', ...' if len(outside) > 5 else ''}); "
            f"every category must be a leaf.",
        )
    return tree


def _missing_detail(checker: _Checker, missing: Any, path: tuple[str, ...], attr_type: str) -> str:
    """The ``missing`` policy of an attribute."""
    checker.choice(missing, (*path, "missing"), MISSING_POLICIES)
    if missing == "category" and attr_type not in ("ordinal", "nominal"):
        raise checker.fail(
            (*path, "missing"),
            "missing: category applies to ordinal and nominal "
            "attributes; use exclude-rows for other types.",
        )
    return missing


def _attributes(checker: _Checker, raw: Any, base: Path | None = None) -> dict[str, AttributeSpec]:
    attributes = checker.mapping(raw, ("attributes",), None)
    if not attributes:
        raise checker.fail(
            ("attributes",),
            "List the table's columns here, each with its role "
            "(`tclose init URL TABLE` writes the list for you).",
        )
    result = {str(name): _attribute(checker, name, body, base) for name, body in attributes.items()}
    roles = [a.role for a in result.values()]
    if "quasi_identifier" not in roles:
        raise checker.fail(
            ("attributes",),
            "No attribute has role quasi_identifier. Give that role to the columns that could "
            "identify someone in combination, e.g. age: {role: quasi_identifier, type: numeric}.",
        )
    return result


def _attribute(checker: _Checker, name: Any, body: Any, base: Path | None) -> AttributeSpec:
    """The spec of the attribute ``name`` (``body``: its mapping, or its role alone)."""
    path = ("attributes", str(name))
    if isinstance(body, str):
        body = {"role": body}
    spec = checker.mapping(body, path, _ATTRIBUTE_KEYS, ("role",))
    role = checker.choice(spec["role"], (*path, "role"), ROLES)
    attr_type = spec.get("type", "numeric")
    if attr_type not in ATTRIBUTE_TYPES:  # on every role: a typo is a typo
        raise checker.fail(
            (*path, "type"),
            f"Unknown attribute type {attr_type!r}. Allowed: {', '.join(ATTRIBUTE_TYPES)}.",
        )
    _refuse_keys_of_other_roles(checker, spec, path, role)
    # No distance named: the registry's default for the type, chosen when the plugins are
    # resolved (tclose.core.plan.resolve_distances).
    distance_options = spec.get("distance_options") or {}
    checker.mapping(distance_options, (*path, "distance_options"), None)
    rounded = checker.boolean(spec.get("round", False), (*path, "round"))
    if rounded and (role != "quasi_identifier" or attr_type != "numeric"):
        raise checker.fail((*path, "round"), "'round' applies to numeric quasi-identifiers only.")
    details = (
        _type_details(checker, spec, path, role, attr_type, base)
        if role in ("quasi_identifier", "confidential")
        else {}
    )
    if checker.boolean(spec.get("allow_unique", False), (*path, "allow_unique")):
        if role != "other":
            raise checker.fail(
                (*path, "allow_unique"), "'allow_unique' applies to role: other only."
            )
        details["allow_unique"] = True
    return AttributeSpec(
        str(name), role, attr_type, spec.get("distance"), dict(distance_options), rounded, **details
    )


def _refuse_keys_of_other_roles(
    checker: _Checker, spec: Mapping[str, Any], path: tuple[str, ...], role: str
) -> None:
    """:class:`ConfigError` for a key that the attribute's role would ignore."""
    if spec.get("distance") is not None and role != "confidential":
        raise checker.fail(
            (*path, "distance"), "A distance is only used for confidential attributes."
        )
    if "distance_options" in spec and role != "confidential":
        raise checker.fail(
            (*path, "distance_options"),
            "Distance options are only used for confidential attributes.",
        )
    if role not in ("quasi_identifier", "confidential"):
        for key in ("categories", "hierarchy", "missing"):  # read for those roles only
            if key in spec:
                raise checker.fail(
                    (*path, key),
                    f"'{key}' applies to quasi-identifiers and confidential attributes "
                    f"only; a column with role {role} would ignore it.",
                )


@dataclass(frozen=True)
class Settings(CriterionValues):
    """What to protect and how: the attributes, the privacy levels and the algorithm.

    Parsed by :func:`parse_settings` from the ``attributes``, ``privacy`` and ``algorithm`` parts
    of a configuration, for ``tclose run`` (YAML) and :func:`tclose.anonymize` alike. Plugin names
    and options are checked against the registry later (:func:`tclose.core.plan.resolve_plugins`).
    """

    attributes: dict[str, AttributeSpec]
    k: int
    t: float | None
    algorithm: str
    algorithm_options: dict[str, Any]
    #: ``privacy.max_suppressed``: the largest share of rows left out as outliers.
    max_suppressed: float = 0.0
    #: the values of the keys registered criteria declare, as :attr:`Config.criteria`.
    criteria: dict[str, Any] = field(default_factory=dict)


#: The kinds of l-diversity ``privacy.l_kind`` names: ``distinct`` (at least ``l`` distinct
#: values in every class) or ``entropy`` (the entropy of the class's values at least
#: ``log(l)``).
L_KINDS = ("distinct", "entropy")


def l_diversity_of(criteria: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(l, kind)`` from criterion values (:attr:`Config.criteria`), or ``None`` without
    ``privacy.l``; the kind defaults to ``distinct``."""
    l_value = criteria.get("privacy.l")
    if l_value is None:
        return None
    return int(l_value), str(criteria.get("privacy.l_kind") or "distinct")


def criterion_keys(registry: Any = None) -> dict[str, Option | None]:
    """Every dotted configuration key (``section.key``) the registered criteria declare in
    ``config_keys``, with the :class:`~tclose.interfaces.Option` that validates its value (the
    criterion's ``config_options``), ``None`` where any value is accepted. ``registry``: the
    plugins (default: the installed ones, :func:`tclose.base.registry.load_registry`)."""
    if registry is None:
        return dict(_installed_criterion_keys(*_autoload_settings()))
    keys: dict[str, Option | None] = {}
    for provided in registry.criteria.values():
        criterion = provided.obj
        options = getattr(criterion, "config_options", None) or {}
        for key in criterion.config_keys:
            keys[key] = options.get(key, keys.get(key))
    return keys


def _autoload_settings() -> tuple[str | None, str | None]:
    """The environment variables that choose which entry-point plugins load."""
    return os.environ.get("TCLOSE_DISABLE_PLUGIN_AUTOLOAD"), os.environ.get("TCLOSE_PLUGINS")


@functools.cache
def _installed_criterion_keys(
    _autoload: str | None, _chosen: str | None
) -> tuple[tuple[str, Option | None], ...]:
    """:func:`criterion_keys` of the installed plugins (loaded once per plugin selection)."""
    from tclose.base.registry import load_registry

    return tuple(criterion_keys(load_registry()).items())


def _extra_keys(keys: Mapping[str, Any], section: str) -> set[str]:
    """The keys of ``section`` that criteria declare (``section.key`` → ``key``)."""
    return {k.partition(".")[2] for k in keys if k.partition(".")[0] == section and "." in k}


def _criterion_values(
    checker: _Checker, document: Mapping[str, Any], keys: Mapping[str, Option | None]
) -> dict[str, Any]:
    """The value of every criterion key given in ``document`` (dotted key → value), each
    validated by its :class:`~tclose.interfaces.Option` when it has one."""
    values: dict[str, Any] = {}
    for key, option in keys.items():
        section, _, name = key.partition(".")
        part = document.get(section)
        if not isinstance(part, Mapping) or part.get(name) is None:
            continue
        if option is not None:
            try:
                validate_options(key, {name: option}, {name: part[name]}, section)
            except ConfigError as error:
                raise checker.fail((section, name), str(error).partition("\n")[2]) from None
        values[key] = part[name]
    return values


def _check_criterion_values(
    checker: _Checker, attributes: Mapping[str, AttributeSpec], criteria: Mapping[str, Any]
) -> None:
    """Refuse what the framework cannot enforce: ``privacy.l`` without a confidential
    attribute, ``privacy.l_kind`` without ``privacy.l``, and a ``source.entity`` column with a
    role other than ``identifier`` (the entity is never published)."""
    confidential = any(a.role == "confidential" for a in attributes.values())
    if "privacy.l" in criteria and not confidential:
        raise checker.fail(
            ("privacy", "l"),
            "l-diversity is measured on the confidential attributes: give at least one column "
            "role confidential, or remove privacy.l.",
        )
    if "privacy.l_kind" in criteria and "privacy.l" not in criteria:
        raise checker.fail(("privacy", "l_kind"), "privacy.l_kind needs privacy.l; add it.")
    entity = criteria.get("source.entity")
    if isinstance(entity, str) and entity in attributes and attributes[entity].role != "identifier":
        raise checker.fail(
            ("source", "entity"),
            f"Column {entity!r} is the entity (source.entity), so it cannot have role "
            f"{attributes[entity].role}: an entity id is never published. Remove it from "
            f"attributes (or give it role identifier), or name another column as the entity.",
        )


def parse_attributes(
    document: Any, lines: dict[tuple[str, ...], int] | None = None, base: Path | None = None
) -> dict[str, AttributeSpec]:
    """Validate an ``attributes`` mapping (column → spec, or column → role) into specs.

    Raises:
        ConfigError: the first problem found, as a key path (with its line when ``lines``).
    """
    return _attributes(_Checker(lines or {}), document, base)


def parse_settings(
    document: Mapping[str, Any],
    lines: dict[tuple[str, ...], int] | None = None,
    base: Path | None = None,
    keys: Mapping[str, Option | None] | None = None,
) -> Settings:
    """Validate the ``attributes``, ``privacy`` (``k``, ``t``) and ``algorithm`` (``name``,
    ``options``; default ``t-first``) parts of a configuration document, and the keys the
    registered criteria declare (``keys``, default :func:`criterion_keys`; e.g.
    ``privacy.l``, ``source.entity``): the one parser of what a run protects, shared by the
    YAML configuration and the Python API.

    Raises:
        ConfigError: the first problem found, as a key path (with its line when ``lines``).
    """
    checker = _Checker(lines or {})
    keys = criterion_keys() if keys is None else keys
    for part in ("attributes", "privacy", "algorithm"):
        refuse_non_finite(checker, document.get(part), (part,))
    attributes = _attributes(checker, document.get("attributes"), base)
    allowed = _PRIVACY_KEYS | _extra_keys(keys, "privacy")
    privacy = checker.mapping(document.get("privacy"), ("privacy",), allowed, ("k",))
    k = privacy["k"]
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise checker.fail(
            ("privacy", "k"),
            f"The 'k' parameter must be an integer >= 1. Got {k!r} instead.{_as_text(k)}",
        )
    t = privacy.get("t")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1):
        raise checker.fail(
            ("privacy", "t"),
            f"The 't' parameter must be in (0, 1]. Got {t!r} instead.{_as_text(t)}",
        )
    if t is not None and not any(a.role == "confidential" for a in attributes.values()):
        raise checker.fail(
            ("privacy", "t"),
            "t-closeness needs at least one attribute with role confidential (confidential=[...] "
            "in tclose.anonymize). For k-anonymity only, remove privacy.t and set "
            "algorithm.name: mdav (algorithm='mdav'), which needs no t.",
        )
    algorithm = checker.mapping(
        document.get("algorithm") or {"name": "t-first"}, ("algorithm",), _ALGORITHM_KEYS, ("name",)
    )
    options = algorithm.get("options") or {}
    checker.mapping(options, ("algorithm", "options"), None)
    criteria = _criterion_values(checker, document, keys)
    _check_criterion_values(checker, attributes, criteria)
    return Settings(
        attributes,
        k,
        None if t is None else float(t),
        checker.string(algorithm["name"], ("algorithm", "name")),
        dict(options),
        checked_fraction(
            privacy.get("max_suppressed", 0.0), checker, ("privacy", "max_suppressed"), 0.5
        ),
        criteria,
    )


def attribute_document(
    columns: Sequence[str] | Mapping[str, Any] | None, role: str
) -> dict[str, Any]:
    """The ``attributes`` document of columns given as :func:`tclose.anonymize` takes them: a
    name or list of names (numeric attributes), or a mapping of names to a type or a full spec;
    ``None`` names none."""
    if columns is None:
        return {}
    if isinstance(columns, str):
        columns = [columns]
    if isinstance(columns, Mapping):
        document = {}
        for name, spec in columns.items():
            if not isinstance(spec, (str, Mapping)):
                raise ConfigError(
                    f"Column {name!r} ({role}): give its type (e.g. 'numeric') or a mapping of "
                    f"its attribute spec; got {type(spec).__name__}."
                )
            body = {"type": spec} if isinstance(spec, str) else dict(spec)
            body["role"] = role
            document[name] = body
        return document
    return {name: {"role": role, "type": "numeric"} for name in columns}


def parse_config(
    document: Any,
    lines: dict[tuple[str, ...], int] | None = None,
    base: Path | None = None,
    keys: Mapping[str, Option | None] | None = None,
) -> Config:
    """Validate a configuration given as a parsed YAML document (a mapping).

    ``base`` is the folder relative paths (hierarchy CSV files) are resolved against: the YAML
    file's folder when loaded by :func:`load_config`, else the current folder. The sections
    also accept the ``keys`` criteria declare (default :func:`criterion_keys`).

    Raises:
        ConfigError: the first problem found, as a key path with its line.
    """
    checker = _Checker(lines or {})
    keys = criterion_keys() if keys is None else keys
    refuse_nul(checker, document, ())
    top = checker.mapping(document, (), _TOP_KEYS, ("source", "attributes", "privacy"))
    refuse_non_finite(checker, top, ())
    _refuse_env_outside_urls(checker, top)
    source = _table_spec(checker, top["source"], "source", True, extra=_extra_keys(keys, "source"))
    target = _target_spec(checker, top, source, keys)
    settings = parse_settings(top, lines, base, keys)
    report = _report_settings(checker, top.get("report"), _extra_keys(keys, "report"))
    output = top.get("output") or {}
    if isinstance(output, Mapping) and "seed" in output:
        raise checker.fail(
            ("output", "seed"),
            "output.seed is not a setting: a release is ordered by its content alone "
            "(tclose_row numbers the rows in that order), so no seed orders it, and none may be "
            "kept that would link its rows to the source's. Remove the key.",
        )
    output = checker.mapping(output, ("output",), _OUTPUT_KEYS)
    keep_key = checker.boolean(output.get("keep_key", False), ("output", "keep_key"))
    if target is None:
        raise checker.fail(
            ("target",),
            "The key 'target' is required: add target: {table: NAME} "
            "to say where the anonymized table is published.",
        )
    for name, attr in settings.attributes.items():
        if attr.role == "identifier" and name == source.key and keep_key:
            raise checker.fail(("attributes", name), "The source key cannot be kept and dropped.")
    return Config(
        source=source,
        target=target,
        attributes=settings.attributes,
        k=settings.k,
        t=settings.t,
        algorithm=settings.algorithm,
        algorithm_options=settings.algorithm_options,
        report_json=report.get("json"),
        report_html=report.get("html"),
        report_table=report.get("table"),
        interval_p=float(report.get("interval_p", 0.05)),
        keep_key=keep_key,
        max_suppressed=settings.max_suppressed,
        sampling_fraction=float(report.get("sampling_fraction", 0.01)),
        document=dict(document),
        lines=lines or {},
        criteria=settings.criteria,
    )


def _target_spec(
    checker: _Checker, top: Mapping[str, Any], source: TableSpec, keys: Mapping[str, Any]
) -> TableSpec | None:
    """The ``target`` part (its url and password file default to the source's), or ``None``."""
    if top.get("target") is None:
        return None
    return _table_spec(
        checker,
        top["target"],
        "target",
        is_source=False,
        default_url=top["source"].get("url"),
        default_password_file=source.password_file,
        extra=_extra_keys(keys, "target"),
    )


def _refuse_env_outside_urls(checker: _Checker, top: Mapping[str, Any]) -> None:
    """Refuse ``${VAR}`` in a table name, file path or key outside ``source.url`` and
    ``target.url``: only URLs are expanded, and ``report: {json: ${OUT}/r.json}`` would write
    the report into a new folder literally named ``${OUT}`` (a ``target.table`` so written would
    publish a table of that name). Refuse a URL given as a table or key name too: on SQLite
    ``report.table: 'postgresql://u:PASSWORD@h/db'`` would be created as a table of that name,
    the password in the log and the report."""
    places: list[tuple[tuple[str, ...], Any]] = [
        ((section, str(key)), value)
        for section in ("source", "target", "report")
        if isinstance(top.get(section), Mapping)
        for key, value in top[section].items()
        if key != "url"
    ]
    if isinstance(top.get("attributes"), Mapping):
        places += [
            (("attributes", str(name), "hierarchy"), body.get("hierarchy"))
            for name, body in top["attributes"].items()
            if isinstance(body, Mapping)
        ]
    for path, value in places:
        if path[-1] in ("table", "key") and isinstance(value, str) and "://" in value:
            # a pasted URL became a table of that name, its password in the report and log
            raise checker.fail(
                path,
                "This looks like a database URL, not a table or column name (the value is not "
                "shown: it may hold a password). Put the URL under 'url' and the table's name "
                "here.",
            )
        found = _ENV_PATTERN.search(value) if isinstance(value, str) else None
        if found:
            raise checker.fail(
                path,
                f"{found.group(0)} is replaced by an environment variable only in source.url "
                f"and target.url; here it would be taken literally. Write the value itself.",
            )


def _report_settings(checker: _Checker, raw: Any, extra: set[str] | None = None) -> dict[str, Any]:
    """The validated ``report`` part (``json``, ``html``, ``table``, ``interval_p``,
    ``sampling_fraction``, and the ``extra`` keys criteria declare)."""
    report = checker.mapping(raw or {}, ("report",), _REPORT_KEYS | (extra or set()))
    for key in _REPORT_KEYS - {"interval_p", "sampling_fraction"}:
        if report.get(key) is not None:
            checker.string(report[key], ("report", key))
    checked_interval_p(report.get("interval_p", 0.05), checker, ("report", "interval_p"))
    checked_sampling_fraction(report.get("sampling_fraction", 0.01), checker)
    return report


def _checked_real(
    value: Any,
    checker: _Checker | None,
    path: tuple[str, ...],
    accepted: Callable[[float], bool],
    expected: str,
) -> float:
    """``value`` as a float when it is a finite real number (not a bool) that ``accepted``
    takes; else :class:`ConfigError` naming ``path``, with ``expected`` before what was given."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
        or not accepted(float(value))
    ):
        raise (checker or _Checker({})).fail(path, expected + _as_text(value))
    return float(value)


def checked_fraction(
    value: Any, checker: _Checker | None, path: tuple[str, ...], below: float
) -> float:
    """``value`` as a share of rows: a number ``f`` with ``0 <= f < below``.

    Raises:
        ConfigError: naming ``path``.
    """
    return _checked_real(
        value,
        checker,
        path,
        lambda f: 0 <= f < below,
        f"The '{path[-1]}' parameter must be a share of rows in [0, {below:g}). "
        f"Got {value!r} instead.",
    )


def checked_sampling_fraction(
    value: Any,
    checker: _Checker | None = None,
    path: tuple[str, ...] = ("report", "sampling_fraction"),
) -> float:
    """``value`` as the share of the population the table is a sample of: ``0 < f <= 1``.

    Raises:
        ConfigError: naming ``path``.
    """
    return _checked_real(
        value,
        checker,
        path,
        lambda f: 0 < f <= 1,
        f"The 'sampling_fraction' parameter must be in (0, 1]. Got {value!r} instead.",
    )


def checked_interval_p(
    value: Any, checker: _Checker | None = None, path: tuple[str, ...] = ("interval_p",)
) -> float:
    """``value`` as the half-width of interval disclosure: a finite number > 0 (NaN would make
    every comparison false: an interval disclosure of 0, "no record at risk").

    Raises:
        ConfigError: naming ``path``.
    """
    return _checked_real(
        value,
        checker,
        path,
        lambda f: f > 0,
        f"Expected a finite number > 0 (standard deviations), got {value!r}.",
    )


#: The most values a configuration may expand to through its aliases (``*name``): an "alias
#: bomb" (a few lines, each an alias of the one before repeated nine times) expands to billions,
#: and the validation walked them for minutes.
MAX_VALUES = 1_000_000
#: The deepest nesting of lists and mappings a configuration may have (a real one has under 20
#: levels; thousands overflowed Python's stack, an internal error).
MAX_DEPTH = 100
#: The largest configuration file read, in bytes (1 MiB; a real one is a few KiB).
MAX_CONFIG_BYTES = 1 << 20


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a mapping that repeats a key (YAML would keep the last one),
    and reading a plain key as the text written when YAML 1.1 would read it as another value
    (``on``, ``NO``, ``null``, ``~``, ``010``, ``0x1F``, ``1_000``): keys name columns, and
    ``on:`` names the column ``on``, never one called ``True``. ``<<: *anchor`` merges an
    anchored mapping (its own keys win)."""

    def mapping_key(self, node: yaml.Node) -> Any:
        """The key ``node`` stands for: its value, or its text when the value reads otherwise."""
        key = self.construct_object(node, deep=True)
        if (
            isinstance(node, yaml.ScalarNode)
            and node.style is None
            and not isinstance(key, str)
            and str(key) != node.value
        ):
            return node.value
        return key

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        seen: dict[str, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.mapping_key(key_node)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)):
                continue
            name = str(key)  # column names are text: `1:` and `"1":` name the same column
            if name in seen:
                raise ConfigError(
                    f"The key {name!r} appears twice in the same mapping (lines {seen[name]} "
                    f"and {line}); YAML would silently keep the last one. Keep one of them."
                )
            seen[name] = line
        self.flatten_mapping(node)
        mapping: dict = {}
        for key_node, value_node in node.value:
            key = self.mapping_key(key_node)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _UniqueKeyLoader.construct_mapping
)


def _check_expansion(node: yaml.Node) -> None:
    """Refuse a document nested deeper than :data:`MAX_DEPTH` or expanding to more than
    :data:`MAX_VALUES` values, before it is built (aliases share one node, so this is quick)."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def measure(node: yaml.Node, depth: int) -> tuple[int, int]:
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"It nests lists and mappings more than {MAX_DEPTH} levels deep (line "
                f"{node.start_mark.line + 1}); a configuration needs a few. Remove the nesting."
            )
        if id(node) in sizes:
            values, height = sizes[id(node)]
            if depth + height > MAX_DEPTH:
                measure_fresh(node, depth)
            return values, height
        return measure_fresh(node, depth)

    def measure_fresh(node: yaml.Node, depth: int) -> tuple[int, int]:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        values, height = 1, 0
        for child in children:
            child_values, child_height = measure(child, depth + 1)
            values += child_values
            height = max(height, child_height + 1)
            if values > MAX_VALUES:
                raise ConfigError(
                    f"It expands to more than {MAX_VALUES:,} values (line "
                    f"{node.start_mark.line + 1}): its aliases (*name) repeat what their "
                    f"anchors (&name) hold, over and over. Write the values out, or use fewer "
                    f"aliases."
                )
        sizes[id(node)] = (values, height)
        return values, height

    measure(node, 0)


_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")


def _misread(node: yaml.ScalarNode) -> str | None:
    """What YAML 1.1 makes of an unquoted ``node`` when that is not the text written and not what
    a category of that spelling could mean (``yes`` → true, ``~`` → null, ``010`` → 8,
    ``1_000`` → 1000, ``1:30`` → 90); ``None`` for the others (``true``, ``7``, ``1.5``, text)."""
    if node.style is not None:
        return None
    text = node.value
    if node.tag.endswith(":bool") and text.lower() not in ("true", "false"):
        return "the boolean " + ("true" if text.lower() in ("yes", "on") else "false")
    if node.tag.endswith(":null"):
        return "null (no value)"
    if node.tag.endswith(":int") and not _DECIMAL.fullmatch(text):
        return f"the number {yaml.safe_load(text)}"
    if node.tag.endswith(":float") and ("_" in text or ":" in text):
        return f"the number {yaml.safe_load(text)}"
    return None


def _refuse_misread_categories(root: yaml.Node, checker: _Checker) -> None:
    """Refuse an unquoted item of ``attributes.<column>.categories`` (or of an inline
    ``hierarchy``) that YAML 1.1 reads as another value (:func:`_misread`): ``categories: [no,
    yes]`` became the categories ``False`` and ``True``, which no text value matched (exit 3,
    "2 distinct value(s) not in categories", the values not shown), and ``[01, 02, 10]``
    became ``1``, ``2``, ``10``."""

    def scalars(node: yaml.Node) -> list[yaml.ScalarNode]:
        if isinstance(node, yaml.ScalarNode):
            return [node]
        if isinstance(node, yaml.SequenceNode):
            return [leaf for item in node.value for leaf in scalars(item)]
        if isinstance(node, yaml.MappingNode):
            return [leaf for _key, value in node.value for leaf in scalars(value)]
        return []

    def entries(node: yaml.Node) -> list[tuple[str, yaml.Node]]:
        if not isinstance(node, yaml.MappingNode):
            return []
        return [(k.value, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]

    for top, attributes in entries(root):
        if top != "attributes":
            continue
        for column, body in entries(attributes):
            for key, value in entries(body):
                if key not in ("categories", "hierarchy"):
                    continue
                for leaf in scalars(value) if not isinstance(value, yaml.ScalarNode) else []:
                    what = _misread(leaf)
                    if what is None:
                        continue
                    raise checker.fail(
                        ("attributes", column, key),
                        f"YAML 1.1 reads the unquoted {leaf.value} (line "
                        f"{leaf.start_mark.line + 1}) as {what}, not as the text "
                        f"{leaf.value!r}, and values are matched as text. Quote it "
                        f"('{leaf.value}') for the text; "
                        + (
                            "write true or false for a boolean column."
                            if "boolean" in what
                            else "leave null values to 'missing'."
                            if "null" in what
                            else f"write {yaml.safe_load(leaf.value)} for the number."
                        ),
                    )


_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"


def _number_reading(node: yaml.ScalarNode, loader: yaml.SafeLoader) -> tuple[str, str] | None:
    """What YAML 1.1 reads an integer or float scalar ``node`` as, and the plain decimal to
    write instead, when it is not written in plain decimal: ``010`` (octal 8), ``0x10``
    (hexadecimal 16), ``0b11`` (binary 3), ``1_000`` (1000), ``1:30`` (base 60: 90), ``1:30.5``
    (90.5), ``1_0.5``; ``None`` for plain forms (``10``, ``+10``, ``1.5``, ``.5``, ``00.5``,
    ``1.0e+3``) and for every other scalar. YAML 1.2 reads those forms otherwise (``010`` as 10,
    ``1:30`` as text), and nothing in a configuration is written so on purpose.

    Raises:
        ValueError: an explicit ``!!int`` or ``!!float`` on a text that is no number.
    """
    text = node.value
    if node.tag not in (_INT_TAG, _FLOAT_TAG):
        return None
    construct = loader.construct_yaml_int if node.tag == _INT_TAG else loader.construct_yaml_float
    try:
        value = construct(node)
    except (ValueError, IndexError):  # PyYAML reads the first character of '' or '-'
        raise ValueError(f"{text!r} is tagged as a number but is none") from None
    plain = (
        _DECIMAL.fullmatch(text) is not None
        if node.tag == _INT_TAG
        else "_" not in text and ":" not in text
    )
    if plain:
        return None
    body = text.lstrip("+-").lower()
    digits = body.replace("_", "")
    if ":" in body:
        return f"the base-60 number {value} (YAML 1.2 reads text)", f"{value}"
    if node.tag == _INT_TAG and body.startswith("0x"):
        return f"the hexadecimal number {value}", f"{value}"
    if node.tag == _INT_TAG and body.startswith("0b"):
        return f"the binary number {value}", f"{value}"
    if node.tag == _INT_TAG and digits.startswith("0") and len(digits) > 1:
        decimal = int(text.replace("_", ""), 10)
        return (
            f"the octal number {value} (YAML 1.2 reads {decimal})",
            f"{value}, or {decimal} if the digits were meant in decimal",
        )
    return f"the number {value} (its underscores dropped; YAML 1.2 reads text)", f"{value}"


def _refuse_misread_numbers(root: yaml.Node, checker: _Checker, loader: yaml.SafeLoader) -> None:
    """Refuse the first integer or float scalar of the document (keys that are not plain text
    included) that is not written in plain decimal (:func:`_number_reading`), naming its key
    path and line: ``k: 010`` ran with k = 8, silently. Every number of the document is
    checked, in plugin options and attribute specs alike, once (an alias shares its anchor's
    node)."""
    seen: set[int] = set()

    def walk(node: yaml.Node, path: tuple[str, ...], item: int | None) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                step = (*path, str(key_node.value))
                if isinstance(key_node, yaml.ScalarNode) and key_node.style is not None:
                    walk(key_node, step, None)  # a plain key is the text written
                walk(value_node, step, None)
        elif isinstance(node, yaml.SequenceNode):
            for index, child in enumerate(node.value):
                walk(child, path, index + 1 if item is None else item)
        elif isinstance(node, yaml.ScalarNode):
            where = f" (item {item} of the list)" if item is not None else ""
            try:
                found = _number_reading(node, loader)
            except ValueError as error:
                raise checker.fail(
                    path,
                    f"{error}{where} (line {node.start_mark.line + 1}): write the number, or "
                    f"remove the tag (!!int, !!float).",
                ) from None
            if found is None:
                return
            reading, fix = found
            raise checker.fail(
                path,
                f"YAML 1.1 reads {node.value}{where} (line {node.start_mark.line + 1}) as "
                f"{reading}: a number in a configuration means one thing to every reader. "
                f"Write it in plain decimal: write {fix}; or quote it ('{node.value}') if it "
                f"is a text, such as a name.",
            )

    walk(root, (), None)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a YAML configuration file (safe loader).

    Raises:
        ConfigError: the file cannot be read or parsed, or fails validation.
    """
    path = Path(path)
    try:
        text = read_text(path, max_bytes=MAX_CONFIG_BYTES)
    except OSError as error:
        if error.errno == errno.EFBIG:
            raise ConfigError(
                f"{path} is larger than {MAX_CONFIG_BYTES // (1 << 20)} MiB, the limit of a "
                f"configuration file (a real one holds a few KiB); it was not read. Is it the "
                f"right file?"
            ) from None
        raise ConfigError(f"Cannot read the configuration file {path}: {error.strerror}.") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {error.start + 1} is not UTF-8): save it as UTF-8."
        ) from None
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node)
        lines = _line_map(node)  # before construction flattens merge keys (<<) into the nodes
        if node is not None:
            _refuse_misread_categories(node, _Checker(lines))
            _refuse_misread_numbers(node, _Checker(lines), loader)
        document = None if node is None else loader.construct_document(node)
    except RecursionError:
        raise ConfigError(
            f"{path}: it nests lists and mappings more than {MAX_DEPTH} levels deep; a "
            f"configuration needs a few. Remove the nesting."
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path} is not valid YAML{where}: {problem}.") from None
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    finally:
        loader.dispose()
    if document is None:
        raise ConfigError(
            f"{path} is empty. Write a configuration there, or create one with "
            f"`tclose init URL TABLE -o {path}`."
        )
    return parse_config(document, lines, base=path.parent)
