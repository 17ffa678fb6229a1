"""Distance plugin ``emd-ordered``: EMD with the ordered ground distance (numeric attributes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tclose.hookspecs import hookimpl
from tclose.interfaces import FittedDistance, Option


class OrderedEMDDistance:
    """EMD over the m distinct values of the column, ground distance ``|rank_i - rank_j| / (m-1)``.

    ``EMD(P, Q) = 1/(m-1) * sum_i |sum_{j<=i} (p_j - q_j)|``; a column with one value gives 0.
    """

    name = "emd-ordered"
    attribute_types = ("numeric", "ordinal", "date", "datetime")
    #: the attribute types it is the default distance for (when the YAML names none)
    default_for = ("numeric", "ordinal", "date", "datetime")
    options_schema: Mapping[str, Option] = {}
    definition = (
        "emd-ordered: EMD(P,Q) = 1/(m-1) * sum_{i<m} |sum_{j<=i} (p_j - q_j)| over the m "
        "distinct values of the attribute in the published table, sorted in their own type "
        "(integers, decimals, dates and datetimes at full resolution, ordinal ranks); ground "
        "distance |i - j| / (m - 1) between the i-th and j-th values; 0 when m = 1"
    )

    def fit(self, values: np.ndarray, options: Mapping[str, Any]) -> FittedDistance:
        from tclose.kernels.emd import OrderedEMD

        return OrderedEMD.fit(values)


@hookimpl
def register_distances(register):
    register(OrderedEMDDistance())
