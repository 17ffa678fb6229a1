"""k distinct entities and l-diversity in a run: the requirements the framework enforces after
every algorithm, and the join of the written rows to the source's entities for the verifier.

``source.entity`` names a column (a person, household or firm id) that is read from the source
with the quasi-identifiers and never published; ``privacy.l`` (with ``privacy.l_kind``) asks
every class for ``l`` distinct values, or an entropy of ``log(l)``, of every confidential
attribute. :func:`requirements` turns them into :class:`~tclose.kernels.diversity.Requirement`
values, refused when even the whole table cannot meet them; :func:`enforce` merges the clusters
that fall short (:func:`tclose.kernels.diversity.merge_until_met`). The verifier's criteria
(:mod:`tclose.plugins.diversity`) judge the written rows; :func:`written_entities` gives them the
entity of every written row.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd

from tclose.base.digests import canonical
from tclose.errors import ConfigError, DataError
from tclose.interfaces import FittedDistance, Partition
from tclose.kernels.diversity import Requirement, merge_until_met, unmet_by_table

__all__ = [
    "entity_codes",
    "enforce",
    "entity_warnings",
    "looks_like_entity",
    "requirements",
    "written_entities",
]

#: Words of a column name that say it names a person, household or firm.
_ENTITY_WORDS = {"nr", "person", "persid", "pid", "household", "hh", "hhid", "firm", "family"}


def looks_like_entity(name: str) -> bool:
    """Whether a column name looks like the id of a person, household or firm: one of its words
    (split at non-letters and camelCase humps) is one of :data:`_ENTITY_WORDS` (``nr``,
    ``person_id``, ``hh_id``, ``household``), or it is an id that is not a table's own
    (``customer_id``, but not ``id``)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    words = [w for w in re.sub(r"[^0-9a-zA-Z]+", "_", spaced).lower().split("_") if w]
    return bool(_ENTITY_WORDS & set(words)) or (len(words) > 1 and words[-1] == "id")


def entity_warnings(config: Any, entity_key_known: bool) -> list[str]:
    """Without ``source.entity`` (and when the key is known: the criterion is installed), a
    warning for every identifier or pass-through column, not the row key, whose name looks
    like an entity's (:func:`looks_like_entity`): if its values repeat, a class of k rows may
    hold fewer than k people, households or firms."""
    if config is None or config.entity is not None or not entity_key_known:
        return []
    return [
        f"Column {name!r} looks like the id of a person, household or firm (its name) and is "
        f"not the row key: if its values repeat, a class of k rows may hold the rows of fewer "
        f"than k of them. Set source.entity: {name} to count them, not rows."
        for name, spec in config.attributes.items()
        if spec.role in ("identifier", "other")
        and name != config.source.key
        and looks_like_entity(name)
    ]


def entity_codes(values: pd.Series, column: str) -> np.ndarray:
    """``int64`` codes of the entity of every row (equal values, equal codes).

    Raises:
        DataError: some rows have no entity (NULL); the message names the column, how many
            rows, and the first rows by their index (the source key in a run).
    """
    missing = values.isna().to_numpy()
    if missing.any():
        rows = ", ".join(str(r) for r in values.index[missing][:5])
        more = ", ..." if missing.sum() > 5 else ""
        raise DataError(
            f"The entity column {column!r} (source.entity) is NULL in {int(missing.sum())} "
            f"row(s) (rows {rows}{more}): every row needs the person, household or firm it "
            f"belongs to. Fill the column, or set those rows aside."
        )
    return pd.factorize(values, sort=False)[0].astype(np.int64)


def requirements(
    k: int,
    entities: np.ndarray | None,
    entity: str | None,
    l_diversity: tuple[int, str] | None,
    distances: Sequence[FittedDistance],
) -> list[Requirement]:
    """What every cluster must hold: ``k`` distinct entities (with ``entities``, the codes of
    :func:`entity_codes`), and ``l`` per confidential attribute (its distance's codes).

    Raises:
        ConfigError: the whole table falls short of a requirement (fewer than ``k`` entities,
            fewer than ``l`` distinct values of a confidential attribute, or an entropy below
            ``log(l)``), so no partition can meet it; raised before any row is written.
    """
    found: list[Requirement] = []
    if entities is not None:
        found.append(Requirement(entities, k, "distinct", f"entities ({entity})"))
    if l_diversity is not None:
        l_value, kind = l_diversity
        for distance in distances:
            found.append(Requirement(distance.codes, l_value, kind, f"values of {distance.column}"))
    unmet = unmet_by_table(found)
    if unmet:
        raise _unreachable(unmet[0])
    return found


