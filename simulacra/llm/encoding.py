"""The canonical JSON text of a call's variables, computed once per top-level value and shared.

Three readers need the variables as sorted-key JSON: the prompt templates (`tojson`, non-ASCII
kept), the scripted provider's seed (ASCII-escaped) and the response cache key (non-ASCII kept).
Each used to encode its own copy; for a judge call with a 6 KB figures table that was most of the
client's CPU. `EncodedVariables` encodes each top-level value once, lazily, and assembles the
whole-dict texts from those parts exactly as `json.dumps` would write them, so every reader gets
byte-for-byte what its own `json.dumps` call produced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# Characters `ensure_ascii=True` escapes that `ensure_ascii=False` writes as they are: all
# non-ASCII ones and DEL (control characters below 0x20 are escaped alike by both).
_NON_ASCII = re.compile(r"[^\x00-\x7e]")


def canonical_json(value: Any) -> str:
    """Sorted keys, non-ASCII kept, anything unknown as its `str`: the form templates and cache use."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _escape(match: re.Match[str]) -> str:
    # Written as the encoder writes it with ensure_ascii: a four-hex-digit unicode escape, and a
    # character beyond the basic plane as its two surrogate escapes.
    code = ord(match.group(0))
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def ascii_escaped(text: str) -> str:
    """`text` (JSON written with non-ASCII kept) as `json.dumps` would have written it with ensure_ascii.

    Outside string literals JSON text is printable ASCII, and inside them the two settings differ
    only in how a non-ASCII character or DEL is written, so escaping those is the whole difference.
    """
    if text.isascii() and "\x7f" not in text:
        return text
    return _NON_ASCII.sub(_escape, text)


class EncodedVariables:
    """A call's variables (plain JSON data with string keys) and their canonical JSON, by part.

    The texts are only valid while the data is not mutated: the client builds it from its own
    freshly converted copy of the variables, which nothing else holds.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self._key_of: dict[int, str] = {id(v): k for k, v in data.items()}
        self._text: dict[str, str] = {}
        self._whole: dict[bool, str] = {}

    def text(self, key: str) -> str:
        """`canonical_json(data[key])`, computed at most once."""
        text = self._text.get(key)
        if text is None:
            text = self._text[key] = canonical_json(self.data[key])
        return text

    def text_of(self, value: Any) -> str | None:
        """The text of `value` when it is one of the top-level values (by identity), else None."""
        key = self._key_of.get(id(value))
        if key is None or self.data.get(key) is not value:
            return None
        return self.text(key)

    def describes(self, variables: Mapping[str, Any]) -> bool:
        """Whether `variables` holds exactly these values (a request's copy of the dict does)."""
        data = self.data
        if len(variables) != len(data):
            return False
        missing = object()
        return all(data.get(key, missing) is value for key, value in variables.items())

    def whole(self, *, ensure_ascii: bool) -> str:
        """`json.dumps(data, sort_keys=True, default=str, ensure_ascii=...)`, built from the parts."""
        whole = self._whole.get(ensure_ascii)
        if whole is None:
            whole = self._whole[ensure_ascii] = self._assemble(ensure_ascii)
        return whole

    def _assemble(self, ensure_ascii: bool) -> str:
        if ensure_ascii:
            parts = [f"{json.dumps(k)}: {ascii_escaped(self.text(k))}" for k in sorted(self.data)]
        else:
            parts = [f"{json.dumps(k, ensure_ascii=False)}: {self.text(k)}" for k in sorted(self.data)]
        return "{" + ", ".join(parts) + "}"
