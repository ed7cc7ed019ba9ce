"""CHANGELOG entries: what changed in the statistics since the previous release."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

HEADER = "# Changelog\n\nEach release compares its statistics with the previous tagged release.\n"
_VERSION = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:[-+](.+))?$")


def version_key(tag: str) -> tuple[int, int, int, int, str] | None:
    """Sort key for vX.Y.Z tags (a pre-release sorts before its release); None if not one."""
    m = _VERSION.match(tag)
    if not m:
        return None
    major, minor, patch, extra = m.groups()
    return int(major), int(minor), int(patch), 0 if extra else 1, extra or ""


def previous_tag(tags: list[str], new: str | None) -> str | None:
    """The highest release tag below `new` (or the highest of all when `new` is None)."""
    keyed = [(version_key(t), t) for t in tags]
    ranked = sorted((k, t) for k, t in keyed if k is not None)
    limit = version_key(new) if new else None
    below = [t for k, t in ranked if limit is None or k < limit]
    return below[-1] if below else None


def _figures(stats: dict[str, Any]) -> dict[str, Any]:
    """The figures worth comparing, flattened to `section: name -> number`."""
    counts = stats.get("counts") or {}
    out: dict[str, Any] = {
        f"count: {k}": counts.get(k) for k in ("docs", "queries", "qrels", "drops", "languages", "domains")
    }
    lengths = stats.get("doc_lengths") or {}
    out.update({f"doc tokens: {k}": lengths.get(k) for k in ("mean", "median")})
    positions = stats.get("positions") or {}
    out["position: mean relative"] = positions.get("mean_rel_pos")
    out.update({f"position tag: {k}": v for k, v in (positions.get("tags") or {}).items()})
    out.update({f"position bin: {k:02d}": v for k, v in enumerate(positions.get("bins") or [])})
    out.update(
        {f"length bucket: {k}": v for k, v in (stats.get("length_buckets") or {}).items() if not isinstance(v, dict)}
    )
    qtypes = (stats.get("query_types") or {}).get("by_interrogative") or {}
    out.update({f"query type: {k}": v for k, v in qtypes.items()})
    reasons: Counter[str] = Counter()
    for row in stats.get("drop_table") or []:
        reasons[row["reason"]] += row["count"]
    out.update({f"removed: {k}": v for k, v in sorted(reasons.items())})
    return out


def _change(old: Any, new: Any) -> str:
    if isinstance(old, int | float) and isinstance(new, int | float):
        delta = new - old
        text = f"{delta:+d}" if isinstance(delta, int) else f"{delta:+.4g}"
        return f"{text} ({delta / old:+.1%})" if old else text
    return "new" if old is None else ("gone" if new is None else "changed")


def entry(
    new_stats: dict[str, Any],
    old_stats: dict[str, Any] | None,
    version: str,
    previous: str | None,
    date: str,
    changes: list[str] | None = None,
) -> str:
    """One markdown entry; `changes` (what changed in the data and the inputs) come first,
    then the statistics: counts always, other figures only where they moved."""
    new = _figures(new_stats)
    lines = [f"## {version} ({date})", ""]
    if old_stats is None:
        counts = new_stats.get("counts") or {}
        note = f" (no statistics found for {previous})" if previous else ""
        lines.append(
            f"First release{note}: {counts.get('docs', 0)} documents, "
            f"{counts.get('queries', 0)} queries, {counts.get('qrels', 0)} qrels."
        )
        return "\n".join(lines) + "\n"
    old = _figures(old_stats)
    lines += [
        f"Compared with {previous}:",
        "",
        *(changes or []),
        "Statistics:",
        "",
        f"| figure | {previous} | {version} | change |",
        "| --- | ---: | ---: | --- |",
    ]
    for key in [*new, *(k for k in old if k not in new)]:
        before, after = old.get(key), new.get(key)
        if before == after and not key.startswith("count: "):
            continue
        lines.append(
            f"| {key} | {_fmt(before)} | {_fmt(after)} | {_change(before, after) if before != after else '='} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(value: Any) -> str:
    return "-" if value is None else str(value)


def changelog(new_entry: str, previous_text: str | None) -> str:
    """The new entry on top of the earlier entries."""
    earlier = (previous_text or "").strip()
    if earlier.startswith(HEADER.strip()):
        earlier = earlier[len(HEADER.strip()) :].strip()
    return HEADER + "\n" + new_entry + ("\n" + earlier + "\n" if earlier else "")
