"""Bundled scenario files (``*.toml``), listed by ``radixbench scenarios``."""
