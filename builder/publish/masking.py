"""Masking secrets in a recipe before it is embedded in a public data card.

The recipe text is masked in place, node by node (PyYAML reports where every value
starts and ends), so comments and layout survive. A value is masked when its key has a
secret-looking word as one of its `_`/`-`/`.`-separated parts (`api_key`, `hf_token`,
`password`; not `max_tokens`). Keys ending in `_env` (`api_key_env`) hold the NAME of
an environment variable, and `${NAME}` references are names too: both stay. A second
pass masks strings shaped like well-known API tokens wherever they appear.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MASK = "***"
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "credential",
                 "credentials", "auth", "authorization", "bearer"}
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_TOKEN_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,})")


def is_secret_key(key: Any) -> bool:
    parts = [p for p in re.split(r"[_.\-\s]+", str(key).lower()) if p]
    return bool(parts) and parts[-1] != "env" and any(p in _SECRET_WORDS for p in parts)


def _keeps(value: str) -> bool:
    return value == "" or bool(_ENV_REF.match(value.strip()))


def mask_mapping(obj: Any) -> Any:
    """A copy of nested dicts/lists with secret values replaced."""
    if isinstance(obj, dict):
        return {
            k: (MASK if is_secret_key(k) and not (isinstance(v, str) and _keeps(v)) and v is not None
                else mask_mapping(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [mask_mapping(v) for v in obj]
    if isinstance(obj, str):
        return _TOKEN_SHAPES.sub(MASK, obj)
    return obj


def _secret_ranges(node: yaml.Node) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and is_secret_key(key.value):
                if isinstance(value, yaml.ScalarNode) and (_keeps(value.value) or value.tag.endswith(":null")):
                    continue
                ranges.append((value.start_mark.index, value.end_mark.index))
            else:
                ranges += _secret_ranges(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            ranges += _secret_ranges(item)
    return ranges


def mask_recipe_text(text: str) -> str:
    """The recipe YAML with secret values replaced by `***`, formatting kept."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        # Unparseable text cannot be masked key by key; show none of it.
        return "# (recipe text not shown: it could not be parsed to mask secrets)\n"
    out = text
    for start, end in sorted(_secret_ranges(root) if root is not None else [], reverse=True):
        while end > start and out[end - 1] in " \t\r\n":  # a block scalar's range ends past its newline
            end -= 1
        out = out[:start] + f"'{MASK}'" + out[end:]
    return _TOKEN_SHAPES.sub(MASK, out)
