from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from environments.world import arrival_time, working_day

MONDAY = datetime(2026, 4, 6, 9, 0)


def test_working_days_skip_weekends() -> None:
    assert working_day(MONDAY, 4) == datetime(2026, 4, 10, 9, 0)  # Friday
    assert working_day(MONDAY, 5) == datetime(2026, 4, 13, 9, 0)  # next Monday
    assert working_day(datetime(2026, 4, 11, 9, 0), 0) == datetime(2026, 4, 13, 9, 0)  # Saturday start


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=1, max_value=50))
def test_arrivals_fall_within_a_working_day(index: int, per_day: int) -> None:
    at = arrival_time(MONDAY, index, per_day, seed=3)
    assert at.weekday() < 5
    assert 9 <= at.hour < 17
    assert at == arrival_time(MONDAY, index, per_day, seed=3)
