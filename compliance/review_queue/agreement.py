"""Agreement statistics: reviewer against reviewer, and judges against the human.

Both compare labels of the *candidate reply as written*: "approve" means it could go out as it
was, "reject" means it could not. By default an edit-and-approve counts as "reject", because the
reviewer changed the reply before letting it out, which is what a judge's "failed" verdict means
too; pass `edit_approve_as="approve"` to count edits as approvals instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from compliance.review_queue.models import Agreement, CodeAgreement, DecisionKind, JudgeVerdictRecord

Label = Literal["approve", "reject"]


def candidate_label(decision: DecisionKind, edit_approve_as: Label = "reject") -> Label:
    if decision == "edit_approve":
        return edit_approve_as
    return "approve" if decision == "approve" else "reject"


def cohen_kappa(pairs: Sequence[tuple[Label, Label]]) -> Agreement:
    """Cohen's kappa for two raters (first review, second review) over binary labels.

    kappa = (p_o - p_e) / (1 - p_e), p_e from each rater's own label frequencies. It is None when
    there are no pairs, or when p_e is 1 (both raters always gave the same single label, so
    agreement beyond chance cannot be measured).
    """
    n = len(pairs)
    if n == 0:
        return Agreement(items=0, observed=None, expected=None, kappa=None)
    observed = sum(1 for a, b in pairs if a == b) / n
    first_approve = sum(1 for a, _ in pairs if a == "approve") / n
    second_approve = sum(1 for _, b in pairs if b == "approve") / n
    expected = first_approve * second_approve + (1 - first_approve) * (1 - second_approve)
    kappa = None if expected >= 1.0 else (observed - expected) / (1.0 - expected)
    return Agreement(items=n, observed=observed, expected=expected, kappa=kappa)


class JudgedOutcome:
    """One closed item as the judge-agreement statistic needs it."""

    __slots__ = ("codes", "human_label", "human_reason_codes", "verdicts")

    def __init__(
        self,
        codes: Iterable[str],
        verdicts: Sequence[JudgeVerdictRecord],
        human_label: Label,
        human_reason_codes: Iterable[str],
    ) -> None:
        self.codes = set(codes)
        self.verdicts = verdicts
        self.human_label = human_label
        self.human_reason_codes = set(human_reason_codes)


def judge_agreement_by_code(outcomes: Iterable[JudgedOutcome]) -> list[CodeAgreement]:
    """Per code: the share of (item, judge) pairs where the judge and the human agreed on that code.

    The judge flags a code when it failed the reply citing that code; the human flags it when the
    final decision did not approve the reply as written and cited that code. Every code involved
    (escalated, cited by any judge, or cited by the human) is compared for every judge that gave a
    verdict; a judge that failed to answer is left out.
    """
    tally: dict[str, list[int]] = {}  # code -> [comparisons, matches, judge_flagged, human_flagged]
    for outcome in outcomes:
        answered = [v for v in outcome.verdicts if v.passed is not None]
        codes = set(outcome.codes) | outcome.human_reason_codes
        for verdict in answered:
            codes |= set(verdict.codes)
        for code in codes:
            human = outcome.human_label == "reject" and code in outcome.human_reason_codes
            row = tally.setdefault(code, [0, 0, 0, 0])
            row[3] += int(human)
            for verdict in answered:
                judge = verdict.passed is False and code in verdict.codes
                row[0] += 1
                row[1] += int(judge == human)
                row[2] += int(judge)
    return [
        CodeAgreement(
            code=code,
            comparisons=comparisons,
            matches=matches,
            rate=matches / comparisons if comparisons else None,
            judge_flagged=judge_flagged,
            human_flagged=human_flagged,
        )
        for code, (comparisons, matches, judge_flagged, human_flagged) in sorted(tally.items())
    ]
