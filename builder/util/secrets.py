"""Masking secrets wherever build-bench shows or stores text: the card, logs, error
messages, `build-bench cache` and the LLM cache's record of which server answered.

A key is secret-looking when one of its `_`/`-`/`.`-separated parts is a secret word
(`api_key`, `hf_token`, `X-Amz-Signature`, `Authorization`; not `max_tokens`). Keys
ending in `_env` (`api_key_env`) hold the NAME of an environment variable, so they stay.
In text, three things are masked wherever they appear: strings shaped like well-known
API tokens, a URL's credentials (`https://user:pass@host`) and URL query parameters
with a secret-looking name (`?api_key=...`, `&token=...`). A mapping (a recipe section,
HTTP headers) has the values of its secret-looking keys masked, and its text as above.

Shapes are not enough: a key of any shape that this process was given (the API key read
from the environment variable a model names, a secret query value or password in a
base_url, a secret value substituted into the recipe) is remembered with
`remember_secret`, and every later `mask_string` masks that exact value too, so a server
that quotes the key back (`Incorrect API key provided: ...`) cannot get it printed or
stored.

This module sits below every other so that any layer can mask without importing the
publishing code.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
_SECRET_WORDS = {
    "key",
    "apikey",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "credentials",
    "auth",
    "authorization",
    "bearer",
    "sig",
    "signature",
}
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
# A short hf_ token needs a digit or a capital, so key names such as `hf_token` stay.
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|hf_(?:[A-Za-z0-9]{16,}|(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{6,}))\b"
)
_URL_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s'\"]*@")
_QUERY_PARAM = re.compile(r"([?&;])([^=&#\s'\"]+)=([^&#\s'\"]*)")


def is_secret_key(key: Any) -> bool:
    parts = [p for p in re.split(r"[_.\-\s]+", str(key).lower()) if p]
    return bool(parts) and parts[-1] != "env" and any(p in _SECRET_WORDS for p in parts)


# Values shorter than this are not remembered: masking `abc` everywhere would spoil text
# without protecting anything worth a key.
_MIN_REMEMBERED = 6
_remembered: set[str] = set()
_remembered_pattern: re.Pattern[str] | None = None


def remember_secret(value: str | None) -> None:
    """Mask `value` wherever `mask_string` sees it from now on (a key this process was given)."""
    global _remembered_pattern
    if value is None or len(value.strip()) < _MIN_REMEMBERED or is_env_reference(value):
        return
    value = value.strip()
    if value not in _remembered:
        _remembered.add(value)
        # Longest first, so a key that contains another is masked whole.
        _remembered_pattern = re.compile("|".join(map(re.escape, sorted(_remembered, key=len, reverse=True))))


def remember_url_secrets(url: str | None) -> None:
    """Remember the password and the secret-named query values of a URL."""
    if not url:
        return
    from urllib.parse import parse_qsl, unquote, urlsplit

    parts = urlsplit(url)
    if parts.password:
        remember_secret(unquote(parts.password))
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if is_secret_key(name):
            remember_secret(value)


def remember_recipe_secrets(obj: Any) -> None:
    """Remember the values of a recipe's secret-looking keys and the secrets of its URLs."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if is_secret_key(k) and isinstance(v, str):
                remember_secret(v)
            else:
                remember_recipe_secrets(v)
    elif isinstance(obj, list):
        for v in obj:
            remember_recipe_secrets(v)
    elif isinstance(obj, str) and "://" in obj:
        remember_url_secrets(obj)


def mask_string(text: str) -> str:
    """`text` with remembered secrets, token-shaped strings, URL credentials and secret URL
    parameters masked."""
    if _remembered_pattern is not None:
        text = _remembered_pattern.sub(MASK, text)
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY_PARAM.sub(lambda m: f"{m[1]}{m[2]}={MASK}" if is_secret_key(m[2]) and m[3] else m[0], text)
    return _TOKEN_SHAPES.sub(MASK, text)


def mask_optional(text: str | None) -> str | None:
    """`mask_string`, passing None through (a column that may be empty)."""
    return None if text is None else mask_string(text)


def is_env_reference(value: str) -> bool:
    """An empty value or `${NAME}`: it names where a secret is, so it is shown."""
    return value == "" or bool(_ENV_REF.match(value.strip()))


def mask_mapping(obj: Any) -> Any:
    """A copy of nested dicts/lists (a recipe, HTTP headers) with secret values replaced."""
    if isinstance(obj, dict):
        return {
            k: (
                MASK
                if is_secret_key(k) and not (isinstance(v, str) and is_env_reference(v)) and v is not None
                else mask_mapping(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [mask_mapping(v) for v in obj]
    if isinstance(obj, str):
        return mask_string(obj)
    return obj
