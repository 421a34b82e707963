"""An inverted-file (IVF) index: the approximate-nearest-neighbour candidate stage.

Spherical k-means on a sample puts centroids where the memories are; every memory joins the list
of its nearest centroid; a query scans the lists whose centroids are nearest to it until it has
gathered about the requested number of candidates, and only those are scored exactly. With
about sqrt(n) lists, a million memories are served by scanning a few percent of them.

Why not Chroma's HNSW: it adds ~880 vectors/s on this hardware (twenty minutes for a million),
needs its own copy of every vector, and cannot combine its neighbour search with the recency and
importance parts of the score. This index is a few arrays beside the stream's own embeddings.

Rows added after the index was built are assigned to their nearest centroid at once and kept in
a small tail that probes check too; the tail is folded into the lists when it grows.
"""

from __future__ import annotations

import math

import numpy as np

from simulacra.memory.matrix import EmbeddingMatrix


def default_list_count(n: int) -> int:
    return int(min(4096, max(8, round(math.sqrt(n)))))


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def _nearest(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    return np.argmax(vectors @ centroids.T, axis=1).astype(np.int32)


def spherical_kmeans(sample: np.ndarray, k: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-norm centroids maximising the summed cosine of each point to its centroid."""
    k = min(k, len(sample))
    centroids = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(iterations):
        labels = _nearest(sample, centroids)
        sums = np.zeros_like(centroids)
        _sum_by_label(sample, labels, sums)
        counts = np.bincount(labels, minlength=k)
        empty = np.flatnonzero(counts == 0)
        if len(empty):
            # Re-seed empty clusters on random points rather than leave dead lists.
            sums[empty] = sample[rng.choice(len(sample), size=len(empty), replace=False)]
        centroids = _normalise(sums).astype(np.float32)
    return centroids


def _sum_by_label(sample: np.ndarray, labels: np.ndarray, out: np.ndarray) -> None:
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
    out[sorted_labels[starts]] = np.add.reduceat(sample[order], starts, axis=0)


class IVFIndex:
    """Inverted lists over rows [0, covered) of an embedding matrix."""

    def __init__(self, centroids: np.ndarray, assignment: np.ndarray, trained_on: int) -> None:
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        # Grows by doubling, so adding one memory at a time does not copy the whole assignment.
        self._assignment = np.ascontiguousarray(assignment, dtype=np.int32)
        self._covered = len(self._assignment)
        self.trained_on = trained_on
        self._sizes = np.bincount(self.assignment, minlength=len(self.centroids)).astype(np.int64)
        self._rebuild_lists()

    # -- building

    @classmethod
    def train(
        cls,
        matrix: EmbeddingMatrix,
        *,
        lists: int | None = None,
        iterations: int = 8,
        sample_size: int | None = None,
        seed: int = 0,
        rows: np.ndarray | None = None,
    ) -> IVFIndex:
        """Train on a sample of the matrix (of `rows`, when given) and assign every row."""
        n = matrix.n
        if n == 0:
            raise ValueError("cannot build an index over no embeddings")
        rng = np.random.default_rng(seed)
        pool = np.arange(n) if rows is None else np.asarray(rows)
        k = lists or default_list_count(len(pool))
        size = min(len(pool), sample_size or max(40 * k, 10_000))
        picked = np.sort(rng.choice(pool, size=size, replace=False))
        centroids = spherical_kmeans(matrix.rows(picked), k, iterations, rng)
        assignment = np.empty(n, dtype=np.int32)
        for first, block in matrix.iter_blocks(0, n, size=32768):
            assignment[first : first + len(block)] = _nearest(block, centroids)
        return cls(centroids, assignment, trained_on=len(pool))

    @property
    def covered(self) -> int:
        return self._covered

    @property
    def assignment(self) -> np.ndarray:
        """The list of every covered row."""
        return self._assignment[: self._covered]

    @property
    def list_count(self) -> int:
        return len(self.centroids)

    def extend(self, vectors: np.ndarray) -> None:
        """Assign rows appended to the matrix since (they join the tail)."""
        if len(vectors) == 0:
            return
        labels = _nearest(np.asarray(vectors, dtype=np.float32), self.centroids)
        if self._covered + len(labels) > len(self._assignment):
            grown = np.empty(max(self._covered + len(labels), 2 * len(self._assignment)), dtype=np.int32)
            grown[: self._covered] = self.assignment
            self._assignment = grown
        self._assignment[self._covered : self._covered + len(labels)] = labels
        self._covered += len(labels)
        self._sizes += np.bincount(labels, minlength=self.list_count)
        if self.covered - self._listed > max(4096, self._listed // 20):
            self._rebuild_lists()

    def _rebuild_lists(self) -> None:
        # A stable sort keeps each list in row order, so gathered candidates read memory forwards.
        self._order = np.argsort(self.assignment, kind="stable")
        self._offsets = np.zeros(self.list_count + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.assignment, minlength=self.list_count), out=self._offsets[1:])
        self._listed = self.covered

    # -- querying

    def probe(self, query: np.ndarray, target: int) -> np.ndarray:
        """Rows of the lists nearest to the query, nearest list first, until about `target` rows."""
        closeness = self.centroids @ np.asarray(query, dtype=np.float32)
        ranked = np.argsort(-closeness, kind="stable")
        reach = np.cumsum(self._sizes[ranked])
        lists = ranked[: int(np.searchsorted(reach, target)) + 1]
        parts = [self._order[self._offsets[i] : self._offsets[i + 1]] for i in lists]
        if self.covered > self._listed:
            tail = np.arange(self._listed, self.covered)
            parts.append(tail[np.isin(self.assignment[self._listed :], lists)])
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)

    # -- persistence

    def state(self) -> dict[str, np.ndarray]:
        return {
            "centroids": self.centroids,
            "assignment": self.assignment,
            "trained_on": np.array([self.trained_on], dtype=np.int64),
        }

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> IVFIndex:
        return cls(state["centroids"], state["assignment"], int(state["trained_on"][0]))


def bucket_rows(
    matrix: EmbeddingMatrix, rows: np.ndarray, buckets: int, *, iterations: int = 6, seed: int = 0
) -> np.ndarray:
    """Coarse clusters of the given rows (a label per row), for work that only compares neighbours."""
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(rows, size=min(len(rows), max(40 * buckets, 10_000)), replace=False))
    centroids = spherical_kmeans(matrix.rows(sample), buckets, iterations, rng)
    labels = np.empty(len(rows), dtype=np.int32)
    for start in range(0, len(rows), 32768):
        part = rows[start : start + 32768]
        labels[start : start + len(part)] = _nearest(matrix.rows(part), centroids)
    return labels
