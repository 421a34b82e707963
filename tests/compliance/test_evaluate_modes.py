"""The evaluation harness in its LLM-judge modes, run as the command line a user types."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEV = REPO / "compliance" / "data" / "dev.jsonl"
KEYS = {
    "cases",
    "accuracy",
    "violation_recall",
    "false_positive_rate",
    "per_code_recall",
    "escalation_agreement",
    "seconds",
}


def evaluate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "compliance.evaluate", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("mode", ["training", "production", "batch_qa"])
def test_judge_modes_score_the_development_set(mode: str, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    result = evaluate(str(DEV), "--mode", mode, "--llm", "scripted", "--predictions", str(predictions))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(summary) >= KEYS and summary["mode"] == mode
    lines = [json.loads(line) for line in predictions.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == summary["cases"] == sum(1 for line in DEV.read_text().splitlines() if line.strip())
    assert {"id", "compliant", "violations", "escalate", "decided_by"} <= set(lines[0])
    stages = {line["decided_by"] for line in lines}
    assert stages == {"rules", "judges"}  # hard failures veto at the rules; the rest go to judges


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "training"], "needs --llm"),
        (["--mode", "production", "--llm", "openai"], "OPENAI_API_KEY"),
        (["--mode", "production", "--llm", "nonsense"], "no llm config 'nonsense'"),
        (["--mode", "training", "--llm", "scripted", "--validator-config", "production"], "is for mode"),
    ],
)
def test_a_judge_mode_without_what_it_needs_is_a_clear_error(args: list[str], message: str) -> None:
    result = evaluate(str(DEV), *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_malformed_dataset_line_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DEV.read_text().splitlines()[0] + "\n{not json\n", encoding="utf-8")
    result = evaluate(str(bad), "--mode", "rules")
    assert result.returncode == 2 and f"{bad}:2: not valid JSON" in result.stderr
