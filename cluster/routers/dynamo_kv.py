"""``dynamo-kv``: NVIDIA Dynamo's KV router (``--router-mode kv``), fed by the instances' KV events.

Cost of sending the request to worker ``w`` (lowest wins), ai-dynamo/dynamo
``lib/kv-router/src/scheduling/selector.rs:96-181`` @ccd1706 (the logit at ``:146``)::

    logit_w = overlap_score_weight x prefill_tokens_w / page + decode_blocks_w

* ``prefill_tokens_w``: the prompt tokens the router has sent to ``w`` whose first token has not
  come back yet, plus this request's uncached tokens ``isl - overlap_w x page`` (``overlap_w``:
  its leading blocks ``w`` holds, from the KV-event index, as :class:`~.block_index.BlockIndex`
  gives them); ``sequences/single.rs`` ``add_request_with_prefill_tracking`` /
  ``mark_prefill_completed`` @04df1c4 (the first token marks the prefill complete);
* ``decode_blocks_w``: the distinct prompt blocks of the requests the router sent to ``w`` and
  that have not finished (``active_blocks``), plus the request's blocks beyond the longest prefix
  of them already active there (``prompt_registry.rs`` ``project_loads_from_overlap``);
* ``temperature`` 0: the lowest logit; ties go to the smallest KV-event tree, and when all tied
  trees are equal, to a uniform draw (``select_worker``); > 0: a softmax of the negated logits
  scaled by their range, ``exp(-(v / range) / T)`` (``softmax_sample`` ``:24-79``).

Defaults are those documented for ai-dynamo 1.6.1 (``dynamo/common/configuration/groups/
kv_router_args.py:325-440`` in its wheel: ``--router-prefill-load-scale`` / the older
``--kv-overlap-score-weight`` 1.0, ``--router-kv-overlap-score-credit`` 1.0,
``--router-temperature`` 0.0, KV events on, active-block and prefill-token tracking on, output
blocks not tracked). Only eligible (healthy) instances are scored. The first token reaches the
router through ``on_dispatch`` (the request object of each dispatch: the gateway sees the
response stream); random draws use the run's seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from radixbench.cluster.routers.base import SHED, ClusterView, RouteRequest
from radixbench.cluster.routers.block_index import BlockIndex
from radixbench.cluster.routers.page_hash import engine_block_ids

__all__ = ["DynamoKv", "DynamoKvOptions"]


@dataclass(frozen=True)
class DynamoKvOptions:
    """``overlap_score_weight`` (1.6.1: ``prefill_load_scale``) and ``temperature``."""

    overlap_score_weight: float = 1.0
    temperature: float = 0.0

    def __post_init__(self) -> None:
        for name in ("overlap_score_weight", "temperature"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {v}")


class DynamoKv:
    """The policy (module docstring). ``active_blocks[i]`` / ``prefill_tokens[i]``: the
    router's load of instance ``i`` (blocks, tokens); ``overlap``: the last decision's."""

    name = "dynamo-kv"
    needs_tokens = True
    needs_events = True
    Options = DynamoKvOptions

    def __init__(self, n: int, options: DynamoKvOptions, seed: int, page_size: int) -> None:
        self.opt = options
        self.page = page_size
        self.index = BlockIndex(n)
        self.rng = np.random.default_rng(seed)
        self.refs: list[dict[int, int]] = [{} for _ in range(n)]
        self.prefill_tokens = [0] * n
        self.active: dict[int, tuple[int, list[int], int]] = {}  # rid -> (i, blocks, prefill)
        self.pending: dict[int, Any] = {}  # rid -> request awaiting its first token
        self.overlap: list[int] = [0] * n
        self.predicted_tokens = -1

    @property
    def active_blocks(self) -> list[int]:
        return [len(r) for r in self.refs]

    def on_events(self, instance: int, events: Sequence[Any]) -> None:
        self.index.apply(instance, events)

    def on_dispatch(self, instance: int, req: Any) -> None:
        if req.rid in self.active and self.active[req.rid][2] > 0:
            self.pending[req.rid] = req

    def _prefill_done(self, rid: int) -> None:
        i, _, tokens = self.active[rid]
        self.prefill_tokens[i] -= tokens
        self.active[rid] = (i, self.active[rid][1], 0)

    def on_finish(self, instance: int, rid: int) -> None:
        state = self.active.get(rid)
        if state is None:
            return
        self.pending.pop(rid, None)
        if state[2] > 0:
            self._prefill_done(rid)
        refs = self.refs[instance]
        for b in self.active.pop(rid)[1]:
            c = refs[b] - 1
            if c:
                refs[b] = c
            else:
                del refs[b]

    def _depth(self, i: int, ids: Sequence[int]) -> int:
        refs, d = self.refs[i], 0
        for b in ids:
            if b not in refs:
                break
            d += 1
        return d

    def route(self, req: RouteRequest, view: ClusterView) -> int:
        for rid, r in list(self.pending.items()):  # first tokens that came back
            if not math.isnan(r.first_token_s):
                del self.pending[rid]
                self._prefill_done(rid)
        elig = view.eligible
        if not elig:
            self.predicted_tokens = -1
            return SHED
        page, isl = self.page, req.input_len
        ids = engine_block_ids(req.tokens, page)
        self.overlap = held = self.index.prefix_blocks(ids)
        w = self.opt.overlap_score_weight
        logits = []
        for i in elig:
            prefill = self.prefill_tokens[i] + max(0, isl - held[i] * page)
            decode = len(self.refs[i]) + len(ids) - self._depth(i, ids)
            logits.append(w * prefill / page + decode)
        chosen = self._select(elig, logits)
        new = max(0, isl - held[chosen] * page)
        refs = self.refs[chosen]
        for b in ids:
            refs[b] = refs.get(b, 0) + 1
        self.prefill_tokens[chosen] += new
        self.active[req.rid] = (chosen, ids, new)
        self.predicted_tokens = held[chosen] * page
        return chosen

    def _select(self, elig: list[int], logits: list[float]) -> int:
        t = self.opt.temperature
        if t > 0:
            lo, hi = min(logits), max(logits)
            if lo == hi:
                p = np.full(len(elig), 1.0 / len(elig))
            else:
                scaled = np.array([-(v / (hi - lo)) / t for v in logits])
                p = np.exp(scaled - scaled.max())
                p /= p.sum()
            draw, acc = float(self.rng.random()), 0.0
            for i, pi in zip(elig, p):
                acc += float(pi)
                if draw <= acc:
                    return i
            return elig[-1]
        best = min(logits)
        tied = [i for i, v in zip(elig, logits) if v == best]
        if len(tied) == 1:
            return tied[0]
        sizes = [self.index.blocks[i] for i in tied]
        if all(s == sizes[0] for s in sizes):
            return tied[int(self.rng.integers(len(tied)))]
        return tied[sizes.index(min(sizes))]
