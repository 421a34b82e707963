"""Personal recommendation: prohibited phrasing from the knowledge base, cleared by negation
("I can't say which is the best option for you"), by an indirect question just before it
("whether it's right for you"), and ignored inside quoted or reported speech."""

from __future__ import annotations

import re

from compliance.codes import ComplianceCode
from compliance.knowledge import KnowledgeBase
from compliance.knowledge.prefilter import FilteredPattern, LiteralScanner, Scan, ScannedUnion, SliceGate
from compliance.models import RuleHit
from compliance.rules.base import Analysis, BaseRule, kb_source
from compliance.text import Clause

# How close before a phrase an indirect-question word must be to make it a question being named.
_INDIRECT_WINDOW = 25


class PersonalRecommendationRule(BaseRule):
    rule_id = "recommendation.personal"
    code = ComplianceCode.PERSONAL_RECOMMENDATION

    def __init__(self, kb: KnowledgeBase, scanner: LiteralScanner | None = None) -> None:
        self.source = kb_source(kb, "advice_boundary")
        scanner = scanner or LiteralScanner()
        # Plain tuples, not the pydantic items: attribute access on models costs more than a match.
        self._patterns = []
        for p in kb.patterns("prohibited", self.code):
            regex = scanner.bind(p.regex)
            unless = None if p.unless is None else scanner.bind(p.unless)
            # The pattern without its assertions, searched once over the whole unquoted reply:
            # where it finds nothing, no own clause (each a slice of that text) can match.
            gate = SliceGate(regex)
            whole = FilteredPattern.of(p.pattern, re.MULTILINE)
            self._patterns.append((p.id, p.description, regex, unless, whole, gate))
        # All of them at once: most replies give none a candidate branch.
        self._any = ScannedUnion([p[2] for p in self._patterns])
        guards = {p.id: p.regex for p in kb.patterns("permitted", self.code)}
        self._declines = scanner.bind(guards["pr.declines"])
        self._indirect = scanner.bind(guards["pr.indirect_question"])
        self._option_list = scanner.bind(kb.lexicon("option_list").regex)
        self._modal_carried = scanner.bind(kb.lexicon("modal_carried").regex)
        self._emphatic = scanner.bind(kb.lexicon("emphatic_verdict_opening").regex)
        self._asks = scanner.bind(kb.lexicon("asks_for_recommendation").regex)

    def check(self, a: Analysis) -> list[RuleHit]:
        # A pattern is only tried if its relaxed form matches the unquoted reply (which holds every
        # own clause; the scan of it covers them all), so most replies are never split into
        # clauses; within a clause, the exception (`unless`) is only looked for once the pattern
        # has matched there.
        scan, unquoted = a.unquoted_scan, a.advisor_unquoted
        # "Is it worth staying in?" - "Definitely!": the opening yes is the verdict on their choice.
        opening = a.unquoted_sentences[0] if a.unquoted_sentences else ""
        if self._emphatic.search(opening, scan) and self._asks.search(a.customer, a.customer_scan):
            return [self.hit("An emphatic yes to a customer asking whether to make a decision.", opening)]
        if not self._any.may_match(scan):
            return []
        # Each pattern with the branches that may match some part of the reply (its gate searched
        # the whole reply once per branch): only those run in each clause.
        candidates = []
        for pattern in self._patterns:
            branches = pattern[5].branches(unquoted, scan)
            if branches is None:  # no scan of this engine's scanner: the gate alone
                if pattern[5].may_match(unquoted, scan):
                    candidates.append((pattern, None))
            elif branches:
                candidates.append((pattern, branches))
        if not candidates:
            return []
        hits: list[RuleHit] = []
        clauses = a.own_clauses
        for (pattern_id, description, regex, unless, whole, _gate), branches in candidates:
            imperative = pattern_id == "pr.imperative"
            # A gated pattern is checked clause by clause (running only its branches whose literals
            # occur); one with no literal to gate on is searched once over the whole text (one
            # clause a line, so "^" still means a clause start) and only the clauses it touches
            # are checked.
            indices = a.clauses_touched(whole) if whole.ungated else range(len(clauses))
            for index in indices:
                text = clauses[index].text
                matches = (
                    regex.finditer(text, scan)
                    if branches is None
                    else regex.finditer_branches(text, branches)
                )
                steering = [m for m in matches if not self._cleared(text, m, scan)]
                if steering and imperative and self._permission_carried(a, clauses[index]):
                    continue
                if steering and imperative:
                    # "You could take it as one payment, take it bit by bit, or...": an item of a
                    # list opened by a permission in the same clause is still an option.
                    steering = [
                        m
                        for m in steering
                        if not m.group().startswith(", ")
                        or self._modal_carried.search(text[: m.start() + 2], scan) is None
                    ]
                if steering and (unless is None or unless.search(text, scan) is None):
                    # In a numbered list of options each item opens with a verb: none of them is
                    # an instruction. (Looked for only once an imperative would be reported: the
                    # list search runs over the whole reply, and most replies have no imperative.)
                    if not (imperative and self._option_list.search(unquoted, scan) is not None):
                        hits.append(self.hit(f"{description} ({pattern_id})", text))
                    break
        return hits

    def _permission_carried(self, a: Analysis, clause: Clause) -> bool:
        """The clause continues a permission with "and"/"or" ("you can take 25%, and leave the rest
        invested"): its opening verb is still what the customer can do."""
        sentence = a.unquoted_sentences[clause.sentence_index]
        position = sentence.find(clause.text)
        return position > 0 and self._modal_carried.search(sentence[:position], a.unquoted_scan) is not None

    def _cleared(self, clause: str, match: re.Match[str], scan: Scan | None) -> bool:
        prefix = clause[: match.start()]
        return (
            self._declines.search(prefix, scan) is not None
            or self._indirect.search(prefix[-_INDIRECT_WINDOW:], scan) is not None
        )
