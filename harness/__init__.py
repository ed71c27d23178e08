"""radixbench.harness — runs a scenario under several variants, checks equivalence, reports.

Owns the ``radixbench`` command line (``radixbench.harness.cli:main``).
"""
