"""tclose: k-anonymity and t-closeness through microaggregation, in SQL databases.

>>> import tclose
>>> result = tclose.anonymize(frame, quasi_identifiers=["age", "zip"], confidential=["charge"],
...                           k=5, t=0.15, algorithm="t-first")  # doctest: +SKIP
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tclose")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

from .api import AnonymizationResult, anonymize  # noqa: E402
from .hookspecs import hookimpl  # noqa: E402

__all__ = ["AnonymizationResult", "anonymize", "hookimpl", "__version__"]
