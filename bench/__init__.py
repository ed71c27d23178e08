"""radixbench.bench — benchmarks that print figures (never timed tests): the cache's algorithm
variants (:mod:`~radixbench.bench.cache`, timed by :mod:`~radixbench.bench.timing`, reported by
:mod:`~radixbench.bench.cache_report`), the KV allocators against SGLang's
(:mod:`~radixbench.bench.alloc`) and the simulator's own speed (:mod:`~radixbench.bench.sim`).
``radixbench bench cache|alloc|sim`` (:mod:`radixbench.harness.cli.bench`) runs them; their
sections of ``BENCHMARKS.md`` are written by :mod:`~radixbench.bench.benchmarks_md`."""
