"""Who is calling: API keys from the `Authorization: Bearer` header, checked and rate limited.

Verified keys are cached for `server.key_cache_s` seconds so a busy client does not cost a
database read per request; a revoked key stops working within that time. Rate limits are counted
in the store, so they hold across server processes and restarts. Logs name a key by its public
id only.
"""

from __future__ import annotations

import time

from environments.live.config import ServerConfig
from environments.live.keys import KeyRecord, hash_key, key_id_of, matches
from environments.live.store import LiveStore, RateDecision


class AuthError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class Authenticator:
    def __init__(self, store: LiveStore, config: ServerConfig, monotonic=time.monotonic) -> None:
        self.store = store
        self.config = config
        self.monotonic = monotonic
        self._verified: dict[str, tuple[float, str, KeyRecord]] = {}  # key id -> (until, hash, record)

    async def authenticate(self, authorization: str | None) -> tuple[KeyRecord, RateDecision]:
        key = _bearer(authorization)
        if key is None:
            raise AuthError(
                401, "send an API key as 'Authorization: Bearer <key>'", {"WWW-Authenticate": "Bearer"}
            )
        record = await self._verify(key)
        limit = record.rate_limit or self.config.rate_limit.requests
        decision = await self.store.run(self.store.hit, record.id, limit, self.config.rate_limit.window_s)
        if not decision.allowed:
            retry = max(1, -(-(decision.reset_at_us - _now_us(self.store)) // 1_000_000))
            raise AuthError(
                429,
                f"rate limit of {limit} requests per {self.config.rate_limit.window_s} s reached for key "
                f"{record.id}; retry in {retry} s",
                {"Retry-After": str(retry), **rate_headers(decision)},
            )
        return record, decision

    async def _verify(self, key: str) -> KeyRecord:
        key_id = key_id_of(key)
        refused = AuthError(401, "the API key is not valid", {"WWW-Authenticate": "Bearer"})
        if key_id is None:
            raise refused
        cached = self._verified.get(key_id)
        now = self.monotonic()
        if cached is not None and cached[0] > now and matches(key, cached[1]):
            return cached[2]
        found = await self.store.run(self.store.key, key_id)
        if found is None or not matches(key, found[1]) or found[0].revoked:
            self._verified.pop(key_id, None)
            raise refused
        record = found[0]
        if self.config.key_cache_s > 0:
            self._verified[key_id] = (now + self.config.key_cache_s, hash_key(key), record)
        return record


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def _now_us(store: LiveStore) -> int:
    return int(store.clock.now().timestamp() * 1_000_000)


def rate_headers(decision: RateDecision) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(decision.limit),
        "X-RateLimit-Remaining": str(decision.remaining),
        "X-RateLimit-Reset": str(decision.reset_at_us // 1_000_000),
    }
