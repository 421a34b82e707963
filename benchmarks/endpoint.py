"""`python -m benchmarks.endpoint`: the live endpoint's replies per second and its latency without
the model's time, at increasing concurrency.

Starts `python -m environments.serve` (scripted model, production validation, its own folder) on
127.0.0.1 as a separate process, opens a pool of customer sessions, then at each concurrency sends
`--n` messages and reads each reply's `Server-Timing` header: `model` is the time spent inside the
LLM providers (the scripted stand-in here), `advisor` the advisor's whole turn. Reported per level:
replies per second, latency percentiles, latency minus model time (`overhead`: what the endpoint
and the advisor's own machinery add), and latency minus the advisor's turn (`endpoint`: HTTP,
authentication, rate limiting, the store). A session that is waiting for review or has used its
turns is swapped for a fresh one from the pool, as a new customer would arrive.

The server runs `--workers` processes (default: one per core). Each level also reports the server's
CPU time per reply (all its processes, from /proc), which unlike rps and latency does not depend
on what else the machine is running, and the benchmark's own CPU per reply (the client shares the
cores with the server).

The JSON last line holds `rps` (of the busiest level), `p50_ms` and `p99_ms` (latency without model
time, at the lowest concurrency, where requests do not queue), `server_cpu_ms_per_reply` and
`client_cpu_ms_per_reply` (at the busiest level), and every level's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

from environments.live.config import compose_serve_config
from environments.live.keys import Scope
from environments.live.store import LiveStore
from simulacra.clock import SystemClock

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "How much of my pension can I take tax-free?",
    "What are my options for taking money from my pension?",
    "How is money from a pension taxed?",
    "When can I get my State Pension?",
    "What is Pension Wise?",
    "Should I take it all as cash?",
]
PROFILES = [
    {"name": "Ann Example", "age": 58, "pots": [{"type": "DC", "value_gbp": 42000}], "goal": "drawdown"},
    {"name": "Bob Example", "age": 63, "pots": [{"type": "DC", "value_gbp": 120000}], "goal": "tax"},
    {"name": "Cy Example", "age": 45, "pots": [{"type": "DC", "value_gbp": 15000}], "goal": "retirement_age"},
]
_TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of a process and its descendants so far; None off Linux.

    The server's CPU per reply does not depend on what else the machine is running, unlike
    latency and throughput on a shared machine.
    """
    proc = Path("/proc")
    if not (proc / str(pid) / "stat").exists():
        return None
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we looked
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        times[child] = int(fields[11]) + int(fields[12])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(times.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")


def server_timing(header: str) -> dict[str, float]:
    return {name: float(value) for name, value in _TIMING.findall(header)}


class Load:
    def __init__(self, http: aiohttp.ClientSession, sessions: list[str]) -> None:
        self.http = http
        self.pool = sessions
        self.next_question = 0

    def fresh(self) -> str:
        if not self.pool:
            raise RuntimeError("the session pool ran out: raise --sessions")
        return self.pool.pop()

    async def worker(self, replies: int, samples: list[dict[str, float]]) -> None:
        session = self.fresh()
        done = 0
        while done < replies:
            question = QUESTIONS[self.next_question % len(QUESTIONS)]
            self.next_question += 1
            started = time.perf_counter()
            async with self.http.post(
                f"/v1/sessions/{session}/messages", json={"text": question}
            ) as response:
                body = await response.read()
                latency = (time.perf_counter() - started) * 1000
                if response.status == 409:
                    session = self.fresh()  # waiting for review or out of turns: a new customer arrives
                    continue
                response.raise_for_status()
                timing = server_timing(response.headers.get("server-timing", ""))
            samples.append({"latency": latency, "model": timing["model"], "advisor": timing["advisor"]})
            done += 1
            if json.loads(body)["holding"]:
                session = self.fresh()


async def run_level(load: Load, concurrency: int, n: int, server_pid: int) -> dict[str, float | None]:
    samples: list[dict[str, float]] = []
    share = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
    cpu_before = tree_cpu_seconds(server_pid)
    client_before = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(load.worker(k, samples) for k in share if k))
    wall = time.perf_counter() - started
    client_cpu = time.process_time() - client_before
    cpu_after = tree_cpu_seconds(server_pid)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    latency = [s["latency"] for s in samples]
    overhead = [s["latency"] - s["model"] for s in samples]
    endpoint = [s["latency"] - s["advisor"] for s in samples]
    return {
        "concurrency": concurrency,
        "replies": len(samples),
        "rps": round(len(samples) / wall, 1),
        "latency_p50_ms": round(percentile(latency, 0.5), 2),
        "latency_p99_ms": round(percentile(latency, 0.99), 2),
        "model_mean_ms": round(statistics.fmean(s["model"] for s in samples), 2),
        "p50_ms": round(percentile(overhead, 0.5), 2),
        "p99_ms": round(percentile(overhead, 0.99), 2),
        "endpoint_p50_ms": round(percentile(endpoint, 0.5), 2),
        "endpoint_p99_ms": round(percentile(endpoint, 0.99), 2),
        # Replies that came while a session was swapped are counted too; None off Linux.
        "server_cpu_ms_per_reply": None if cpu is None else round(cpu * 1000 / len(samples), 2),
        # This process's own CPU per reply: it runs on the same cores as the server.
        "client_cpu_ms_per_reply": round(client_cpu * 1000 / len(samples), 2),
    }


