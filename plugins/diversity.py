"""Privacy models beyond k and t, as criterion plugins: ``k_entities`` and ``l_diversity``.

Registered through the ``register_criteria`` hook and the ``tclose`` entry point
(``tclose.plugins.diversity``), as a third party would register its own. Their configuration
keys (``source.entity``, ``privacy.l``, ``privacy.l_kind``) are declared in ``config_keys``,
which makes the YAML configuration and :func:`tclose.anonymize` accept them; the framework
enforces them on every partition (:mod:`tclose.kernels.diversity`), and these criteria judge the
written rows, sharing no code with that step.

- ``k_entities``: every equivalence class of the written rows holds rows of at least ``k``
  distinct entities (the ``source.entity`` column, read from the source, never published, and
  joined to the written rows by their published quasi-identifier values).
- ``l_diversity:<column>``, one per confidential column: every class holds at least ``l``
  distinct values of the column (``privacy.l_kind: distinct``), or values whose entropy is at
  least ``log(l)`` (``entropy``; the check's ``actual`` is then ``exp`` of the lowest class
  entropy, the class's "effective l").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tclose.hookspecs import hookimpl
from tclose.interfaces import Check, Evidence, Option

#: Tolerance of the entropy comparison (``entropy >= log(l) - ENTROPY_TOLERANCE``).
ENTROPY_TOLERANCE = 1e-9


def _criteria(evidence: Evidence) -> Mapping[str, Any]:
    """The criterion keys' values of the evidence's configuration (none without one)."""
    return getattr(evidence.config, "criteria", None) or {}


class KEntities:
    """``k_entities``: every class of the written rows holds rows of at least ``k`` distinct
    entities (``classes_below_k``: how many do not). Only when ``source.entity`` is set and the
    entities of the written rows are known (a run, :func:`tclose.anonymize`); a failed join of
    the written rows to the source's entities fails the check with its ``problem``."""

    name = "k_entities"
    config_keys = ("source.entity",)
    config_options: Mapping[str, Option] = {
        "source.entity": Option(
            str,
            None,
            "The column naming the person, household or firm of a row: every class holds "
            "rows of at least k of them. Never published.",
        )
    }

    def check(self, evidence: Evidence) -> Check | None:
        entity = _criteria(evidence).get("source.entity")
        if entity is None or not evidence.rows:
            return None
        details: dict[str, Any] = {"entity": entity}
        if evidence.entity_problem is not None:
            details["problem"] = evidence.entity_problem
            return Check(self.name, False, evidence.k, None, details)
        if evidence.entities is None:
            return None
        pairs = pd.DataFrame({"c": evidence.classes, "e": evidence.entities})
        distinct = pairs.groupby("c", sort=True)["e"].nunique(dropna=False).to_numpy()
        details["classes_below_k"] = int((distinct < evidence.k).sum())
        lowest = int(distinct.min())
        return Check(self.name, lowest >= evidence.k, evidence.k, lowest, details)


class LDiversity:
    """``l_diversity:<column>`` for every confidential column: the lowest diversity of any class
    (distinct values, or ``exp`` of the entropy) against ``l`` (``classes_below_l``: how many
    classes fall short). Only with ``privacy.l`` and a non-empty table."""

    name = "l_diversity"
    config_keys = ("privacy.l", "privacy.l_kind")
    config_options: Mapping[str, Option] = {
        "privacy.l": Option(
            int,
            None,
            "Every class holds at least l distinct values of every confidential "
            "attribute (l-diversity).",
            min=1,
        ),
        "privacy.l_kind": Option(
            str,
            "distinct",
            "distinct: at least l distinct values per class; entropy: the entropy of the "
            "class's values is at least log(l).",
            choices=("distinct", "entropy"),
        ),
    }

    def check(self, evidence: Evidence) -> list[Check]:
        criteria = _criteria(evidence)
        l_value = criteria.get("privacy.l")
        if l_value is None or not evidence.rows:
            return []
        kind = criteria.get("privacy.l_kind") or "distinct"
        return [
            self._column_check(evidence, column, int(l_value), kind)
            for column in evidence.confidential
        ]

    def _column_check(self, evidence: Evidence, column: str, l_value: int, kind: str) -> Check:
        pairs = pd.DataFrame({"c": evidence.classes, "v": evidence.frame[column].to_numpy()})
        counts = pairs.value_counts(dropna=False).rename("n").reset_index()
        if kind == "distinct":
            diversity = counts.groupby("c")["n"].size().to_numpy().astype(float)
            below = diversity < l_value
            lowest: float = float(diversity.min())
        else:
            share = counts["n"] / counts.groupby("c")["n"].transform("sum")
            entropy = (-share * np.log(share)).groupby(counts["c"]).sum().to_numpy()
            below = entropy < math.log(l_value) - ENTROPY_TOLERANCE
            lowest = float(math.exp(entropy.min()))
        details = {"kind": kind, "classes_below_l": int(below.sum())}
        return Check(f"{self.name}:{column}", not below.any(), l_value, lowest, details)


@hookimpl
def register_criteria(register: Any) -> None:
    """``k_entities`` and ``l_diversity``."""
    register(KEntities())
    register(LDiversity())
