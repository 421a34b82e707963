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

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jinja2

from simulacra.llm.errors import ConfigurationError
from simulacra.llm.types import Message, Task

_SYSTEM = "### system"
_USER = "### user"


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


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

    def render(self, task: Task, variables: dict[str, Any]) -> list[Message]:
        system, user = self._templates(task)
        try:
            return [
                Message(role="system", content=system.render(**variables)),
                Message(role="user", content=user.render(**variables)),
            ]
        except jinja2.UndefinedError as exc:
            raise ConfigurationError(
                f"prompt {task.key} uses a variable the call did not pass: {exc}"
            ) from exc
