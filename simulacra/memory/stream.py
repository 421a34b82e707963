"""The memory stream: an agent's append-only record of observations, reflections and plans.

It owns the memory table (columns), the embedding matrix and, once the stream is large, the IVF
index, and keeps them in step. Everything time-related comes from the injected clock. Adding is
all-or-nothing: citations are checked before any model is called, and rows are appended only
once every rating and embedding is in hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from simulacra.clock import Clock
from simulacra.embeddings.base import Embedder, embed_async
from simulacra.memory.ann import IVFIndex
from simulacra.memory.columns import KIND_CODE, MemoryTable, TimeCodec, node_id, row_of
from simulacra.memory.importance import ImportanceRater
from simulacra.memory.matrix import EmbeddingMatrix
from simulacra.memory.node import (
    IMPORTANCE_MAX,
    IMPORTANCE_MIN,
    CitationTree,
    MemoryKind,
    MemoryNode,
    Provenance,
)
from simulacra.memory.retrieval import RetrievalConfig, RetrievalFilter, ScoredMemory, filter_mask, rank
from simulacra.memory.store import load_stream, save_stream


class NewMemory(BaseModel):
    description: str = Field(min_length=1)
    kind: MemoryKind
    provenance: Provenance
    importance: int | None = Field(default=None, ge=IMPORTANCE_MIN, le=IMPORTANCE_MAX)
    citations: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class RetrievalStats(BaseModel):
    """How the last query was answered (for benchmarks and diagnostics)."""

    eligible: int
    candidates: int
    approximate: bool


def _check_metadata(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Metadata must survive a JSON round trip unchanged, or a saved stream would not load back equal."""
    if not metadata:
        return None
    try:
        restored = json.loads(json.dumps(metadata))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"memory metadata must be JSON data: {exc}") from exc
    if restored != metadata:
        raise ValueError(
            "memory metadata must be JSON data (tuples, sets and non-string keys do not round-trip)"
        )
    return restored


def _unit_rows(vectors: np.ndarray, dimension: int) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise ValueError(f"expected embeddings of shape (n, {dimension}), got {vectors.shape}")
    if not np.isfinite(vectors).all():
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


