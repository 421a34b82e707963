"""Building both bases from config: the store client, the two collections and their settings."""

from __future__ import annotations

from dataclasses import dataclass

from chromadb.api import ClientAPI

from casebase.case_base import CaseBase, case_collection
from casebase.classify import KeywordClassifier, TaskClassifier
from casebase.config import CasebaseConfig
from casebase.rules_base import RulesBase, rule_collection
from casebase.store import open_client
from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder
from simulacra.memory.importance import LLMCaller


@dataclass
class Bases:
    cases: CaseBase
    rules: RulesBase
    client: ClientAPI


def open_bases(
    config: CasebaseConfig, embedder: Embedder, clock: Clock, llm: LLMCaller | None = None
) -> Bases:
    """Open (or create) the case and rules collections where the config points.

    `llm` serves task classification and contradiction checks; without one, classification uses
    keywords and proposed rules cannot be checked for contradictions (so they are rejected).
    """
    client = open_client(config.store)
    prefix = config.store.collection_prefix
    classifier = TaskClassifier(llm, KeywordClassifier(default=config.cases.default_task_type))
    cases = CaseBase(
        case_collection(
            client,
            prefix + config.store.cases_collection,
            embedder,
            empty_recheck_s=config.store.empty_recheck_s,
        ),
        clock,
        config.cases,
        classifier,
    )
    rules = RulesBase(
        rule_collection(
            client,
            prefix + config.store.rules_collection,
            embedder,
            empty_recheck_s=config.store.empty_recheck_s,
        ),
        clock,
        config.rules,
        llm,
    )
    return Bases(cases=cases, rules=rules, client=client)
