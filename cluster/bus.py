"""KV events from the instances to the router: publication, delay, loss.

An instance publishes one batch per scheduler step that changed its tree (sglang 0.5.23's
``publish_kv_events``: one ``KVEventBatch`` per drain, ``managers/scheduler_components/
kv_events_publisher.py:98-105``). The bus hands it to every subscriber after ``delay_s`` of
simulated time (a simpy timeout; 0 delivers at once, in the publishing step), unless it is lost:
each batch is dropped with probability ``loss`` (one seeded draw per batch; a ZeroMQ PUB socket
drops whole messages), and a lost batch is never repaired, so the index drifts from the
instance's tree until the blocks are stored or removed again. An ``exact`` subscriber (the
``oracle`` reference) always gets every batch at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import simpy

__all__ = ["EventBus"]

Deliver = Callable[[int, Sequence[Any]], None]


class EventBus:
    """Delivers batches to subscribers on ``env`` (``delay_s`` >= 0, ``loss`` in [0, 1),
    drawn from ``rng``). ``published`` / ``delivered`` / ``lost``: batch counts."""

    def __init__(
        self, env: simpy.Environment, delay_s: float, loss: float, rng: np.random.Generator
    ) -> None:
        self.env, self.delay_s, self.loss, self.rng = env, delay_s, loss, rng
        self.exact: list[Deliver] = []
        self.lagged: list[Deliver] = []
        self.published = self.delivered = self.lost = 0

    def subscribe(self, deliver: Deliver, exact: bool = False) -> None:
        """``deliver(instance, events)`` for every batch (``exact``: undelayed, lossless)."""
        (self.exact if exact else self.lagged).append(deliver)

    def publish(self, instance: int, events: Sequence[Any]) -> None:
        """``instance`` published ``events`` now."""
        self.published += 1
        for deliver in self.exact:
            deliver(instance, events)
        if not self.lagged:
            return
        if self.loss > 0 and self.rng.random() < self.loss:
            self.lost += 1
            return
        if self.delay_s <= 0:
            self._deliver(instance, events)
            return
        ev = self.env.timeout(self.delay_s)
        ev.callbacks.append(lambda _e: self._deliver(instance, events))

    def _deliver(self, instance: int, events: Sequence[Any]) -> None:
        self.delivered += 1
        for deliver in self.lagged:
            deliver(instance, events)
