"""Evaluation harness: score a validator on a labelled utterance dataset (DESIGN.md).

    python -m compliance.evaluate DATASET.jsonl --mode rules [--predictions FILE]

The last line printed is one JSON object with cases, accuracy, violation_recall,
false_positive_rate, per_code_recall, escalation_agreement and seconds. The harness only knows the
`Validator` protocol; `build_validator` maps a mode to a validator, so the LLM-judge modes
(training, production, batch_qa) plug in there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf
from pydantic import BaseModel, ValidationError

from compliance.codes import HARD_CONSTRAINTS, ComplianceCode
from compliance.config import ValidatorConfig, build_judge_panel
from compliance.config import build_validator as build_hybrid_validator
from compliance.knowledge import KnowledgeBase, KnowledgeError, load_knowledge
from compliance.models import DatasetError, LabelledCase, ValidationResult, Validator, load_dataset
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator
from compliance.scripted import register_compliance_handlers
from simulacra.llm.config import LLMConfig
from simulacra.llm.errors import ConfigurationError, LLMChainExhausted
from simulacra.llm.providers.scripted import ScriptedHandlers

MODES = ("rules", "training", "production", "batch_qa")
JUDGE_MODES = ("training", "production", "batch_qa")


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


class ValidatorConfigError(ValueError):
    """A mode asked for without what it needs; the message names the missing option."""


def load_group(group: str, name: str, conf_dir: Path = CONF_DIR) -> dict:
    """One file of a Hydra config group (`conf/<group>/<name>.yaml`) as plain data."""
    path = conf_dir / group / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
        raise ValidatorConfigError(
            f"no {group} config {name!r} in {conf_dir / group} (known: {', '.join(known)})"
        )
    data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    assert isinstance(data, dict)
    return data


def judge_llm_config(spec: str, conf_dir: Path = CONF_DIR) -> LLMConfig:
    """`--llm NAME[:MODEL]`: an `llm` config (scripted, openai, anthropic), optionally another model."""
    name, _, model = spec.partition(":")
    data = load_group("llm", name, conf_dir)
    if model:
        data["chain"] = [{**data["chain"][0], "model": model}]
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as exc:
        raise ValidatorConfigError(f"llm config {name!r}: {exc}") from exc


def build_validator(
    mode: str,
    kb: KnowledgeBase | None = None,
    llm: str | None = None,
    *,
    validator_config: str | None = None,
    seed: int = 0,
    conf_dir: Path = CONF_DIR,
) -> Validator:
    """The validator for an evaluation mode.

    `rules` is the deterministic stage alone. The judge modes read the mode's panel from
    `conf/validator/<mode>.yaml` (or `validator_config`, e.g. production_multivendor) and run it on
    the `--llm` chain; judges with their own chains in that file keep them.
    """
    if mode not in MODES:
        raise ValidatorConfigError(f"unknown mode {mode!r}: choose one of {', '.join(MODES)}")
    kb = kb or load_knowledge()
    if mode == "rules":
        return RulesOnlyValidator(RuleEngine(kb))
    if llm is None:
        raise ValidatorConfigError(
            f"mode {mode!r} runs LLM judges and needs --llm (the judge provider, e.g. --llm scripted, "
            "--llm openai or --llm anthropic:MODEL); use --mode rules for the deterministic stage alone"
        )
    try:
        config = ValidatorConfig.model_validate(load_group("validator", validator_config or mode, conf_dir))
    except ValidationError as exc:
        raise ValidatorConfigError(f"validator config {validator_config or mode!r}: {exc}") from exc
    if config.mode != mode:
        raise ValidatorConfigError(
            f"validator config {validator_config!r} is for mode {config.mode!r}, not {mode!r}"
        )
    handlers = ScriptedHandlers()
    register_compliance_handlers(handlers)
    try:
        panel = build_judge_panel(config, judge_llm_config(llm, conf_dir), handlers=handlers, seed=seed)
    except ConfigurationError as exc:
        raise ValidatorConfigError(str(exc)) from exc
    return build_hybrid_validator(config, kb, panel)


class Prediction(BaseModel):
    id: str
    compliant: bool
    violations: list[ComplianceCode]
    escalate: bool
    decided_by: str


class Summary(BaseModel):
    mode: str
    cases: int
    accuracy: float
    violation_recall: float | None
    false_positive_rate: float | None
    per_code_recall: dict[str, float]
    per_code_support: dict[str, int]
    per_code_precision: dict[str, float]
    hard_constraint_recall_min: float | None
    escalation_agreement: float
    seconds: float


def _ratio(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else round(numerator / denominator, 4)


def score(
    cases: Sequence[LabelledCase], results: Sequence[ValidationResult], mode: str, seconds: float
) -> Summary:
    if len(cases) != len(results):
        raise ValueError("one result per case is required")
    pairs = list(zip(cases, results, strict=True))
    violating = [(c, r) for c, r in pairs if not c.expected.compliant]
    clean = [(c, r) for c, r in pairs if c.expected.compliant]
    codes = sorted({code for c in cases for code in c.expected.violations})
    recall: dict[str, float] = {}
    support: dict[str, int] = {}
    for code in codes:
        labelled = [(c, r) for c, r in pairs if code in c.expected.violations]
        support[code] = len(labelled)
        recall[code] = round(sum(code in r.violations for _, r in labelled) / len(labelled), 4)
    precision: dict[str, float] = {}
    for code in sorted({code for r in results for code in r.violations}):
        flagged = [(c, r) for c, r in pairs if code in r.violations]
        precision[code] = round(sum(code in c.expected.violations for c, _ in flagged) / len(flagged), 4)
    hard = [recall[code] for code in codes if ComplianceCode(code) in HARD_CONSTRAINTS]
    return Summary(
        mode=mode,
        cases=len(cases),
        accuracy=round(sum(c.expected.compliant == r.compliant for c, r in pairs) / max(len(pairs), 1), 4),
        violation_recall=_ratio(sum(not r.compliant for _, r in violating), len(violating)),
        false_positive_rate=_ratio(sum(not r.compliant for _, r in clean), len(clean)),
        per_code_recall=recall,
        per_code_support=support,
        per_code_precision=precision,
        hard_constraint_recall_min=min(hard) if hard else None,
        escalation_agreement=round(
            sum(c.expected.must_escalate == r.escalate for c, r in pairs) / max(len(pairs), 1), 4
        ),
        seconds=round(seconds, 4),
    )


async def run_validator(
    validator: Validator, cases: Sequence[LabelledCase], concurrency: int = 8
) -> list[ValidationResult]:
    """Validate every case, at most `concurrency` at a time (judges are network-bound)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(case: LabelledCase) -> ValidationResult:
        async with gate:
            return await validator.validate(case.context())

    return list(await asyncio.gather(*(one(case) for case in cases)))


