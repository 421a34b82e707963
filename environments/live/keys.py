"""API keys: what a key looks like, how it is stored (hashed), and what each scope may do.

A key is `pgt_<id>_<secret>`. The id is public (it names the key in logs, rate limits and the
audit trail); only a SHA-256 hash of the whole key is stored. The secret is 256 random bits, so
a fast hash is enough: there is nothing to brute-force, unlike a password.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from enum import StrEnum

from pydantic import BaseModel

PREFIX = "pgt"
_KEY = re.compile(rf"^{PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{43}})$")


class Scope(StrEnum):
    CUSTOMER = "customer"  # their own sessions only
    REVIEWER = "reviewer"  # read any session; approve a finished consultation as a case
    ADMIN = "admin"  # everything a reviewer may do


class KeyRecord(BaseModel):
    id: str
    owner: str
    scope: Scope
    rate_limit: int | None = None
    revoked: bool = False

    def may_review(self) -> bool:
        return self.scope in (Scope.REVIEWER, Scope.ADMIN)


class IssuedKey(BaseModel):
    """A newly created key: the only time its secret exists outside the client."""

    record: KeyRecord
    key: str


def new_key() -> tuple[str, str]:
    """A fresh (id, whole key)."""
    key_id = secrets.token_hex(6)
    return key_id, f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"


def key_id_of(key: str) -> str | None:
    """The id part of a well-formed key, or None for anything else."""
    match = _KEY.match(key)
    return match.group(1) if match else None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)
