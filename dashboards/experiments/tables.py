"""The experiment page's figures as data frames: is it learning, what goes wrong, at what cost.

Kept apart from the charts and the page so each answer can be checked on a real tracking store.
"""

from __future__ import annotations

import pandas as pd

from dashboards.experiments.data import RunInfo
from environments.consultation import ConsultationRecord

VIOLATION_PREFIX = "violations.first_pass."
DECIDED_PREFIX = "decided_by."
HEADLINE = (
    "first_pass_compliance_rate",
    "escalation_rate",
    "holding_reply_rate",
    "goal_achieved_rate",
    "understanding_rate",
)


def per_consultation(run: RunInfo, metric: str) -> float | None:
    count = run.metrics.get("consultations")
    value = run.metrics.get(metric)
    if not count or value is None:
        return None
    return value / count


def runs_table(runs: list[RunInfo]) -> pd.DataFrame:
    rows = []
    for run in runs:
        row = {
            "run": run.label,
            "started": f"{run.started:%Y-%m-%d %H:%M} UTC",
            "status": run.status,
            "ablation": run.ablation,
            "validator": run.params.get("validator.mode", ""),
            "model": "scripted" if run.scripted else run.tags.get("llm.providers", ""),
            "consultations": run.metrics.get("consultations"),
        }
        row.update({name: run.metrics.get(name) for name in HEADLINE})
        row["tokens / consultation"] = per_consultation(run, "tokens_total")
        row["cost USD / consultation"] = per_consultation(run, "cost_usd_total")
        rows.append(row)
    return pd.DataFrame(rows)


FIRST_CURVES = ("consultation.first_pass_compliance", "day.first_pass_compliance_rate")


def curve_metrics(runs: list[RunInfo]) -> list[str]:
    """Metrics logged along a run: per consultation (`consultation.*`) and per virtual day (`day.*`),
    first-pass compliance first (the headline question: does it get it right first time?)."""
    names = {m for run in runs for m in run.metrics if m.startswith(("consultation.", "day."))}
    return sorted(
        names,
        key=lambda m: (m not in FIRST_CURVES, not m.startswith("consultation."), m),
    )


def axis_of(metric: str) -> str:
    return "virtual day" if metric.startswith("day.") else "consultation"


def curve_frame(histories: dict[str, list[tuple[int, float]]], window: int) -> pd.DataFrame:
    """Long frame (run, step, value, smoothed) with a trailing rolling mean per run over `window` steps."""
    if window < 1:
        raise ValueError("the smoothing window must be at least 1")
    frames = []
    for label, points in histories.items():
        if not points:
            continue
        frame = pd.DataFrame(points, columns=["step", "value"])
        frame["run"] = label
        frame["smoothed"] = frame["value"].rolling(window, min_periods=1).mean()
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["run", "step", "value", "smoothed"])
    return pd.concat(frames, ignore_index=True)[["run", "step", "value", "smoothed"]]


def violations_frame(runs: list[RunInfo]) -> pd.DataFrame:
    """First-pass violations by code and run, as counts and per consultation."""
    rows = []
    for run in runs:
        consultations = run.metrics.get("consultations") or 0
        for name, count in run.metrics.items():
            if name.startswith(VIOLATION_PREFIX):
                rows.append(
                    {
                        "run": run.label,
                        "code": name.removeprefix(VIOLATION_PREFIX),
                        "count": count,
                        "per consultation": count / consultations if consultations else None,
                    }
                )
    return pd.DataFrame(rows, columns=["run", "code", "count", "per consultation"])


def decided_by_frame(runs: list[RunInfo]) -> pd.DataFrame:
    rows = [
        {"run": run.label, "stage": name.removeprefix(DECIDED_PREFIX), "turns": value}
        for run in runs
        for name, value in run.metrics.items()
        if name.startswith(DECIDED_PREFIX)
    ]
    return pd.DataFrame(rows, columns=["run", "stage", "turns"])


def cost_frame(runs: list[RunInfo]) -> pd.DataFrame:
    rows = [
        {
            "run": run.label,
            "tokens / consultation": per_consultation(run, "tokens_total"),
            "cost USD / consultation": per_consultation(run, "cost_usd_total"),
        }
        for run in runs
        if run.metrics.get("consultations")
    ]
    return pd.DataFrame(rows, columns=["run", "tokens / consultation", "cost USD / consultation"])


def ablation_frame(runs: list[RunInfo]) -> pd.DataFrame:
    """Headline rates averaged over the finished runs of each ablation (which learning parts were on)."""
    rows = [
        {"ablation": run.ablation, "runs": 1, **{name: run.metrics.get(name) for name in HEADLINE}}
        for run in runs
        if run.status == "FINISHED"
    ]
    if not rows:
        return pd.DataFrame(columns=["ablation", "runs", *HEADLINE])
    frame = pd.DataFrame(rows)
    grouped = frame.groupby("ablation", as_index=False).agg(
        {"runs": "sum", **{name: "mean" for name in HEADLINE}}
    )
    return grouped.sort_values("ablation").reset_index(drop=True)


def consultations_behind(
    records: list[ConsultationRecord], metric: str, step: int, window: int, per_day: int
) -> list[ConsultationRecord]:
    """The consultations a point on a curve summarises: its day's, or those in its smoothing window."""
    if axis_of(metric) == "virtual day":
        return [r for r in records if r.index // per_day == step]
    return [r for r in records if step - window < r.index <= step]


def consultation_rows(records: list[ConsultationRecord]) -> pd.DataFrame:
    rows = []
    for record in records:
        advisor = record.advisor_turns
        rows.append(
            {
                "index": record.index,
                "consultation": record.id,
                "goal": record.goal,
                "vulnerable": record.vulnerable,
                "DB pension": record.has_db,
                "ended by": record.ended_by,
                "advisor turns": len(advisor),
                "first-pass compliant": sum(bool(t.first_pass_compliant) for t in advisor),
                "escalations": sum(t.escalated for t in advisor),
                "violations": ", ".join(sorted({c for t in advisor for c in t.first_pass_violations})),
                "tokens": record.tokens,
            }
        )
    return pd.DataFrame(rows)
