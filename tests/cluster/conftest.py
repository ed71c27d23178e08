"""Shared fixtures of the cluster tests: ``View``, a scripted
:class:`~radixbench.cluster.routers.base.ClusterView`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest


@dataclass
class View:
    n: int
    outstanding: list[int] = field(default_factory=list)
    outstanding_tokens: list[int] = field(default_factory=list)
    processed: list[int] = field(default_factory=list)
    queues: list[int] = field(default_factory=list)
    usage: list[float] = field(default_factory=list)
    t: float = 0.0
    down: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        for name in ("outstanding", "outstanding_tokens", "processed", "queues"):
            if not getattr(self, name):
                setattr(self, name, [0] * self.n)
        if not self.usage:
            self.usage = [0.0] * self.n

    @property
    def eligible(self) -> list[int]:
        return [i for i in range(self.n) if i not in self.down]

    @property
    def now(self) -> float:
        return self.t

    def waiting(self, i: int) -> int:
        return self.queues[i]

    def waiting_tokens(self, i: int) -> int:
        return self.queues[i] * 100

    def running(self, i: int) -> int:
        return 0

    def kv_usage(self, i: int) -> float:
        return self.usage[i]

    def kv_used_tokens(self, i: int) -> int:
        return int(self.usage[i] * 1000)


@pytest.fixture(name="View")
def view_class() -> type:
    """The scripted view class: ``View(n, outstanding=..., queues=..., usage=..., down=...)``."""
    return View
