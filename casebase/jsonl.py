"""JSON Lines export and import of records: one model a line, exact round trip.

Exports are how a base moves between stores and embedders (import re-embeds), how a run's bases
are snapshotted as artifacts, and how people read them without a vector database.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

RecordT = TypeVar("RecordT", bound=BaseModel)


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> int:
    """Write atomically (a temporary file renamed into place), so a snapshot is never half written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(record.model_dump_json())
            handle.write("\n")
            count += 1
    os.replace(tmp, path)
    return count


def read_jsonl(path: Path, record_type: type[RecordT]) -> list[RecordT]:
    records: list[RecordT] = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(record_type.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise ValueError(f"{path}:{number}: not a valid {record_type.__name__}: {exc}") from exc
    return records
