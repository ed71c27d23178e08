"""The bundled study files (``study-<name>.toml``, package data) and the extra ``study.md``
sections a study file may name (``sections = [...]``): one module per section beside the study
that uses it, e.g. :mod:`~radixbench.harness.config.studies.pr6907` for the eviction study."""
