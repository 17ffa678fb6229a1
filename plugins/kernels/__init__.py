"""Computational kernels: NumPy arrays in, NumPy arrays out."""
