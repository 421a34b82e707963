"""Speed of the validator's rule stage (stage 1) on one core.

    python -m benchmarks.validator            (default: 30,000 utterances, a few seconds)
    python -m benchmarks.validator --n 200000

Cycles through the development set (compliance/data/dev.jsonl), building each utterance context
once, then times `RulesOnlyValidator.validate_sync` per utterance: every rule, the shared text
analysis (including the one literal scan per text that tells each pattern which of its branches
can match) and the high-stakes check, exactly what the `rules` evaluation mode runs. Nothing is
kept from one utterance to the next except compiled patterns. One process, one thread, so the
figure is per core. Regexes are compiled when the engine is built (timed separately as
`build_seconds`); a warm-up pass (not timed) takes first-call costs, among them compiling the
alternations of candidate branches a pattern first meets (cached per pattern, as `re` caches
compiled patterns).

The last line printed is one JSON object: n, utterances_per_second, p50_us, p95_us, seconds,
target_per_second, meets_target (and build_seconds, dataset, cases, flagged_share).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from compliance.knowledge import load_knowledge
from compliance.models import UtteranceContext, load_dataset
from compliance.rules import RuleEngine
from compliance.rules_only import RulesOnlyValidator

DEV_SET = Path(__file__).resolve().parents[1] / "compliance" / "data" / "dev.jsonl"
# The target for the rule stage: at least 5,000 utterances a second on one core.
TARGET_PER_SECOND = 5000


def percentile(sorted_values: list[float], share: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    index = min(len(sorted_values) - 1, max(0, round(share * len(sorted_values)) - 1))
    return sorted_values[index]


def run(n: int, dataset: Path) -> dict[str, object]:
    if n < 1:
        raise ValueError("--n must be at least 1")
    started = time.perf_counter()
    validator = RulesOnlyValidator(RuleEngine(load_knowledge()))
    build_seconds = time.perf_counter() - started
    contexts: list[UtteranceContext] = [case.context() for case in load_dataset(dataset)]
    for ctx in contexts:  # warm-up: first-call costs (lazy imports, pydantic caches) are not timed
        validator.validate_sync(ctx)
    timings: list[float] = []
    flagged = 0
    clock = time.perf_counter
    begin = clock()
    for i in range(n):
        ctx = contexts[i % len(contexts)]
        t0 = clock()
        result = validator.validate_sync(ctx)
        timings.append(clock() - t0)
        flagged += not result.compliant
    seconds = clock() - begin
    timings.sort()
    per_second = n / seconds
    return {
        "n": n,
        "utterances_per_second": round(per_second, 1),
        "p50_us": round(statistics.median(timings) * 1e6, 1),
        "p95_us": round(percentile(timings, 0.95) * 1e6, 1),
        "seconds": round(seconds, 3),
        "target_per_second": TARGET_PER_SECOND,
        "meets_target": per_second >= TARGET_PER_SECOND,
        "build_seconds": round(build_seconds, 3),
        "dataset": str(dataset),
        "cases": len(contexts),
        "flagged_share": round(flagged / n, 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.validator", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--n", type=int, default=30_000, help="utterances to validate (cycling the dataset)")
    parser.add_argument(
        "--dataset", type=Path, default=DEV_SET, help="labelled JSONL whose utterances are cycled"
    )
    args = parser.parse_args(argv)
    figures = run(args.n, args.dataset)
    print(
        f"rule stage: {figures['utterances_per_second']:,.0f} utterances/s on one core "
        f"(p50 {figures['p50_us']} us, p95 {figures['p95_us']} us, target {TARGET_PER_SECOND:,}/s)"
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
