"""Scenario files: TOML that says what to simulate, validated into a :class:`Scenario`.

Layout (documented in README.md): top-level ``description`` (one line, required) and ``seed``
(int); tables ``[workload]`` (``kind`` plus that kind's parameters, see
:data:`radixbench.workloads.sources.SOURCES`), ``[arrivals]``
(:class:`radixbench.workloads.arrivals.Arrivals`), ``[cache]`` / ``[scheduler]`` (fields of
:class:`radixbench.sim.config.SimConfig`, any field in either table, never both), ``[cost]``
(fields of SimConfig's cost-model dataclass), ``[variants]`` (``evictors``, ``matchers``,
``flatten`` and ``impls`` lists; the run is the product evictors x matchers x flatten for the
``radixbench`` impl and flatten for each SGLang impl, see :mod:`radixbench.harness.config.impl`)
and ``[cluster]`` (fields of :class:`radixbench.cluster.spec.ClusterSpec`, with
``[cluster.router_options.<router>]`` tables: N instances behind each listed router, every
variant once per router with the axes ``router`` and ``instances``; no table: one server).

Tables map onto the dataclasses by field introspection: key = field name, the value's type is
checked against the field's annotation, unknown keys are refused, and the dataclass's own
``__post_init__`` validates values. Every error is a :class:`ScenarioError`, one line
``"<file>: <key.path>: <reason>"``. Overrides (``--set``, ``--trace``) are applied to the
document before validation (:mod:`radixbench.harness.config.overrides`).
"""

from __future__ import annotations

import dataclasses
import pathlib
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from radixbench.cache.registry import check_policy
from radixbench.harness.config.cluster_table import check_cluster, parse_cluster
from radixbench.harness.config.cost_table import with_cost
from radixbench.harness.config.impl import ImplError, impl_variants, resolve_impls
from radixbench.harness.config.overrides import SIM_TABLES, apply_override, apply_trace
from radixbench.harness.config.tomlmap import ScenarioError, build_dataclass, coerce
from radixbench.sim.config import SimConfig, Variant
from radixbench.workloads.arrivals import Arrivals
from radixbench.workloads.sources import SOURCES
from radixbench.workloads.trace import BAD_LINE_POLICIES

__all__ = [
    "DEFAULT_SCENARIO",
    "Scenario",
    "ScenarioError",
    "bundled_scenarios",
    "load_scenario",
    "resolve_scenario",
]

DEFAULT_SCENARIO = "shared-prefix-serving"
"""The bundled scenario ``radixbench compare`` runs when given none."""

