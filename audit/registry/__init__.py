"""The registry: ``registry.yaml`` parsed, validated against schema v1 (:mod:`audit.registry.load`) and turned
into entries (:mod:`audit.registry.model`)."""
