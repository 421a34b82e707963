"""The memory table: every node's fields as contiguous numpy columns.

A million pydantic objects would cost gigabytes and make every query a walk over Python objects;
columns cost tens of bytes a node and let retrieval score and filter with whole-array operations.
`MemoryNode`s are built only for the handful of rows a caller actually asks for.

Rows are append-only and never move: a node's id is derived from its row, so citations stay valid
for ever, and upkeep retires a node by clearing its `active` flag instead of deleting it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from simulacra.memory.node import MemoryKind, MemoryNode, Provenance, Scope

KINDS: tuple[MemoryKind, ...] = tuple(MemoryKind)
SCOPES: tuple[Scope, ...] = tuple(Scope)
KIND_CODE = {kind: i for i, kind in enumerate(KINDS)}
SCOPE_CODE = {scope: i for i, scope in enumerate(SCOPES)}
NO_STRING = -1  # code of an absent optional string (scope_id, consultation_id)

_ID_PREFIX = "mem-"
_ID = re.compile(r"mem-(\d{6,})")
_EPOCH_NAIVE = datetime(1970, 1, 1)
_EPOCH_AWARE = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
US_PER_HOUR = 3_600_000_000


def node_id(row: int) -> str:
    return f"{_ID_PREFIX}{row:06d}"


def row_of(node_id_: str) -> int | None:
    """The row an id names, or None when it is not an id this scheme could have issued."""
    match = _ID.fullmatch(node_id_) if isinstance(node_id_, str) else None
    if match is None:
        return None
    row = int(match.group(1))
    return row if node_id(row) == node_id_ else None


class TimeCodec:
    """Datetimes as integer microseconds since 1970, exactly (floats would lose microseconds).

    A stream uses either naive or timezone-aware datetimes, never both, because comparing the two
    is an error in Python too; aware times come back in UTC (the same instant).
    """

    def __init__(self, aware: bool | None = None) -> None:
        self.aware = aware

    def encode(self, moment: datetime) -> int:
        is_aware = moment.tzinfo is not None and moment.utcoffset() is not None
        if self.aware is None:
            self.aware = is_aware
        elif self.aware != is_aware:
            kind = "timezone-aware" if self.aware else "naive"
            raise ValueError(f"this memory stream uses {kind} datetimes; got {moment!r}")
        return (moment - (_EPOCH_AWARE if is_aware else _EPOCH_NAIVE)) // _ONE_US

    def decode(self, micros: int) -> datetime:
        return (_EPOCH_AWARE if self.aware else _EPOCH_NAIVE) + timedelta(microseconds=int(micros))


class StringTable:
    """Interns repeated strings (authors, scope ids, consultation ids) as small integer codes."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: list[str] = []
        self._codes: dict[str, int] = {}
        for value in values:
            self.code(value)

    def code(self, value: str | None) -> int:
        if value is None:
            return NO_STRING
        code = self._codes.get(value)
        if code is None:
            code = len(self.values)
            self._codes[value] = code
            self.values.append(value)
        return code

    def lookup(self, value: str) -> int | None:
        """The code of a known string, without interning an unknown one."""
        return self._codes.get(value)

    def value(self, code: int) -> str | None:
        return None if code == NO_STRING else self.values[code]


_NUMERIC_COLUMNS: dict[str, type] = {
    "created_us": np.int64,
    "last_us": np.int64,
    "importance": np.int8,
    "kind": np.int8,
    "scope": np.int8,
    "author": np.int32,
    "scope_id": np.int32,
    "consultation": np.int32,
    "active": np.bool_,
}


