"""The tables of a run: the per-request table, and the per-op and per-step tables held in
parts (docs/CONTRACTS.md; ``sim.parted``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from radixbench.sim.config import Variant
from radixbench.sim.metrics import max_gaps, token_gaps
from radixbench.sim.parted import PartedTable
from radixbench.sim.records import STRING, repeated
from radixbench.sim.request import Req

__all__ = ["VariantResult", "request_frame", "with_axes"]


@dataclass(frozen=True, slots=True)
class VariantResult:
    """``requests``: the per-request table; ``op_table`` / ``step_table``: the per-op and
    per-step tables held in parts (:class:`~radixbench.sim.parted.PartedTable`: the servers'
    logs; :attr:`ops` / :attr:`timeseries` build their frames); ``metrics``: the serving
    metrics (one ``metrics`` row, docs/CONTRACTS.md); ``sim_end_s``: simulated time of the
    last event; ``events``: simpy events processed; ``wall_s``: wall time spent stepping this
    simulation (s)."""

    variant: str
    requests: pd.DataFrame
    op_table: PartedTable
    sim_end_s: float
    step_table: PartedTable
    metrics: dict[str, Any]
    events: int
    wall_s: float
    #: further tables by stem: with HiCache ``transfers`` and ``tiers``
    #: (``radixbench.sim.tier_metrics``); empty without
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def ops(self) -> pd.DataFrame:
        """The per-op table as one frame (built on each call)."""
        return self.op_table.frame()

    @property
    def timeseries(self) -> pd.DataFrame:
        """The per-step table as one frame (built on each call)."""
        return self.step_table.frame()


def request_frame(variant: str, reqs: Sequence[Req]) -> pd.DataFrame:
    """The per-request table (docs/CONTRACTS.md, ``requests``) of ``reqs`` under ``variant``,
    sorted by ``rid``."""
    df = pd.DataFrame(
        {
            "rid": [r.rid for r in reqs],
            "arrival_s": [r.arrival_s for r in reqs],
            "input_len": [r.input_len for r in reqs],
            "output_len": [r.output_len for r in reqs],
            "prefix_hit_tokens": [r.prefix_hit_tokens for r in reqs],
            "first_token_s": [r.first_token_s for r in reqs],
            "finish_s": [r.finish_s for r in reqs],
            "status": [r.status for r in reqs],
            "retractions": [r.retractions for r in reqs],
            "itl_max_s": max_gaps(*token_gaps(reqs)),
        }
    )
    df = df.astype(
        {
            "rid": "int64",
            "input_len": "int64",
            "output_len": "int64",
            "prefix_hit_tokens": "int64",
            "arrival_s": "float64",
            "first_token_s": "float64",
            "finish_s": "float64",
            "retractions": "int64",
            "itl_max_s": "float64",
        }
    )
    df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
    df["e2e_s"] = df["finish_s"] - df["arrival_s"]
    n_dec = (df["output_len"] - 1).where(df["output_len"] > 1)
    df["tpot_s"] = (df["finish_s"] - df["first_token_s"]) / n_dec
    df.insert(0, "variant", repeated(variant, len(df)))
    return df.sort_values("rid", kind="stable").reset_index(drop=True)


def with_axes(variant: Variant, df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with ``variant``'s axis columns (``Variant.axes``: impl, evictor, matcher,
    flatten, extra axes; string dtype, missing where the implementation runs its own
    algorithm) inserted after ``variant`` (mutates and returns ``df``)."""
    for i, (axis, value) in enumerate(variant.axes().items(), start=1):
        df.insert(i, axis, pd.Series(repeated(value, len(df), STRING), index=df.index))
    return df
