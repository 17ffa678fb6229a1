"""tclose-sortagg: an example third-party tclose plugin (the ``principal-sort`` algorithm)."""

from .plugin import PrincipalSort

__all__ = ["PrincipalSort"]
