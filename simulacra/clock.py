"""Virtual time.

Simulated time never comes from the wall clock: every component that needs "now" is handed a
clock. `VirtualClock` is advanced explicitly by the environment; `AcceleratedClock` maps real
elapsed seconds onto virtual time with a fixed ratio (one real hour is one virtual day by default).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current virtual time."""

    def now(self) -> datetime: ...


class VirtualClock:
    """A clock that only moves when told to; the deterministic default for simulations and tests."""

    def __init__(self, start: datetime) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError("virtual time cannot run backwards")
        self._now += delta
        return self._now

    def set(self, moment: datetime) -> None:
        if moment < self._now:
            raise ValueError(f"virtual time cannot run backwards: {moment} < {self._now}")
        self._now = moment


class SystemClock:
    """Real time (UTC), for things people work on in real time: review leases, live sessions."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class AcceleratedClock:
    """Virtual time that runs `ratio` times faster than real time from a virtual start.

    The real-time source is injectable so tests can drive it.
    """

    def __init__(self, start: datetime, ratio: float, monotonic=time.monotonic) -> None:
        if ratio <= 0:
            raise ValueError("acceleration ratio must be positive")
        self._start = start
        self._ratio = ratio
        self._monotonic = monotonic
        self._real_start = monotonic()

    def now(self) -> datetime:
        elapsed = self._monotonic() - self._real_start
        return self._start + timedelta(seconds=elapsed * self._ratio)


def hours_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / 3600.0
