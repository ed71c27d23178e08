"""radixbench.harness.config — what to run, read from TOML and validated before any work starts.

:mod:`~radixbench.harness.config.tomlmap` (TOML tables onto dataclasses, key-path errors),
:mod:`~radixbench.harness.config.scenario` (scenario files), :mod:`~radixbench.harness.config.grid`
(sweep grids), :mod:`~radixbench.harness.config.study` (study files; the bundled ones and their
extra report sections live in :mod:`radixbench.harness.config.studies`) and
:mod:`~radixbench.harness.config.impl` (the ``--impl`` axis: cache implementations resolved).
"""
