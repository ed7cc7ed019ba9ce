"""The README stays a first screen with working links: it opens with the commands (CI and
a hook run its test command as written), fits in 200 lines, and every relative link in it
reaches a file of the checkout (nothing a fresh clone lacks). The manual is in docs/,
whose links `mkdocs build --strict` checks."""

from __future__ import annotations

import re

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.splitlines()[:45])


def _first_code_block(text: str) -> list[str]:
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines()]


def test_the_readme_opens_with_the_quickstart_and_the_test_command():
    commands = _first_code_block(README)
    assert commands[:2] == [
        "pip install -e . && build-bench recipes/quickstart.yaml",
        'pip install -e ".[dev]" && python -m pytest',
    ]


def test_the_first_screen_gives_the_cpu_torch_command():
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in FIRST_SCREEN


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200


def test_every_relative_link_in_the_readme_reaches_a_file_of_the_checkout():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    relative = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert relative, "the README links its docs"
    broken = [t for t in relative if not (REPO / t).exists() or not (REPO / t).resolve().is_relative_to(REPO)]
    assert broken == []
