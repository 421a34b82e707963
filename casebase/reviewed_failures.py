"""The reviewed-failures file: replies compliance staff refused, for rule accumulation to learn from.

One JSON object a line (`ReviewedFailure`): the `casebase.accumulation.FailureCase` the training
loop hands to its `RuleAccumulator`, with the review item it came from and who decided it. The file
is append-only and written once per item (a second append of the same item is a no-op), so the
review app can replay its outcome stream after a crash without feeding a failure in twice.

The training loop reads it with `read_failures` and remembers how many lines it has consumed
(`read_failures(path, start=n)`); lines are only ever appended, so a line number is a stable cursor.
It lives in `casebase` so that both the review app (which writes it) and the training loop (which
reads it) can import it.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from casebase.accumulation import FailureCase


class ReviewedFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item_id: str = Field(min_length=1)
    source: Literal["training", "live"]
    decision: Literal["reject", "edit_approve"]
    reviewers: list[str]
    decided_at: datetime
    reason_codes: list[str] = Field(default_factory=list)
    reason: str = ""
    # A reviewer's corrected reply, when the item was edited and approved: the better alternative
    # that reflection compares the failed reply with.
    corrected_reply: str | None = None
    failure: FailureCase


class AppendResult(BaseModel):
    appended: bool
    line: int  # 1-based line of the item's failure in the file


def read_failures(path: Path, start: int = 0) -> list[ReviewedFailure]:
    """The failures from line `start + 1` on (all of them by default); a missing file has none."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    return [ReviewedFailure.model_validate_json(line) for line in lines[start:]]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside the file, so two app processes never interleave their appends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_name(path.name + ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def append_failure(path: Path, record: ReviewedFailure) -> AppendResult:
    """Append `record` unless its item is already in the file."""
    with _locked(path):
        existing = read_failures(path)
        for number, seen in enumerate(existing, start=1):
            if seen.item_id == record.item_id:
                return AppendResult(appended=False, line=number)
        with path.open("a", encoding="utf-8") as out:
            out.write(record.model_dump_json() + "\n")
        return AppendResult(appended=True, line=len(existing) + 1)
