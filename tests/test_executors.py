"""Executors: the local one and Ray give the same results in the same order, a killed
worker is retried, and a recipe that asks for Ray without it says how to install it."""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import pytest

from builder.executors import ActorResources, ExecutorConfig, LocalExecutor, make_executor, map_blocks

HAS_RAY = importlib.util.find_spec("ray") is not None


def _square(block: list[int]) -> list[int]:
    return [x * x for x in block]


def _die_once(marker: str, block: list[int]) -> list[int]:
    """Kill the worker process the first time it sees 7: Ray must re-run the block."""
    if 7 in block and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return [x + 1 for x in block]


class _Scale:
    def __init__(self) -> None:
        self.factor = 10
        self.pid = os.getpid()


def _make_scale() -> _Scale:
    return _Scale()


def _scaled(model: _Scale, block: list[int]) -> list[tuple[int, tuple[int, int]]]:
    return [(model.factor * x, (model.pid, id(model))) for x in block]


def _scaled_dying_once(marker: str, model: _Scale, block: list[int]) -> list[tuple[int, tuple[int, int]]]:
    """Kill the actor the first time it sees 7: Ray must restart it and re-run the call."""
    if 7 in block and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return _scaled(model, block)


def test_local_executor_maps_blocks_in_order() -> None:
    ex = LocalExecutor(block_size=3)
    seen: list[int] = []
    assert map_blocks(ex, _square, list(range(7)), 3, on_block=seen.append) == [0, 1, 4, 9, 16, 25, 36]
    assert seen == [3, 3, 1]
    assert ex.map_with_model(_make_scale, _scaled, [1, 2], ActorResources())[1][0] == 20


def _block_length(model: _Scale, block: list[int]) -> list[int]:
    return [len(block)] * len(block)


def test_actor_resources_can_set_the_items_per_call() -> None:
    ex = LocalExecutor(block_size=256)
    assert ex.map_with_model(_make_scale, _block_length, list(range(5)), ActorResources(batch_size=2)) == [
        2,
        2,
        2,
        2,
        1,
    ]


def test_a_block_function_that_loses_rows_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="returned 1 results for 2 items"):
        map_blocks(LocalExecutor(), lambda block: block[:1], [1, 2], 2)


@pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install -e '.[ray]'")
def test_ray_executor_matches_local_and_survives_a_killed_worker(ray_local, tmp_path: Path) -> None:
    ray_ex = make_executor(ExecutorConfig(kind="ray", block_size=4))
    items = list(range(50))
    assert map_blocks(ray_ex, _square, items, 4) == map_blocks(LocalExecutor(), _square, items, 4)
    marker = tmp_path / "died"
    out = map_blocks(ray_ex, functools.partial(_die_once, str(marker)), items, 4)
    assert marker.exists(), "the worker was not killed: the test proves nothing"
    assert out == [x + 1 for x in items]
    ray_ex.close()
    assert ray_local.is_initialized(), "an executor must not shut down a Ray it did not start"


@pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed: pip install -e '.[ray]'")
def test_ray_actor_pool_keeps_one_model_per_actor_across_calls_and_order(ray_local, tmp_path: Path) -> None:
    ray_ex = make_executor(ExecutorConfig(kind="ray", block_size=5))
    resources = ActorResources(actors=2)
    first = ray_ex.map_with_model(_make_scale, _scaled, list(range(40)), resources)
    assert [v for v, _ in first] == [10 * x for x in range(40)]
    models = {model for _, model in first}
    assert len(models) <= 2
    second = ray_ex.map_with_model(_make_scale, _scaled, list(range(10)), resources)
    assert {model for _, model in second} <= models, "a second call must reuse the loaded models"
    marker = tmp_path / "died"
    survived = ray_ex.map_with_model(
        _make_scale, functools.partial(_scaled_dying_once, str(marker)), list(range(40)), resources
    )
    assert marker.exists(), "the actor was not killed: the test proves nothing"
    assert [v for v, _ in survived] == [10 * x for x in range(40)]
    assert ray_ex.map_with_model(_make_scale, _scaled, [], ActorResources()) == []
    ray_ex.close()


def test_recipe_asking_for_ray_without_it_names_the_line_and_the_install(write_recipe, monkeypatch) -> None:
    from builder.executors import config as executor_config
    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError

    monkeypatch.setattr(
        executor_config.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ray" else importlib.util.find_spec(name, *a),
    )
    path = write_recipe(
        "name: r\nsources: [{type: jsonl, path: c.jsonl}]\nexecutor:\n  kind: ray\n"
        "stages:\n  - sample_by_length: {n_docs: 1}\n"
    )
    with pytest.raises(RecipeError) as err:
        parse_recipe(path)
    text = err.value.render()
    from builder.util.install_hint import install_command

    assert ":4" in text and "needs ray, which is not installed" in text and install_command("ray") in text


def test_a_mistyped_executor_section_names_each_line(write_recipe) -> None:
    from builder.recipe.model import parse_recipe
    from builder.recipe.yaml_text import RecipeError

    path = write_recipe(
        "name: r\nsources: [{type: python_docs}]\nexecutor:\n  kind: rayy\n  blocks: 3\n"
        "stages:\n  - sample_by_length: {n_docs: 1}\n"
    )
    with pytest.raises(RecipeError) as err:
        parse_recipe(path)
    text = err.value.render()
    assert ":4: executor.kind: Input should be 'local' or 'ray'" in text
    assert ":5: executor.blocks: unknown key 'blocks'" in text
