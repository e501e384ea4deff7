"""The machinery every check shares, apart from the checks themselves (:mod:`audit.checks`).

Below the registry's validation: the :class:`~audit.checking.interface.Check` a check is, and the catalog of the
built-in checks' declarations (:mod:`audit.checking.catalog`, read without torch). Above the results: how a case
is judged (:mod:`audit.checking.judgement`), how a property is called as its replay script calls it
(:mod:`audit.checking.replayable`), the reference and smoothness excuses it applies, and per-worker resources.
"""
