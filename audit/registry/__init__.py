"""The registry: ``registry.yaml`` parsed, validated against schema v1 and turned into entries."""

from audit.registry.load import load_registry
from audit.registry.model import Entry, Registry, Supports, TensorSpec, ValueSpec

__all__ = ["Entry", "Registry", "Supports", "TensorSpec", "ValueSpec", "load_registry"]