_TOP = ("description", "seed", "workload", "arrivals", *SIM_TABLES, "cost", "variants", "cluster")
_DEFAULT_VARIANTS = {
    "evictors": ["heapify", "persistent-heap"],
    "matchers": ["linear", "galloping"],
    "flatten": ["chain"],
    "impls": ["radixbench"],
}
#: ``[variants]`` keys beyond the lists above: ``hicache``, the HiCache write policies (an axis).
_HICACHE_KEY = "hicache"


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. ``workload`` is the parameter dataclass of ``kind``; ``sim``
    carries the seed; ``base_dir`` is the folder relative trace paths start from."""

    name: str
    file: str
    description: str
    seed: int
    kind: str
    workload: Any
    arrivals: Arrivals
    sim: SimConfig
    variants: tuple[Variant, ...]
    on_bad_line: str = "error"
    base_dir: pathlib.Path | None = None
    cluster: Any = None  # radixbench.cluster.spec.ClusterSpec | None
    #: the label of the reference implementation's variant among ``variants`` (``[variants]
    #: reference``: what SGLang serves with, beside radixbench's algorithms), "" without one
    reference: str = ""
    #: why the reference asked for does not run (not installed, cannot load...), "" when it does
    reference_note: str = ""
    #: (key, what set it) for the keys an override set (``("arrivals.start_s", "--start")``):
    #: an error found later, e.g. while loading the trace, names that (:meth:`named`)
    origins: tuple[tuple[str, str], ...] = ()

    def named(self, key: str) -> str:
        """What an error about ``key`` names: the flag that set it, else ``<file>: <key>``."""
        return dict(self.origins).get(key) or f"{self.file}: {key}"


def _table(doc: dict[str, Any], name: str, file: str) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise ScenarioError(file, name, f"must be a table, got {type(value).__name__}")
    return value


def _reference(
    table: dict[str, Any], file: str, policy: str, flatten: str, taken: set[str]
) -> tuple[Variant | None, str]:
    """The reference variant of ``[variants] reference`` (an implementation spec; ``"none"`` or
    absent: no reference) and why it does not run when it cannot load or run ``policy`` (the run
    goes on without it: a reference is information beside the comparison, not part of it)."""
    spec = table.get("reference", "none")
    if not isinstance(spec, str) or not spec.strip():
        raise ScenarioError(file, "variants.reference", "an implementation spec or 'none'")
    if spec == "none":
        return None, ""
    try:
        (impl,) = resolve_impls([spec])
        check_policy(impl.spec, policy)
    except ImplError as exc:
        return None, f"the reference {spec} does not run here: {exc}"
    if impl.takes_algorithms:
        raise ScenarioError(
            file, "variants.reference", f"{spec}: a reference runs its own algorithms"
        )
    if impl.label in taken:  # already compared: it is its own reference
        return None, ""
    return Variant(flatten=flatten, impl=impl.spec, impl_label=impl.label), ""


def _variants(
    table: dict[str, Any], file: str, sim: SimConfig
) -> tuple[tuple[Variant, ...], Variant | None, str]:
    policy = sim.policy
    known = (*_DEFAULT_VARIANTS, _HICACHE_KEY, "reference")
    for key in table:
        if key not in known:
            raise ScenarioError(file, f"variants.{key}", f"unknown key; known: {', '.join(known)}")
    lists = {}
    for key, default in _DEFAULT_VARIANTS.items():
        names = coerce(table.get(key, default), list[str], f"variants.{key}", file)
        if not names:
            raise ScenarioError(file, f"variants.{key}", "must not be empty")
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        # an implementation may be listed twice: the same code timed against itself (A/A),
        # told apart by its label (resolve_impls)
        if twice is not None and key != "impls":
            raise ScenarioError(file, f"variants.{key}", f"{twice!r} is listed twice")
        lists[key] = names
    try:
        impls = resolve_impls(lists["impls"])
        for impl in impls:
            check_policy(impl.spec, policy)
    except ImplError as exc:
        raise ScenarioError(file, "variants.impls", str(exc)) from None
    try:
        out = impl_variants(impls, lists["evictors"], lists["matchers"], lists["flatten"])
    except ValueError as exc:
        bad = next((f"{k}s" for k in ("evictor", "matcher") if k in str(exc)), "flatten")
        raise ScenarioError(file, f"variants.{bad}", str(exc)) from None
    out = _hicache_variants(out, table.get(_HICACHE_KEY), impls, file, sim)
    if len({v.name for v in out}) != len(out):
        raise ScenarioError(file, "variants", "variants repeat")
    if not sim.batch_builder and len({v.flatten for v in out}) > 1:  # nothing to compare
        why = "--no-batch-builder (batch_builder = false) skips the builds these variants differ in"
        raise ScenarioError(file, "variants.flatten", why)
    ref, note = _reference(table, file, policy, lists["flatten"][0], {i.label for i in impls})
    if ref is not None and sim.hicache is not None:
        ref, note = _hicache_reference(ref, out[0], file)
    return tuple(out), ref, note


def _hicache_reference(ref: Variant, first: Variant, file: str) -> tuple[Variant | None, str]:
    """Under HiCache the reference runs with the baseline's HiCache setting (the first variant's
    ``hicache`` value), or not at all when its implementation has no HiCache."""
    from radixbench.cache.registry import resolve

    if not resolve(ref.impl).entry.hicache:
        return None, f"the reference {ref.impl} has no HiCache"
    return dataclasses.replace(ref, extra=(*ref.extra, *first.extra)), ""


def _hicache_variants(
    variants: list[Variant], policies: Any, impls: Any, file: str, sim: SimConfig
) -> list[Variant]:
    """With HiCache on, every variant once per write policy (``[variants] hicache``, default
    the ``[cache.hicache]`` write policy), the policy as its ``hicache`` axis. Raises
    :class:`ScenarioError` for policies without HiCache, an unknown policy, or an
    implementation that has no HiCache."""
    from radixbench.cache.hicache import WRITE_POLICIES
    from radixbench.cache.registry import resolve
    from radixbench.sim.config import HICACHE_AXIS, HICACHE_OFF

    key = f"variants.{_HICACHE_KEY}"
    if sim.hicache is None:
        if policies is not None:
            raise ScenarioError(file, key, "needs HiCache on (--enable-hierarchical-cache)")
        return variants
    names = coerce(policies, list[str], key, file) if policies is not None else None
    names = names or [sim.hicache.write_policy]
    for name in names:
        if name not in WRITE_POLICIES and name != HICACHE_OFF:
            raise ScenarioError(
                file, key,
                f"--hicache-write-policy: unknown policy {name!r}; known: "
                f"{', '.join(WRITE_POLICIES)}, {HICACHE_OFF}",
            )  # fmt: skip
    for impl in impls:
        if not resolve(impl.spec).entry.hicache:
            raise ScenarioError(
                file, "cache.hicache",
                f"--enable-hierarchical-cache: impl {impl.spec!r} has no HiCache (implementations "
                "with it: radixbench, sglang, sglang-python)",
            )  # fmt: skip
    return [
        dataclasses.replace(v, extra=(*v.extra, (HICACHE_AXIS, name)))
        for v in variants
        for name in names
    ]


def parse_scenario(
    doc: dict[str, Any], file: str, name: str = "", base_dir: pathlib.Path | None = None
) -> Scenario:
    """Validate a parsed TOML document (see the module docstring) into a :class:`Scenario`."""
    for key in doc:
        if key not in _TOP:
            raise ScenarioError(file, key, f"unknown key; known: {', '.join(_TOP)}")
    desc = doc.get("description")
    if not isinstance(desc, str) or not desc.strip() or "\n" in desc.strip():
        raise ScenarioError(file, "description", "a one-line string is required")
    seed = coerce(doc.get("seed", 0), int, "seed", file)
    if seed < 0:
        raise ScenarioError(file, "seed", f"must be >= 0, got {seed}")
    work = dict(_table(doc, "workload", file))
    kind = work.pop("kind", None)
    if kind not in SOURCES:
        raise ScenarioError(
            file, "workload.kind", f"must be one of {', '.join(SOURCES)}, got {kind!r}"
        )
    on_bad = work.pop("on_bad_line", "error")
    if on_bad not in BAD_LINE_POLICIES:
        raise ScenarioError(
            file, "workload.on_bad_line", f"must be one of {', '.join(BAD_LINE_POLICIES)}"
        )
    params = build_dataclass(SOURCES[kind], work, "workload", file)
    arrivals = build_dataclass(Arrivals, _table(doc, "arrivals", file), "arrivals", file)
    if kind not in ("mooncake", "azure", "trace") and arrivals.process == "trace":
        raise ScenarioError(
            file,
            "arrivals.process",
            f"a {kind} workload has no timestamps; use poisson, gamma or constant",
        )
    table: dict[str, Any] = {}
    paths: dict[str, str] = {"seed": "seed"}
    for tname in SIM_TABLES:
        for key, value in _table(doc, tname, file).items():
            if key in ("seed", "cost"):
                raise ScenarioError(file, f"{tname}.{key}", f"set it as top-level {key}")
            if key in paths:
                raise ScenarioError(file, f"{tname}.{key}", f"also set in {paths[key]}")
            table[key], paths[key] = value, f"{tname}.{key}"
    sim = build_dataclass(SimConfig, {**table, "seed": seed}, "", file, paths=paths)
    if "cost" in doc:
        sim = with_cost(sim, dict(_table(doc, "cost", file)), file)
    variants, ref, note = _variants(_table(doc, "variants", file), file, sim)
    cluster = None
    if "cluster" in doc:
        from radixbench.cluster.spec import router_variants

        cluster = parse_cluster(_table(doc, "cluster", file), file)
        variants = router_variants(variants, cluster)
        if ref is not None:  # a cluster compares routers; the reference's ops are a server's
            note, ref = f"the reference {ref.impl_label} runs on one server, not in a cluster", None
    elif ref is not None:
        variants = (*variants, ref)
    return Scenario(
        name,
        file,
        desc.strip(),
        seed,
        kind,
        params,
        arrivals,
        sim,
        variants,
        on_bad,
        base_dir,
        cluster,
        ref.impl_label if ref is not None else "",
        note,
    )


def bundled_scenarios() -> dict[str, pathlib.Path]:
    """Bundled scenario name -> path (``radixbench.workloads.scenarios/*.toml``), sorted."""
    from radixbench.workloads import scenarios

    root = resources.files(scenarios)
    return {
        p.name[: -len(".toml")]: pathlib.Path(str(p))
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.endswith(".toml")
    }


def resolve_scenario(ref: str) -> pathlib.Path:
    """A scenario path from a file path or a bundled name; ``ScenarioError`` if neither."""
    bundled = bundled_scenarios()
    if ref in bundled:
        return bundled[ref]
    path = pathlib.Path(ref).expanduser()
    if path.suffix == ".toml" or path.exists():
        return path
    raise ScenarioError(
        ref, None, f"no such scenario file or bundled scenario; bundled: {', '.join(bundled)}"
    )


def load_scenario(
    ref: str | pathlib.Path,
    overrides: dict[str, Any] | None = None,
    trace: pathlib.Path | None = None,
    origins: dict[str, str] | None = None,
) -> Scenario:
    """Read and validate a scenario (file path or bundled name).

    ``overrides``: dotted key -> value applied to the TOML document before validation
    (``None`` deletes the key), e.g. ``{"arrivals.max_requests": 50}``; ``sim.<field>`` or a
    bare ``SimConfig`` field name (``page_size``) goes to whichever of ``[cache]`` /
    ``[scheduler]`` already sets it (else ``[cache]``). ``trace``: a trace file (absolute
    path) replacing the workload, applied before ``overrides``
    (:func:`~radixbench.harness.config.overrides.apply_trace`). Raises
    :class:`ScenarioError` (one line naming the file and key path; for a key set by an
    override with an entry in ``origins`` — override key -> what set it, e.g.
    ``{"variants.evictors": "--evictors"}`` — that origin instead of the file), or
    :class:`~radixbench.workloads.trace.TraceError` when ``trace`` cannot be read.
    """
    path = resolve_scenario(str(ref))
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(file, None, f"cannot read scenario: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(file, None, f"not UTF-8 text: {exc.reason}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(file, None, f"invalid TOML: {exc}") from None
    if trace is not None:
        apply_trace(doc, trace)
    blame: dict[str, str] = {}
    for key, value in (overrides or {}).items():
        resolved = apply_override(doc, key, value, file)
        if origins and key in origins:
            blame[resolved] = origins[key]
    name = path.name[: -len(".toml")] if path.name.endswith(".toml") else path.name
    try:
        scenario = parse_scenario(doc, file, name, path.parent.resolve())
    except ScenarioError as exc:
        origin = _origin(exc.key, blame)
        if origin is None:
            raise
        raise ScenarioError(origin, exc.key, exc.reason) from None
    check_cluster(scenario, blame)
    return dataclasses.replace(scenario, origins=tuple(blame.items()))


def _origin(key: str | None, blame: dict[str, str]) -> str | None:
    """What set the key an error names (``blame``: overridden key path -> its flag), or None
    when the scenario file did: an override of ``key`` or of a key under it (``variants.evictors``
    for an error on ``variants.evictors[1]``), else an override that created ``key`` on its way
    to a deeper key (``--set nosuch.key=1`` for the unknown top-level key ``nosuch``)."""
    if not key:
        return None
    for k, origin in blame.items():
        if (key + ".").startswith(k + ".") or (key + "[").startswith(k + "["):
            return origin
    return next((o for k, o in blame.items() if k.startswith(key + ".")), None)
