"""The prompt library: versioned template files rendered with the call's structured variables.

A template file holds a system part and a user part:

    ### system
    You are ...
    ### user
    {{ question }}

Rendering is strict: a variable the template uses but the call did not pass is an error, so a
renamed variable cannot silently produce an empty prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from simulacra.llm.encoding import EncodedVariables, canonical_json
from simulacra.llm.errors import ConfigurationError
from simulacra.llm.types import Message, Task

_SYSTEM = "### system"
_USER = "### user"
# A hidden render variable carrying the call's EncodedVariables (not a valid template identifier
# a prompt author would use), so `tojson` of a whole variable reuses the text already encoded.
_ENCODED = "__simulacra_encoded__"


@jinja2.pass_context
def _to_json(context: jinja2.runtime.Context, value: Any) -> str:
    encoded = context.get(_ENCODED)
    if encoded is not None:
        text = encoded.text_of(value)
        if text is not None:
            return text
    return canonical_json(value)


class PromptLibrary:
    """Finds `<task>.<version>.j2` in an ordered list of folders (later folders may not shadow)."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self._folders = [Path(f) for f in folders]
        self._env = jinja2.Environment(
            undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False
        )
        self._env.filters["tojson"] = _to_json
        self._cache: dict[str, tuple[jinja2.Template, jinja2.Template]] = {}
        self._sources: dict[str, Path] = {}

    def path_of(self, task: Task) -> Path:
        filename = f"{task.name}.{task.version}.j2"
        for folder in self._folders:
            candidate = folder / filename
            if candidate.is_file():
                return candidate
        searched = ", ".join(str(f) for f in self._folders)
        raise ConfigurationError(f"no prompt template {filename} for task {task.key} (searched {searched})")

    def source_of(self, task: Task) -> Path:
        """The template file this library renders `task` from (looked up once)."""
        if task.key not in self._sources:
            self._sources[task.key] = self.path_of(task).resolve()
        return self._sources[task.key]

    def _templates(self, task: Task) -> tuple[jinja2.Template, jinja2.Template]:
        if task.key not in self._cache:
            source = self.source_of(task).read_text(encoding="utf-8")
            if _SYSTEM not in source or _USER not in source:
                raise ConfigurationError(f"template for {task.key} needs '{_SYSTEM}' and '{_USER}' sections")
            system_src, user_src = source.split(_SYSTEM, 1)[1].split(_USER, 1)
            self._cache[task.key] = (
                self._env.from_string(system_src.strip()),
                self._env.from_string(user_src.strip()),
            )
        return self._cache[task.key]

    def render(
        self, task: Task, variables: dict[str, Any], encoded: EncodedVariables | None = None
    ) -> list[Message]:
        """The task's messages; `encoded` (of these same variables) saves re-encoding for `tojson`."""
        system, user = self._templates(task)
        context = variables if encoded is None else {**variables, _ENCODED: encoded}
        try:
            return [
                Message(role="system", content=system.render(context)),
                Message(role="user", content=user.render(context)),
            ]
        except jinja2.UndefinedError as exc:
            raise ConfigurationError(
                f"prompt {task.key} uses a variable the call did not pass: {exc}"
            ) from exc
