"""Pushing messages to customers connected to a session's event stream.

Each connection gets its own queue; a reviewer's decision delivered to a session is put on every
queue of that session in this process. Every server process polls the review queue itself, so a
client connected to any of them is told.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

from environments.live.store import MessageRecord

QUEUE_LIMIT = 100  # a client this far behind is sent nothing more until it reads


class DeliveryHub:
    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[MessageRecord]]] = defaultdict(set)

    @contextmanager
    def subscribe(self, session_id: str) -> Iterator[asyncio.Queue[MessageRecord]]:
        queue: asyncio.Queue[MessageRecord] = asyncio.Queue(QUEUE_LIMIT)
        self._queues[session_id].add(queue)
        try:
            yield queue
        finally:
            self._queues[session_id].discard(queue)
            if not self._queues[session_id]:
                del self._queues[session_id]

    def publish(self, session_id: str, message: MessageRecord) -> int:
        sent = 0
        for queue in self._queues.get(session_id, ()):
            if not queue.full():
                queue.put_nowait(message)
                sent += 1
        return sent

    def listeners(self, session_id: str) -> int:
        return len(self._queues.get(session_id, ()))
