"""Reporters: pure functions from a matrix (the contract's JSON object) to text."""
