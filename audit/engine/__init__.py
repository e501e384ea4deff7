"""The engine: resolves targets, runs checks in worker processes and streams cells to a callback."""
