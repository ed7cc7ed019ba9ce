"""What a fresh clone's reader needs is in the clone: the CPU-torch command written out,
the papers described in docs/ (not in a workspace file a clone lacks), and the first
screen says which commands need the network."""

from __future__ import annotations

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.splitlines()[:45])


def test_the_readme_points_at_nothing_a_clone_lacks():
    assert "../shared/seeds" not in README
    papers = (REPO / "docs" / "papers.md").read_text(encoding="utf-8")
    for title in ("PosIR", "SQuAD-PosQ", "FarRelevant", "ColDeR"):
        assert title in papers
    assert "docs/papers.md" in README


def test_the_first_screen_names_the_cpu_torch_command_and_what_needs_the_network():
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in FIRST_SCREEN
    assert "Network:" in FIRST_SCREEN
    for command in ("validate", "plan", "push", "--from hf://", "--mock-llm"):
        assert command in FIRST_SCREEN.split("Network:")[1]
