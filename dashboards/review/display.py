"""Plain-data views of queue entries and items for the review page's tables (no Streamlit here)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from compliance.review_queue import AuditEvent, QueueEntry, QueueFilter, ReviewItem

AGE_BUCKETS: dict[str, tuple[timedelta | None, timedelta | None]] = {
    "any age": (None, None),
    "under 1 hour": (None, timedelta(hours=1)),
    "1 to 24 hours": (timedelta(hours=1), timedelta(hours=24)),
    "over 24 hours": (timedelta(hours=24), None),
}


def waited(age: timedelta | None) -> str:
    """A waiting time as a reviewer reads it: '45 s', '12 min', '3 h 05 min', '2 d 4 h'."""
    if age is None:
        return "-"
    seconds = int(age.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def queue_filter(
    code: str | None, stage: str | None, mode: str | None, source: str | None, age: str
) -> QueueFilter:
    min_age, max_age = AGE_BUCKETS[age]
    return QueueFilter(code=code, stage=stage, mode=mode, source=source, min_age=min_age, max_age=max_age)


def queue_rows(entries: list[QueueEntry]) -> list[dict[str, Any]]:
    return [
        {
            "item": e.item.id,
            "source": e.item.source,
            "stage": e.item.stage,
            "mode": e.item.mode,
            "codes": ", ".join(e.item.codes) or "-",
            "risk": round(e.item.risk, 2),
            "priority": round(e.priority, 2),
            "waiting": waited(e.age),
            "taken by": e.state.lease_holder or "",
            "reviews": f"{e.state.reviews_done}/{e.state.reviews_required}",
        }
        for e in entries
    ]


def entry_label(entry: QueueEntry) -> str:
    codes = ", ".join(entry.item.codes) or "no code"
    taken = f" · taken by {entry.state.lease_holder}" if entry.state.lease_holder else ""
    return f"{entry.item.id[:10]} · {entry.item.source} · {entry.item.stage} · {codes}{taken}"


def customer_rows(item: ReviewItem) -> list[dict[str, Any]]:
    """The customer's profile as field/value rows, pots one row each."""
    rows: list[dict[str, Any]] = []
    for key, value in item.payload.customer.items():
        if key == "pots" and isinstance(value, list):
            for i, pot in enumerate(value, start=1):
                text = ", ".join(f"{k}: {v}" for k, v in pot.items()) if isinstance(pot, dict) else str(pot)
                rows.append({"field": f"pot {i}", "value": text})
        else:
            rows.append({"field": key, "value": str(value)})
    return rows


def history_rows(events: list[AuditEvent]) -> list[dict[str, Any]]:
    return [
        {
            "when": e.at.isoformat(timespec="seconds"),
            "event": e.kind.value,
            "by": e.actor,
            "reason": e.reason,
            "detail": ", ".join(f"{k}={v}" for k, v in e.detail.items()),
        }
        for e in events
    ]
