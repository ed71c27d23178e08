"""radixbench.harness.profiling — ``radixbench profile``: a compare run under scalene
(:mod:`~radixbench.harness.profiling.scalene_profile`), whose profiled program is
:mod:`~radixbench.harness.profiling.target`."""
