"""The rule engine: runs every deterministic rule over an utterance and collects the hits."""

from __future__ import annotations

from collections.abc import Sequence

from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import LiteralScanner
from compliance.models import RuleReport, UtteranceContext
from compliance.rules.base import Analysis, Rule
from compliance.rules.certainty import FalseCertaintyRule, PromisedOutcomeRule
from compliance.rules.db_transfer import DbAdviceSignpostRule, DbWarningRule
from compliance.rules.disclosures import PensionWiseNudgeRule, RiskDisclosureRule
from compliance.rules.facts import (
    EarlyAccessClaimRule,
    FalseClaimRule,
    FigureCheckRule,
    UnfundedTransferClaimRule,
)
from compliance.rules.recommendation import PersonalRecommendationRule
from compliance.rules.scams import ScamRedFlagRule
from compliance.rules.signposting import AdviceRequestSignpostRule
from compliance.rules.topics import Topics
from compliance.rules.vulnerable import JargonRule, PressureRule


def default_rules(kb: KnowledgeBase, topics: Topics | None = None) -> list[Rule]:
    """Every rule, sharing `topics` and its literal scanner (so one scan per text serves them all)."""
    topics = topics or Topics(kb)
    scanner = topics.scanner
    return [
        PersonalRecommendationRule(kb, scanner),
        DbWarningRule(kb, topics),
        DbAdviceSignpostRule(kb, topics),
        AdviceRequestSignpostRule(kb, topics),
        RiskDisclosureRule(kb, topics),
        PensionWiseNudgeRule(kb, topics),
        FigureCheckRule(kb, scanner),
        FalseClaimRule(kb, scanner),
        EarlyAccessClaimRule(kb, scanner),
        UnfundedTransferClaimRule(kb, scanner),
        FalseCertaintyRule(kb, scanner),
        PromisedOutcomeRule(kb, scanner),
        ScamRedFlagRule(kb, topics),
        JargonRule(kb, topics),
        PressureRule(kb, topics),
    ]


class RuleEngine:
    """Stage 1 of the validator. Regexes are compiled once here; `check` only matches.

    The rules' patterns are bound to one `LiteralScanner`, so each text of an utterance is scanned
    once for all their literals and every pattern then runs only the branches that can match.
    """

    def __init__(self, kb: KnowledgeBase, rules: Sequence[Rule] | None = None) -> None:
        self.kb = kb
        self.scanner = LiteralScanner()
        self.topics = Topics(kb, self.scanner)
        self.rules: list[Rule] = list(rules) if rules is not None else default_rules(kb, self.topics)
        ids = [r.rule_id for r in self.rules]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate rule ids: {sorted(i for i in ids if ids.count(i) > 1)}")
        self._reported = self.scanner.bind(kb.lexicon("reported_speech").regex)
        self.scanner.prepare()

    def analyse(self, ctx: UtteranceContext) -> Analysis:
        return Analysis(ctx, self._reported, self.scanner)

    def check(self, ctx: UtteranceContext) -> RuleReport:
        analysis = self.analyse(ctx)
        hits = []
        for rule in self.rules:
            hits.extend(rule.check(analysis))
        return RuleReport(hits=hits)
