"""The vector store adapter: pydantic records in Chroma collections, with the embedder pinned.

Each record is stored whole as its JSON document, so what comes back is exactly what went in; a few
flat fields go into the metadata so Chroma can filter on them (task type, verified, status). We
always pass embeddings ourselves: Chroma's default embedding function would download a model.

A collection remembers the embedder (name and dimension) that filled it. Vectors from different
embedders are not comparable, so opening a collection with another embedder is refused with an
error that says what to do, rather than silently returning nonsense neighbours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import chromadb
import numpy as np
from chromadb.api import ClientAPI
from chromadb.config import Settings
from pydantic import BaseModel

from casebase.config import StoreConfig
from simulacra.embeddings.base import Embedder, normalise_rows

RecordT = TypeVar("RecordT", bound=BaseModel)
STORE_FORMAT = 1
_PAGE = 1000

Where = dict[str, Any]


class EmbedderMismatchError(RuntimeError):
    """A collection was filled by one embedder and is being opened with another."""


def open_client(config: StoreConfig) -> ClientAPI:
    """Chroma's HTTP client when a server is named, else its persistent client on a local folder."""
    settings = Settings(anonymized_telemetry=False)
    if config.remote:
        return chromadb.HttpClient(host=config.host, port=config.port, ssl=config.ssl, settings=settings)
    config.path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(config.path), settings=settings)


def matches_where(fields: dict[str, Any], where: Where | None) -> bool:
    """Whether a record's flat fields satisfy a Chroma metadata filter (the operators we use)."""
    if not where:
        return True
    for key, condition in where.items():
        if key == "$and":
            if not all(matches_where(fields, c) for c in condition):
                return False
        elif key == "$or":
            if not any(matches_where(fields, c) for c in condition):
                return False
        elif isinstance(condition, dict):
            ((op, operand),) = condition.items()
            value = fields.get(key)
            if op == "$eq":
                ok = value == operand
            elif op == "$ne":
                ok = value != operand
            elif op == "$in":
                ok = value in operand
            elif op == "$nin":
                ok = value not in operand
            else:
                raise ValueError(f"filter operator {op!r} is not supported on held writes")
            if not ok:
                return False
        elif fields.get(key) != condition:
            return False
    return True


def and_where(*clauses: Where | None) -> Where | None:
    """Chroma wants `$and` only for two or more clauses."""
    present = [c for c in clauses if c]
    if not present:
        return None
    return present[0] if len(present) == 1 else {"$and": present}