def write_predictions(path: Path, cases: Sequence[LabelledCase], results: Sequence[ValidationResult]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for case, result in zip(cases, results, strict=True):
            prediction = Prediction(
                id=case.id,
                compliant=result.compliant,
                violations=result.violations,
                escalate=result.escalate,
                decided_by=result.decided_by,
            )
            out.write(prediction.model_dump_json() + "\n")


def _report(summary: Summary) -> list[str]:
    lines = [f"{summary.cases} cases, mode {summary.mode}: accuracy {summary.accuracy}"]
    lines.append(
        f"violation recall {summary.violation_recall}, false-positive rate {summary.false_positive_rate}, "
        f"escalation agreement {summary.escalation_agreement}"
    )
    for code, value in summary.per_code_recall.items():
        mark = " (hard)" if ComplianceCode(code) in HARD_CONSTRAINTS else ""
        lines.append(f"  {code:<28} recall {value:.3f}  n={summary.per_code_support[code]}{mark}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compliance.evaluate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--mode", choices=MODES, default="rules")
    parser.add_argument(
        "--llm", default=None, help="judge provider for the LLM modes, e.g. scripted or openai:MODEL"
    )
    parser.add_argument("--predictions", type=Path, default=None, help="write one JSON line per case here")
    parser.add_argument(
        "--knowledge", type=Path, default=None, help="knowledge folder (default: the packaged one)"
    )
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--validator-config",
        default=None,
        help="validator config file for the judge modes (default: the mode's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the scripted judges")
    args = parser.parse_args(argv)
    try:
        kb = load_knowledge(args.knowledge)
        cases = load_dataset(args.dataset)
        validator = build_validator(
            args.mode, kb=kb, llm=args.llm, validator_config=args.validator_config, seed=args.seed
        )
    except (DatasetError, KnowledgeError, ValidatorConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        results = asyncio.run(run_validator(validator, cases, args.concurrency))
    except LLMChainExhausted as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = score(cases, results, args.mode, time.perf_counter() - started)
    if args.predictions is not None:
        write_predictions(args.predictions, cases, results)
    for line in _report(summary):
        print(line)
    print(json.dumps(summary.model_dump(), sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
