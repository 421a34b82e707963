"""Compare the arms of a case-base / rules-base ablation from the MLflow tracking store.

    python -m environments.train -m advisor.use_cases=true,false advisor.use_rules=true,false \\
        environment.consultations=200 tracking.uri=sqlite:///runs/ablation.db
    python -m environments.ablation --tracking-uri sqlite:///runs/ablation.db --plot ablation.png

Each arm is the set of finished runs with the same `advisor.use_cases` and `advisor.use_rules`
params (several seeds are averaged). The table compares first-pass compliance and outcome rates;
the plot shows first-pass compliance per virtual day for each arm. The last line printed is one
JSON object with the figures per arm.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Run
from pydantic import BaseModel

COMPARED = (
    "first_pass_compliance_rate",
    "goal_achieved_rate",
    "escalation_rate",
    "holding_reply_rate",
    "cases_total",
    "rules_active",
    "tokens_total",
)
CURVE = "day.first_pass_compliance_rate"


class Arm(BaseModel):
    name: str
    runs: list[str]
    metrics: dict[str, float]
    curve: list[tuple[int, float]]


def arm_name(run: Run) -> str:
    params = run.data.params
    cases = params.get("advisor.use_cases") == "True"
    rules = params.get("advisor.use_rules") == "True"
    if cases and rules:
        return "cases+rules"
    if cases:
        return "cases only"
    if rules:
        return "rules only"
    return "neither"


def finished_runs(client: MlflowClient, experiment: str | None) -> list[Run]:
    experiments = client.search_experiments()
    ids = [e.experiment_id for e in experiments if experiment is None or e.name == experiment]
    if not ids:
        raise ValueError(f"no experiment named {experiment!r} in the tracking store")
    return [r for r in client.search_runs(ids) if r.info.status == "FINISHED"]


def mean_curve(client: MlflowClient, runs: list[Run]) -> list[tuple[int, float]]:
    by_day: dict[int, list[float]] = defaultdict(list)
    for run in runs:
        for point in client.get_metric_history(run.info.run_id, CURVE):
            by_day[point.step].append(point.value)
    return [(day, sum(values) / len(values)) for day, values in sorted(by_day.items())]


def compare(client: MlflowClient, experiment: str | None = None) -> list[Arm]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in finished_runs(client, experiment):
        groups[arm_name(run)].append(run)
    arms = []
    for name in ("cases+rules", "cases only", "rules only", "neither"):
        runs = groups.get(name)
        if not runs:
            continue
        metrics = {
            key: round(sum(r.data.metrics.get(key, 0.0) for r in runs) / len(runs), 4) for key in COMPARED
        }
        arms.append(
            Arm(
                name=name, runs=[r.info.run_id for r in runs], metrics=metrics, curve=mean_curve(client, runs)
            )
        )
    return arms


def plot(arms: list[Arm], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for arm in arms:
        if arm.curve:
            days, values = zip(*arm.curve, strict=True)
            ax.plot([d + 1 for d in days], values, marker="o", markersize=3, label=arm.name)
    ax.set_xlabel("virtual working day")
    ax.set_ylabel("first-pass compliance rate")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Ablation: case base and rules base (scripted model)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(arms: list[Arm]) -> list[str]:
    header = f"{'arm':<12} {'runs':>4} " + " ".join(f"{k[:22]:>22}" for k in COMPARED)
    lines = [header]
    for arm in arms:
        lines.append(
            f"{arm.name:<12} {len(arm.runs):>4} " + " ".join(f"{arm.metrics[k]:>22.4g}" for k in COMPARED)
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m environments.ablation", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default=None, help="experiment name (default: all)")
    parser.add_argument("--plot", type=Path, default=None, help="write the learning-curve plot here (PNG)")
    args = parser.parse_args(argv)
    try:
        arms = compare(MlflowClient(args.tracking_uri), args.experiment)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not arms:
        print("error: no finished runs in the tracking store", file=sys.stderr)
        return 2
    for line in table(arms):
        print(line)
    if args.plot is not None:
        plot(arms, args.plot)
        print(f"plot written to {args.plot}")
    print(json.dumps({arm.name: {"runs": len(arm.runs), **arm.metrics} for arm in arms}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
