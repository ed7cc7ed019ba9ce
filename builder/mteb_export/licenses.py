"""The licences MTEB's `TaskMetadata` takes: one id from its list, or a URL to the text.

The list is read from the installed MTEB (`mteb.types.Licenses`); without MTEB it is the
copy below, which a test compares with MTEB's wherever MTEB is installed. An id
written in other letters (`MIT`, `CC-BY-4.0`) is given in MTEB's lower case.
"""

from __future__ import annotations

from typing import get_args

# MTEB 2.26's list, in its order (mteb.types.Licenses).
KNOWN_LICENSES: tuple[str, ...] = (
    "not specified",
    "mit",
    "cc-by-2.0",
    "cc-by-3.0",
    "cc-by-4.0",
    "cc-by-sa-3.0",
    "cc-by-sa-4.0",
    "cc-by-nc-3.0",
    "cc-by-nc-4.0",
    "cc-by-nc-sa-3.0",
    "cc-by-nc-sa-4.0",
    "cc-by-nc-nd-4.0",
    "cc-by-nd-4.0",
    "openrail",
    "openrail++",
    "odc-by",
    "afl-3.0",
    "apache-2.0",
    "cc-by-nd-2.1-jp",
    "cc0-1.0",
    "bsd-3-clause",
    "gpl-3.0",
    "lgpl",
    "lgpl-3.0",
    "cdla-sharing-1.0",
    "mpl-2.0",
    "msr-la-nc",
    "multiple",
    "gemma",
    "eupl-1.2",
    "openmdw-1.1",
)


def installed_licenses() -> tuple[str, ...] | None:
    """The installed MTEB's list, or None without MTEB (or where it keeps it elsewhere)."""
    try:
        from mteb.types import Licenses
    except ImportError:
        return None
    return tuple(dict.fromkeys(get_args(Licenses)))


def mteb_licenses() -> tuple[str, ...]:
    return installed_licenses() or KNOWN_LICENSES


def mteb_license(value: str) -> str:
    """`value` as MTEB takes it: a URL as it is, an id in MTEB's spelling; ValueError saying
    what MTEB takes when it is neither."""
    if value.startswith(("https://", "http://")):
        return value
    allowed = mteb_licenses()
    spelled = value.strip().lower()
    if spelled in allowed:
        return spelled
    raise ValueError(
        f"licence {value!r} is not one MTEB's TaskMetadata takes: give --license one of "
        f"{', '.join(allowed)}, or a URL to the licence text (for a Hub `other` licence, "
        "its license_link)"
    )
