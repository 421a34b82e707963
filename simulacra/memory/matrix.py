"""The stream's embeddings: one contiguous array, float32 or bfloat16.

float32 costs 1.5 GB for a million 384-dimensional memories, which leaves no room for anything else
in a 2 GB budget; bfloat16 (the top 16 bits of a float32, rounded to nearest) halves that and
decodes with an integer shift, which numpy does far faster than its float16 conversion. The cosine
error it introduces is below 5e-4, far below what separates relevant from irrelevant memories.
Arithmetic is always float32.

Dot products are taken one row at a time (`vecdot`, which calls BLAS's dot once per row) rather
than as one matrix-vector product: a matrix-vector kernel may give two identical rows results that
differ in the last bit (depending on where they sit in the matrix), which would break ties between
identical memories arbitrarily, whereas a per-row dot computes every row with the same instruction
sequence. It is also faster than `einsum`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Precision = Literal["float32", "bfloat16"]
_CHUNK = 1024  # rows gathered and decoded at a time: small enough to stay in cache


def _row_dots(block: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    """out[i] = block[i] · query, each row computed on its own (see the module docstring)."""
    if hasattr(np, "vecdot"):  # numpy >= 2
        np.vecdot(block, query, out=out)
    else:
        np.einsum("ij,j->i", block, query, out=out)


def to_bfloat16(vectors: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bit patterns (round half to even), stored as uint16."""
    bits = np.ascontiguousarray(vectors, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def from_bfloat16(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Decode uint16 bfloat16 bit patterns to float32 (exact: bfloat16 is a truncated float32)."""
    out = np.empty(bits.shape, dtype=np.uint32) if out is None else out.view(np.uint32)
    np.copyto(out, bits, casting="unsafe")
    out <<= np.uint32(16)
    return out.view(np.float32)


class EmbeddingMatrix:
    def __init__(self, dimension: int, precision: Precision = "float32") -> None:
        if dimension < 1:
            raise ValueError("embedding dimension must be positive")
        self.dimension = dimension
        self.precision: Precision = precision
        self.n = 0
        self._data = np.empty((0, dimension), dtype=self._dtype(precision))
        # Gather and decode buffers, kept between calls: fresh megabyte-sized buffers would cost a
        # page fault per 4 KiB on every query.
        self._scratch: dict[str, np.ndarray] = {}

    @staticmethod
    def _dtype(precision: Precision) -> type:
        return np.float32 if precision == "float32" else np.uint16

    @classmethod
    def from_stored(cls, stored: np.ndarray, precision: Precision) -> EmbeddingMatrix:
        """Adopt an array as saved by `stored()` (no copy)."""
        if stored.ndim != 2 or stored.dtype != cls._dtype(precision):
            raise ValueError(f"stored embeddings have shape {stored.shape} and dtype {stored.dtype}")
        matrix = cls(stored.shape[1], precision)
        matrix._data = stored
        matrix.n = stored.shape[0]
        return matrix

    def stored(self) -> np.ndarray:
        """The stored representation of the first n rows (what persistence writes)."""
        return self._data[: self.n]

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def reserve(self, capacity: int) -> None:
        if capacity <= self._data.shape[0]:
            return
        grown = np.empty((capacity, self.dimension), dtype=self._data.dtype)
        grown[: self.n] = self._data[: self.n]
        self._data = grown

    def append(self, vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dimension:
            raise ValueError(f"expected embeddings of shape (m, {self.dimension}), got {vectors.shape}")
        m = vectors.shape[0]
        if self.n + m > self._data.shape[0]:
            self.reserve(max(self.n + m, 2 * self._data.shape[0], 1024))
        self._data[self.n : self.n + m] = vectors if self.precision == "float32" else to_bfloat16(vectors)
        self.n += m

    def compress(self) -> None:
        """Switch to bfloat16 storage in place (chunked, so the peak is the new array plus one chunk)."""
        if self.precision == "bfloat16":
            return
        packed = np.empty(self._data.shape, dtype=np.uint16)  # keeps the reserved capacity
        for start in range(0, self.n, _CHUNK * 16):
            stop = min(self.n, start + _CHUNK * 16)
            packed[start:stop] = to_bfloat16(self._data[start:stop])
        self._data = packed
        self.precision = "bfloat16"

    # -- reading

    def rows(self, rows: np.ndarray | slice) -> np.ndarray:
        """Float32 copies of the given rows."""
        picked = self._data[: self.n][rows]
        if self.precision == "float32":
            return np.array(picked, dtype=np.float32, copy=True)
        return from_bfloat16(picked)

    def dots(self, query: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """query · row for the given rows (all rows when None), float32, computed per row identically."""
        query = np.ascontiguousarray(query, dtype=np.float32)
        data = self._data[: self.n]
        count = self.n if rows is None else len(rows)
        out = np.empty(count, dtype=np.float32)
        if self.precision == "float32" and rows is None:
            _row_dots(data, query, out)
            return out
        if rows is not None and count and (int(rows.min()) < 0 or int(rows.max()) >= self.n):
            raise IndexError(f"rows out of range for {self.n} embeddings")
        chunk = min(_CHUNK, max(count, 1))
        gathered = self._buffer("gathered", data.dtype)
        decoded = self._buffer("decoded", np.float32)
        for start in range(0, count, chunk):
            stop = min(count, start + chunk)
            m = stop - start
            if rows is None:
                picked = data[start:stop]
            else:
                picked = gathered[:m]
                # mode="clip" (the rows were checked above): with the default mode numpy buffers
                # `out`, an extra copy of every gathered row.
                np.take(data, rows[start:stop], axis=0, out=picked, mode="clip")
            block = picked if self.precision == "float32" else from_bfloat16(picked, out=decoded[:m])
            _row_dots(block, query, out[start:stop])
        return out

    def _buffer(self, name: str, dtype: type) -> np.ndarray:
        buffer = self._scratch.get(name)
        if buffer is None or buffer.dtype != dtype:
            buffer = self._scratch[name] = np.empty((_CHUNK, self.dimension), dtype=dtype)
        return buffer

    def iter_blocks(self, start: int = 0, stop: int | None = None, size: int = 65536):
        """(first_row, float32 block) over a row range, for passes over everything (index training)."""
        stop = self.n if stop is None else stop
        for first in range(start, stop, size):
            yield first, self.rows(slice(first, min(stop, first + size)))
