"""``compare``'s baseline option and hit-rate ceiling over the served requests."""

from __future__ import annotations

import pandas as pd
import pytest

from radixbench.harness.cli.compare import parse_baseline
from radixbench.harness.cli.util import UsageError
from radixbench.harness.experiments.workload import served_ceiling
from radixbench.sim.config import Variant
from radixbench.workloads.ceiling import hit_ceiling
from radixbench.workloads.trace import TraceRequest

VARIANTS = [
    Variant("persistent-heap", "galloping", "numpy"),
    Variant("heapify", "linear", "numpy"),
]


def test_parse_baseline_accepts_axis_value_pairs_and_bare_values() -> None:
    assert parse_baseline(None, VARIANTS) is None
    assert parse_baseline("heapify", VARIANTS) == {"evictor": "heapify"}
    assert parse_baseline("matcher=linear, heapify", VARIANTS) == {
        "matcher": "linear",
        "evictor": "heapify",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "--baseline: 'nope' is no evictor, matcher or flatten"),
        ("colour=red", "--baseline: unknown axis 'colour'"),
        ("evictor=lru-list", "--baseline: evictor 'lru-list' is not run"),
    ],
)
def test_parse_baseline_rejects_what_the_run_lacks(text, message) -> None:
    with pytest.raises(UsageError, match=message):
        parse_baseline(text, VARIANTS)


def test_ceiling_covers_the_finished_requests_only() -> None:
    """A rejected request (here a long one sharing nothing) is left out of the ceiling, as
    it is of the achieved hit rate."""
    trace = [
        TraceRequest(0, 0.0, 1024, 1, [1, 2]),
        TraceRequest(1, 1.0, 1024, 1, [1, 2]),
        TraceRequest(2, 2.0, 100 * 512, 1, list(range(100, 200))),
    ]
    requests = pd.DataFrame(
        {"variant": ["v"] * 3, "rid": [0, 1, 2], "status": ["finished", "finished", "rejected"]}
    )
    ceiling = served_ceiling(trace, requests)
    assert ceiling["all"] == hit_ceiling(trace[:2])["all"] > 0.49  # request 1 hits its prompt
    assert hit_ceiling(trace)["all"] < 0.05  # what the achieved rate was compared with before
    assert (ceiling["requests"], ceiling["rejected"]) == (2, 1)
