"""Exceptions, each tied to the exit code of the CLI contract.

======================  ====  ==================================================
exception               exit  meaning
======================  ====  ==================================================
``VerificationError``   1     the written table failed verification; nothing was published
``ConfigError``         2     bad configuration or usage
``DataError``           3     source, connection or data problem
``PluginFailure``       4     a plugin raised an unexpected exception (a bug in the plugin)
``RunInterrupted``      130   SIGINT or SIGTERM (a ``KeyboardInterrupt``)
======================  ====  ==================================================
"""

from __future__ import annotations


class TcloseError(Exception):
    """Base class of every error tclose reports to a user.

    Attributes:
        published: whether the target table was published before the error (the runner sets
            it on any error that ends a run; e.g. a report file that cannot be written after
            the publish).
    """

    exit_code = 3
    published: bool = False

    def __init__(self, *args: object, published: bool = False) -> None:
        super().__init__(*args)
        self.published = published


class VerificationError(TcloseError):
    """The re-read output failed a check; the target was left as it was."""

    exit_code = 1

    def __init__(
        self, message: str, checks: list[dict] | None = None, report: dict | None = None
    ) -> None:
        super().__init__(message)
        self.checks = checks or []
        #: the run's report (the verdict and its checks), attached by the runner once written.
        self.report = report


class ConfigError(TcloseError):
    """A configuration or usage error.

    The message reads as a path into the YAML document, e.g.
    ``==> At attributes.age ==> At key: type`` followed by the problem, and the file line
    where known.
    """

    exit_code = 2


class DataError(TcloseError):
    """A problem with the source: connection, missing table or column, or unusable values.

    Attributes:
        driver_error: the database driver's exception it reports, if any (a connector sets it),
            so that a caller can tell, e.g., a uniqueness violation from other failures.
    """

    exit_code = 3
    driver_error: BaseException | None = None


class PluginError(ConfigError):
    """A plugin could not be registered or found (e.g. two plugins claim the same name)."""


class PluginFailure(TcloseError):
    """A plugin raised an exception that is not a :class:`TcloseError`: a bug in the plugin, not
    in tclose (exit code 4, like an internal error). The message names the plugin and the
    exception; the exception is the ``__cause__`` (the CLI prints its traceback with ``-v``)."""

    exit_code = 4


class RunInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM ended a run (a :class:`KeyboardInterrupt`, exit code 130 of the CLI).

    Attributes:
        published: whether the target table was replaced before the interrupt took effect
            (signals are deferred from the publish until the report and audit row are written).
    """

    def __init__(self, message: str = "", published: bool = False) -> None:
        super().__init__(message)
        self.published = published


def columns_hold(found: list[str]) -> str:
    """The subject of a message about the columns ``found`` (each already written, e.g.
    ``"'a' (3 rows)"``): ``Column 'a' (3 rows) holds`` or ``Columns 'a' (3 rows), 'b' (1 rows)
    hold``."""
    if len(found) == 1:
        return f"Column {found[0]} holds"
    return f"Columns {', '.join(found)} hold"
