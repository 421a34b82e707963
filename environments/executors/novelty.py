"""The validator's novelty memory as a log of what it was shown, so it can be moved and rebuilt.

The novelty check compares a reply against every reply validated on earlier days. Its memory is a
matrix of embeddings; this subclass also keeps the replies themselves, committed day by day, which
is what a checkpoint stores and what a Ray worker's validator is brought up to date with: feeding
the same batches to a fresh detector, each followed by a commit, rebuilds the same matrix.
"""

from __future__ import annotations

from collections.abc import Iterable

from compliance.validator import HybridComplianceValidator, NoveltyDetector


class RecordingNovelty(NoveltyDetector):
    def __init__(self, inner: NoveltyDetector) -> None:
        super().__init__(inner.embedder, inner.threshold, inner.warmup)
        self.batches: list[list[str]] = []  # committed replies, one sorted batch per commit
        self._seen: set[str] = set()  # shown since the last commit
        self._drained: set[str] = set()  # already handed to the driver by `drain_seen`

    def is_novel(self, text: str) -> bool:
        self._seen.add(text)
        return super().is_novel(text)

    def commit(self) -> int:
        self.batches.append(sorted(self._seen))
        self._seen.clear()
        self._drained.clear()
        return super().commit()

    def drain_seen(self) -> list[str]:
        """Replies shown since the last commit and not yet drained (a worker reports these)."""
        fresh = sorted(self._seen - self._drained)
        self._drained.update(fresh)
        return fresh

    def pending(self) -> list[str]:
        """Replies shown since the last commit (e.g. by rule-accumulation replays after a day)."""
        return sorted(self._seen)

    def replay(self, batches: Iterable[list[str]], pending: Iterable[str] = ()) -> None:
        """Commit `batches` as if they had been validated here, one commit each, then show
        `pending` without committing it."""
        for batch in batches:
            for text in batch:
                self.is_novel(text)
            self.commit()
        for text in pending:
            self.is_novel(text)


def record_novelty(validator: HybridComplianceValidator) -> RecordingNovelty | None:
    """Swap the validator's novelty detector for a recording one (None when the check is off)."""
    if validator.novelty is None:
        return None
    if not isinstance(validator.novelty, RecordingNovelty):
        validator.novelty = RecordingNovelty(validator.novelty)
    return validator.novelty
