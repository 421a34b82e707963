"""Scoring memories for a query: the Generative Agents retrieval function, vectorised.

score = alpha_recency * recency + alpha_importance * importance + alpha_relevance * relevance

- recency = decay ** (virtual hours since the memory was last accessed), from the injected clock;
- importance = (rating - 1) / 9, so 1..10 maps onto [0, 1];
- relevance = cosine similarity to the query (embeddings are unit vectors, so a dot product).

With normalisation "minmax" each component is min-max scaled over the candidate set as in the
paper, and a component whose values are all equal becomes 0.5 for every candidate (as the
reference code does); with "none" the raw values are used.

Everything is whole-array arithmetic over the stream's columns. Top-k uses a partial selection
and then a stable sort, so equal scores come out in creation order and results are deterministic.
For large streams an IVF candidate stage (see `ann`) supplies the rows nearest the query, and the
rows best on recency and importance alone are added before exact re-scoring (more of them when a
threshold test says they could still win), so a very recent, very important memory is never lost
to the relevance index. Reading embeddings is the costly step, so the probed rows are scored in
two rounds: the nearest lists and the static winners first, then only those of the rest whose
static part could still reach the k-th score found so far. The approximate path normalises as the
exact one does: recency and importance bounds come from every eligible row (cheap columns), and
the lowest relevance from the lists nearest the *opposite* of the query, where the least relevant
memories are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from simulacra.memory.ann import IVFIndex
from simulacra.memory.columns import KIND_CODE, SCOPE_CODE, US_PER_HOUR, MemoryTable
from simulacra.memory.matrix import EmbeddingMatrix
from simulacra.memory.node import IMPORTANCE_MAX, IMPORTANCE_MIN, MemoryKind, MemoryNode, Scope

Normalisation = Literal["minmax", "none"]
# Relevance is a cosine of unit vectors, so at most 1; bfloat16 storage can round it a little over.
_MAX_RELEVANCE = 1.01


class RetrievalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alpha_recency: float = Field(default=1.0, ge=0)
    alpha_importance: float = Field(default=1.0, ge=0)
    alpha_relevance: float = Field(default=1.0, ge=0)
    decay: float = Field(default=0.995, gt=0, le=1)
    normalisation: Normalisation = "minmax"
    # Above this many active memories retrieval uses the IVF candidate stage, and with precision
    # "auto" embeddings are stored as bfloat16 once the stream holds more than this many; at or
    # below it every eligible memory is scored exactly, in float32.
    ann_threshold: int = Field(default=50_000, ge=0)
    # About how many rows the IVF stage probes (whole lists); those that cannot beat the k-th score
    # found so far are pruned before their embeddings are read (see `rank`), so far fewer are
    # scored. The benchmark reports recall@10 against exact scoring.
    candidates: int = Field(default=8_192, ge=1)
    # How many of the best rows by recency + importance alone join the candidates (more are taken
    # when the threshold test in `rank` says they could still win).
    static_candidates: int = Field(default=1_024, ge=0)
    ann_lists: int | None = Field(default=None, ge=1)  # None: about sqrt(n)
    ann_iterations: int = Field(default=8, ge=1)
    ann_seed: int = 0
    # The index is retrained once the stream has grown this many times past what it was trained on.
    ann_retrain_growth: float = Field(default=2.0, gt=1)
    embedding_precision: Literal["auto", "float32", "bfloat16"] = "auto"


class RetrievalFilter(BaseModel):
    """Which memories may be returned; None means no constraint. Times are creation times, [since, until)."""

    model_config = ConfigDict(extra="forbid")

    kinds: set[MemoryKind] | None = None
    scopes: set[Scope] | None = None
    scope_id: str | None = None
    consultation_id: str | None = None
    authors: set[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_importance: int | None = Field(default=None, ge=IMPORTANCE_MIN, le=IMPORTANCE_MAX)


class ScoredMemory(BaseModel):
    """A retrieved memory with its score and the three components as they entered the score."""

    node: MemoryNode
    score: float
    recency: float
    importance: float
    relevance: float


def filter_mask(
    table: MemoryTable, filter: RetrievalFilter | None, *, include_retired: bool = False
) -> np.ndarray:
    """Boolean mask of the rows that pass the filter (and are active, unless retired ones are wanted)."""
    mask = np.ones(table.n, dtype=bool) if include_retired else table.active.copy()
    if filter is None or table.n == 0:
        return mask
    if filter.kinds is not None:
        mask &= np.isin(table.column("kind"), [KIND_CODE[k] for k in filter.kinds])
    if filter.scopes is not None:
        mask &= np.isin(table.column("scope"), [SCOPE_CODE[s] for s in filter.scopes])
    for value, strings, column in (
        (filter.scope_id, table.scope_ids, "scope_id"),
        (filter.consultation_id, table.consultations, "consultation"),
    ):
        if value is not None:
            code = strings.lookup(value)
            if code is None:
                mask[:] = False
            else:
                mask &= table.column(column) == code
    if filter.authors is not None:
        codes = [c for c in (table.authors.lookup(a) for a in filter.authors) if c is not None]
        mask &= np.isin(table.column("author"), codes)
    if filter.since is not None:
        mask &= table.created_us >= table.codec.encode(filter.since)
    if filter.until is not None:
        mask &= table.created_us < table.codec.encode(filter.until)
    if filter.min_importance is not None:
        mask &= table.importance >= filter.min_importance
    return mask


# -- the score's parts


def recency(last_us: np.ndarray, now_us: int, decay: float) -> np.ndarray:
    """decay ** hours since last access; an access 'in the future' (clock reset) counts as now."""
    hours = np.maximum(now_us - last_us, 0) / US_PER_HOUR
    if decay == 1.0:
        return np.ones(len(hours))
    return np.exp(hours * math.log(decay))


def importance(ratings: np.ndarray) -> np.ndarray:
    return (ratings.astype(np.float64) - IMPORTANCE_MIN) / (IMPORTANCE_MAX - IMPORTANCE_MIN)


def normalise(
    values: np.ndarray, mode: Normalisation, bounds: tuple[float, float] | None = None
) -> np.ndarray:
    """Min-max scale to [0, 1] over `values` (or given bounds); all-equal becomes 0.5 as in the paper."""
    if mode == "none" or len(values) == 0:
        return values
    lo, hi = bounds if bounds is not None else (float(values.min()), float(values.max()))
    if hi - lo == 0:
        return np.full(len(values), 0.5)
    return (values - lo) / (hi - lo)


def top_k_stable(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, best first; equal scores in ascending position."""
    n = len(scores)
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if k >= n:
        picked = np.arange(n)
    else:
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
        above = np.flatnonzero(scores > kth)
        ties = np.flatnonzero(scores == kth)[: k - len(above)]
        picked = np.concatenate([above, ties])
    return picked[np.lexsort((picked, -scores[picked]))]