class MemoryStream:
    """One agent's memories. Not safe to share between threads; coroutines on one loop are fine."""

    def __init__(
        self,
        embedder: Embedder,
        clock: Clock,
        rater: ImportanceRater,
        config: RetrievalConfig | None = None,
    ) -> None:
        self.embedder = embedder
        self.clock = clock
        self.rater = rater
        self.config = config or RetrievalConfig()
        self.table = MemoryTable(TimeCodec())
        precision = "bfloat16" if self.config.embedding_precision == "bfloat16" else "float32"
        self.matrix = EmbeddingMatrix(embedder.dimension, precision)
        self.index: IVFIndex | None = None
        self.last_retrieval: RetrievalStats | None = None

    # -- size and lookup

    def __len__(self) -> int:
        """Every memory ever stored, including ones retired by upkeep (their ids stay valid)."""
        return self.table.n

    def __contains__(self, node_id_: object) -> bool:
        return isinstance(node_id_, str) and self._row(node_id_) is not None

    @property
    def active_count(self) -> int:
        return int(np.count_nonzero(self.table.active))

    def _row(self, node_id_: str) -> int | None:
        row = row_of(node_id_)
        return row if row is not None and row < self.table.n else None

    def row(self, node_id_: str) -> int:
        row = self._row(node_id_)
        if row is None:
            raise KeyError(f"no memory with id {node_id_!r} in this stream ({self.table.n} memories)")
        return row

    def get(self, node_id_: str) -> MemoryNode:
        return self.table.node(self.row(node_id_))

    def embedding(self, node_id_: str) -> np.ndarray:
        """The stored embedding of a memory, as float32."""
        return self.matrix.rows(np.array([self.row(node_id_)]))[0]

    def nodes(
        self,
        kind: MemoryKind | None = None,
        since: datetime | None = None,
        filter: RetrievalFilter | None = None,
        *,
        last: int | None = None,
        include_retired: bool = False,
    ) -> list[MemoryNode]:
        """Memories in creation order; `last` keeps only the newest ones (cheap on large streams)."""
        update: dict[str, Any] = {}
        base = filter or RetrievalFilter()
        if kind is not None:
            update["kinds"] = {kind} if base.kinds is None else {kind} & set(base.kinds)
        if since is not None:
            update["since"] = since if base.since is None else max(since, base.since)
        chosen = base.model_copy(update=update) if update else base
        rows = np.flatnonzero(filter_mask(self.table, chosen, include_retired=include_retired))
        if last is not None:
            rows = rows[max(len(rows) - last, 0) :] if last > 0 else rows[:0]
        return [self.table.node(int(r)) for r in rows]

    # -- adding

    async def add(
        self,
        description: str,
        kind: MemoryKind,
        provenance: Provenance,
        *,
        importance: int | None = None,
        citations: Iterable[str] = (),
        metadata: dict[str, Any] | None = None,
    ) -> MemoryNode:
        item = NewMemory(
            description=description,
            kind=kind,
            provenance=provenance,
            importance=importance,
            citations=list(citations),
            metadata=metadata or {},
        )
        return (await self.add_many([item]))[0]

    async def add_many(self, items: Sequence[NewMemory]) -> list[MemoryNode]:
        """Store several memories with one batched rating and one batched embedding call."""
        if not items:
            return []
        cited = [self._resolve_citations(item.citations) for item in items]
        metadata = [_check_metadata(item.metadata) for item in items]
        descriptions = [item.description for item in items]
        unrated = [i for i, item in enumerate(items) if item.importance is None]
        ratings = [item.importance for item in items]
        if unrated:
            given = await self.rater.rate([descriptions[i] for i in unrated])
            if len(given) != len(unrated):
                raise ValueError(
                    f"the importance rater returned {len(given)} ratings for {len(unrated)} memories"
                )
            for i, rating in zip(unrated, given, strict=True):
                if not IMPORTANCE_MIN <= int(rating) <= IMPORTANCE_MAX:
                    raise ValueError(f"importance {rating} for {descriptions[i]!r} is outside 1..10")
                ratings[i] = int(rating)
        # One text is embedded where we are, as a query is (`_query_vector`): handing it to a
        # thread costs more than embedding it. Batches go to a thread.
        embedded = (
            self.embedder.embed(descriptions)
            if len(descriptions) == 1
            else await embed_async(self.embedder, descriptions)
        )
        vectors = _unit_rows(embedded, self.matrix.dimension)
        if len(vectors) != len(items):
            raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(items)} texts")
        now = self.table.codec.encode(self.clock.now())
        times = np.full(len(items), now, dtype=np.int64)
        rows = self._append(
            descriptions=descriptions,
            kinds=np.array([KIND_CODE[item.kind] for item in items], dtype=np.int8),
            created_us=times,
            last_us=times,
            importance=np.array(ratings, dtype=np.int8),
            provenance_codes=self.table.provenance_codes([item.provenance for item in items]),
            citations=cited,
            metadata=metadata,
            vectors=vectors,
        )
        return [self.table.node(r) for r in rows]

    def import_rows(
        self,
        *,
        descriptions: Sequence[str],
        embeddings: np.ndarray,
        importance: np.ndarray,
        kinds: MemoryKind | Sequence[MemoryKind],
        provenance: Provenance | Sequence[Provenance],
        created_at: np.ndarray,
        last_accessed_at: np.ndarray | None = None,
    ) -> range:
        """Bulk-load already rated and embedded memories (imports, benchmarks); returns their rows.

        Times are numpy datetime64 arrays (UTC when the stream uses aware datetimes). Nothing is
        stored unless every row is valid.
        """
        n = len(descriptions)
        if any(not d for d in descriptions):
            raise ValueError("every memory needs a non-empty description")
        importance = np.asarray(importance)
        if (
            importance.shape != (n,)
            or importance.min(initial=IMPORTANCE_MIN) < IMPORTANCE_MIN
            or importance.max(initial=IMPORTANCE_MAX) > IMPORTANCE_MAX
        ):
            raise ValueError(f"importance must be {n} integers in 1..10")
        kind_codes = (
            np.full(n, KIND_CODE[kinds], dtype=np.int8)
            if isinstance(kinds, MemoryKind)
            else np.array([KIND_CODE[k] for k in kinds], dtype=np.int8)
        )
        provenances = [provenance] * n if isinstance(provenance, Provenance) else list(provenance)
        created_us = self._micros(created_at, n)
        last_us = created_us if last_accessed_at is None else self._micros(last_accessed_at, n)
        if len(kind_codes) != n or len(provenances) != n:
            raise ValueError("kinds and provenance must be one value or one per memory")
        vectors = _unit_rows(embeddings, self.matrix.dimension)
        if len(vectors) != n:
            raise ValueError(f"{len(vectors)} embeddings for {n} descriptions")
        return self._append(
            descriptions=list(descriptions),
            kinds=kind_codes,
            created_us=created_us,
            last_us=last_us,
            importance=importance.astype(np.int8),
            provenance_codes=self.table.provenance_codes(provenances),
            citations=None,
            metadata=None,
            vectors=vectors,
        )

    def reserve(self, capacity: int) -> None:
        """Pre-size the arrays for a known number of memories (avoids growth copies on bulk loads)."""
        self._choose_precision(capacity)
        self.table.reserve(capacity)
        self.matrix.reserve(capacity)

    def _choose_precision(self, size: int) -> None:
        # "auto": exact float32 while every query is a full scan, bfloat16 once the stream is large.
        if self.config.embedding_precision == "auto" and size > self.config.ann_threshold:
            self.matrix.compress()

    def _micros(self, times: np.ndarray, n: int) -> np.ndarray:
        micros = np.asarray(times, dtype="datetime64[us]").astype(np.int64)
        if micros.shape != (n,):
            raise ValueError(f"expected {n} times, got shape {micros.shape}")
        if self.table.codec.aware is None:
            self.table.codec.encode(self.clock.now())  # fixes naive/aware from the clock
        return micros

    def _append(self, *, vectors: np.ndarray, **columns: Any) -> range:
        self._choose_precision(self.table.n + len(vectors))
        self.matrix.append(vectors)
        rows = self.table.append(**columns)
        if self.index is not None:
            self.index.extend(vectors)
        return rows

    def _resolve_citations(self, citations: Sequence[str]) -> tuple[int, ...]:
        rows = [self._row(c) for c in citations]
        unknown = [c for c, r in zip(citations, rows, strict=True) if r is None]
        if unknown:
            raise ValueError(f"citations name memories that do not exist: {', '.join(map(repr, unknown))}")
        return tuple(dict.fromkeys(r for r in rows if r is not None))

    # -- retrieval

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            vector = np.asarray(self.embedder.embed([query]), dtype=np.float32)[0]
        else:
            vector = np.asarray(query, dtype=np.float32).reshape(-1)
        return _unit_rows(vector[None, :], self.matrix.dimension)[0]

    def build_index(self) -> IVFIndex:
        """Train the IVF index now (retrieval does this by itself once the stream passes ann_threshold)."""
        if self.config.embedding_precision == "auto":
            self.matrix.compress()
        active = np.flatnonzero(self.table.active)
        self.index = IVFIndex.train(
            self.matrix,
            lists=self.config.ann_lists,
            iterations=self.config.ann_iterations,
            seed=self.config.ann_seed,
            rows=active if len(active) < self.table.n else None,
        )
        return self.index

    def _index_for_query(self) -> IVFIndex | None:
        active = self.active_count
        if active <= self.config.ann_threshold:
            return None
        if self.index is None or active >= self.config.ann_retrain_growth * self.index.trained_on:
            return self.build_index()
        return self.index

    def retrieve(
        self,
        query: str | np.ndarray,
        k: int = 10,
        filter: RetrievalFilter | None = None,
        *,
        touch: bool = True,
    ) -> list[ScoredMemory]:
        """The k best memories for the query, best first; touching them marks them accessed now."""
        if k < 0:
            raise ValueError("k must not be negative")
        if self.table.n == 0 or k == 0:
            return []
        vector = self._query_vector(query)
        mask = filter_mask(self.table, filter)
        now = self.table.codec.encode(self.clock.now())
        ranking = rank(self.table, self.matrix, vector, k, mask, now, self.config, self._index_for_query())
        self.last_retrieval = RetrievalStats(
            eligible=int(np.count_nonzero(mask)),
            candidates=ranking.candidates,
            approximate=ranking.approximate,
        )
        if touch and len(ranking.rows):
            self.table.set_last_access(ranking.rows, now)
        return [
            ScoredMemory(
                node=self.table.node(int(row)),
                score=float(ranking.score[i]),
                recency=float(ranking.recency[i]),
                importance=float(ranking.importance[i]),
                relevance=float(ranking.relevance[i]),
            )
            for i, row in enumerate(ranking.rows)
        ]

    def touch(self, node_ids: Iterable[str]) -> None:
        """Mark memories as accessed now (what retrieval does to what it returns)."""
        rows = np.array([self.row(i) for i in node_ids], dtype=np.int64)
        if len(rows):
            self.table.set_last_access(rows, self.table.codec.encode(self.clock.now()))

    # -- provenance

    def explain(self, node_id_: str, max_depth: int | None = None) -> CitationTree:
        """The memory and, recursively, what it cites, down to observations (or max_depth)."""
        return self._tree(self.row(node_id_), 0, max_depth, frozenset())

    def _tree(self, row: int, depth: int, max_depth: int | None, path: frozenset[int]) -> CitationTree:
        children: list[CitationTree] = []
        if max_depth is None or depth < max_depth:
            inner = path | {row}
            children = [
                self._tree(cited, depth + 1, max_depth, inner)
                for cited in self.table.citations[row]
                if cited not in inner
            ]
        return CitationTree(node=self.table.node(row), children=children)

    def retire_duplicates(self, survivor_id: str, duplicate_ids: Sequence[str]) -> MemoryNode:
        """Fold near-duplicates into the earliest of them, keeping every node and its provenance.

        The survivor takes the highest importance and the latest access and lists what it absorbed;
        each duplicate stays readable (citations to it still resolve) but leaves retrieval.
        """
        survivor = self.row(survivor_id)
        duplicates = [self.row(d) for d in duplicate_ids]
        if survivor in duplicates:
            raise ValueError("a memory cannot be merged into itself")
        if not self.table.active[survivor] or not all(self.table.active[d] for d in duplicates):
            raise ValueError("only active memories can be merged")
        table = self.table
        rows = np.array([survivor, *duplicates])
        table.set_importance(survivor, int(table.importance[rows].max()))
        table.set_last_access(np.array([survivor]), int(table.last_us[rows].max()))
        meta = dict(table.metadata[survivor] or {})
        merged = [*meta.get("merged_from", []), *(node_id(d) for d in duplicates)]
        meta["merged_from"] = merged
        meta["mentions"] = int(meta.get("mentions", 1)) + len(duplicates)
        table.set_metadata(survivor, meta)
        for d in duplicates:
            table.set_active(d, False)
            table.set_metadata(d, {**(table.metadata[d] or {}), "merged_into": node_id(survivor)})
        return table.node(survivor)

    # -- persistence

    def save(self, folder: Path | str) -> Path:
        return save_stream(folder, self.table, self.matrix, self.index, embedder=self.embedder.name)

    @classmethod
    def load(
        cls,
        folder: Path | str,
        embedder: Embedder,
        clock: Clock,
        rater: ImportanceRater,
        config: RetrievalConfig | None = None,
    ) -> MemoryStream:
        manifest, table, matrix, index = load_stream(folder)
        if manifest.embedder != embedder.name or manifest.dimension != embedder.dimension:
            raise ValueError(
                f"{folder} was saved with embedder {manifest.embedder!r} ({manifest.dimension} dimensions); "
                f"got {embedder.name!r} ({embedder.dimension}): its embeddings would not be comparable"
            )
        stream = cls(embedder, clock, rater, config)
        stream.table, stream.matrix, stream.index = table, matrix, index
        return stream
