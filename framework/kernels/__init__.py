"""Computational kernels: NumPy arrays in, NumPy arrays out.

Only names needed to declare plugin options live here, so that registering the plugins does
not import Numba; the kernels themselves are imported when a run uses them. Their compiled
functions are decorated with :func:`tclose.base.jit.njit`, which imports Numba only when one of them
is first called: a run whose inputs are small enough for the NumPy twins never imports it.
"""

#: The ``partner`` choices of :func:`tclose.kernels.merge.merge_until_t_close`.
PARTNERS = ("nearest", "min-emd", "gain")