class MemoryTable:
    """Columns of all nodes; grows by doubling (or to an announced size with `reserve`)."""

    def __init__(self, codec: TimeCodec | None = None) -> None:
        self.codec = codec or TimeCodec()
        self.n = 0
        self._capacity = 0
        self._cols: dict[str, np.ndarray] = {
            name: np.empty(0, dtype) for name, dtype in _NUMERIC_COLUMNS.items()
        }
        self.descriptions: list[str] = []
        # Citations are stored as rows; empty tuples are shared, so uncited nodes cost a pointer.
        self.citations: list[tuple[int, ...]] = []
        self.metadata: list[dict[str, Any] | None] = []
        self.authors = StringTable()
        self.scope_ids = StringTable()
        self.consultations = StringTable()

    # -- columns (views of the first n rows)

    def column(self, name: str) -> np.ndarray:
        return self._cols[name][: self.n]

    @property
    def created_us(self) -> np.ndarray:
        return self.column("created_us")

    @property
    def last_us(self) -> np.ndarray:
        return self.column("last_us")

    @property
    def importance(self) -> np.ndarray:
        return self.column("importance")

    @property
    def active(self) -> np.ndarray:
        return self.column("active")

    def reserve(self, capacity: int) -> None:
        if capacity <= self._capacity:
            return
        for name, col in self._cols.items():
            grown = np.empty(capacity, dtype=col.dtype)
            grown[: self.n] = col[: self.n]
            self._cols[name] = grown
        self._capacity = capacity

    # -- writing

    def append(
        self,
        *,
        descriptions: Sequence[str],
        kinds: np.ndarray,
        created_us: np.ndarray,
        last_us: np.ndarray,
        importance: np.ndarray,
        provenance_codes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        citations: Sequence[tuple[int, ...]] | None = None,
        metadata: Sequence[dict[str, Any] | None] | None = None,
        active: np.ndarray | None = None,
    ) -> range:
        """Append already-validated rows (codes, not strings); returns the new rows."""
        m = len(descriptions)
        start = self.n
        if start + m > self._capacity:
            self.reserve(max(start + m, 2 * self._capacity, 1024))
        scope, author, scope_id, consultation = provenance_codes
        stop = start + m
        values = {
            "created_us": created_us,
            "last_us": last_us,
            "importance": importance,
            "kind": kinds,
            "scope": scope,
            "author": author,
            "scope_id": scope_id,
            "consultation": consultation,
            "active": np.ones(m, dtype=bool) if active is None else active,
        }
        for name, value in values.items():
            self._cols[name][start:stop] = value
        self.descriptions.extend(descriptions)
        self.citations.extend(citations if citations is not None else [()] * m)
        self.metadata.extend(metadata if metadata is not None else [None] * m)
        self.n = stop
        return range(start, stop)

    def provenance_codes(self, provenances: Sequence[Provenance]) -> tuple[np.ndarray, ...]:
        return (
            np.fromiter((SCOPE_CODE[p.scope] for p in provenances), np.int8, len(provenances)),
            np.fromiter((self.authors.code(p.author) for p in provenances), np.int32, len(provenances)),
            np.fromiter((self.scope_ids.code(p.scope_id) for p in provenances), np.int32, len(provenances)),
            np.fromiter(
                (self.consultations.code(p.consultation_id) for p in provenances), np.int32, len(provenances)
            ),
        )

    def set_last_access(self, rows: np.ndarray, micros: int) -> None:
        self._cols["last_us"][rows] = micros

    def set_importance(self, row: int, value: int) -> None:
        self._cols["importance"][row] = value

    def set_active(self, row: int, value: bool) -> None:
        self._cols["active"][row] = value

    def set_metadata(self, row: int, metadata: dict[str, Any]) -> None:
        self.metadata[row] = metadata or None

    # -- reading

    def provenance(self, row: int) -> Provenance:
        cols = self._cols
        return Provenance.model_construct(
            author=self.authors.values[cols["author"][row]],
            scope=SCOPES[cols["scope"][row]],
            scope_id=self.scope_ids.value(int(cols["scope_id"][row])),
            consultation_id=self.consultations.value(int(cols["consultation"][row])),
        )

    def node(self, row: int) -> MemoryNode:
        """A validated-on-the-way-in row as a node (constructed without re-validation, for speed)."""
        cols = self._cols
        meta = self.metadata[row]
        return MemoryNode.model_construct(
            id=node_id(row),
            description=self.descriptions[row],
            kind=KINDS[cols["kind"][row]],
            created_at=self.codec.decode(cols["created_us"][row]),
            last_accessed_at=self.codec.decode(cols["last_us"][row]),
            importance=int(cols["importance"][row]),
            citations=[node_id(r) for r in self.citations[row]],
            provenance=self.provenance(row),
            metadata=copy.deepcopy(meta) if meta else {},
        )

    def kind_of(self, row: int) -> MemoryKind:
        return KINDS[self._cols["kind"][row]]

    def group_keys(self) -> np.ndarray:
        """One int64 per row that is equal exactly when kind, author, scope and scope id are equal."""
        cols = {name: self.column(name).astype(np.int64) for name in ("kind", "scope", "author", "scope_id")}
        n_kinds, n_scopes = len(KINDS), len(SCOPES)
        key = cols["author"] * (n_kinds * n_scopes) + cols["kind"] * n_scopes + cols["scope"]
        return key * (len(self.scope_ids.values) + 1) + (cols["scope_id"] + 1)
