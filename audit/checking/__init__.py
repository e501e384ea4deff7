"""The machinery every check shares, apart from the checks themselves (:mod:`audit.checks`) and what a check
declares (:mod:`audit.catalog`, below the registry): how a case is judged (:mod:`audit.checking.judgement`), how a
property is called as its replay script calls it (:mod:`audit.checking.replayable`), the reference and smoothness
excuses it applies, and per-worker resources.
"""
