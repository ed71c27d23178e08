"""``radixbench.cache.sglang.allocators``: sglang 0.5.23's own KV allocators, executed from the
installed package by the one SGLang loader (``radixbench bench alloc`` times them)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from radixbench.cache.sglang.allocators import ALLOCATOR_MODULES
from radixbench.cache.sglang.finder import SGLangStubError
from radixbench.cache.sglang.loader import load_modules
from radixbench.cache.sglang.package import installed_dir


def test_allocators_load_through_the_one_sglang_loader() -> None:
    """The allocators come from ``loader.load_modules`` (its finder, stubs and isolation): the
    stubs' working attributes work, any other stubbed attribute raises when called."""
    if importlib.util.find_spec("sglang") is None:
        pytest.skip("sglang is not installed (make install)")
    before = {k for k in sys.modules if k.split(".")[0] == "sglang"}
    loaded = load_modules("sglang", installed_dir(), ALLOCATOR_MODULES)
    modules, files = loaded.modules, loaded.files
    assert {k for k in sys.modules if k.split(".")[0] == "sglang"} == before
    assert set(ALLOCATOR_MODULES.real) <= set(modules)
    assert "sglang/srt/mem_cache/allocator/paged.py" in files
    utils = modules["sglang.srt.utils"]
    assert utils.is_hip() is False and utils.get_bool_env_var("RADIXBENCH_UNSET_FLAG") is False
    assert not modules["sglang.srt.platforms"].current_platform.capabilities.supports_triton
    with pytest.raises(SGLangStubError):
        utils.get_num_new_pages()
