"""radixbench.cache.sglang — sglang 0.5.23's own caches, loaded from its source files."""
