"""``python -m tclose`` and the ``tclose`` console script: the command-line interface.

**One BLAS thread.** Before NumPy (and SciPy, which bundles a second OpenBLAS) is imported, the
command sets ``OPENBLAS_NUM_THREADS=1`` unless the environment already sets it. Each OpenBLAS
starts a pool of threads when it loads, which cost 0.1-0.17 s of CPU per command on a 2-core
machine (``bench/bench_startup.py``); tclose's work is in Numba kernels and its BLAS
calls are ``(n, d) @ (d, d)`` products with small ``d``, which one thread does as fast. Set the
variable yourself to choose otherwise. Applications importing :mod:`tclose` are not affected.
"""

import gc
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tclose.app.cli import main  # noqa: E402  (after the BLAS setting, which NumPy reads on import)


def console() -> None:
    """Run :func:`tclose.app.cli.main` and exit with its code.

    Before the interpreter shuts down, every object is moved to the collector's permanent
    generation (``gc.freeze()``): exit handlers, thread joins, flushes and refcount-driven
    finalizers still run, but the last full collection skips the ~10^6 objects of pandas,
    Numba, SciPy and SQLAlchemy, whose walk costs 0.3 s of CPU at every exit.
    In-process callers of ``main`` (tests, applications) are not affected.
    """
    code = main()
    sys.stdout.flush()
    gc.freeze()
    raise SystemExit(code)


if __name__ == "__main__":
    console()
