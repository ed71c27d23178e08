"""The run record: what a saved run was made with, typed and schema-versioned (``config.json``).

One module writes and reads it: :class:`RunMeta` (frozen), :func:`write_meta` (atomic) and
:func:`read_meta` / :func:`read_run` (a run folder's tables and record). Every command that
saves a run folder (``compare``, its sweep cells and study points, ``replay``) writes one, and
``plot``, ``sweep``, ``study``, ``diff`` and the notebooks read it, so what a run was made
with — its variants and their axes, the baseline it was compared against, the scheduler
settings the load check needs — comes back exactly, never guessed.

Schema versions: 2 (this one) adds ``schema``, ``command``, ``variants`` (one axis record per
variant), ``baseline`` and the scheduler settings as fields. A ``config.json`` without
``schema`` (version 1, written before) is migrated on read: its fields are taken from where
version 1 kept them (``spec.scenario.sim``, ``spec.scenario.variants``, ``spec.baseline``);
keys a record does not know go to ``extra``. A newer version than this module knows is an
error (one line naming the file).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from radixbench.reports._atomic import atomic_paths

__all__ = ["SCHEMA", "RecordError", "RunMeta", "read_meta", "read_run", "write_meta"]

#: The schema version this module writes.
SCHEMA = 2
#: The run tables a run folder may hold (Parquet), in the order :func:`read_run` reads them.
RUN_TABLES = ("requests", "ops", "timeseries", "metrics")


class RecordError(ValueError):
    """A run folder or its ``config.json`` cannot be read; one line naming the file."""


@dataclass(frozen=True)
class RunMeta:
    """A saved run's record. Sizes in tokens, times in s.

    ``command``: what wrote it (``compare``, ``replay``). ``scenario``: ``"<name>:
    <description>"``. ``variants``: one record per variant in the order run — ``name`` plus
    its axes (``impl``, ``evictor``, ``matcher``, ``flatten``, further axes; ``None`` where
    the implementation runs its own algorithm). ``baseline``: axis -> value the verdicts
    compare against as the user named it (``--baseline``; ``None``: the defaults);
    ``reference`` / ``reference_note``: the label of the reference implementation's variant
    (what SGLang serves with, run beside the variants) and why an asked-for reference did not
    run; ``expect_divergence``: the user expects the variants' prefix hits to differ (a policy
    patch, ``--expect-divergence``): the report states the behaviour change, exit status 0.
    ``implementations``: the Implementations table's entries (label, spec, version, origin,
    class, files, reference...). ``hit_rate_ceiling`` / ``hit_rate_belady``: the bounds the
    report shows. ``spec``: the whole configuration as JSON (the config hash is over it).
    ``cost_model`` / ``cost_source``: the step-time model's name, and its kind, data source, data
    version and system (``radixbench.sim.cost.cost_info``). ``command_line``: the words that
    reproduce the run (``radixbench compare ...``).
    ``batch_builder``: whether every step built its ``ScheduleBatch`` (timed; ``False``:
    ``--no-batch-builder``, rows written only; ``None``: no scheduler ran, or not recorded).
    ``extra``: further keys (a study point's, a sweep cell's), shown as run rows."""

    command: str = "compare"
    scenario: str = "run"
    requests: int | None = None
    seed: int | None = None
    device: str | None = None
    clock: str = "isolated"
    sched_policy: str | None = None
    kv_capacity_tokens: int | None = None
    page_size: int | None = None
    max_running: int | None = None
    max_prefill_tokens: int | None = None
    chunked_prefill_size: int | None = None
    cost_model: str | None = None
    batch_builder: bool | None = None
    cost_source: dict[str, Any] | None = None
    baseline: dict[str, str] | None = None
    reference: str = ""
    reference_note: str = ""
    expect_divergence: bool = False
    variants: list[dict[str, Any]] = field(default_factory=list)
    implementations: list[dict[str, Any]] = field(default_factory=list)
    hit_rate_ceiling: dict[str, Any] | None = None
    hit_rate_belady: dict[str, Any] | None = None
    skipped_lines: int = 0
    skipped_line_errors: list[str] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    sim_end_s: dict[str, float] = field(default_factory=dict)
    torch_threads: int | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] | None = None
    command_line: list[str] = field(default_factory=list)
    wall_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA

    # ---------------------------------------------------------------- conversion
    def to_json(self) -> dict[str, Any]:
        """The record as JSON-able data (``extra``'s keys at the top level, as version 1)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        extra = out.pop("extra")
        return {**out, **{k: v for k, v in extra.items() if k not in out}}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], file: str = "config.json") -> RunMeta:
        """A record from ``config.json``'s object: version 2 as written, version 1 (no
        ``schema``) migrated (see the module docstring). Raises :class:`RecordError` for a
        newer schema or a field of the wrong shape."""
        schema = doc.get("schema", 1)
        if not isinstance(schema, int) or schema > SCHEMA:
            raise RecordError(
                f"{file}: schema {schema!r} is newer than this radixbench reads ({SCHEMA})"
            )
        known = {f.name for f in dataclasses.fields(cls)} - {"extra", "schema"}
        data = {k: v for k, v in doc.items() if k in known}
        extra = {k: v for k, v in doc.items() if k not in known and k not in ("schema",)}
        extra.pop("clock_mode", None)  # version 1's older name of ``clock``
        if schema == 1:
            data.update(_from_v1(doc))
        if isinstance(doc.get("extra"), Mapping):  # as ``to_json`` never writes it: merged
            extra = {**{k: v for k, v in extra.items() if k != "extra"}, **doc["extra"]}
        data["extra"] = extra
        try:
            return cls(**data)
        except TypeError as e:
            raise RecordError(f"{file}: {e}") from None

    @classmethod
    def coerce(cls, meta: RunMeta | Mapping[str, Any] | None) -> RunMeta:
        """``meta`` as a record: a record as it is, a mapping through :meth:`from_json`,
        ``None`` as an empty record."""
        if isinstance(meta, RunMeta):
            return meta
        return cls.from_json(meta or {})

    def replace(self, **changes: Any) -> RunMeta:
        """A copy with ``changes`` (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def axis_frame(self) -> pd.DataFrame:
        """One row per variant: ``variant`` then its axis columns (what old runs' tables
        lack; :func:`read_run` merges it in)."""
        rows = [{"variant": v["name"], **{k: x for k, x in v.items() if k != "name"}}
                for v in self.variants]  # fmt: skip
        return pd.DataFrame(rows)


def _from_v1(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The version-2 fields of a version-1 ``config.json``: scheduler settings from
    ``spec.scenario.sim``, variant records from ``spec.scenario.variants`` (the dataclass
    fields: an SGLang impl had no evictor / matcher of its own), baseline from
    ``spec.baseline``, ``clock`` from ``clock_mode`` when ``clock`` is absent."""
    out: dict[str, Any] = {}

    def table(parent: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = parent.get(key)
        return value if isinstance(value, Mapping) else {}

    spec = table(doc, "spec")
    scenario = table(spec, "scenario")
    sim = table(scenario, "sim")
    for key in ("max_running", "max_prefill_tokens", "chunked_prefill_size"):
        if key in sim:
            out[key] = sim[key]
    if "clock" not in doc and "clock_mode" in doc:
        out["clock"] = doc["clock_mode"]
    if isinstance(spec.get("baseline"), Mapping):
        out["baseline"] = dict(spec["baseline"])
    variants = []
    for v in scenario.get("variants") or ():
        if not isinstance(v, Mapping):
            continue
        impl = v.get("impl", "radixbench")
        ours = impl == "radixbench"
        label = v.get("impl_label") or impl
        flatten = v.get("flatten")
        name = f"{v.get('evictor')}/{v.get('matcher')}/{flatten}" if ours else f"{label}/{flatten}"
        variants.append(
            {
                "name": name,
                "impl": label,
                "evictor": v.get("evictor") if ours else None,
                "matcher": v.get("matcher") if ours else None,
                "flatten": flatten,
            }
        )
    if variants:
        out["variants"] = variants
    return out


def write_meta(run_dir: Path, meta: RunMeta) -> Path:
    """Write ``meta`` to ``run_dir/config.json`` atomically; returns the path."""
    path = Path(run_dir) / "config.json"
    with atomic_paths(path) as (tmp,):
        tmp.write_text(json.dumps(meta.to_json(), indent=2, default=str), encoding="utf-8")
    return path


def read_meta(run_dir: Path) -> RunMeta:
    """The record of ``run_dir`` (an empty record when it has no ``config.json``). Raises
    :class:`RecordError` naming the file (and line) on invalid JSON or schema."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return RunMeta()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: unreadable ({type(e).__name__})") from None
    if not isinstance(doc, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return RunMeta.from_json(doc, str(path))


def read_run(run_dir: Path) -> tuple[dict[str, pd.DataFrame | None], RunMeta]:
    """A run folder's tables (``requests`` and ``ops`` required; ``timeseries`` /
    ``metrics`` ``None`` when absent) and record. Tables of a version-1 run, written before
    variants had axis columns, get them from the record (``RunMeta.axis_frame``). Raises
    :class:`RecordError` naming the folder or file when it is not a readable run folder."""
    from radixbench.reports.tables import read_table

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "a file" if run_dir.exists() else "no such directory"
        raise RecordError(
            f"{run_dir}: not a run folder ({what}; give one written by compare, e.g. runs/<ts>)"
        )
    for stem in ("requests", "ops"):
        if not (run_dir / f"{stem}.parquet").is_file():
            raise RecordError(f"{run_dir}: not a run folder (missing {stem}.parquet)")
    meta = read_meta(run_dir)
    axes = meta.axis_frame()
    tables: dict[str, pd.DataFrame | None] = {}
    for stem in RUN_TABLES:
        path = run_dir / f"{stem}.parquet"
        if not path.is_file():
            tables[stem] = None
            continue
        try:
            df = read_table(run_dir, stem)
        except Exception as e:  # pyarrow raises several types on a corrupt file
            raise RecordError(f"{path}: unreadable Parquet ({type(e).__name__})") from None
        if "impl" not in df.columns and len(axes) and "variant" in df.columns:
            df = _with_axes(df, axes)
        tables[stem] = df
    return tables, meta


def _with_axes(df: pd.DataFrame, axes: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``axes``' columns (by ``variant``) inserted after its ``variant``."""
    at = list(df.columns).index("variant") + 1
    by_name = axes.set_index("variant")
    out = df.copy()
    for i, col in enumerate(c for c in by_name.columns if c not in df.columns):
        values = out["variant"].map(by_name[col].to_dict())
        out.insert(at + i, col, values.astype("string"))
    return out
