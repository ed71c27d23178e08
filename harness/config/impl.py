"""The ``impl`` variant axis: which cache implementation a variant runs.

``--impl`` (``compare`` / ``profile``) and ``impls`` (a scenario's or a grid's ``[variants]``)
list implementation specs: ``radixbench`` (the default: radixbench's cache, one variant per
evictor x matcher x flatten, named ``"<evictor>/<matcher>/<flatten>"``), ``sglang`` (the
installed sglang 0.5.23), ``sglang:PATH`` (a checkout's ``python/`` folder) or
``sglang:FILE.py:CLASS`` (a user's ``RadixCache`` subclass over the installed package); an SGLang
spec evicts and matches with SGLang's own code, so it gives one variant per flatten, named
``"<label>/<flatten>"`` (``sglang/chain``, ``sglang@<checkout>/chain``, ``sglang:CLASS/chain``).

This module resolves specs (:func:`resolve_impls`: every SGLang spec is loaded, so a missing
package, a broken path or an unsupported version fails before any work, in one line naming the
spec), expands them into variants (:func:`impl_variants`) and describes what each variant's
cache ran for the report (:func:`implementations`: version, origin, sha256 of its files). The
simulator builds the caches itself (``radixbench.cache.impls.make_cache``, given
``Variant.impl``); nothing here is imported by it.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from radixbench.cache.impls import RADIXBENCH, check_spec
from radixbench.sim.config import Variant

__all__ = [
    "IMPL_HELP",
    "Impl",
    "ImplError",
    "check_policy",
    "impl_arg",
    "impl_variants",
    "implementations",
    "radixbench_info",
    "resolve_impls",
]

IMPL_HELP = (
    "comma list of cache implementations: radixbench (default), sglang (installed sglang "
    "0.5.23), sglang:PATH (a checkout's python/ folder), sglang:FILE.py:CLASS (a RadixCache "
    "subclass); an SGLang impl gives one variant per flatten, named <label>/<flatten>"
)


class ImplError(ValueError):
    """An implementation spec cannot be used; the message is one line naming the spec."""


@dataclass(frozen=True)
class Impl:
    """A resolved implementation: its ``spec`` as given and the ``label`` its variants are
    named by (``radixbench`` for radixbench's cache, whose variants keep their
    ``<evictor>/<matcher>/<flatten>`` names)."""

    spec: str
    label: str

    @property
    def is_radixbench(self) -> bool:
        return self.spec == RADIXBENCH


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def resolve_impls(specs: Sequence[str]) -> tuple[Impl, ...]:
    """Check and load ``specs`` (in order) and label them.

    An SGLang spec is loaded (``sglang_loader.load_sglang``, cached per spec) and takes the
    loader's label; a label already taken by an earlier spec gets ``~2``, ``~3``... appended,
    so two checkouts in folders of the same name stay apart. Raises :class:`ImplError` (one
    line naming the spec) for an empty list, a repeated or unknown spec, or an SGLang spec that
    cannot be loaded (missing package or path, unsupported version, import failure...).
    """
    if not specs:
        raise ImplError("no implementation given")
    out: list[Impl] = []
    taken: set[str] = set()
    for spec in specs:
        if any(i.spec == spec for i in out):
            raise ImplError(f"{spec}: given twice")
        try:
            check_spec(spec)
            if spec == RADIXBENCH:
                label = RADIXBENCH
            else:
                from radixbench.cache.sglang_loader import load_sglang

                label = load_sglang(spec).label
        except ValueError as e:  # SGLangLoadError included: its message names the spec
            raise ImplError(_one_line(e)) from None
        base, k = label, 1
        while label in taken:
            k += 1
            label = f"{base}~{k}"
        taken.add(label)
        out.append(Impl(spec, label))
    return tuple(out)


def impl_arg(text: str) -> list[str]:
    """``argparse`` type of ``--impl``: a comma list of specs, resolved (loaded) now so that a
    bad one is reported as ``argument --impl: <spec>: <reason>``; returns the specs."""
    specs = [x.strip() for x in text.split(",") if x.strip()]
    try:
        resolve_impls(specs)
    except ImplError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return specs


def check_policy(impls: Iterable[Impl], policy: str) -> None:
    """Raise :class:`ImplError` if an SGLang implementation cannot run eviction ``policy``, as
    ``SGLangCache`` would when built: sglang 0.5.23's ``RadixCache`` has no ``tlru`` (a user's
    class may add it and say so with ``keeps_tlru_lengths = True``)."""
    from radixbench.cache.sglang_adapter import SGLANG_POLICIES
    from radixbench.cache.sglang_loader import load_sglang

    for impl in impls:
        if impl.is_radixbench or policy in SGLANG_POLICIES:
            continue
        cls = load_sglang(impl.spec).cache_class
        if policy == "tlru" and getattr(cls, "keeps_tlru_lengths", False):
            continue
        raise ImplError(
            f"{impl.spec}: eviction policy {policy!r} is not supported by "
            f"{cls.__qualname__} (supported: {', '.join(SGLANG_POLICIES)})"
        )


def impl_variants(
    impls: Sequence[Impl], evictors: Sequence[str], matchers: Sequence[str], flatten: Sequence[str]
) -> list[Variant]:
    """The variants of ``impls``, in order: radixbench's evictors x matchers x flatten, an
    SGLang implementation's flatten only (its evictor and matcher are its own). Raises
    ``ValueError`` for an unknown evictor, matcher or flatten."""
    ours = [Variant(e, m, f) for e in evictors for m in matchers for f in flatten]  # validates
    out = []
    for impl in impls:
        if impl.is_radixbench:
            out += ours
        else:
            out += [Variant(flatten=f, impl=impl.spec, impl_label=impl.label) for f in flatten]
    return out


def radixbench_info() -> dict[str, Any]:
    """What radixbench's cache runs (``radixbench.cache.impls.radixbench_info``) as the dict
    of the report's Implementations table: ``spec``, ``version``, ``origin``, ``class``,
    ``files``."""
    from radixbench.cache.impls import radixbench_info as info_of

    info = info_of()
    return {
        "spec": info.spec,
        "version": info.version,
        "origin": info.origin,
        "class": info.cls,
        "files": dict(info.files),
    }


def files_digest(files: dict[str, str]) -> str:
    """sha256 of ``sha256sum``-style lines (``<sha256>  <path>``, sorted by path): one digest
    standing for a set of files."""
    text = "".join(f"{files[p]}  {p}\n" for p in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def _reference(spec: str) -> dict[str, str]:
    from radixbench.cache.registry import resolve

    return dict(resolve(spec).entry.reference)


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