class VectorCollection(Generic[RecordT]):
    """One Chroma collection of one record type, searched by cosine similarity."""

    def __init__(
        self,
        client: ClientAPI,
        name: str,
        embedder: Embedder,
        record_type: type[RecordT],
        *,
        flat_fields: Callable[[RecordT], dict[str, str | int | float | bool]],
        text_of: Callable[[RecordT], str],
        empty_recheck_s: float = 0.0,
    ) -> None:
        """`empty_recheck_s`: how long a collection found empty is taken to stay empty before
        Chroma is counted again (see `query`); 0 counts at every query while it is empty."""
        self.name = name
        self.embedder = embedder
        self.record_type = record_type
        self._flat_fields = flat_fields
        self._text_of = text_of
        expected = {
            "embedder": embedder.name,
            "dimension": int(embedder.dimension),
            "record": record_type.__name__,
            "format": STORE_FORMAT,
        }
        self._collection = client.get_or_create_collection(
            name,
            metadata=expected,
            # One index thread: HNSW built by several threads links its graph in whatever order the
            # threads finish, so the same inserts could give different neighbours and a seeded run
            # would not replay exactly. A wide search keeps recall high on small libraries.
            configuration={"hnsw": {"space": "cosine", "num_threads": 1, "ef_search": 200}},
            embedding_function=None,
        )
        self._seen_records = False  # see `query`
        self._empty_recheck_s = empty_recheck_s
        self._found_empty_at: float | None = None  # monotonic time of the last count that found none
        # Writes held by `deferred`: id -> (JSON document, flat fields, embedding), in write order.
        self._held: dict[str, tuple[str, dict[str, Any], np.ndarray]] | None = None
        found = dict(self._collection.metadata or {})
        differing = {k: (found.get(k), v) for k, v in expected.items() if found.get(k) != v}
        if differing:
            details = ", ".join(f"{k}: stored {old!r}, given {new!r}" for k, (old, new) in differing.items())
            raise EmbedderMismatchError(
                f"collection '{name}' was built with embedder {found.get('embedder')!r} "
                f"(dimension {found.get('dimension')}) and cannot be opened with {embedder.name!r} "
                f"(dimension {embedder.dimension}) [{details}]. Use the embedder it was built with, or "
                "export it to JSON Lines and import it into a new collection to re-embed it."
            )

    # --- embedding -------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dimension):
            raise ValueError(
                f"embedder {self.embedder.name} returned shape {vectors.shape}, "
                f"expected ({len(texts)}, {self.embedder.dimension})"
            )
        return vectors

    # --- writing ---------------------------------------------------------------------------

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold this collection's writes in memory until the block ends, then store them in one call.

        A persistent Chroma client commits every write to disk, which costs tens of milliseconds
        whatever the write's size; learning after a virtual day updates rules and cases one at a
        time, and would wait on the disk for each. Reads inside the block (`get`, `query`, `all`,
        `count`) see the held writes, so code in it behaves as if each write had been stored at
        once. What a crash inside the block loses is what the run's checkpoint, written after the
        block, does not hold yet either. Blocks do not nest.
        """
        if self._held is not None:
            raise RuntimeError(f"collection '{self.name}' is already holding its writes")
        self._held = {}
        if not self._seen_records:
            # Whether the store holds anything is read once for the block, not at every query
            # (counting costs Chroma about as much as a query; see `query`).
            self._seen_records = self._collection.count() > 0
        try:
            yield
        finally:
            # Store what was held even when the block failed: what it wrote so far was meant to be.
            self.flush()
            self._held = None

    def flush(self) -> None:
        """Store the writes held by `deferred` (a no-op outside it)."""
        if not self._held:
            return
        held, self._held = self._held, {}
        self._collection.upsert(
            ids=list(held),
            embeddings=np.stack([vector for _, _, vector in held.values()]),
            documents=[document for document, _, _ in held.values()],
            metadatas=[fields for _, fields, _ in held.values()],  # type: ignore[misc]
        )
        self._seen_records = True

    def upsert(self, records: Sequence[RecordT], embeddings: np.ndarray | None = None) -> None:
        if not records:
            return
        if embeddings is None:
            embeddings = self.embed([self._text_of(r) for r in records])
        if self._held is not None:
            for record, vector in zip(records, np.asarray(embeddings, dtype=np.float32), strict=True):
                record_id: str = record.id  # type: ignore[attr-defined]
                self._held.pop(record_id, None)  # a rewrite goes after the writes it follows
                self._held[record_id] = (record.model_dump_json(), self._flat_fields(record), vector)
            return
        self._collection.upsert(
            ids=[r.id for r in records],  # type: ignore[attr-defined]
            embeddings=embeddings,
            documents=[r.model_dump_json() for r in records],
            metadatas=[self._flat_fields(r) for r in records],  # type: ignore[arg-type]
        )
        self._seen_records = True

    def replace(self, record: RecordT) -> None:
        """Rewrite a record whose search text is unchanged, keeping its stored embedding."""
        record_id: str = record.id  # type: ignore[attr-defined]
        if self._held and record_id in self._held:
            self.upsert([record], self._held[record_id][2].reshape(1, -1))
            return
        found = self._collection.get(ids=[record_id], include=["embeddings"])
        embeddings = found["embeddings"]
        if embeddings is None or len(embeddings) == 0:
            raise KeyError(f"collection '{self.name}' has no record {record_id!r} to replace")
        # Chroma's update would re-embed a changed document with its own function: pass ours back.
        self.upsert([record], np.asarray(embeddings, dtype=np.float32))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self.flush()
            self._collection.delete(ids=list(ids))

    # --- reading ---------------------------------------------------------------------------

    def _parse(self, document: str | None) -> RecordT:
        if document is None:
            raise ValueError(f"collection '{self.name}' holds a record without its document")
        return self.record_type.model_validate_json(document)

    def get(self, record_id: str) -> RecordT | None:
        if self._held and record_id in self._held:
            return self._parse(self._held[record_id][0])
        found = self._collection.get(ids=[record_id], include=["documents"])
        documents = found["documents"] or []
        return self._parse(documents[0]) if documents else None

    def all(self, where: Where | None = None) -> list[RecordT]:
        self.flush()
        records: list[RecordT] = []
        offset = 0
        while True:
            page = self._collection.get(where=where, include=["documents"], limit=_PAGE, offset=offset)
            documents = page["documents"] or []
            records.extend(self._parse(d) for d in documents)
            if len(documents) < _PAGE:
                return records
            offset += _PAGE

    def count(self, where: Where | None = None) -> int:
        self.flush()
        if where is None:
            return self._collection.count()
        total = 0
        offset = 0
        while True:
            page = self._collection.get(where=where, include=[], limit=_PAGE, offset=offset)
            total += len(page["ids"])
            if len(page["ids"]) < _PAGE:
                return total
            offset += _PAGE

    def query(self, vector: np.ndarray, k: int, where: Where | None = None) -> list[tuple[RecordT, float]]:
        """The k nearest records with their cosine similarity, best first."""
        if k < 1:
            return []
        if self._held:
            return self._query_with_held(vector, k, where)
        if not self._seen_records:
            # A library starts empty (the rules base stays so until rules are learned), and
            # counting costs Chroma half of what a query does. The count is read afresh (at most
            # every `empty_recheck_s`), so records another process added are found; this process's
            # own writes are seen at once; once there were some, it is not asked again.
            now = time.monotonic()
            if self._found_empty_at is not None and now - self._found_empty_at < self._empty_recheck_s:
                return []
            if self._collection.count() == 0:
                self._found_empty_at = now
                return []
            self._seen_records = True
        found = self._collection.query(
            query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
            n_results=k,
            where=where,
            include=["documents", "distances"],
        )
        documents = (found["documents"] or [[]])[0]
        distances = (found["distances"] or [[]])[0]
        return [(self._parse(d), 1.0 - float(dist)) for d, dist in zip(documents, distances, strict=True)]

    def _query_with_held(
        self, vector: np.ndarray, k: int, where: Where | None
    ) -> list[tuple[RecordT, float]]:
        """`query` while writes are held: the stored neighbours, less the records held in a newer
        version, merged with the held records that pass the filter, scored the way Chroma scores
        (cosine similarity)."""
        assert self._held is not None
        held = self._held
        stored: list[tuple[RecordT, float]] = []
        if self._seen_records:  # an empty store was seen empty when the block began
            found = self._collection.query(
                query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
                n_results=k + len(held),
                where=where,
                include=["documents", "distances"],
            )
            ids = found["ids"][0]
            documents = (found["documents"] or [[]])[0]
            distances = (found["distances"] or [[]])[0]
            stored = [
                (self._parse(d), 1.0 - float(dist))
                for i, d, dist in zip(ids, documents, distances, strict=True)
                if i not in held
            ]
        query = normalise_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        fresh = [
            (self._parse(document), float(normalise_rows(v.reshape(1, -1))[0] @ query))
            for document, fields, v in held.values()
            if matches_where(fields, where)
        ]
        return sorted([*stored, *fresh], key=lambda pair: -pair[1])[:k]
