"""Which AIC data a ``--cost-model aic[...]`` value or a preset's ``[aic]`` table names.

Forms (``radixbench.sim.cost.load_cost_model``)::

    aic                                   the default preset's deployment (llama-3.1-8b-h100)
    aic:PRESET                            a bundled preset's deployment (its [aic] table)
    aic:MODEL@[TPx]SYSTEM[/FRAMEWORK[-VERSION]]
        MODEL: a Hugging Face id whose config aiconfigurator-core bundles
               (meta-llama/Meta-Llama-3.1-8B, Qwen/Qwen3-32B, ...) or a preset's model name
               (Llama-3.1-8B); SYSTEM: an AIC system (h100_sxm, h200_sxm, a100_sxm, ...);
        TP: GPUs (default: a preset's of that model and system, else 1);
        FRAMEWORK: sglang (default), vllm or trtllm; VERSION: one AIC exposes for the system
        (default for sglang: the one nearest the reference, sglang 0.5.23; else AIC's current).

A preset's ``[aic]`` table holds ``model``, ``system`` and optionally ``framework``,
``version``, ``step_overhead_s``. The memory side of an AIC model (KV bytes per token,
weights, HBM, host link, TP) is the matching preset's roofline, else one derived from AIC's
model config and system file (:func:`_derived_roofline`: dense decoders only).

Every refusal is a one-line ``ValueError`` (the CLI prefixes the flag and exits 2): a model or
system AIC has no data for, a version it does not expose, aiconfigurator-core missing. Nothing
here downloads: a model outside AIC's bundled configs is refused before AIC would try.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from radixbench.sim import cost_aic
from radixbench.sim.cost import RooflineCostModel, preset_names, read_preset, roofline_from_doc
from radixbench.sim.cost_aic import AIC_DIST, AIC_PIN, AicCostModel, engine

__all__ = ["REFERENCE_SGLANG", "aic_from_table", "data_versions", "load_aic", "resolved"]

#: The SGLang version radixbench's reference is; AIC's sglang data nearest it is the default.
REFERENCE_SGLANG = "0.5.23"
#: The op families of a dense decoder's step, whose data versions the report names.
_FAMILIES = ("gemm", "attention", "comm")
_SPEC = re.compile(r"^(?P<model>[^@]+)@(?:(?P<tp>\d+)x)?(?P<system>[a-z0-9_]+)"
                   r"(?:/(?P<fw>[a-z]+)(?:-(?P<ver>.+))?)?$")  # fmt: skip


def _systems_dir() -> Path:
    if cost_aic.aic_version() is None:
        raise ValueError(f"{AIC_DIST} is not installed (pip install {AIC_DIST}=={AIC_PIN})")
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent / "systems"


def _config_path(model: str) -> Path:
    return _systems_dir().parent / "model_configs" / f"{model.replace('/', '--')}_config.json"


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def resolve_version(system: str, framework: str, version: str | None) -> str:
    """The literal data version of ``framework`` on ``system``: ``version`` if AIC exposes it
    (an alias ``current`` / ``previous`` / ``next`` resolved), else, for ``None``, the exposed
    sglang version nearest :data:`REFERENCE_SGLANG` (other frameworks: AIC's current)."""
    root = _systems_dir()  # refuses first when aiconfigurator-core is missing
    from aiconfigurator_core.sdk.perf_database import get_version_slots

    systems = sorted(p.stem for p in root.glob("*.yaml") if (p.parent / "data" / p.stem).is_dir())
    if system not in systems:
        raise ValueError(f"AIC has no system {system!r}; known: {', '.join(systems)}")
    slots = get_version_slots(system, framework)
    if not slots:
        raise ValueError(f"AIC has no {framework} data for {system}")
    if version is None:
        if framework != "sglang":
            return slots["current"]
        ref = _vkey(REFERENCE_SGLANG)
        return min(slots.values(), key=lambda v: (abs(_num(_vkey(v)) - _num(ref)), v))
    if version in slots:
        return slots[version]
    if version not in slots.values():
        shown = ", ".join(f"{k} {v}" for k, v in slots.items())
        raise ValueError(f"AIC has no {framework} {version} data for {system}; it has {shown}")
    return version


def resolved(system: str, framework: str, version: str | None) -> tuple[str, str]:
    """``(resolve_version(...), data_versions(...))`` of a request, kept in the on-disk cache
    (:mod:`radixbench.sim.cost_aic_cache`): resolving reads every AIC system's YAML file (half
    a second of CPU). Raises what :func:`resolve_version` raises (refusals are not cached)."""
    from radixbench.sim import cost_aic_cache

    request = {"system": system, "framework": framework, "requested": version,
               "reference": REFERENCE_SGLANG, "families": list(_FAMILIES)}  # fmt: skip
    hit = cost_aic_cache.load("resolve", request)
    if isinstance(hit, list) and len(hit) == 2 and all(isinstance(v, str) for v in hit):
        return hit[0], hit[1]
    literal = resolve_version(system, framework, version)
    by_op = data_versions(system, framework, literal)
    cost_aic_cache.store("resolve", request, [literal, by_op])
    return literal, by_op


def _num(key: tuple[int, ...]) -> float:
    """A version as one number (major, minor, patch weighted), for "nearest"."""
    return sum(x / 1000.0**i for i, x in enumerate(key[:4]))


def data_versions(system: str, framework: str, version: str) -> str:
    """The version whose measurements serve each op family of a dense step (``gemm 0.5.14,
    attention 0.5.14, comm 0.5.14``): the newest data folder at or below ``version`` (AIC
    fills an op it did not re-collect from older data of the same framework)."""
    out = []
    for fam in _FAMILIES:
        root = _systems_dir() / "data" / system / fam / framework
        have = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        older = [v for v in have if _vkey(v) <= _vkey(version)]
        out.append(f"{fam} {max(older, key=_vkey) if older else 'n/a'}")
    return ", ".join(out)


def _preset_aic() -> dict[str, tuple[dict[str, Any], RooflineCostModel]]:
    """Bundled presets with an ``[aic]`` table: name -> (table, roofline)."""
    out = {}
    for name in preset_names():
        doc, where = read_preset(name)
        if isinstance(doc.get("aic"), dict):
            out[name] = (doc["aic"], roofline_from_doc(doc, where))
    return out


def load_aic(spec: str) -> AicCostModel:
    """The AIC cost model ``spec`` names (forms in the module docstring)."""
    rest = spec.removeprefix("aic").removeprefix(":")
    presets = _preset_aic()
    if not rest or "@" not in rest:
        from radixbench.sim.config import DEFAULT_COST_MODEL

        name = rest or DEFAULT_COST_MODEL
        if name not in presets:
            known = ", ".join(presets)
            raise ValueError(f"{spec}: no AIC data named for preset {name!r}; AIC presets: "
                             f"{known}; or aic:MODEL@SYSTEM/FRAMEWORK-VERSION")  # fmt: skip
        table, roof = presets[name]
        return aic_from_table(table, roof, f"presets/{name}.toml")
    m = _SPEC.match(rest)
    if m is None:
        raise ValueError(f"{spec}: expected aic:MODEL@[TPx]SYSTEM[/FRAMEWORK[-VERSION]]")
    model, system = str(m["model"]), str(m["system"])
    by_name = {t["model"].lower(): t["model"] for t, _ in presets.values()}
    by_name |= {r.name.partition("@")[0].lower(): t["model"] for t, r in presets.values()}
    model = by_name.get(model.lower(), model)
    if not _config_path(model).is_file():
        raise ValueError(f"{spec}: AIC has no model config for {model!r} (it bundles "
                         f"{len(list(_config_path('x').parent.glob('*_config.json')))} "
                         "models, e.g. meta-llama/Meta-Llama-3.1-8B, Qwen/Qwen3-32B)")  # fmt: skip
    framework = m["fw"] or "sglang"
    try:
        resolved(system, framework, m["ver"])  # the system and version, before memory
    except ValueError as e:
        raise ValueError(f"{spec}: {e}") from None
    same = [r for t, r in presets.values() if t["model"] == model and t["system"] == system]
    tp = int(m["tp"]) if m["tp"] else (same[0].tp if same else 1)
    if tp < 1:
        raise ValueError(f"{spec}: TP must be >= 1")
    roof = same[0] if same else _derived_roofline(model, system, tp)
    if roof.tp != tp:
        roof = dataclasses.replace(roof, tp=tp, name=roof.name.rpartition("x")[0] + f"x{tp}")
    table = {"model": model, "system": system, "framework": framework}
    if m["ver"]:
        table["version"] = m["ver"]
    return aic_from_table(table, roof, spec)


def aic_from_table(table: Any, roof: RooflineCostModel, where: str) -> AicCostModel:
    """The AIC model of an ``[aic]`` table over the deployment ``roof``; compiles the engine
    (so a bad model or system fails here, one line naming ``where``)."""
    if not isinstance(table, dict) or not {"model", "system"} <= table.keys():
        raise ValueError(f"{where}: [aic] needs model and system")
    unknown = set(table) - {"model", "system", "framework", "version", "step_overhead_s"}
    if unknown:
        raise ValueError(f"{where}: [aic] unknown key {sorted(unknown)[0]}")
    model, system = str(table["model"]), str(table["system"])
    framework = str(table.get("framework", "sglang"))
    try:
        asked = table.get("version")
        version, by_op = resolved(system, framework, None if asked is None else str(asked))
        engine(model, system, framework, version, roof.tp)
        cost = AicCostModel(
            name=f"{roof.name} (AIC {framework} {version}, {system})",
            model=model,
            system=system,
            framework=framework,
            version=version,
            roofline=roof,
            step_overhead_s=float(table.get("step_overhead_s", 0.0)),
            data_versions=by_op,
        )
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: {e}") from None
    return cost


def _derived_roofline(model: str, system: str, tp: int) -> RooflineCostModel:
    """A roofline (used for memory only) from AIC's model config and system file: parameters
    counted from the config (embeddings, attention, gated MLP, norms negligible), peaks from
    the system. Refuses models whose KV layout is not a dense decoder's (MoE, MLA)."""
    import yaml

    cfg = json.loads(_config_path(model).read_text())
    cfg = cfg.get("text_config", cfg)
    if any(k in cfg for k in ("num_experts", "n_routed_experts", "num_local_experts",
                              "kv_lora_rank")):  # fmt: skip
        raise ValueError(f"{model}: radixbench derives the memory of dense decoders only; "
                         "write a preset TOML with an [aic] table for it")  # fmt: skip
    h, layers, heads = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    kv, hd = cfg.get("num_key_value_heads", heads), cfg.get("head_dim") or h // heads
    vocab, inter = cfg["vocab_size"], cfg["intermediate_size"]
    emb = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
    params = emb + layers * (2 * h * heads * hd + 2 * h * kv * hd + 3 * h * inter)
    gpu = yaml.safe_load((_systems_dir() / f"{system}.yaml").read_text())
    g, node = gpu["gpu"], gpu.get("node", {})
    return RooflineCostModel(
        name=f"{model.rpartition('/')[2]}@{system}x{tp}",
        params=float(params),
        layers=int(layers),
        heads=int(heads),
        kv_heads=int(kv),
        head_dim=int(hd),
        dtype_bytes=2,
        tp=tp,
        peak_flops=float(g["bfloat16_tc_flops"]),
        mem_bw_bytes_s=float(g["mem_bw"]),
        mem_gb=float(g["mem_capacity"]) / 1e9,
        compute_eff=0.5,
        bw_eff=0.7,
        step_overhead_s=1e-3,
        host_link_bytes_s=float(node.get("pcie_bw", 25e9)),
        source=f"derived from {AIC_DIST}'s {model} config and {system} system file",
    )
