"""A persistent on-disk cache of what an AIC cost model costs every process to build: the data
version a request resolves to, the compiled engine spec and the step times already asked.

Building ``--cost-model aic`` (the bundled H100/H200 presets' default) cost about 1.2 s of CPU
in every process, before a step was timed: aiconfigurator-core 0.12.0 parses 27 system YAML
files to resolve a version (``perf_database.get_version_slots``: ``_derive_fleet_next`` reads
every system), compiles the engine (``sdk.engine.compile_engine``: builds the model, loads the
Python perf database, walks its ops into ``EngineSpec`` bytes), then its Rust engine loads and
indexes its kernel tables on the first step asked. None of it depends on anything but the
installed aiconfigurator-core and the request, so it is kept here, one JSON file each:

- ``resolve``: ``(system, framework, requested version)`` -> the literal version and the data
  version serving each op family (``sim.cost_aic_spec.resolve_version`` / ``data_versions``);
- ``engine``: ``(model, system, framework, literal version, tp)`` -> the ``EngineSpec`` bytes
  ``compile_engine`` returned (``EngineHandle(bytes)`` builds the Rust engine from them, as
  ``EngineHandle.compile`` does);
- ``memo``: the same engine key with the memo's grid and formulas -> every rounded shape's step
  time asked so far (``cost_aic._Engine``'s tables, ms as AIC returned them), merged in at the
  end of each process that asked new shapes. A run whose shapes are all there never builds
  the Rust engine (``_Engine.handle`` is built on the first shape the tables miss).

Where: ``$RADIXBENCH_CACHE_DIR`` (``off`` disables the cache), else
``$XDG_CACHE_HOME/radixbench``, else ``~/.cache/radixbench``; files under ``aic/``.

Never trusted blindly: an entry's key holds the installed aiconfigurator-core (version, install
folder, size and mtime of its ``systems/query_versions.yaml``: a reinstall or upgrade changes
them), radixbench's rules (:data:`FORMAT`, and per kind the reference version, op families,
grid bits, formula version) and the request; the file stores the whole key beside the value
and a SHA-256 of the value. A file that does not parse, whose key differs (a stale entry,
another install) or whose digest does not match (a corrupt entry) is a miss: the value is
rebuilt and the file rewritten; an engine spec the library rejects is recompiled. Writes are
atomic (a temporary file in the same folder, then ``os.replace``); a folder that cannot be
written costs the rebuild, never the run.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radixbench.sim import cost_aic

if TYPE_CHECKING:
    from radixbench.sim.cost_aic import _Engine

__all__ = ["ENV", "FORMAT", "cache_dir", "decode", "encode", "fingerprint", "load", "store"]

#: The environment variable naming the cache folder (``off``: no cache).
ENV = "RADIXBENCH_CACHE_DIR"
#: Bumped whenever what an entry means changes (the file layout, a kind's value).
FORMAT = 1
#: A memo file holding more step times than this stops growing (a run's own are still kept).
MEMO_CAP = 200_000


def cache_dir() -> Path | None:
    """The folder of the AIC entries (not created here), or None when ``$RADIXBENCH_CACHE_DIR``
    is ``off``."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() == "off":
        return None
    if env:
        return Path(env).expanduser() / "aic"
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "radixbench" / "aic"


def fingerprint() -> dict[str, Any] | None:
    """What identifies the installed aiconfigurator-core and its data: version, install folder,
    ``[size, mtime_ns]`` of ``systems/query_versions.yaml``. None when it is not installed (or
    cannot be located): then nothing is cached."""
    version = cost_aic.aic_version()
    if version is None:
        return None
    try:
        spec = importlib.util.find_spec("aiconfigurator_core")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    try:
        st = (root / "systems" / "query_versions.yaml").stat()
    except OSError:
        return None
    return {"aic": version, "root": str(root), "slots": [st.st_size, st.st_mtime_ns]}


def _digest(doc: Any) -> str:
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def _where(kind: str, request: Mapping[str, Any]) -> tuple[Path, dict[str, Any]] | None:
    """The file and full key of an entry; None when caching is off or AIC is not installed."""
    root, fp = cache_dir(), fingerprint()
    if root is None or fp is None:
        return None
    key = {"format": FORMAT, "kind": kind, "aic": fp, **request}
    return root / f"{kind}-{_digest(key)[:40]}.json", key


def load(kind: str, request: Mapping[str, Any]) -> Any:
    """The value stored for ``request`` of ``kind`` by this aiconfigurator-core, or None when
    there is none, or it does not parse, or its key or digest does not match."""
    where = _where(kind, request)
    if where is None:
        return None
    path, key = where
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or "value" not in doc:
        return None
    return doc["value"] if doc.get("sha256") == _digest(doc["value"]) else None


def store(kind: str, request: Mapping[str, Any], value: Any) -> None:
    """Store ``value`` (JSON) for ``request`` of ``kind`` atomically; nothing when caching is
    off, AIC is not installed or the folder cannot be written."""
    where = _where(kind, request)
    if where is None:
        return
    path, key = where
    body = json.dumps({"key": key, "value": value, "sha256": _digest(value)}, sort_keys=True)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(body)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def encode(blob: bytes) -> str:
    """``blob`` as a JSON string (base64)."""
    return base64.b64encode(blob).decode()


def decode(text: Any) -> bytes | None:
    """The bytes :func:`encode` made, or None for anything else."""
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return None


# ------------------------------------------------------------------- the step-time memo
_Tables = tuple[dict[int, float], dict[tuple[int, int, int], float], dict[int, float]]


def memo_tables(request: Mapping[str, Any]) -> _Tables:
    """The stored memo of an engine: ``(shared, attn, decode)`` as ``cost_aic._Engine`` keys
    them; empty tables when there is none or it is malformed."""
    doc = load("memo", request)
    try:
        shared = {int(q): float(ms) for q, ms in doc["shared"]}
        attn = {(int(k), int(n), int(c)): float(ms) for k, n, c, ms in doc["attn"]}
        dec = {int(key): float(ms) for key, ms in doc["decode"]}
    except (TypeError, KeyError, ValueError):
        return {}, {}, {}
    return shared, attn, dec


#: The engines whose memo is merged into the cache at exit: (request, engine, sizes at load).
_KEPT: list[tuple[dict[str, Any], _Engine, tuple[int, int, int]]] = []
_AT_EXIT: list[bool] = []


def keep_memo(request: Mapping[str, Any], engine: _Engine) -> None:
    """Merge ``engine``'s memo tables into the cache when this process exits (if they grew)."""
    if not _AT_EXIT:
        atexit.register(save_memos)
        _AT_EXIT.append(True)
    sizes = (len(engine.shared), len(engine.attn), len(engine.decode))
    _KEPT.append((dict(request), engine, sizes))


def save_memos() -> None:
    """Merge every kept engine's grown memo tables into its stored memo (called at exit)."""
    for request, eng, sizes in _KEPT:
        if (len(eng.shared), len(eng.attn), len(eng.decode)) == sizes:
            continue
        shared, attn, dec = memo_tables(request)
        if len(shared) + len(attn) + len(dec) > MEMO_CAP:
            shared, attn, dec = {}, {}, {}
        shared.update(eng.shared)
        attn.update(eng.attn)
        dec.update(eng.decode)
        store("memo", request, {
            "shared": sorted([q, ms] for q, ms in shared.items()),
            "attn": sorted([*key, ms] for key, ms in attn.items()),
            "decode": sorted([key, ms] for key, ms in dec.items()),
        })  # fmt: skip
