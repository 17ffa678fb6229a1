"""Validation of plugin options against their declared :class:`~tclose.interfaces.Option` schema.

Messages follow one shape, as scikit-learn's parameter constraints do:
``The 'partner' option of merge must be one of ('nearest', 'min-emd'). Got 'best' instead.``
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tclose.errors import ConfigError
from tclose.interfaces import Option


def _type_ok(value: Any, expected: type) -> bool:
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def validate_options(
    owner: str,
    schema: Mapping[str, Option],
    given: Mapping[str, Any] | None,
    path: Sequence[str],
) -> dict[str, Any]:
    """Check ``given`` against ``schema`` and return it with defaults filled in.

    Args:
        owner: the plugin's name, used in messages.
        schema: option name → :class:`Option`.
        given: the options from the configuration (``None`` means none).
        path: the key path of the options mapping in the configuration (e.g.
            ``("algorithm", "options")``), the place of an error as data.

    Raises:
        ConfigError: an unknown option, or a value of the wrong type or out of range.
    """
    given = dict(given or {})
    unknown = sorted(set(given) - set(schema))
    if unknown:
        allowed = ", ".join(sorted(schema)) or "none"
        raise ConfigError(
            f"Unknown option {unknown[0]!r} for {owner}. Allowed options: {allowed}.",
            path=(*path, unknown[0]),
        )
    result: dict[str, Any] = {}
    for name, option in schema.items():
        if name not in given:
            result[name] = option.default
            continue
        value = given[name]
        where = (*path, name)
        if not _type_ok(value, option.type):
            raise ConfigError.given_at(
                where,
                f"The {name!r} option of {owner} must be of type {option.type.__name__}. "
                f"Got {value!r} instead.",
            )
        if option.choices is not None and value not in option.choices:
            raise ConfigError.given_at(
                where,
                f"The {name!r} option of {owner} must be one of {option.choices}. "
                f"Got {value!r} instead.",
            )
        if option.type is float and not math.isfinite(value):
            raise ConfigError.given_at(
                where,
                f"The {name!r} option of {owner} must be a finite number (NaN and "
                f"infinity are not, and the audit report cannot hold them). Got {value!r} instead.",
            )
        low = -float("inf") if option.min is None else option.min
        high = float("inf") if option.max is None else option.max
        if option.type in (int, float) and not low <= value <= high:
            raise ConfigError.given_at(
                where,
                f"The {name!r} option of {owner} must be in [{low}, {high}]. "
                f"Got {value!r} instead.",
            )
        result[name] = option.type(value) if option.type is float else value
    return result