def static_bounds(
    last_us: np.ndarray, ratings: np.ndarray, now_us: int, decay: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The lowest and highest recency and importance over the given rows, without scoring each.

    Recency falls as the last access gets older and importance rises with the rating, so the
    bounds are the parts of the extreme rows: two whole-column min/max instead of an exp per row.
    """
    extremes = recency(np.array([last_us.min(), last_us.max()]), now_us, decay)
    rated = importance(np.array([ratings.min(), ratings.max()]))
    return (float(extremes[0]), float(extremes[1])), (float(rated[0]), float(rated[1]))


def static_scores(
    last_us: np.ndarray,
    ratings: np.ndarray,
    now_us: int,
    config: RetrievalConfig,
    rec_bounds: tuple[float, float],
    imp_bounds: tuple[float, float],
) -> np.ndarray:
    """alpha_recency * recency + alpha_importance * importance (normalised as configured), float32.

    Only used to pick candidates that are then scored exactly, so float32 (half the memory traffic
    of float64 over a million rows) is enough, with one care: min-max recency over memories all
    accessed within minutes of one another divides a tiny spread, which float32 `exp` values near 1
    cannot resolve. Relative to the most recent access it is
    (expm1(d) - expm1(d_oldest)) / -expm1(d_oldest), d = log(decay) * hours behind the most recent,
    and `expm1` keeps full relative precision however small d is. Normalised importance is an
    affine function of the rating, so it is one multiply-add over the int8 column.
    """
    mode = config.normalisation
    weight = config.alpha_recency
    rate = math.log(config.decay) / US_PER_HOUR  # per microsecond; 0 when decay is 1
    # Age in microseconds; an access "in the future" (clock reset) counts as now.
    ages = np.subtract(now_us, last_us)
    np.maximum(ages, 0, out=ages)
    if mode == "minmax" and rec_bounds[1] - rec_bounds[0] == 0:
        static = np.full(len(last_us), 0.5 * weight, dtype=np.float32)
    elif mode == "minmax":
        youngest, oldest = int(ages.min()), int(ages.max())
        ages -= youngest
        static = ages.astype(np.float32)
        static *= np.float32(rate)
        np.expm1(static, out=static)
        static *= np.float32(-weight / math.expm1(rate * (oldest - youngest)))
        static += np.float32(weight)
    elif rate == 0:
        static = np.full(len(last_us), weight, dtype=np.float32)
    else:
        static = ages.astype(np.float32)
        static *= np.float32(rate)
        np.exp(static, out=static)
        static *= np.float32(weight)
    lo, hi = imp_bounds if mode == "minmax" else (0.0, 1.0)
    if hi - lo == 0:
        static += np.float32(0.5 * config.alpha_importance)
        return static
    # ((rating - MIN) / (MAX - MIN) - lo) / (hi - lo), times alpha, as scale * rating + offset.
    span = IMPORTANCE_MAX - IMPORTANCE_MIN
    scale = config.alpha_importance / (span * (hi - lo))
    offset = -config.alpha_importance * (IMPORTANCE_MIN / span + lo) / (hi - lo)
    static += np.multiply(ratings, np.float32(scale), dtype=np.float32)
    static += np.float32(offset)
    return static


@dataclass(frozen=True)
class Ranking:
    """The winners of one query, best first, with their score components (after normalisation)."""

    rows: np.ndarray
    score: np.ndarray
    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray
    candidates: int  # how many rows were scored exactly
    approximate: bool


def _take(column: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    return column if rows is None else column[rows]


def rank(
    table: MemoryTable,
    matrix: EmbeddingMatrix,
    query: np.ndarray,
    k: int,
    mask: np.ndarray,
    now_us: int,
    config: RetrievalConfig,
    index: IVFIndex | None = None,
) -> Ranking:
    """Score the eligible rows (all of them, or IVF + static candidates when `index` is given)."""
    eligible_count = int(np.count_nonzero(mask))
    eligible = None if eligible_count == table.n else np.flatnonzero(mask)
    mode = config.normalisation
    if index is None or eligible_count <= config.candidates:
        rows = np.arange(table.n) if eligible is None else eligible
        rec = recency(_take(table.last_us, eligible), now_us, config.decay)
        imp = importance(_take(table.importance, eligible))
        rel = matrix.dots(query, eligible).astype(np.float64)
        return _finish(
            rows, normalise(rec, mode), normalise(imp, mode), normalise(rel, mode), k, config, False
        )

    # The static part (recency + importance) of every eligible row: exact bounds for normalising,
    # and the rows that could win on it alone.
    last = _take(table.last_us, eligible)
    ratings = _take(table.importance, eligible)
    rec_bounds, imp_bounds = static_bounds(last, ratings, now_us, config.decay)
    static = static_scores(last, ratings, now_us, config, rec_bounds, imp_bounds)
    del last, ratings
    by_static = top_k_stable(static, max(config.static_candidates, k))

    # A selective filter leaves fewer eligible rows per list, so probe proportionally more lists.
    target = math.ceil(config.candidates * table.n / max(eligible_count, 1))
    near = index.probe(query, target)  # nearest list first
    near = near[mask[near]]
    probed = np.zeros(table.n, dtype=bool)
    probed[near] = True
    # Min-max relevance needs the lowest relevance of all eligible rows, which the candidates (all
    # near the query) do not contain: the lists nearest to the opposite direction do.
    opposite = index.probe(-query, max(256, target // 16))
    opposite = np.sort(opposite[mask[opposite]])  # read the matrix forwards
    lowest = float(matrix.dots(query, opposite).min()) if len(opposite) else math.inf

    def static_of(rows: np.ndarray) -> np.ndarray:
        return static[rows if eligible is None else np.searchsorted(eligible, rows)]

    def score(rows: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, ...]:
        rec = normalise(recency(table.last_us[rows], now_us, config.decay), mode, rec_bounds)
        imp = normalise(importance(table.importance[rows]), mode, imp_bounds)
        raw = raw.astype(np.float64)
        rel = normalise(raw, mode, (min(float(raw.min()), lowest), float(raw.max())))
        total = config.alpha_recency * rec + config.alpha_importance * imp + config.alpha_relevance * rel
        return rec, imp, rel, total

    # Score the static winners and the nearest quarter of the probed rows first. The k-th score
    # among them bounds the rest: a row's score is its static part plus at most alpha_relevance
    # (relevance is at most 1, normalised or not), so a probed row whose static part falls short
    # by more than that cannot win and is never read from the embedding matrix, the costly step.
    nearest = near[: max(k, len(near) // 4)]
    seed = _sorted_unique(np.concatenate([by_static if eligible is None else eligible[by_static], nearest]))
    seed_raw = matrix.dots(query, seed)
    rows, raw = seed, seed_raw
    in_seed = np.zeros(table.n, dtype=bool)
    in_seed[seed] = True
    rest = np.sort(near[len(nearest) :])
    rest = rest[~in_seed[rest]]
    if len(rest):
        if len(seed) >= k:
            total = score(seed, seed_raw)[3]
            kth = np.partition(total, len(total) - k)[len(total) - k]
            # The static part is float32: leave it a margin well above its rounding.
            rest = rest[static_of(rest) >= kth - config.alpha_relevance * _MAX_RELEVANCE - 1e-4]
        rows = np.concatenate([seed, rest])
        raw = np.concatenate([seed_raw, matrix.dots(query, rest)])
        order = np.argsort(rows, kind="stable")  # creation order, which breaks ties
        rows, raw = rows[order], raw[order]
    rec, imp, rel, total = score(rows, raw)
    # Threshold check: an unscored row can only win if its static part plus the best relevance
    # seen outside the probed lists reaches the current k-th score. If more rows than were taken
    # pass that test, take them too (bounded by `candidates`) and score again.
    if len(rows) > k and len(by_static) < eligible_count:
        kth = np.partition(total, len(total) - k)[len(total) - k]
        outside = ~probed[rows]
        best_outside = rel[outside].max() if outside.any() else rel.max()
        threshold = kth - config.alpha_relevance * best_outside
        contenders = int(np.count_nonzero(static >= threshold))
        if contenders > len(by_static):
            more = top_k_stable(static, min(contenders, len(by_static) + config.candidates))
            rows = _sorted_unique(np.concatenate([rows, more if eligible is None else eligible[more]]))
            rec, imp, rel, total = score(rows, matrix.dots(query, rows))
    return _finish(rows, rec, imp, rel, k, config, True)


def _sorted_unique(rows: np.ndarray) -> np.ndarray:
    """np.unique by sorting: for a few thousand ints much faster than numpy's hash-based unique."""
    rows = np.sort(rows)
    return rows[np.concatenate([[True], rows[1:] != rows[:-1]])] if len(rows) else rows


def _finish(
    rows: np.ndarray,
    rec: np.ndarray,
    imp: np.ndarray,
    rel: np.ndarray,
    k: int,
    config: RetrievalConfig,
    approximate: bool,
) -> Ranking:
    score = config.alpha_recency * rec + config.alpha_importance * imp + config.alpha_relevance * rel
    best = top_k_stable(score, k)
    return Ranking(
        rows=rows[best],
        score=score[best],
        recency=rec[best],
        importance=imp[best],
        relevance=rel[best],
        candidates=len(rows),
        approximate=approximate,
    )
