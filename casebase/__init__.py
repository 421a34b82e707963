"""The advisor's dual memory: a case base of consultations that went well (episodic) and a rules
base of validated principles learnt from ones that did not (semantic), on Chroma.

Imports `simulacra` and `compliance` only. The environment opens both bases with `open_bases`,
plugs them into the advisor through `CaseRetriever` and `RuleRetriever`, drives rule accumulation
through `RuleAccumulator` with its own `Replayer`, reports each consultation's evidence about the
rules with `apply_consultation_evidence`, seeds the case base with `learn_knowledge`, and logs
`log_snapshot` to its run tracker.
"""

from casebase.accumulation import (
    AccumulationResult,
    FailureCase,
    PrincipleVerdict,
    Replayer,
    ReplayScore,
    ReplaySituation,
    RuleAccumulator,
    RuleCompliance,
)
from casebase.case_base import AddResult, CaseBase, CaseMatch
from casebase.classify import Classification, KeywordClassifier, TaskClassifier
from casebase.compliance_check import ValidatorRuleCompliance, verify_cases
from casebase.config import CasebaseConfig, StoreConfig
from casebase.evidence import RuleEvidence, apply_consultation_evidence
from casebase.factory import Bases, open_bases
from casebase.knowledge import KnowledgeLearning, knowledge_cases, learn_knowledge
from casebase.models import (
    TASK_TYPES,
    Case,
    CaseOutcome,
    GuidanceRule,
    ReplayComparison,
    TaskType,
    ValidationRecord,
)
from casebase.retrievers import CaseRetriever, RuleRetriever, classified_task_type
from casebase.rules_base import Admission, RuleCounts, RuleMatch, RulesBase
from casebase.scripted import register_casebase_handlers
from casebase.snapshot import Snapshot, SnapshotTracker, log_snapshot, snapshot
from casebase.store import EmbedderMismatchError
from casebase.tasks import PROMPTS_DIR

__all__ = [
    "PROMPTS_DIR",
    "TASK_TYPES",
    "AccumulationResult",
    "AddResult",
    "Admission",
    "Bases",
    "Case",
    "CaseBase",
    "CaseMatch",
    "CaseOutcome",
    "CaseRetriever",
    "CasebaseConfig",
    "Classification",
    "EmbedderMismatchError",
    "FailureCase",
    "GuidanceRule",
    "KeywordClassifier",
    "KnowledgeLearning",
    "PrincipleVerdict",
    "ReplayComparison",
    "ReplayScore",
    "ReplaySituation",
    "Replayer",
    "RuleAccumulator",
    "RuleCompliance",
    "RuleCounts",
    "RuleEvidence",
    "RuleMatch",
    "RuleRetriever",
    "RulesBase",
    "Snapshot",
    "SnapshotTracker",
    "StoreConfig",
    "TaskClassifier",
    "TaskType",
    "ValidationRecord",
    "ValidatorRuleCompliance",
    "apply_consultation_evidence",
    "classified_task_type",
    "knowledge_cases",
    "learn_knowledge",
    "log_snapshot",
    "open_bases",
    "register_casebase_handlers",
    "snapshot",
    "verify_cases",
]
