"""What one memory is: the Generative Agents memory object plus where it came from.

The paper's node has a description, creation and last-access times (virtual time), an importance
rating and a type; reflections cite the memories they rest on. We add provenance (who or what
wrote it, at which scope, in which consultation) because an advisor that learns from experience
must be able to say where each belief came from, and because upkeep (merging, summarising) must
never blur a customer's statement into the agent's own inference.

Embeddings are not on the node: the stream keeps them in one contiguous array so retrieval is a
vectorised scan rather than a walk over objects.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

IMPORTANCE_MIN = 1
IMPORTANCE_MAX = 10


class MemoryKind(StrEnum):
    OBSERVATION = "observation"
    REFLECTION = "reflection"
    PLAN = "plan"


class Scope(StrEnum):
    """How widely a memory applies: one session, one customer across sessions, or the whole application."""

    SESSION = "session"
    CUSTOMER = "customer"
    APPLICATION = "application"


class Provenance(BaseModel):
    model_config = ConfigDict(frozen=True)

    # Free text so domains can add their own sources; the usual ones are
    # "customer_statement", "agent", "tool", "reviewer".
    author: str = Field(min_length=1)
    scope: Scope = Scope.SESSION
    scope_id: str | None = None
    consultation_id: str | None = None


class MemoryNode(BaseModel):
    """A snapshot of one memory; changing it does not change the stream (use the stream's methods)."""

    id: str
    description: str = Field(min_length=1)
    kind: MemoryKind
    created_at: datetime
    last_accessed_at: datetime
    importance: int = Field(ge=IMPORTANCE_MIN, le=IMPORTANCE_MAX)
    citations: list[str] = Field(default_factory=list)
    provenance: Provenance
    metadata: dict[str, Any] = Field(default_factory=dict)


class CitationTree(BaseModel):
    """A memory and, recursively, the memories it cites: the evidence behind a reflection or plan."""

    node: MemoryNode
    children: list[CitationTree] = Field(default_factory=list)

    def ids(self) -> list[str]:
        """Every id in the tree, depth first, each once."""
        seen: dict[str, None] = {}
        stack = [self]
        while stack:
            tree = stack.pop()
            seen.setdefault(tree.node.id, None)
            stack.extend(reversed(tree.children))
        return list(seen)

    def leaves(self) -> list[MemoryNode]:
        """The memories at the bottom of the tree (normally observations)."""
        if not self.children:
            return [self.node]
        out: list[MemoryNode] = []
        for child in self.children:
            out.extend(child.leaves())
        return out