def _unreachable(requirement: Requirement) -> ConfigError:
    """The error for a requirement the whole table falls short of."""
    key = "privacy.k" if requirement.what.startswith("entities") else "privacy.l"
    codes = requirement.codes
    held = f"{len(np.unique(codes))} distinct {requirement.what}"
    if requirement.kind == "entropy":
        share = np.bincount(codes) / len(codes)
        share = share[share > 0]
        entropy = float(-(share * np.log(share)).sum())
        held = (
            f"{requirement.what} with an entropy of {entropy:.3f}, below "
            f"log({requirement.need}) = {np.log(requirement.need):.3f}"
        )
    return ConfigError(
        f"The whole table holds {held}, so no class can hold {requirement.need} of them: "
        f"lower {key}.",
        path=tuple(key.split(".")),
    )


def enforce(
    x: np.ndarray, labels: np.ndarray, partition: Partition, found: Sequence[Requirement]
) -> np.ndarray:
    """``labels`` with the clusters that fall short of a requirement merged into their nearest
    (:func:`tclose.kernels.diversity.merge_until_met`); ``partition.info["diversity_merges"]``
    says how many clusters the merges removed."""
    if not found:
        return labels
    merged_labels, merged = merge_until_met(x, labels, found)
    partition.info["diversity_merges"] = merged
    return merged_labels


def _value_key(value: Any) -> Any:
    """A written value as the join compares it: numbers exactly (as ``Decimal``), date-times
    and text as themselves, every missing value as one."""
    value = canonical(value)
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return None
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return ("n", Decimal(value))
    if isinstance(value, (dt.date, dt.datetime, pd.Timestamp)):
        return ("d", pd.Timestamp(value))
    return ("s", str(value))


def _text_key(value: Any) -> Any:
    """A value of a column written as text (a category's label) as the join compares it: as
    its text, so that the label ``"3"`` written into an integer column, read back as ``3``,
    joins (the labels of one column's values are distinct texts)."""
    value = canonical(value)
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return ("s", str(value))


def _time_key(value: Any) -> Any:
    """A value of a column written as dates or date-times as the join compares it: as a
    timestamp, also when the database gives it back as text (SQLite)."""
    value = canonical(value)
    if isinstance(value, tuple):  # an aware date-time, in UTC
        value = value[1]
    if value is None or value is pd.NaT:
        return None
    return ("d", pd.Timestamp(value))


def _column_key(written: np.ndarray) -> Callable[[Any], Any]:
    """How the join compares the values of a column, chosen by the values it was written with:
    text (category labels), dates and date-times, or other values (numbers exactly)."""
    present = [v for v in written[:1000].tolist() if v is not None]
    if present and isinstance(present[0], str):
        return _text_key
    if present and isinstance(present[0], (dt.date, dt.datetime)):
        return _time_key
    return _value_key


def _column_codes(mine: pd.Series, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of the values of one column on both sides of the join (equal values, equal
    codes): NumPy numbers of one kind compared as they are, else each value by the column's
    key function (:func:`_column_key`)."""
    read, written = mine.to_numpy(), np.asarray(theirs)
    kinds = {read.dtype.kind, written.dtype.kind}
    if kinds <= {"f"} or kinds <= {"i"} or kinds <= {"u"}:
        codes = pd.factorize(np.concatenate([read, written]))[0]
    else:
        key = _column_key(np.asarray(written, dtype=object))
        seen: dict[Any, int] = {}
        values = [*read.tolist(), *written.tolist()]
        codes = np.array([seen.setdefault(key(v), len(seen)) for v in values], dtype=np.int64)
    return codes[: len(read)], codes[len(read) :]


def written_entities(
    frame: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    written: Mapping[str, np.ndarray],
    entities: np.ndarray,
) -> tuple[np.ndarray | None, str | None]:
    """The entity of every row of ``frame`` (the written rows, read back), from the source
    rows' ``entities`` and the quasi-identifier values each was ``written`` with: rows with the
    same published values are joined (rows of one class are alike, so which written row of a
    value gets which of its source rows' entities does not change any class's entities).
    Returns ``(entities, None)``, or ``(None, problem)`` when the written rows and the source
    rows do not hold the same published values as often."""
    group = np.zeros(len(frame) + len(entities), dtype=np.int64)
    for q in quasi_identifiers:  # the row's group: its columns' codes combined, one at a time
        codes = np.concatenate(_column_codes(frame[q], written[q])) + 1  # NaN's -1 becomes 0
        group = pd.factorize(group * (int(codes.max()) + 1) + codes)[0]
    mine_group, their_group = group[: len(frame)], group[len(frame) :]
    size = int(group.max()) + 1 if len(group) else 0
    held, wanted = np.bincount(their_group, minlength=size), np.bincount(mine_group, minlength=size)
    if not np.array_equal(held, wanted):
        unmatched = int(np.clip(wanted - held, 0, None).sum())
        left = int(np.clip(held - wanted, 0, None).sum())
        return None, (
            f"{unmatched} written row(s) match no source row's published quasi-identifier "
            f"values and {left} source row(s) match no written row, so the entities of the "
            f"written classes cannot be known."
        )
    result = np.empty(len(mine_group), dtype=np.asarray(entities).dtype)
    result[np.argsort(mine_group, kind="stable")] = np.asarray(entities)[
        np.argsort(their_group, kind="stable")
    ]
    return result, None
