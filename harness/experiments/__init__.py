"""radixbench.harness.experiments — running what the configuration describes.

:mod:`~radixbench.harness.experiments.compare` (one scenario under several variants, one
report), :mod:`~radixbench.harness.experiments.workload` (the requests a run simulates),
:mod:`~radixbench.harness.experiments.equivalence` (the variants' prefix hits must agree),
:mod:`~radixbench.harness.experiments.replay` (hit rates of eviction policies, no scheduler),
:mod:`~radixbench.harness.experiments.sweep` and :mod:`~radixbench.harness.experiments.study`
(many compares on the one Dask runner, :mod:`~radixbench.harness.experiments.dask_runner`),
:mod:`~radixbench.harness.experiments.rerender` (a saved run's reports again) and
:mod:`~radixbench.harness.experiments.rundir` (run folders written atomically, the environment).
"""
