"""Pacing a run against real time: the acceleration ratio of the virtual world.

With a ratio of r, virtual time may run at most r times faster than real time: a consultation that
arrives v virtual seconds after the run's virtual start is not begun before v / r real seconds have
passed since the run (or its resumption) started. Pacing only delays; it never changes what happens,
so a paced seeded run gives the same transcripts as an unpaced one. Without a ratio (None or 0) the
world runs as fast as the models allow.

The real clock and the sleep are passed in, so tests drive pacing without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

# The spec's pace: one real hour is one virtual day, i.e. 24 virtual seconds per real second.
SPEC_ACCELERATION = 24.0

Sleep = Callable[[float], Awaitable[None]]


class Pacer:
    """Holds virtual moments back until real time, scaled by the ratio, has caught up with them."""

    def __init__(
        self,
        virtual_start: datetime,
        acceleration: float | None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if acceleration is not None and acceleration < 0:
            raise ValueError("an acceleration ratio cannot be negative")
        self.virtual_start = virtual_start
        self.acceleration = acceleration or None
        self._monotonic = monotonic
        self._sleep = sleep
        self._real_start = monotonic()
        self.slept_s = 0.0

    @property
    def paced(self) -> bool:
        return self.acceleration is not None

    def real_due(self, moment: datetime) -> float:
        """Real seconds after the start at which virtual `moment` may begin."""
        if self.acceleration is None:
            return 0.0
        return max(0.0, (moment - self.virtual_start).total_seconds() / self.acceleration)

    async def until(self, moment: datetime) -> float:
        """Wait (if paced) until virtual `moment` is due; returns the seconds slept."""
        if self.acceleration is None:
            return 0.0
        wait = self.real_due(moment) - (self._monotonic() - self._real_start)
        if wait <= 0:
            return 0.0
        await self._sleep(wait)
        self.slept_s += wait
        return wait
