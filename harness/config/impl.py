"""The ``impl`` variant axis: which cache implementation a variant runs.

``--impl`` (``compare`` / ``profile``) and ``impls`` (a scenario's or a grid's ``[variants]``)
list implementation specs, each a name registered in :mod:`radixbench.cache.registry`
(``radixbench``, ``sglang``, ``sglang-python``, ``sglang-legacy``, a plug-in) optionally with
an argument (``sglang:PATH``, ``sglang:FILE.py:CLASS``). An implementation that takes the
``evictor`` and ``matcher`` axes (radixbench's cache) gives one variant per evictor x matcher x
flatten, named ``"<evictor>/<matcher>/<flatten>"``; one that evicts and matches with its own
code (SGLang's caches) one variant per flatten, named ``"<label>/<flatten>"``.

This module resolves specs (:func:`resolve_impls`: every spec is loaded once, through the
registry, so a missing package, a broken path or an unsupported version fails before any work,
in one line naming the spec), expands them into variants (:func:`impl_variants`) and describes
what each variant's cache ran for the report (:func:`implementations`: version, origin, tree
core, sha256 of its files, the algorithms its own code runs). The simulator builds the caches
itself (``radixbench.cache.registry.make_cache``, given ``Variant.impl``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from radixbench.cache import registry
from radixbench.cache.registry import ImplError
from radixbench.sim.config import Variant

__all__ = [
    "Impl",
    "ImplError",
    "impl_help",
    "impl_variants",
    "implementations",
    "resolve_impls",
]


def impl_help() -> str:
    """``--impl``'s help: the registered implementations, one clause each."""
    parts = [f"{name} ({e.help})" if e.help else name for name, e in registry.entries().items()]
    return (
        "comma list of cache implementations: " + "; ".join(parts) + ". An implementation "
        "with its own evictor and matcher gives one variant per flatten, named <label>/<flatten>. "
        "A relative PATH or FILE.py is read from the current folder"
    )


@dataclass(frozen=True)
class Impl:
    """A resolved implementation: its ``spec`` as given, the ``label`` its variants are named
    by (``~2``, ``~3``... appended when an earlier spec has the same label) and ``axes``: the
    variant axes it takes (``evictor`` / ``matcher`` for radixbench's cache)."""

    spec: str
    label: str
    axes: frozenset[str] = field(default_factory=frozenset)

    @property
    def takes_algorithms(self) -> bool:
        """Whether its variants run the evictor and matcher they are given."""
        return {"evictor", "matcher"} <= self.axes


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def resolve_impls(specs: Sequence[str]) -> tuple[Impl, ...]:
    """Check, load (``registry.resolve``, cached per spec) and label ``specs`` in order.

    A spec may repeat when its implementation runs its own algorithms (``--impl
    sglang,sglang``: an A/A pair, the second labelled ``sglang~2``); one that takes evictor and
    matcher may not (its variants would be the same). Raises :class:`ImplError` (one line
    naming the spec) for an empty list, such a repeat, an unknown spec or one that cannot be
    loaded (missing package or path, unsupported version, import failure...)."""
    if not specs:
        raise ImplError("no implementation given")
    out: list[Impl] = []
    taken: set[str] = set()
    for spec in specs:
        try:
            r = registry.resolve(spec)
        except ValueError as e:  # registry.ImplError: its message names the spec
            raise ImplError(_one_line(e)) from None
        impl = Impl(spec, r.label, r.entry.axes)
        if impl.takes_algorithms and any(i.spec == spec for i in out):
            raise ImplError(f"{spec}: given twice (its variants would repeat)")
        label, base, k = impl.label, impl.label, 1
        while label in taken:
            k += 1
            label = f"{base}~{k}"
        taken.add(label)
        out.append(Impl(spec, label, impl.axes))
    return tuple(out)


def impl_variants(
    impls: Sequence[Impl], evictors: Sequence[str], matchers: Sequence[str], flatten: Sequence[str]
) -> list[Variant]:
    """The variants of ``impls``, in order: evictors x matchers x flatten for an
    implementation that takes evictor and matcher (radixbench's cache), flatten only for one
    that runs its own (SGLang's). Raises ``ValueError`` for an unknown evictor, matcher or
    flatten."""
    [Variant(e, m, f) for e in evictors for m in matchers for f in flatten]  # validates
    out = []
    for impl in impls:
        if impl.takes_algorithms:
            out += [
                Variant(e, m, f, impl=impl.spec, impl_label=impl.label)
                for e in evictors
                for m in matchers
                for f in flatten
            ]
        else:
            out += [Variant(flatten=f, impl=impl.spec, impl_label=impl.label) for f in flatten]
    return out


def files_digest(files: dict[str, str]) -> str:
    """sha256 of ``sha256sum``-style lines (``<sha256>  <path>``, sorted by path): one digest
    standing for a set of files."""
    text = "".join(f"{files[p]}  {p}\n" for p in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def _reference(spec: str) -> dict[str, str]:
    return dict(registry.resolve(spec).entry.reference)


def implementations(variants: Sequence[Variant], caches: Sequence[Any]) -> list[dict[str, Any]]:
    """One entry per implementation run (first appearance order), for ``config.json`` and the
    report's Implementations table: ``impl`` (the label), ``spec``, ``version``, ``origin``
    (folder it was loaded from), ``class``, ``files`` (sha256 by path), ``files_sha256``
    (:func:`files_digest`) and ``variants`` (names). ``caches[i]`` is the cache ``variants[i]``
    ran; it describes itself (``PrefixCache.info()``)."""
    out: dict[str, dict[str, Any]] = {}
    for variant, cache in zip(variants, caches, strict=True):
        label = variant.impl_label
        if label not in out:
            info = cache.info()
            entry = {
                "impl": label,
                "spec": info.spec,
                "version": info.version,
                "origin": info.origin,
                "class": info.cls,
                "files": dict(info.files),
            }
            if info.tree_core:
                entry["tree_core"] = info.tree_core
                entry["tree_core_reason"] = info.tree_core_reason
            reference = _reference(variant.impl)
            if reference:  # the radixbench axis values its own code runs (like-for-like)
                entry["reference"] = reference
            entry["files_sha256"] = files_digest(info.files)
            out[label] = {**entry, "variants": []}
        out[label]["variants"].append(variant.name)
    return list(out.values())
