"""Masking secrets in a recipe before it is embedded in a public data card.

The recipe text is masked in place, node by node (PyYAML reports where every value
starts and ends), so comments and layout survive. A value is masked when its key has a
secret-looking word as one of its `_`/`-`/`.`-separated parts (`api_key`, `hf_token`,
`password`; not `max_tokens`). Keys ending in `_env` (`api_key_env`) hold the NAME of
an environment variable, and `${NAME}` references are names too: both stay. A second
pass masks, wherever they appear, strings shaped like well-known API tokens, the
credentials of a URL (`https://user:pass@host`) and URL query parameters with a
secret-looking name (`?api_key=...`, `&token=...`, `&X-Amz-Signature=...`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

MASK = "***"
_SECRET_WORDS = {"key", "apikey", "token", "secret", "password", "passwd", "credential",
                 "credentials", "auth", "authorization", "bearer", "sig", "signature"}
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
# A short hf_ token needs a digit or a capital, so key names such as `hf_token` stay.
_TOKEN_SHAPES = re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
                           r"|hf_(?:[A-Za-z0-9]{16,}|(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{6,}))\b")
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@")
_QUERY_PARAM = re.compile(r"([?&;])([^=&#\s'\"]+)=([^&#\s'\"]*)")


def is_secret_key(key: Any) -> bool:
    parts = [p for p in re.split(r"[_.\-\s]+", str(key).lower()) if p]
    return bool(parts) and parts[-1] != "env" and any(p in _SECRET_WORDS for p in parts)


def mask_string(text: str) -> str:
    """`text` with token-shaped strings, URL credentials and secret URL parameters masked."""
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY_PARAM.sub(lambda m: f"{m[1]}{m[2]}={MASK}" if is_secret_key(m[2]) and m[3] else m[0], text)
    return _TOKEN_SHAPES.sub(MASK, text)


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
        return mask_string(obj)
    return obj


def _replacements(node: yaml.Node) -> set[tuple[int, int, str]]:
    """(start, end, new text) for every scalar to mask: values of secret-looking keys, and
    values holding a token, URL credentials or a secret URL parameter (quoted, so that a
    plain `***` is not read back as a YAML alias)."""
    out: set[tuple[int, int, str]] = set()
    if isinstance(node, yaml.ScalarNode):
        masked = mask_string(node.value)
        if masked != node.value:
            out.add((node.start_mark.index, node.end_mark.index, json.dumps(masked, ensure_ascii=False)))
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and is_secret_key(key.value):
                if isinstance(value, yaml.ScalarNode) and (_keeps(value.value) or value.tag.endswith(":null")):
                    continue
                out.add((value.start_mark.index, value.end_mark.index, f"'{MASK}'"))
            else:
                out |= _replacements(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            out |= _replacements(item)
    return out


def mask_recipe_text(text: str) -> str:
    """The recipe YAML with secrets replaced by `***`, formatting and comments kept."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        # Unparseable text cannot be masked key by key; show none of it.
        return "# (recipe text not shown: it could not be parsed to mask secrets)\n"
    chosen: dict[tuple[int, int], str] = {}
    for start, end, new in _replacements(root) if root is not None else set():
        # An anchored scalar reached under a secret key and elsewhere is masked whole.
        if chosen.get((start, end)) != f"'{MASK}'":
            chosen[(start, end)] = new
    out = text
    for (start, end), new in sorted(chosen.items(), reverse=True):
        while end > start and out[end - 1] in " \t\r\n":  # a block scalar's range ends past its newline
            end -= 1
        out = out[:start] + new + out[end:]
    return mask_string(out)  # what is left: secrets in comments
