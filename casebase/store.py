"""The vector store adapter: pydantic records in Chroma collections, with the embedder pinned.

Each record is stored whole as its JSON document, so what comes back is exactly what went in; a few
flat fields go into the metadata so Chroma can filter on them (task type, verified, status). We
always pass embeddings ourselves: Chroma's default embedding function would download a model.

A collection remembers the embedder (name and dimension) that filled it. Vectors from different
embedders are not comparable, so opening a collection with another embedder is refused with an
error that says what to do, rather than silently returning nonsense neighbours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import chromadb
import numpy as np
from chromadb.api import ClientAPI
from chromadb.config import Settings
from pydantic import BaseModel

from casebase.config import StoreConfig
from simulacra.embeddings.base import Embedder

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
    ) -> None:
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

    def upsert(self, records: Sequence[RecordT], embeddings: np.ndarray | None = None) -> None:
        if not records:
            return
        if embeddings is None:
            embeddings = self.embed([self._text_of(r) for r in records])
        self._collection.upsert(
            ids=[r.id for r in records],  # type: ignore[attr-defined]
            embeddings=embeddings,
            documents=[r.model_dump_json() for r in records],
            metadatas=[self._flat_fields(r) for r in records],  # type: ignore[arg-type]
        )

    def replace(self, record: RecordT) -> None:
        """Rewrite a record whose search text is unchanged, keeping its stored embedding."""
        record_id: str = record.id  # type: ignore[attr-defined]
        found = self._collection.get(ids=[record_id], include=["embeddings"])
        embeddings = found["embeddings"]
        if embeddings is None or len(embeddings) == 0:
            raise KeyError(f"collection '{self.name}' has no record {record_id!r} to replace")
        # Chroma's update would re-embed a changed document with its own function: pass ours back.
        self.upsert([record], np.asarray(embeddings, dtype=np.float32))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._collection.delete(ids=list(ids))

    # --- reading ---------------------------------------------------------------------------

    def _parse(self, document: str | None) -> RecordT:
        if document is None:
            raise ValueError(f"collection '{self.name}' holds a record without its document")
        return self.record_type.model_validate_json(document)

    def get(self, record_id: str) -> RecordT | None:
        found = self._collection.get(ids=[record_id], include=["documents"])
        documents = found["documents"] or []
        return self._parse(documents[0]) if documents else None

    def all(self, where: Where | None = None) -> list[RecordT]:
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
        if not self._seen_records:
            # A library starts empty (the rules base stays so until rules are learned), and
            # counting costs Chroma half of what a query does. The count is read afresh, so
            # records another process added are found; once there were some, it is not asked again.
            if self._collection.count() == 0:
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
