"""tclose: k-anonymity and t-closeness through microaggregation, in SQL databases.

>>> import tclose
>>> result = tclose.anonymize(frame, quasi_identifiers=["age", "zip"], confidential=["charge"],
...                           k=5, t=0.15, algorithm="t-first")  # doctest: +SKIP
"""

from typing import TYPE_CHECKING, Any

from tclose.base.version import __version__
from tclose.hookspecs import hookimpl

if TYPE_CHECKING:
    from tclose.core.api import AnonymizationResult, anonymize

__all__ = ["AnonymizationResult", "anonymize", "hookimpl", "__version__"]

_LAZY = {"anonymize", "AnonymizationResult"}


def __getattr__(name: str) -> Any:
    """``anonymize`` and ``AnonymizationResult`` are imported on first use (PEP 562): ``import
    tclose`` and plugin registration then do not import pandas."""
    if name in _LAZY:
        from tclose.core import api

        return getattr(api, name)
    raise AttributeError(f"module 'tclose' has no attribute {name!r}")
