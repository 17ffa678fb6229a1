"""The installed version of tclose (``tclose --version``, reports, ``tclose plugins``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("tclose")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"
