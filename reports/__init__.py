"""radixbench.reports — what a run's saved tables say: summaries, verdicts, plots, reports.

Reads the simulator's tables (docs/CONTRACTS.md) and the run record (:mod:`~radixbench.reports.
record`, ``config.json``) only; imports nothing of the simulator or the harness. The report of
one run is written by :func:`radixbench.reports.pipeline.write_report`; the modules it uses,
one concept each: :mod:`~radixbench.reports.tables` (schemas, validation, storage),
:mod:`~radixbench.reports.summary` (statistics and speed-ups), :mod:`~radixbench.reports.axes`
(variants and their pairing), :mod:`~radixbench.reports.verdicts` (bootstrap CIs and verdicts),
:mod:`~radixbench.reports.headline` (the answer), :mod:`~radixbench.reports.plots` /
:mod:`~radixbench.reports.plots_run` (figures), :mod:`~radixbench.reports.markdown` /
:mod:`~radixbench.reports.html` (``report.md`` / ``report.html``). Importing this package
imports nothing else: the pipeline's pandas, tqdm and renderers load with the module that needs
them.
"""
