"""autograd-audit: prove that custom autograd code in PyTorch is correct.

The public surface is small: the command line (``audit``), the registry format
(``registry.yaml``, schema v1) and, for repositories that add checks of their own,
:class:`audit.catalog.interface.Check` and :class:`audit.catalog.interface.Violation`.
"""

__version__ = "0.1.0"
