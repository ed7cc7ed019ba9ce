"""YAML helpers for recipes: safe reading, line numbers for error locations, ${ENV}
expansion, --set.

Recipes come from users, so reading is defensive: PyYAML silently keeps the last of two
equal keys and expands aliases without limit (a few lines can stand for billions of
values), so the composed node graph is checked before anything is built from it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Far more values than any recipe needs, few enough to walk in well under a second.
MAX_VALUES = 100_000
# Far deeper than any recipe needs, shallow enough that building it never hits Python's recursion limit.
MAX_DEPTH = 64
_MERGE = "tag:yaml.org,2002:merge"


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
        if len(self.problems) == 1 and not self.problems[0].loc:
            # A problem with the file as a whole (not YAML, a directory, a bad --set): one line.
            p = self.problems[0]
            return f"recipe {self.path}{f':{p.line}' if p.line else ''}: {p.message}"
        lines = [f"recipe {self.path} is not valid:"]
        for p in self.problems:
            at = f"{self.path}:{p.line}" if p.line else str(self.path)
            lines.append(f"  {at}: {p.where()}: {p.message}")
        return "\n".join(lines)


class BadYaml(Exception):
    """YAML text that cannot be read safely; carries the problems found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def read_yaml(text: str) -> Any:
    """Parse YAML text like `yaml.safe_load`, but reject NUL characters, duplicate keys,
    self-referencing aliases and documents that expand to more than MAX_VALUES values."""
    nul = text.find("\0")
    if nul >= 0:
        raise BadYaml([Problem((), "a NUL character is not allowed in a recipe", _line_at(text, nul))])
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:  # the reader rejects control characters up front
        raise BadYaml([_syntax_problem(exc, text)]) from None
    try:
        _check_depth(text)
        node = loader.get_single_node()
        if node is None:
            return None
        problems = _check_graph(node)
        if problems:
            raise BadYaml(problems)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise BadYaml([_syntax_problem(exc, text)]) from None
    except RecursionError:
        raise BadYaml([Problem((), "not valid YAML: nested too deeply")]) from None
    finally:
        loader.dispose()


def _check_depth(text: str) -> None:
    """Reject nesting deeper than MAX_DEPTH at the line where it gets too deep. The event
    stream is read without recursion, so this holds for any depth, unlike composing."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise BadYaml([Problem((), f"nested more than {MAX_DEPTH} levels deep", line)])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _syntax_problem(exc: yaml.YAMLError, text: str) -> Problem:
    if isinstance(exc, yaml.reader.ReaderError):
        return Problem((), f"not valid YAML: character {exc.character!r} is not allowed", _line_at(text, exc.position))
    mark = getattr(exc, "problem_mark", None)
    return Problem((), f"not valid YAML: {getattr(exc, 'problem', None) or exc}", mark.line + 1 if mark else None)


def _check_graph(root: yaml.Node) -> list[Problem]:
    """Duplicate keys, and the size of the document with every alias expanded."""
    sizes: dict[int, int] = {}
    duplicates: list[Problem] = []

    def size(node: yaml.Node, loc: tuple[Any, ...], line: int, inside: frozenset[int]) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in inside:
            raise BadYaml([Problem(loc, "an alias refers to a node that contains it", line)])
        inside = inside | {id(node)}
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                total += size(item, (*loc, i), item.start_mark.line + 1, inside)
        elif isinstance(node, yaml.MappingNode):
            duplicates.extend(_duplicate_keys(node, loc))
            for key, value in node.value:
                where = (*loc, key.value if isinstance(key, yaml.ScalarNode) else "?")
                total += 1 + size(value, where, key.start_mark.line + 1, inside)
        if total > MAX_VALUES:
            # The first node found too big is the smallest such: the anchored value to blame.
            raise BadYaml(
                [
                    Problem(
                        (),
                        f"more than {MAX_VALUES} values once aliases are expanded "
                        "(the value starting on this line is the one that grows past that; "
                        "use fewer aliases)",
                        node.start_mark.line + 1,
                    )
                ]
            )
        sizes[id(node)] = total
        return total

    size(root, (), root.start_mark.line + 1, frozenset())
    return duplicates


def _duplicate_keys(node: yaml.MappingNode, loc: tuple[Any, ...]) -> list[Problem]:
    # Keys brought in by a `<<` merge may be overridden; keys written twice may not.
    seen: dict[tuple[str, str], yaml.Node] = {}
    problems = []
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE:
            continue
        first = seen.setdefault((key.tag, key.value), key)
        if first is not key:
            problems.append(
                Problem(
                    (*loc, key.value),
                    f"duplicate key {key.value!r} (first on line {first.start_mark.line + 1})",
                    key.start_mark.line + 1,
                )
            )
    return problems


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
            if "${" in _ENV.sub("", value):
                problems.append(
                    Problem(
                        here,
                        "'${' does not start a valid ${NAME} or ${NAME:-default} "
                        "reference (a name is letters, digits and '_', "
                        "not starting with a digit, closed by '}')",
                        line_of(text, here),
                    )
                )
                continue
            missing = [m.group(1) for m in _ENV.finditer(value) if m.group(2) is None and m.group(1) not in os.environ]
            if missing:
                problems.append(
                    Problem(
                        here,
                        f"environment variable {missing[0]} is not set (set it, or write ${{{missing[0]}:-default}})",
                        line_of(text, here),
                    )
                )
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
            container[key] = read_yaml(raw) if raw else ""
        except BadYaml as exc:
            detail = str(exc).removeprefix("not valid YAML: ")
            problems.append(Problem((), f"--set {item!r}: the value is not valid YAML ({detail})"))
        except (KeyError, IndexError, TypeError):
            problems.append(Problem(tuple(parts), f"--set {item!r}: no such place in the recipe"))
    return problems
