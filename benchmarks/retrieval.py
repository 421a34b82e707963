"""Retrieval at scale: our memory stream against the reference code's `new_retrieve`.

    python -m benchmarks.retrieval --n 100000        (default; well under a minute on 2 cores)
    python -m benchmarks.retrieval --n 1000000

Builds a stream of N memories with 384-dimensional clustered embeddings (topics of Zipf-like sizes
under a few broad themes, plus the shared direction real sentence embeddings have), random
importance, and creation / last-access times spread over two virtual years. It then times top-10
retrieval for many query vectors (queries are drawn like memories; embedding the query is not
timed, for either side), with the virtual clock moving ten minutes per query and retrieved
memories touched, as in a simulation. Recall@10 of the approximate path is measured against exact
scoring of every memory on the same state. The stream is then saved, dropped and reloaded (timed,
and checked equal). Finally the faithful re-implementation of the reference `new_retrieve`
(benchmarks/reference_retrieve.py) runs on the same memories, loaded from the saved stream in a
child process, because its per-node Python objects would not fit beside ours in the memory budget;
it is slow, so it is timed on fewer queries (`baseline_queries` in the output).

The targets are for 2 cores, so the BLAS and OpenMP thread pools are capped at 2 whatever the
machine has (BENCHMARK_THREADS changes the cap; an OPENBLAS_NUM_THREADS already set wins). The cap
is set in the environment before numpy loads, because the pools are sized then, and the baseline's
child process inherits it.

The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import os

THREADS = os.environ.get("BENCHMARK_THREADS", "2")
for _pool in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_pool, THREADS)

import argparse  # noqa: E402  (after the thread cap, which must precede numpy)
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks import reference_retrieve as ref  # noqa: E402
from simulacra.clock import VirtualClock  # noqa: E402
from simulacra.embeddings.hashing import HashingEmbedder  # noqa: E402
from simulacra.llm.client import ChainLink, LLMClient  # noqa: E402
from simulacra.llm.prompts import PromptLibrary  # noqa: E402
from simulacra.llm.providers.scripted import ScriptedHandlers, ScriptedProvider  # noqa: E402
from simulacra.memory.columns import US_PER_HOUR  # noqa: E402
from simulacra.memory.importance import LLMImportanceRater, register_importance_handlers  # noqa: E402
from simulacra.memory.node import MemoryKind, Provenance  # noqa: E402
from simulacra.memory.retrieval import RetrievalConfig, filter_mask, rank  # noqa: E402
from simulacra.memory.stream import MemoryStream  # noqa: E402

DIMENSION = 384
START = datetime(2026, 4, 6, 9, 0)
SPAN_HOURS = 2 * 365 * 24
PROMPTS = Path(__file__).resolve().parents[1] / "simulacra" / "prompts"


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM, unlike ru_maxrss, is not inherited across exec."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass  # no /proc (not Linux): fall back to getrusage below
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


class ClusteredEmbeddings:
    """A generative model of memory embeddings: theme -> topic -> memory, with a shared offset.

    Cosine within a topic is about 0.6, within a theme about 0.3, between themes about 0.1,
    roughly what a sentence model gives for paraphrases, related and unrelated sentences.
    """

    def __init__(self, n: int, rng: np.random.Generator, dimension: int = DIMENSION) -> None:
        self.rng = rng
        self.dimension = dimension
        self.topics = max(16, n // 1000)
        themes = max(4, self.topics // 32)
        shared = _unit(rng.standard_normal(dimension, dtype=np.float32))
        theme_dirs = _unit(rng.standard_normal((themes, dimension), dtype=np.float32))
        theme_of = rng.integers(0, themes, self.topics)
        self.centres = _unit(
            0.35 * shared
            + theme_dirs[theme_of]
            + 1.1 * _unit(rng.standard_normal((self.topics, dimension), dtype=np.float32))
        )
        weights = 1.0 / np.arange(1, self.topics + 1) ** 0.8
        self.weights = weights / weights.sum()

    def sample(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        topic = self.rng.choice(self.topics, size=count, p=self.weights)
        noise = _unit(self.rng.standard_normal((count, self.dimension), dtype=np.float32))
        return _unit(self.centres[topic] + 0.8 * noise), topic


def scripted_rater(seed: int) -> LLMImportanceRater:
    """The rater is never called here (memories arrive rated), but a stream needs one."""
    handlers = ScriptedHandlers()
    register_importance_handlers(handlers)
    return LLMImportanceRater(
        LLMClient([ChainLink(ScriptedProvider(handlers, seed=seed))], PromptLibrary([PROMPTS]))
    )


def build_stream(
    n: int, seed: int, config: RetrievalConfig
) -> tuple[MemoryStream, ClusteredEmbeddings, VirtualClock]:
    rng = np.random.default_rng(seed)
    rater = scripted_rater(seed)
    now = START + timedelta(hours=SPAN_HOURS)
    clock = VirtualClock(now)
    stream = MemoryStream(HashingEmbedder(DIMENSION), clock, rater, config)
    stream.reserve(n)
    model = ClusteredEmbeddings(n, rng)
    start_us = stream.table.codec.encode(START)
    span_us = SPAN_HOURS * US_PER_HOUR
    provenance = Provenance(author="agent")
    for first in range(0, n, 16384):
        count = min(16384, n - first)
        vectors, topic = model.sample(count)
        created = start_us + np.sort(rng.integers(0, span_us, count))
        # Last access somewhere between creation and now, skewed towards creation.
        accessed = created + ((start_us + span_us - created) * rng.random(count) ** 3).astype(np.int64)
        stream.import_rows(
            descriptions=[f"memory {first + i} on topic {t}" for i, t in enumerate(topic.tolist())],
            embeddings=vectors,
            importance=rng.integers(1, 11, count),
            kinds=MemoryKind.OBSERVATION,
            provenance=provenance,
            created_at=created.astype("datetime64[us]"),
            last_accessed_at=accessed.astype("datetime64[us]"),
        )
    return stream, model, clock


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def time_ours(
    stream: MemoryStream, clock: VirtualClock, queries: np.ndarray, k: int, cpu: list[float] | None = None
) -> list[float]:
    """Wall-clock milliseconds per query (and, into `cpu`, this process's CPU milliseconds)."""
    latencies = []
    for query in queries:
        clock.advance(timedelta(minutes=10))
        started, started_cpu = time.perf_counter(), time.process_time()
        stream.retrieve(query, k=k)
        latencies.append((time.perf_counter() - started) * 1000)
        if cpu is not None:
            cpu.append((time.process_time() - started_cpu) * 1000)
    return latencies


def recall_at_k(stream: MemoryStream, queries: np.ndarray, k: int) -> tuple[float, float]:
    """Mean overlap of the approximate top-k with exact scoring of every memory (same state)."""
    overlaps, candidates = [], []
    now = stream.table.codec.encode(stream.clock.now())
    for query in queries:
        approx = stream.retrieve(query, k=k, touch=False)
        candidates.append(stream.last_retrieval.candidates if stream.last_retrieval else 0)
        exact = rank(
            stream.table, stream.matrix, query, k, filter_mask(stream.table, None), now, stream.config
        )
        found = {stream.row(s.node.id) for s in approx}
        overlaps.append(len(found & set(exact.rows.tolist())) / k)
    return float(np.mean(overlaps)), float(np.mean(candidates))


class _DecodedRows:
    """The baseline's `a_mem.embeddings[key]`: each node's stored embedding as a float32 row."""

    def __init__(self, stream: MemoryStream) -> None:
        self.matrix = stream.matrix

    def __getitem__(self, key: str) -> np.ndarray:
        row = int(key)
        return self.matrix.rows(slice(row, row + 1))[0]


def build_baseline(stream: MemoryStream) -> ref.Persona:
    a_mem = ref.AssociativeMemory(_DecodedRows(stream))
    codec = stream.table.codec
    table = stream.table
    importance = table.importance.tolist()
    created = table.created_us.tolist()
    last = table.last_us.tolist()
    for row in range(table.n):
        a_mem.add(
            ref.ConceptNode(
                f"node_{row}",
                "event",
                codec.decode(created[row]),
                codec.decode(last[row]),
                str(row),
                importance[row],
            )
        )
    return ref.Persona(a_mem, ref.Scratch(stream.clock.now()))


def time_baseline(persona: ref.Persona, queries: np.ndarray, k: int) -> list[float]:
    focal = {f"focal point {i}": q for i, q in enumerate(queries)}
    latencies = []
    for name in focal:
        persona.scratch.curr_time += timedelta(minutes=10)
        started = time.perf_counter()
        ref.new_retrieve(persona, [name], focal.__getitem__, n_count=k)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def fingerprint(stream: MemoryStream) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for array in (
        stream.table.last_us,
        stream.table.importance,
        stream.table.created_us,
        stream.matrix.stored(),
    ):
        digest.update(memoryview(np.ascontiguousarray(array)).cast("B"))  # no copy of 768 MB
    digest.update("\n".join(stream.table.descriptions).encode("utf-8"))
    return digest.hexdigest()


def run_baseline_child(folder: str, queries: np.ndarray, k: int) -> dict:
    """Time the baseline in its own process, on the saved stream: its objects would not fit beside ours."""
    with tempfile.NamedTemporaryFile(suffix=".npy", delete=False) as handle:
        np.save(handle, queries)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.retrieval",
                "--baseline-from",
                folder,
                "--query-file",
                handle.name,
                "--k",
                str(k),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(handle.name)
    return json.loads(done.stdout.strip().splitlines()[-1])


def baseline_child(folder: str, query_file: str, k: int) -> dict:
    stream = MemoryStream.load(folder, HashingEmbedder(DIMENSION), VirtualClock(START), scripted_rater(0))
    persona = build_baseline(stream)
    latencies = time_baseline(persona, np.load(query_file), k)
    return {"latencies_ms": latencies, "peak_rss_mb": peak_rss_mb()}


def run(n: int, queries: int, baseline_queries: int, recall_queries: int, k: int, seed: int) -> dict:
    config = RetrievalConfig()
    started = time.perf_counter()
    stream, model, clock = build_stream(n, seed, config)
    load_seconds = time.perf_counter() - started
    index_started = time.perf_counter()
    indexed = stream.active_count > config.ann_threshold
    if indexed:
        stream.build_index()
    index_seconds = time.perf_counter() - index_started
    build_seconds = time.perf_counter() - started

    query_vectors, _ = model.sample(queries + recall_queries + baseline_queries)
    time_ours(stream, clock, query_vectors[:5], k)  # warm-up
    cpu: list[float] = []
    ours = time_ours(stream, clock, query_vectors[:queries], k, cpu)
    recall, mean_candidates = recall_at_k(stream, query_vectors[queries : queries + recall_queries], k)
    facts = {
        "ivf_lists": stream.index.list_count if stream.index is not None else 0,
        "embedding_storage": stream.matrix.precision,
        "embedding_mb": round(stream.matrix.nbytes / 2**20, 1),
    }
    with tempfile.TemporaryDirectory() as folder:
        before = fingerprint(stream)
        saving = time.perf_counter()
        stream.save(folder)
        save_seconds = time.perf_counter() - saving
        embedder, rater = stream.embedder, stream.rater
        del stream  # the reload below stands alone, as after a restart
        gc.collect()
        loading = time.perf_counter()
        loaded = MemoryStream.load(folder, embedder, clock, rater, config)
        reload_seconds = time.perf_counter() - loading
        round_trip = fingerprint(loaded) == before
        del loaded
        gc.collect()
        baseline = run_baseline_child(folder, query_vectors[queries + recall_queries :], k)
    p50, base_p50 = statistics.median(ours), statistics.median(baseline["latencies_ms"])
    return {
        "n": n,
        "k": k,
        "dimension": DIMENSION,
        "queries": queries,
        "p50_ms": round(p50, 3),
        "p95_ms": round(percentile(ours, 95), 3),
        # CPU time per query: less disturbed than wall-clock time by other work on the machine.
        "cpu_p50_ms": round(statistics.median(cpu), 3),
        "baseline_p50_ms": round(base_p50, 1),
        "baseline_p95_ms": round(percentile(baseline["latencies_ms"], 95), 1),
        "baseline_queries": len(baseline["latencies_ms"]),
        "speedup": round(base_p50 / p50, 1),
        "recall_at_10": round(recall, 4),
        "recall_queries": recall_queries,
        "approximate": indexed,
        "mean_candidates": round(mean_candidates, 1),
        **facts,
        "topics": model.topics,
        "build_seconds": round(build_seconds, 2),
        "load_seconds": round(load_seconds, 2),
        "index_seconds": round(index_seconds, 2),
        "save_seconds": round(save_seconds, 2),
        "reload_seconds": round(reload_seconds, 2),
        "round_trip_equal": round_trip,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "cpus": len(os.sched_getaffinity(0)),
        # Other work on the machine slows the timed queries; the load says how much there was.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "baseline_peak_rss_mb": round(baseline["peak_rss_mb"], 1),
        "notes": (
            "peak_rss_mb is this process: data generation, the stream, its index, queries, save and "
            "reload; the baseline runs in a child process on the saved stream (baseline_peak_rss_mb). "
            "Query embedding is not timed on either side; retrieved memories are touched and the clock "
            "moves 10 virtual minutes per query; the baseline is timed on fewer queries because it is "
            "slow, keeps embeddings as numpy rows (faster than the reference's JSON lists) and skips "
            "its debug prints"
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the stream")
    parser.add_argument("--queries", type=int, default=300, help="timed queries for our retrieval")
    parser.add_argument("--baseline-queries", type=int, default=None, help="timed queries for the baseline")
    parser.add_argument("--recall-queries", type=int, default=50, help="queries for recall@k against exact")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline-from", help=argparse.SUPPRESS)  # child mode: a saved stream folder
    parser.add_argument("--query-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.baseline_from:
        print(json.dumps(baseline_child(args.baseline_from, args.query_file, args.k)))
        return
    baseline_queries = args.baseline_queries or (5 if args.n <= 200_000 else 2)
    print(json.dumps(run(args.n, args.queries, baseline_queries, args.recall_queries, args.k, args.seed)))


if __name__ == "__main__":
    main()
