"""YAML helpers for recipes: line numbers for error locations, ${ENV} expansion, --set."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Problem:
    loc: tuple[Any, ...]
    message: str
    line: int | None = None

    def where(self) -> str:
        return ".".join(str(p) for p in self.loc) or "(top level)"


class RecipeError(Exception):
    """A recipe that cannot be used; printed as file:line: key: message, exit code 2."""

    def __init__(self, path: Path | str, problems: list[Problem]) -> None:
        self.path = Path(path)
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        lines = [f"recipe {self.path} is not valid:"]
        for p in self.problems:
            at = f"{self.path}:{p.line}" if p.line else str(self.path)
            lines.append(f"  {at}: {p.where()}: {p.message}")
        return "\n".join(lines)


def _child(node: yaml.Node, key: Any) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == str(key):
                return v
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        return node.value[key]
    return None


def _key_node(node: yaml.Node, key: Any) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if k.value == str(key):
                return k
    return None


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest node along `loc` that exists in the YAML text."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        key = _key_node(node, part)
        nxt = _child(node, part)
        if nxt is None:
            break
        line = (key or nxt).start_mark.line + 1
        node = nxt
    return line


def expand_env(data: Any, text: str, loc: tuple[Any, ...] = ()) -> list[Problem]:
    """Replace ${VAR} and ${VAR:-default} in string values, in place."""
    problems: list[Problem] = []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in list(items):
        here = (*loc, key)
        if isinstance(value, str) and "${" in value:
            missing = [m.group(1) for m in _ENV.finditer(value)
                       if m.group(2) is None and m.group(1) not in os.environ]
            if missing:
                problems.append(Problem(here, f"environment variable {missing[0]} is not set "
                                              f"(set it, or write ${{{missing[0]}:-default}})",
                                        line_of(text, here)))
                continue
            data[key] = _ENV.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
        elif isinstance(value, dict | list):
            problems.extend(expand_env(value, text, here))
    return problems


def _slot(container: Any, part: str) -> tuple[Any, Any]:
    """The (container, key) a --set path segment names; in a list, a stage name selects
    that stage's params."""
    if isinstance(container, list):
        if part.isdigit():
            return container, int(part)
        for item in container:
            if isinstance(item, dict) and part in item:
                return item, part
        raise KeyError(part)
    if isinstance(container, dict):
        return container, part
    raise KeyError(part)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> list[Problem]:
    """Apply `a.b.c=value` assignments; values are parsed as YAML scalars/flow values."""
    problems: list[Problem] = []
    for item in overrides:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            problems.append(Problem((), f"--set {item!r}: expected key.path=value"))
            continue
        parts = path.split(".")
        try:
            node: Any = data
            for part in parts[:-1]:
                container, key = _slot(node, part)
                if isinstance(container, dict) and container.get(key) is None:
                    container[key] = {}
                node = container[key]
            container, key = _slot(node, parts[-1])
            container[key] = yaml.safe_load(raw) if raw else ""
        except (KeyError, IndexError, TypeError):
            problems.append(Problem(tuple(parts), f"--set {item!r}: no such place in the recipe"))
    return problems
