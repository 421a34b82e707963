"""The Generative Agents memory: nodes, the stream, retrieval at scale, importance and upkeep.

Reflection and planning live beside these modules (`simulacra.memory.reflection`,
`simulacra.memory.planning`) and build on the stream.
"""

from simulacra.llm.providers.scripted import ScriptedHandlers
from simulacra.memory.importance import (
    IMPORTANCE_TASK,
    ImportanceRater,
    ImportanceRatingError,
    LLMImportanceRater,
    register_importance_handlers,
)
from simulacra.memory.node import CitationTree, MemoryKind, MemoryNode, Provenance, Scope
from simulacra.memory.retrieval import RetrievalConfig, RetrievalFilter, ScoredMemory
from simulacra.memory.stream import MemoryStream, NewMemory
from simulacra.memory.upkeep import (
    SESSION_SUMMARY_TASK,
    MergeReport,
    merge_near_duplicates,
    register_upkeep_handlers,
    summarise_session,
)


def register_memory_handlers(handlers: ScriptedHandlers) -> None:
    """Scripted answers for the memory tasks (importance rating, session summaries)."""
    register_importance_handlers(handlers)
    register_upkeep_handlers(handlers)


__all__ = [
    "IMPORTANCE_TASK",
    "SESSION_SUMMARY_TASK",
    "CitationTree",
    "ImportanceRater",
    "ImportanceRatingError",
    "LLMImportanceRater",
    "MemoryKind",
    "MemoryNode",
    "MemoryStream",
    "MergeReport",
    "NewMemory",
    "Provenance",
    "RetrievalConfig",
    "RetrievalFilter",
    "Scope",
    "ScoredMemory",
    "merge_near_duplicates",
    "register_importance_handlers",
    "register_memory_handlers",
    "register_upkeep_handlers",
    "summarise_session",
]
