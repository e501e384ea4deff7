"""Behaviour records: what an entry computes in one environment, kept so that another environment can be compared
with it value by value (``audit run --record``, ``audit diff``).

Written by a record worker (:mod:`audit.behaviour.worker`, one process per share of the entries, started by
:mod:`audit.behaviour.recorder`), read by the diff (:mod:`audit.behaviour.compare`). Every recorded value carries the
error its own computation makes in its dtype, measured in the environment that made it, so that a change between
two environments is judged against what rounding alone can explain.
"""
