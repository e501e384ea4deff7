"""Inputs: Hypothesis strategies drawn from an entry's ``inputs`` and ``dims``, and the cases they give."""
