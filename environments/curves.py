"""Learning curves of one training run, read back from its MLflow per-virtual-day metrics.

    python -m environments.curves RUN_ID --tracking-uri sqlite:///runs/mlflow.db --plot curves.png

Every training run logs its own `learning_curves.png` artifact through `plot_run`; the command
draws the same figure for any finished run and prints, as its JSON last line, the first-pass
compliance of the first and last `--window` virtual days, the least-squares slope per day, and the
final case and rule totals: the numbers behind "compliance rises over virtual time".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from pydantic import BaseModel

# Panels of the figure: (title, metrics drawn in it, y range or None to let it scale).
PANELS: tuple[tuple[str, tuple[str, ...], tuple[float, float] | None], ...] = (
    ("first-pass compliance", ("day.first_pass_compliance_rate",), (0.0, 1.0)),
    ("escalations and holding replies", ("day.escalation_rate", "day.holding_reply_rate"), (0.0, 1.0)),
    (
        "customer outcomes",
        ("day.goal_achieved_rate", "day.satisfaction", "day.understanding_score"),
        (0.0, 1.0),
    ),
    ("case base and rules base", ("cases_total", "rules_active"), None),
)
HEADLINE = "day.first_pass_compliance_rate"


class Curve(BaseModel):
    metric: str
    points: list[tuple[int, float]]  # (virtual day, value), by day


class CurveSummary(BaseModel):
    run_id: str
    days: int
    window: int
    first_days_mean: float
    last_days_mean: float
    slope_per_day: float
    cases_total: float | None
    rules_active: float | None


def read_curves(client: MlflowClient, run_id: str) -> dict[str, Curve]:
    """Each panel metric's per-day history (the last value logged for a day wins: a resumed run
    may have logged a day twice before its checkpoint).

    `cases_total` and `rules_active` are also logged once more at the end of the run with the
    number of consultations as the step; only the steps that are days of the headline curve are
    kept, so that point does not stretch the day axis."""
    history = {
        metric: {p.step: p.value for p in sorted(client.get_metric_history(run_id, metric), key=_order)}
        for _title, metrics, _ylim in PANELS
        for metric in metrics
    }
    days = set(history[HEADLINE])
    return {
        metric: Curve(metric=metric, points=sorted((d, v) for d, v in by_day.items() if d in days))
        for metric, by_day in history.items()
        if any(d in days for d in by_day)
    }


def _order(point) -> tuple[int, int]:
    return point.step, point.timestamp


def slope(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of value against day."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0


def summarise(run_id: str, curves: dict[str, Curve], window: int) -> CurveSummary:
    if window < 1:
        raise ValueError("window must be at least 1")
    headline = curves.get(HEADLINE)
    if headline is None or not headline.points:
        raise ValueError(f"run {run_id} has no {HEADLINE} history (not a training run, or no day finished)")
    values = [v for _, v in headline.points]
    span = min(window, len(values))

    def last(metric: str) -> float | None:
        curve = curves.get(metric)
        return curve.points[-1][1] if curve and curve.points else None

    return CurveSummary(
        run_id=run_id,
        days=len(values),
        window=span,
        first_days_mean=round(sum(values[:span]) / span, 4),
        last_days_mean=round(sum(values[-span:]) / span, 4),
        slope_per_day=round(slope(headline.points), 5),
        cases_total=last("cases_total"),
        rules_active=last("rules_active"),
    )


def rolling(values: Sequence[float], width: int) -> list[float]:
    """Trailing mean over up to `width` values: a day's rate over 8 consultations is noisy."""
    out = []
    for i in range(len(values)):
        chunk = values[max(0, i - width + 1) : i + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def plot(curves: dict[str, Curve], path: Path, title: str, smooth: int = 5) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    for ax, (panel, metrics, ylim) in zip(axes.flat, PANELS, strict=True):
        for metric in metrics:
            curve = curves.get(metric)
            if curve is None:
                continue
            days = [d + 1 for d, _ in curve.points]
            values = [v for _, v in curve.points]
            label = metric.removeprefix("day.")
            if metric.startswith("day.") and smooth > 1:
                (line,) = ax.plot(days, values, alpha=0.25, linewidth=1)
                ax.plot(
                    days,
                    rolling(values, smooth),
                    color=line.get_color(),
                    label=f"{label} ({smooth}-day mean)",
                )
            else:
                ax.plot(days, values, label=label)
        ax.set_title(panel)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("virtual working day")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_run(client: MlflowClient, run_id: str, path: Path, title: str) -> Path | None:
    """The run's learning-curve figure, or None when it has no per-day history yet."""
    curves = read_curves(client, run_id)
    if HEADLINE not in curves:
        return None
    return plot(curves, path, title)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m environments.curves", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("run_id")
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    parser.add_argument("--window", type=int, default=10, help="days averaged at each end (default 10)")
    args = parser.parse_args(argv)
    client = MlflowClient(args.tracking_uri)
    try:
        curves = read_curves(client, args.run_id)
        summary = summarise(args.run_id, curves, args.window)
    except (ValueError, MlflowException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.plot is not None:
        plot(curves, args.plot, f"Training run {args.run_id[:8]}: {summary.days} virtual days")
        print(f"plot written to {args.plot}")
    print(summary.model_dump_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
