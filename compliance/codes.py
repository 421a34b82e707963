"""The fixed compliance vocabulary shared by rules, judges, the review queue and the datasets.

Codes are never renamed (DESIGN.md); which of them are hard constraints is data here so the hybrid
validator can veto on a failed hard rule without calling any judge.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict


class ComplianceCode(StrEnum):
    PERSONAL_RECOMMENDATION = "PERSONAL_RECOMMENDATION"
    MISSING_DB_WARNING = "MISSING_DB_WARNING"
    MISSING_ADVICE_SIGNPOST = "MISSING_ADVICE_SIGNPOST"
    MISSING_RISK_DISCLOSURE = "MISSING_RISK_DISCLOSURE"
    MISSING_PENSION_WISE_NUDGE = "MISSING_PENSION_WISE_NUDGE"
    FALSE_CERTAINTY = "FALSE_CERTAINTY"
    FACTUAL_ERROR = "FACTUAL_ERROR"
    SCAM_RISK_IGNORED = "SCAM_RISK_IGNORED"
    UNSUITABLE_FOR_VULNERABLE = "UNSUITABLE_FOR_VULNERABLE"
    PROMISES_OUTCOME = "PROMISES_OUTCOME"


class CodeInfo(BaseModel):
    """What a code means and where the obligation comes from, for reports, prompts and reviewers."""

    model_config = ConfigDict(frozen=True)

    code: ComplianceCode
    hard: bool
    summary: str
    source: str


_INFO = (
    CodeInfo(
        code=ComplianceCode.PERSONAL_RECOMMENDATION,
        hard=True,
        summary="Recommends or steers the customer to a particular course of action as suitable for them.",
        source="RAO art 53(1C)-(1D); PERG 8.30B; PERG 8.28",
    ),
    CodeInfo(
        code=ComplianceCode.MISSING_DB_WARNING,
        hard=True,
        summary="A DB transfer or cash-in is discussed without warning that guaranteed benefits are given up.",
        source="Pension Schemes Act 2015 s48; COBS 19.1; FCA PS18/6",
    ),
    CodeInfo(
        code=ComplianceCode.MISSING_ADVICE_SIGNPOST,
        hard=True,
        summary=(
            "The customer asks what to do, or a DB transfer over the advice threshold is in play, "
            "and the reply does not point to regulated advice."
        ),
        source="PERG 8.30B; Pension Schemes Act 2015 s48; COBS 19.1",
    ),
    CodeInfo(
        code=ComplianceCode.MISSING_RISK_DISCLOSURE,
        hard=False,
        summary="Options for using pension money are described without their risks.",
        source="COBS 19.7 (retirement risk warnings); PRIN 2A.5",
    ),
    CodeInfo(
        code=ComplianceCode.MISSING_PENSION_WISE_NUDGE,
        hard=False,
        summary="Accessing DC savings is discussed without explaining free Pension Wise guidance.",
        source="COBS 19.7 (pensions stronger nudge)",
    ),
    CodeInfo(
        code=ComplianceCode.FALSE_CERTAINTY,
        hard=False,
        summary="Presents uncertain matters (markets, future rules, outcomes) as certain.",
        source="COBS 4.2.1R (fair, clear and not misleading); PRIN 2A.5",
    ),
    CodeInfo(
        code=ComplianceCode.FACTUAL_ERROR,
        hard=True,
        summary="A wrong figure, date or rule.",
        source="COBS 4.2.1R; the knowledge base's sources for each figure",
    ),
    CodeInfo(
        code=ComplianceCode.SCAM_RISK_IGNORED,
        hard=True,
        summary="The customer describes scam red flags and the reply does not warn them.",
        source="FCA ScamSmart; TPR pension scams guidance",
    ),
    CodeInfo(
        code=ComplianceCode.UNSUITABLE_FOR_VULNERABLE,
        hard=False,
        summary="Unexplained jargon or pressure with a vulnerable or low-literacy customer.",
        source="FG21/1; PRIN 2A.5",
    ),
    CodeInfo(
        code=ComplianceCode.PROMISES_OUTCOME,
        hard=False,
        summary="Promises or guarantees a result (returns, income, a pot lasting, being better off).",
        source="COBS 4.2.1R; COBS 4.6; PRIN 2A.5",
    ),
)

CODE_INFO = MappingProxyType({info.code: info for info in _INFO})
HARD_CONSTRAINTS: frozenset[ComplianceCode] = frozenset(info.code for info in _INFO if info.hard)


def is_hard(code: ComplianceCode) -> bool:
    return code in HARD_CONSTRAINTS
