"""Training throughput: real consultations through the real run loop, at several concurrencies.

    python -m benchmarks.throughput                       (200 ms per model call; 1, 8, 32, 128)
    python -m benchmarks.throughput --latency-ms 500 --levels 1 32 --executor ray

Each level is a complete training run (`environments.training.train`: the executor, the gate,
learning between days, checkpoints, MLflow) with the scripted model answering every call after an
injected delay, as a remote model would. A level runs one virtual day of `--waves` times as many
consultations as it runs at once; the single-stream level (concurrency 1) runs `--single`
consultations. Only the day loop is timed (`RunSummary.loop_seconds`), not building the world or
opening MLflow. The day's learning (memory, cases, rule accumulation) runs after its consultations:
every failure's rule is proposed at once (reflection, replays, refinement and judgement overlap),
then the proposals are decided one by one in consultation order; `--no-learning` turns it off.

Two rates are measured in the same runs:

- the full loop, consultations and the learning between days (`RunSummary.loop_seconds`):
  `consultations_per_hour`, `virtual_days_per_hour` (in virtual working days of the spec's
  calendar, `--day-size` = 8 consultations a day) and `efficiency_with_learning`;
- the consultations the executor runs, the part the issue's "runs consultations at concurrency
  1, 8, 32 and 128" scales out (`RunSummary.consultation_seconds`):
  `consultations_per_hour_executor` and the headline `efficiency`.

An efficiency is measured against the ideal, concurrency times the single-stream rate of the same
part (`efficiency_in_model_calls`: the full loop's in model calls, which evens out consultation
lengths). Learning does not scale with a day's concurrency the way consultations do: a day of many
failures decides them one after another (admission may ask the model whether two rules
contradict), and its replays' validations cost the driver CPU, so `efficiency_with_learning` is the
lower figure on a small machine.

The embedder is the hashing one by default, so what is measured is the run loop and not the
sentence model's CPU time per utterance on a small machine (`--embedder minilm` measures with it).
`--profile` prints where the driver's CPU time went at the highest level.

The last line printed is one JSON object with those figures keyed by concurrency level, the
targets and whether they were met, the driver's CPU seconds per consultation and the load average
(the figures are only as quiet as the machine).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import sys
import tempfile
from pathlib import Path

from hydra import compose, initialize_config_dir

from environments.config import AppConfig, load_app_config
from environments.training import train

CONF = Path(__file__).resolve().parents[1] / "conf"
# The targets: efficiency of at least 0.8 at concurrency 32, and a virtual year of
# consultations (2,000) per real hour at concurrency 128.
TARGET_EFFICIENCY = {32: 0.8}
TARGET_PER_HOUR = {128: 2000.0}
LEARNING_OFF = ["advisor.use_memory=false", "advisor.use_cases=false", "advisor.use_rules=false"]


def level_config(root: Path, args: argparse.Namespace, concurrency: int) -> AppConfig:
    # A day holds `--waves` times as many consultations as run at once, so the end-of-day barrier
    # (the day's learning waits for its longest consultation) costs a small share of the day.
    consultations = args.single if concurrency == 1 else concurrency * args.waves
    overrides = [
        f"embedder={args.embedder}",
        "tracking.traces=false",
        f"paths.root={root}",
        f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
        f"llm.scripted.latency_ms={args.latency_ms}",
        f"environment.concurrency={concurrency}",
        f"environment.consultations={consultations}",
        f"environment.consultations_per_day={consultations}",
        "environment.acceleration=null",
        f"executor={args.executor}",
        # The whole population is drawn up front; raise the scripted provider's own cap so it is
        # not the limit being measured.
        f"llm.concurrency.scripted={max(256, concurrency * 4)}",
        *(LEARNING_OFF if args.no_learning else []),
        *args.override,
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return load_app_config(compose("config", overrides=overrides))


async def run_level(
    root: Path, args: argparse.Namespace, concurrency: int, profile: cProfile.Profile | None
) -> dict[str, float]:
    app = level_config(root / f"c{concurrency}", args, concurrency)
    if profile is not None:
        profile.enable()
    summary = await train(app, progress=False)
    if profile is not None:
        profile.disable()
    usage = json.loads(Path(summary.run_dir, "llm_usage.json").read_text(encoding="utf-8"))
    consultations = summary.metrics["consultations"]
    return {
        "consultations": consultations,
        "seconds": summary.loop_seconds,
        "consultation_seconds": summary.consultation_seconds,
        "per_hour": consultations / summary.loop_seconds * 3600.0,
        "executor_per_hour": consultations / summary.consultation_seconds * 3600.0,
        "calls_per_hour": sum(u["calls"] for u in usage.values()) / summary.loop_seconds * 3600.0,
        "driver_cpu_seconds_per_consultation": summary.loop_cpu_seconds / consultations,
        "tokens_per_consultation": summary.metrics["tokens_total"] / consultations,
    }


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--latency-ms", type=int, default=200, help="injected delay per model call")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument(
        "--single", type=int, default=16, help="consultations at concurrency 1 (a sample of lengths)"
    )
    parser.add_argument("--waves", type=int, default=4, help="a level's day: waves x concurrency")
    parser.add_argument("--day-size", type=int, default=8, help="consultations in a spec virtual day")
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"])
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument(
        "--no-learning",
        action="store_true",
        help="turn off memory, case and rules learning: the consultations alone",
    )
    parser.add_argument("--profile", action="store_true", help="print the CPU profile of the top level")
    parser.add_argument("override", nargs="*", help="extra Hydra overrides, e.g. advisor.use_rules=false")
    args = parser.parse_args(argv)
    levels = sorted(set(args.levels))
    if 1 not in levels:
        levels = [1, *levels]  # efficiency is measured against the single stream

    results: dict[int, dict[str, float]] = {}
    profile = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="throughput-") as folder:
        for level in levels:
            top = profile if level == levels[-1] else None
            results[level] = asyncio.run(run_level(Path(folder), args, level, top))
            print(f"concurrency {level}: {json.dumps(results[level])}", file=sys.stderr)

    def ratio(key: str, level: int) -> float:
        return round(results[level][key] / (level * results[1][key]), 3)

    per_hour = {str(c): round(r["per_hour"], 1) for c, r in results.items()}
    executor_per_hour = {str(c): round(r["executor_per_hour"], 1) for c, r in results.items()}
    efficiency = {str(c): ratio("executor_per_hour", c) for c in results}
    with_learning = {str(c): ratio("per_hour", c) for c in results}
    # Consultations differ in length (a few single-stream ones may be shorter or longer than a
    # level's many), so the same ratio in model calls, the unit the latency is paid in, is shown too.
    by_calls = {str(c): ratio("calls_per_hour", c) for c in results}
    met = {
        **{f"efficiency@{c}": efficiency[str(c)] >= t for c, t in TARGET_EFFICIENCY.items() if c in results},
        **{
            f"efficiency_with_learning@{c}": with_learning[str(c)] >= t
            for c, t in TARGET_EFFICIENCY.items()
            if c in results and not args.no_learning
        },
        **{f"per_hour@{c}": results[c]["per_hour"] >= t for c, t in TARGET_PER_HOUR.items() if c in results},
    }
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print(out.getvalue(), file=sys.stderr)
    report: dict[str, object] = {
        "latency_ms_per_call": args.latency_ms,
        "embedder": args.embedder,
        "executor": args.executor,
        "learning": not args.no_learning,
        "virtual_day_consultations": args.day_size,
        "consultations_per_hour": per_hour,
        "virtual_days_per_hour": {c: round(v / args.day_size, 1) for c, v in per_hour.items()},
        "efficiency": efficiency,
        "efficiency_with_learning": with_learning,
        "efficiency_in_model_calls": by_calls,
        "consultations_per_hour_executor": executor_per_hour,
        "consultations": {str(c): int(r["consultations"]) for c, r in results.items()},
        "loop_seconds": {str(c): round(r["seconds"], 2) for c, r in results.items()},
        "consultation_seconds": {str(c): round(r["consultation_seconds"], 2) for c, r in results.items()},
        # CPU of the driver process only: Ray workers' CPU is not counted here.
        "driver_cpu_seconds_per_consultation": {
            str(c): round(r["driver_cpu_seconds_per_consultation"], 3) for c, r in results.items()
        },
        "tokens_per_consultation": {str(c): round(r["tokens_per_consultation"]) for c, r in results.items()},
        "targets": {"efficiency": TARGET_EFFICIENCY, "consultations_per_hour": TARGET_PER_HOUR},
        "meets_targets": met,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
