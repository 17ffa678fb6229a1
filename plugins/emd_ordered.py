"""Distance plugin ``emd-ordered``: EMD with the ordered ground distance (numeric attributes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option
from tclose.plugins.kernels.emd import OrderedEMD


class OrderedEMDDistance:
    """EMD over the m distinct values of the column, ground distance ``|rank_i - rank_j| / (m-1)``.

    ``EMD(P, Q) = 1/(m-1) * sum_i |sum_{j<=i} (p_j - q_j)|``; a column with one value gives 0.
    """

    name = "emd-ordered"
    attribute_types = ("numeric", "ordinal", "date", "datetime")
    options_schema: Mapping[str, Option] = {}

    def fit(self, values: np.ndarray, options: Mapping[str, Any]) -> FittedDistance:
        return OrderedEMD.fit(values)


@hookimpl
def register_distances(register):
    register(OrderedEMDDistance())
