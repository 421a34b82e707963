"""The virtual world's calendar: working days, customers arriving at random times."""

from __future__ import annotations

import random
from datetime import datetime, timedelta


def working_day(start: datetime, day_index: int) -> datetime:
    """The `day_index`-th working day (Monday to Friday) on or after `start`, at start's time of day."""
    day = start
    while day.weekday() >= 5:
        day += timedelta(days=1)
    counted = 0
    while counted < day_index:
        day += timedelta(days=1)
        if day.weekday() < 5:
            counted += 1
    return day


def arrival_time(start: datetime, index: int, per_day: int, seed: int) -> datetime:
    """When consultation `index` begins: its day from the daily capacity, its minute at random.

    Seeded by (seed, index) alone, so the schedule does not depend on how many run at once.
    """
    day = working_day(start, index // per_day)
    rng = random.Random(f"arrival:{seed}:{index}")
    # Customers arrive across an eight-hour working day.
    return day + timedelta(minutes=rng.randrange(0, 8 * 60))


def day_of(index: int, per_day: int) -> int:
    return index // per_day
