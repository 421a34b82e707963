"""The review queue's clock: the wall clock for real reviewers, a fixed moment from config otherwise.

Leases and waiting times are real time for compliance staff, unlike the simulation's virtual
time; a configured fixed moment lets tests (and screenshots) put the queue at a chosen time and
move it by changing the setting.
"""

from __future__ import annotations

from dashboards.settings import DashboardSettings
from simulacra.clock import Clock, SystemClock, VirtualClock


def review_clock(settings: DashboardSettings) -> Clock:
    if settings.review_clock_now is None:
        return SystemClock()
    return VirtualClock(settings.review_clock_now)  # never advanced: a fixed moment
