"""Distance plugin ``nominal-ranking``: EMD for nominal attributes, with a total order of the
categories so that t-first can stratify them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tclose.base.hierarchy import Hierarchy
from tclose.errors import ConfigError
from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option
from tclose.kernels.nominal import ORDERS, NominalEMD


class NominalRankingDistance:
    """EMD with the equal ground distance (total variation), or with the hierarchical ground
    distance of Li et al. when the attribute has a ``hierarchy``; categories ranked by
    ``order`` for t-first's strata (see :mod:`tclose.kernels.nominal`)."""

    name = "nominal-ranking"
    attribute_types = ("nominal",)
    #: the attribute types it is the default distance for (when the YAML names none)
    default_for = ("nominal",)
    definition = (
        "nominal-ranking: EMD with the equal ground distance (1 between any two different "
        "categories), i.e. half the L1 distance between the class's and the table's category "
        "frequencies; with a hierarchy, the hierarchical ground distance of Li et al. (the "
        "height of the two categories' lowest common ancestor over the hierarchy's height). The "
        "category order (option 'order') only forms t-first's strata; it does not change the EMD"
    )
    options_schema: Mapping[str, Option] = {
        "order": Option(
            str,
            "auto",
            "Total order of the categories for t-first's strata: "
            "auto (hierarchy if one is given, else frequency), frequency, hierarchy, "
            "marginality, listed.",
            choices=ORDERS,
        ),
        "hierarchy": Option(
            object,
            None,
            "The attribute's hierarchy (set from the attribute's "
            "'hierarchy' key; a nested mapping or a CSV file of paths).",
        ),
        "categories": Option(
            object,
            None,
            "The categories in order, for order 'listed' (set "
            "from the attribute's 'categories' key).",
        ),
    }

    def fit(self, values: np.ndarray, options: Mapping[str, Any]) -> FittedDistance:
        hierarchy = options.get("hierarchy")
        if hierarchy is not None and not isinstance(hierarchy, Hierarchy):
            hierarchy = Hierarchy.load(hierarchy)
        order = options.get("order", "auto")
        if order == "hierarchy" and hierarchy is None:
            raise ConfigError(
                "The order 'hierarchy' needs the attribute's hierarchy: give "
                "the attribute a 'hierarchy', or choose another order (frequency, marginality, "
                "listed).",
                path=("order",),
            )
        return NominalEMD.fit(
            values,
            hierarchy=hierarchy,
            order=order,
            listed=options.get("categories"),
        )


@hookimpl
def register_distances(register):
    register(NominalRankingDistance())
