"""The compliance codes rules are about, and what good practice does about each.

The codes themselves belong to `compliance`; this module adds the remedy side (situation, what to
do, why) from a data file, which the reflection and refinement prompts show the model so a rule
states a real remedy rather than a platitude.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict

from compliance.codes import CODE_INFO, ComplianceCode


class CodeGuidance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    summary: str
    situation: str
    do: str
    because: str
    source: str


def known_codes() -> frozenset[str]:
    return frozenset(code.value for code in ComplianceCode)


@cache
def _catalogue() -> dict[str, CodeGuidance]:
    text = resources.files("casebase").joinpath("data/code_guidance.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    unknown = set(raw) - known_codes()
    missing = known_codes() - set(raw)
    if unknown or missing:
        raise ValueError(
            f"code_guidance.yaml must cover exactly the compliance codes (unknown {sorted(unknown)}, "
            f"missing {sorted(missing)})"
        )
    return {
        code: CodeGuidance(code=code, summary=CODE_INFO[ComplianceCode(code)].summary, **entry)
        for code, entry in raw.items()
    }


def code_guidance(codes: Iterable[str]) -> list[CodeGuidance]:
    """Good practice for each known code, in the order given (unknown codes are skipped)."""
    catalogue = _catalogue()
    return [catalogue[c] for c in dict.fromkeys(codes) if c in catalogue]
