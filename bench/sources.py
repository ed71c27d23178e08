"""radixbench's source packages: the folders of the checkout installed as ``radixbench.*``.

One definition, read by ``bench peers`` (:func:`radixbench.bench.peers.compile_sources`
compiles them), ``radixbench profile`` (:mod:`radixbench.harness.profiling.scalene_profile`
profiles only their lines) and the import-rule tests (``tests/test_architecture.py``); a test
holds it equal to the top-level folders of ``pyproject.toml``'s
``[tool.setuptools.package-dir]``, which is what installs them.
"""

from __future__ import annotations

__all__ = ["SOURCE_PACKAGES"]

#: The top-level package folders, lowest layer first (docs/ARCHITECTURE.md, "Layers").
SOURCE_PACKAGES = ("cache", "workloads", "reports", "sim", "cluster", "bench", "harness")
