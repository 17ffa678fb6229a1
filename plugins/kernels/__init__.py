"""Computational kernels: NumPy arrays in, NumPy arrays out.

Only names needed to declare plugin options live here, so that registering the plugins does
not import Numba; the kernels themselves are imported when a run uses them.
"""

#: The ``partner`` choices of :func:`tclose.plugins.kernels.merge.merge_until_t_close`.
PARTNERS = ("nearest", "min-emd", "gain")
