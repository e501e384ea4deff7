"""Real, correct custom autograd code that this repository audits on itself (see registry.yaml)."""
