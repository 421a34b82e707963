"""`python -m environments.train`: a training run of the pension guidance advisor.

With no arguments it runs offline (scripted model, no API key) and finishes in well under two
minutes. Hydra overrides change anything in `conf/`, e.g.
`python -m environments.train llm=openai environment.consultations=200 seed=3`;
`--cfg job` prints the resolved config and `-m` sweeps.

A run writes a checkpoint after every virtual day. If it is killed, the same command with
`resume=RUN_ID` (the MLflow run id it printed, also its folder name under `paths.root`) carries it
on in the same MLflow run from its last checkpoint, to the result an unkilled run would have had.
"""

from __future__ import annotations

import asyncio
import sys

import hydra
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig

from environments.checkpoint import ResumeMismatchError
from environments.config import ConfigError, load_app_config
from environments.training import RunSummary, train
from simulacra.llm.errors import ConfigurationError, LLMChainExhausted

HEADLINE = [
    "consultations",
    "first_pass_compliance_rate",
    "escalation_rate",
    "holding_reply_rate",
    "refinements_per_turn",
    "goal_achieved_rate",
    "cases_total",
    "rules_active",
    "tokens_total",
    "cost_usd_total",
]


def print_summary(summary: RunSummary) -> None:
    width = max(len(k) for k in HEADLINE)
    print()
    print("Training run finished" + (" (scripted offline model)" if summary.scripted else ""))
    print("-" * (width + 14))
    for key in HEADLINE:
        value = summary.metrics.get(key, 0.0)
        shown = f"{value:.3f}" if not float(value).is_integer() else f"{int(value)}"
        print(f"{key:<{width}}  {shown:>10}")
    print("-" * (width + 14))
    print(f"MLflow run id   {summary.run_id}")
    print(f"run folder      {summary.run_dir}")
    print(f"open it with    mlflow ui --backend-store-uri {summary.tracking_uri}")


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    try:
        app = load_app_config(cfg)
        summary = asyncio.run(train(app, progress=sys.stderr.isatty()))
    except (
        ConfigError,
        ConfigurationError,
        LLMChainExhausted,
        MlflowException,
        ResumeMismatchError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print_summary(summary)


if __name__ == "__main__":
    main()
