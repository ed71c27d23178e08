"""radixbench.cache.registry.ImplSpec: an implementation spec parsed once (issue 32 item 3)."""

from __future__ import annotations

import pytest

from radixbench.cache.registry import ImplError, ImplSpec, check_spec, default_label


@pytest.mark.parametrize(
    ("text", "name", "arg", "path", "user_class"),
    [
        ("radixbench", "radixbench", None, None, None),
        ("sglang:", "sglang", "", None, None),
        ("sglang:/src/sglang/python", "sglang", "/src/sglang/python", "/src/sglang/python", None),
        ("sglang:patch.py:MyCache", "sglang", "patch.py:MyCache", None, ("patch.py", "MyCache")),
        ("sglang-legacy:p.py", "sglang-legacy", "p.py", None, ("p.py", "")),
    ],
)
def test_parse(text, name, arg, path, user_class) -> None:
    spec = ImplSpec.parse(text)
    assert (spec.text, spec.name, spec.arg) == (text, name, arg)
    assert spec.path == path and spec.user_class == user_class


def test_labels_and_checks_read_the_parsed_spec() -> None:
    assert default_label("sglang:patch.py:MyCache") == "sglang:MyCache"
    assert default_label("sglang:/src/sglang/python") == "sglang@sglang"
    with pytest.raises(ImplError, match="unknown impl 'radixbench:x'"):
        check_spec("radixbench:x")
    with pytest.raises(ImplError, match="unknown impl 'sglang:'"):
        check_spec("sglang:")
