"""Prompt templates: sandboxed Jinja2 files with a `system` and a `user` block.

A prompt is named by a file in `prompts/` (`locate_reference` -> `locate_reference.j2`)
or given as a path to the user's own `.j2` file.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path

from builder.util.resources import shipped_dir

Message = dict[str, str]


class PromptError(ValueError):
    pass


class Prompt:
    def __init__(self, path: Path) -> None:
        # jinja2 is imported by the first prompt read, not by every command that may read one.
        from jinja2 import StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        self.path = path
        self.source = path.read_text(encoding="utf-8")
        self._env = SandboxedEnvironment(
            undefined=StrictUndefined,
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,
        )
        self._template = self._env.from_string(self.source)
        if "user" not in self._template.blocks:
            raise PromptError(f"prompt {path} has no {{% block user %}}")

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()

    @cached_property
    def variables(self) -> set[str]:
        from jinja2 import meta

        return meta.find_undeclared_variables(self._env.parse(self.source))

    def render(self, **variables: object) -> tuple[Message, ...]:
        ctx = self._template.new_context(variables)
        messages = []
        for role in ("system", "user"):
            block = self._template.blocks.get(role)
            if block is not None:
                text = "".join(block(ctx)).strip()
                if text:
                    messages.append({"role": role, "content": text})
        return tuple(messages)


class PromptLibrary:
    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir
        self._cache: dict[str, Prompt] = {}

    def path_of(self, name: str) -> Path:
        if name.endswith(".j2"):
            p = Path(name).expanduser()
            if not p.is_absolute() and not p.exists() and self.base_dir is not None:
                p = self.base_dir / p
            return p
        return shipped_dir("prompts") / f"{name}.j2"

    def get(self, name: str) -> Prompt:
        if name not in self._cache:
            path = self.path_of(name)
            if not path.exists():
                known = sorted(p.stem for p in shipped_dir("prompts").glob("*.j2"))
                raise PromptError(f"prompt {name!r} not found (shipped prompts: {', '.join(known)})")
            self._cache[name] = Prompt(path)
        return self._cache[name]
