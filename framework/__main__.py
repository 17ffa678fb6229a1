"""``python -m tclose`` and the ``tclose`` console script: the command-line interface."""

import gc
import sys

from tclose.cli import main


def console() -> None:
    """Run :func:`tclose.cli.main` and exit with its code.

    Before the interpreter shuts down, every object is moved to the collector's permanent
    generation (``gc.freeze()``): exit handlers, thread joins, flushes and refcount-driven
    finalizers still run, but the last full collection no longer walks the ~10^6 objects of
    pandas, Numba, SciPy and SQLAlchemy, which cost 0.3 s of CPU at every exit (issue 14).
    In-process callers of ``main`` (tests, applications) are not affected.
    """
    code = main()
    sys.stdout.flush()
    gc.freeze()
    raise SystemExit(code)


if __name__ == "__main__":
    console()
