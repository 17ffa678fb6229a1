"""Exceptions, each tied to the exit code of the CLI contract.

======================  ====  ==================================================
exception               exit  meaning
======================  ====  ==================================================
``VerificationError``   1     the written table failed verification; nothing was published
``ConfigError``         2     bad configuration or usage
``DataError``           3     source, connection or data problem
======================  ====  ==================================================
"""

from __future__ import annotations


class TcloseError(Exception):
    """Base class of every error tclose reports to a user."""

    exit_code = 3
    #: whether the target table was published before the error (set by the runner).
    published: bool = False


class VerificationError(TcloseError):
    """The re-read output failed a check; the target was left as it was."""

    exit_code = 1

    def __init__(self, message: str, checks: list[dict] | None = None) -> None:
        super().__init__(message)
        self.checks = checks or []
        #: the run's report (the verdict and its checks), attached by the runner.
        self.report: dict | None = None


class ConfigError(TcloseError):
    """A configuration or usage error.

    The message reads as a path into the YAML document, e.g.
    ``==> At attributes.age ==> At key: type`` followed by the problem, and the file line
    where known.
    """

    exit_code = 2


class DataError(TcloseError):
    """A problem with the source: connection, missing table or column, or unusable values."""

    exit_code = 3


class PluginError(ConfigError):
    """A plugin could not be registered or found (e.g. two plugins claim the same name)."""