async def open_sessions(http: aiohttp.ClientSession, count: int) -> list[str]:
    async def one(i: int) -> str:
        async with http.post(
            "/v1/sessions",
            json={"profile": PROFILES[i % len(PROFILES)], "consent": {"guidance_only": True}},
        ) as response:
            response.raise_for_status()
            return (await response.json())["id"]

    ids: list[str] = []
    for start in range(0, count, 16):
        ids += await asyncio.gather(*(one(i) for i in range(start, min(count, start + 16))))
    return ids


def start_server(overrides: list[str], url: str, log: Path, workers: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "environments.serve", *overrides],
        cwd=ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 180
    ready: set[int] = set()  # worker processes seen answering; measuring starts when all are up
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            response = httpx.get(f"{url}/healthz", timeout=1)  # a new connection: any worker
            if response.status_code == 200:
                ready.add(response.json()["process"])
                if len(ready) >= workers:
                    return process
                continue
        except httpx.TransportError:
            pass  # not listening yet: poll again
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server's {workers} workers did not all start within 180 s")


async def measure(
    url: str, key: str, levels: list[int], n: int, sessions: int, server_pid: int
) -> list[dict[str, float | None]]:
    # aiohttp rather than httpx: the client shares the machine's cores with the server, and
    # aiohttp costs about a third of httpx's CPU per request, which the server then gets.
    async with aiohttp.ClientSession(
        base_url=url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=aiohttp.ClientTimeout(total=120),
        connector=aiohttp.TCPConnector(limit=max(levels) + 4),
    ) as http:
        load = Load(http, await open_sessions(http, sessions))
        await run_level(load, 1, min(20, n), server_pid)  # warm-up: caches, connections, first use
        return [await run_level(load, c, n, server_pid) for c in levels]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="replies measured per concurrency level")
    parser.add_argument("--levels", default="1,4,16", help="concurrency levels, comma-separated")
    parser.add_argument("--sessions", type=int, default=0, help="sessions opened up front (default: 2 n)")
    parser.add_argument("--validator", default="production", help="validator config group")
    parser.add_argument("--embedder", default="hashing", help="embedder config group")
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="server processes (server.workers)"
    )
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    sessions = args.sessions or args.n * len(levels) + 60
    with tempfile.TemporaryDirectory(prefix="endpoint-bench-") as tmp:
        overrides = [
            f"paths.root={tmp}/runs",
            f"validator={args.validator}",
            f"embedder={args.embedder}",
            f"server.port={args.port}",
            f"server.workers={args.workers}",
            "server.log_level=warning",
            "advisor.knowledge_cases=false",
        ]
        config = compose_serve_config(overrides)
        store = LiveStore(config.database_url(), SystemClock())
        key = store.create_key("benchmark", Scope.CUSTOMER, rate_limit=10_000_000).key
        store.close()
        url = f"http://127.0.0.1:{args.port}"
        server = start_server(overrides, url, Path(tmp) / "server.log", args.workers)
        try:
            results = asyncio.run(measure(url, key, levels, args.n, sessions, server.pid))
        finally:
            server.terminate()
            server.wait(timeout=30)
    for row in results:
        print(json.dumps(row))
    # Throughput at the busiest level; latency at the lowest, where it is not queueing behind
    # other requests (every level's figures are in `levels`).
    busiest = max(results, key=lambda r: r["rps"])
    unloaded = min(results, key=lambda r: r["concurrency"])
    summary = {
        "rps": busiest["rps"],
        "rps_concurrency": busiest["concurrency"],
        "p50_ms": unloaded["p50_ms"],
        "p99_ms": unloaded["p99_ms"],
        "latency_concurrency": unloaded["concurrency"],
        "endpoint_p50_ms": unloaded["endpoint_p50_ms"],
        "endpoint_p99_ms": unloaded["endpoint_p99_ms"],
        "model_mean_ms": unloaded["model_mean_ms"],
        "server_cpu_ms_per_reply": busiest["server_cpu_ms_per_reply"],
        "client_cpu_ms_per_reply": busiest["client_cpu_ms_per_reply"],
        "validator": args.validator,
        "embedder": args.embedder,
        "llm": "scripted",
        "workers": args.workers,
        "cores": os.cpu_count(),
        "levels": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
