"""Makes the compiled kernels of the built-ins' blocked runs: importing this module does it.

The built-in algorithms name this module in their ``block_preload``. The local pool imports it
first in the process that starts the pool, then in its fork server: a fresh environment compiles
the kernels once, in the run's own process, where the compile notice and the report's
``timings.compile`` see it; the fork server then loads them from Numba's cache, and every worker,
forked from it, starts with them (no worker compiles or loads anything).

The kernels are those of blocked t-first, MDAV and merge runs, whatever their options (the
t-first and MDAV loops, the merge loop's helpers): so a blocked run of one of them also compiles,
once per environment, the loop of the other. The kernels of k-first and of the refinement are
not made here: the workers of a blocked run that uses them compile or load them.
"""

from __future__ import annotations

from tclose.base.jit import dispatcher_of
from tclose.kernels import _compiled, emd, merge

for kernel in (
    _compiled._t_first_loop,
    _compiled._mdav_loop,
    merge._start_clusters,
    merge._gather,
    merge._k_nearest,
    emd.numerator_sorted,
):
    dispatcher_of(kernel)
