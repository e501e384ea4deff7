"""What a check is, and the built-in checks' declarations: read without torch, below the registry's validation
(which checks a registry's check names against them) and above the entry model (which they read).

:mod:`audit.catalog.interface`: the :class:`~audit.catalog.interface.Check` a check declares itself as, and what
its property raises (a repository's own checks import from here). :mod:`audit.catalog.checks`: the catalog, the one
list of the built-in check names, in the matrix's column order.
"""
