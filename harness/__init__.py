"""radixbench.harness — runs a scenario under several variants, checks equivalence, reports.

Owns the ``radixbench`` command line (``radixbench.harness.cli:main``). Parts, from the top:
:mod:`~radixbench.harness.cli` (argument parsing and printing, one module per subcommand),
:mod:`~radixbench.harness.config` (scenario, grid and study files, implementations),
:mod:`~radixbench.harness.experiments` (compare, replay, sweep, study; run folders) and
:mod:`~radixbench.harness.profiling` (scalene). Benchmarks are a package of their own,
:mod:`radixbench.bench`.
"""
