"""Server processes the tests start on 127.0.0.1: a free port, the Chroma CLI, and a process that is
ready once its health URL answers 200 and is stopped when the test is done."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chroma_cli() -> str:
    """The `chroma` script installed with chromadb, beside this interpreter or on PATH."""
    beside = Path(sys.executable).parent / "chroma"
    found = str(beside) if beside.exists() else shutil.which("chroma")
    assert found, "the chroma CLI (installed with chromadb) is not on PATH"
    return found


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False  # not listening yet


@contextmanager
def running_server(
    command: Sequence[str], health_url: str, log: Path, timeout_s: float = 90
) -> Iterator[None]:
    """Run `command` (output to `log`) until `health_url` answers; terminate it afterwards."""
    with log.open("w") as out:
        process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while not answers(health_url):
                if process.poll() is not None:
                    raise RuntimeError(f"{command[0]} exited: {log.read_text(errors='replace')[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not answer within {timeout_s:.0f} s")
                time.sleep(0.2)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
