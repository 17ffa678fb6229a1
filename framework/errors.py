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

from collections.abc import Sequence


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
    """A configuration or usage error, located in the YAML document where it can be.

    Its text starts with the place, then the problem on the next lines::

        ==> At attributes.age ==> At key: type (line 7)
        'numbr' is not a type: numeric, ordinal or nominal.

    The place is data: :attr:`path` and :attr:`line`, which the ``tclose`` command uses to
    name the file and the line (:meth:`located_text`). ``ConfigError(problem, path=...,
    line=...)`` writes the place; the framework, its connectors and its plugins place every
    error so. The place is data only: a message is never parsed for it.

    Attributes:
        path: the keys from the top of the document to the place, ``()`` for the document as a
            whole, ``None`` when the error names no place in it.
        line: the 1-based line of the place in the file, if known.
        problem: the text after the place (the whole text when there is no place).
    """

    exit_code = 2

    def __init__(
        self,
        *args: object,
        path: Sequence[str] | None = None,
        line: int | None = None,
        published: bool = False,
    ) -> None:
        message = str(args[0]) if args else ""
        if path is not None:
            self.path: tuple[str, ...] | None = tuple(path)
            self.line, self.problem = line, message
            self._where = _place(self.path, None)
            args = (_place(self.path, line) + "\n" + message, *args[1:])
        else:
            self.path, self.line, self.problem, self._where = None, None, message, ""
        super().__init__(*args, published=published)

    def __reduce__(self) -> tuple:
        """Pickled with its place as data (a block worker's error reaches the parent whole)."""
        return (_rebuilt, (type(self), self.problem, self.path, self.line, self.published))

    def located_text(self, line: int | None = None) -> str:
        """The error's text with its place's line: its own :attr:`line`, else ``line`` (the
        line a caller found for :attr:`path`, e.g. in the configuration file)."""
        if self.path is None:
            return str(self)
        line = self.line or line
        first = self._where + (f" (line {line})" if line else "")
        return f"{first}\n{self.problem}" if self.problem else first

    @classmethod
    def given_at(cls, where: Sequence[str] | str, problem: str) -> ConfigError:
        """``problem`` with what was given at ``where``: a key path of the configuration (a
        sequence of keys, the error's :attr:`path`), or a text that opens the message for what
        is not in the configuration (a command-line option: ``"--html: "``; no place)."""
        if isinstance(where, str):
            return cls(where + problem)
        return cls(problem, path=where)

    def at(self, *prefix: str) -> ConfigError:
        """This error placed below ``prefix`` (its path is relative to it): how a check of a
        part of the document (a plugin's options, a column's distance options) says where the
        part is. The line is left to the caller, who knows the file."""
        return type(self)(self.problem, path=(*prefix, *(self.path or ())))


_TOP = "the top level"


def _place(path: tuple[str, ...], line: int | None) -> str:
    """The first line of a located message (a NUL in a key is shown as ``\\x00``)."""
    shown = [step.replace("\0", "\\x00") for step in path]
    if len(shown) > 1:
        where = f"At {'.'.join(shown[:-1])} ==> At key: {shown[-1]}"
    else:
        where = f"At key: {shown[0]}" if shown else f"At {_TOP}"
    return f"==> {where}" + (f" (line {line})" if line else "")


def _rebuilt(
    cls: type[ConfigError],
    problem: str,
    path: tuple[str, ...] | None,
    line: int | None,
    published: bool,
) -> ConfigError:
    """A :class:`ConfigError` (or subclass) unpickled: :meth:`ConfigError.__reduce__`."""
    return cls(problem, path=path, line=line, published=published)


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
