"""Masking secrets in a recipe's YAML text before it is embedded in a public data card.

The text is masked in place, node by node (PyYAML reports where every value starts and
ends), so comments and layout survive. Which keys and strings count as secret is
`builder.util.secrets`'s rule; a second pass masks what is left in comments.
"""

from __future__ import annotations

import json

import yaml

from builder.util.secrets import MASK, is_env_reference, is_secret_key, mask_string


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
                if isinstance(value, yaml.ScalarNode) and (
                    is_env_reference(value.value) or value.tag.endswith(":null")
                ):
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
