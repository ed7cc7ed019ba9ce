"""Value checks every recipe gets, whatever the stage: numbers a stage can use, URLs a
client can reach. Run on the parsed YAML (so the message names the value as written) and
again on the validated recipe (pydantic turns strings such as "inf" into numbers)."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

# Counts, sizes and seeds all fit in a signed 32-bit integer; polars, numpy and SQLite
# columns then hold them whatever the stage does with them.
INT_MAX = 2**31 - 1


def number_problems(value: Any, loc: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """(location, message) for every non-finite float and out-of-range integer in `value`."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in number_problems(v, (*loc, k))]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in number_problems(v, (*loc, i))]
    if isinstance(value, float) and not math.isfinite(value):
        return [(loc, f"must be a finite number, not {value}")]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_MAX:
        bound = f"at most {INT_MAX}" if value > 0 else f"at least {-INT_MAX}"
        return [(loc, f"must be {bound}")]
    return []


# The client sends the API key as `Authorization: Bearer`; the HTTP library refuses a URL
# whose user:password@ would need that header too, so every call would fail unexplained.
_USERINFO = (
    "must not carry a user name or password (user:password@): requests send the API key as a "
    "bearer token, so put the secret in the environment variable that api_key_env names "
    "(default OPENAI_API_KEY) and drop it from the URL"
)


def url_problems(recipe: Any) -> list[tuple[tuple[Any, ...], str]]:
    """Every model's base_url, and each of its base_urls, is an http(s) URL with a host
    and no user name or password. The messages never repeat the URL: it may hold a secret."""
    out = []
    for name, model in recipe.models.items():
        urls: list[tuple[tuple[Any, ...], str | None]] = [
            (("models", name, "base_url"), getattr(model, "base_url", None))
        ]
        urls += [
            (("models", name, "base_urls", i), url) for i, url in enumerate(getattr(model, "base_urls", None) or [])
        ]
        for loc, url in urls:
            if url is not None and not is_http_url(url):
                out.append((loc, "must be an http:// or https:// URL with a host (e.g. http://127.0.0.1:8000/v1)"))
            elif url is not None and "@" in urlsplit(url).netloc:
                out.append((loc, _USERINFO))
    return out


def is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is not a number in range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
