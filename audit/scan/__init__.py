"""Finding custom autograd code: by running a model under instrumentation, or by reading its sources."""
