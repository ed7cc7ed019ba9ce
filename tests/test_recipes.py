"""Every shipped recipe validates; every broken recipe fails with its expected message."""

from __future__ import annotations

import copy
import re
import tempfile
import traceback
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from builder.cli import app
from builder.util.resources import shipped_recipes
from tests.conftest import FIXTURES, require_recipe_extras

BROKEN = sorted((FIXTURES / "broken_recipes").glob("*.yaml"))
runner = CliRunner()


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_shipped_recipe_validates(recipe: Path, monkeypatch):
    require_recipe_extras(recipe)
    # As on a user's machine with network: Hub models need not be in the cache to validate.
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    monkeypatch.delenv("MY_DOCS", raising=False)  # my_domain then reads its shipped sample
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output


def _expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: ")
    return first.removeprefix("# expect: ")


@pytest.mark.parametrize("recipe", BROKEN, ids=lambda p: p.stem)
def test_broken_recipe_names_the_line_and_exits_2(recipe: Path, monkeypatch):
    monkeypatch.delenv("BUILD_BENCH_TEST_UNSET_VAR", raising=False)
    result = runner.invoke(app, ["validate", str(recipe)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    expected = _expected(recipe)
    if expected[0].isdigit():
        line, _, message = expected.partition(": ")
        assert f"{recipe}:{line}: {message}" in " ".join(result.output.split()), result.output
    else:
        assert expected in result.output


def test_set_overrides_a_stage_param_by_stage_name(tmp_path):
    from builder.recipe.model import parse_recipe
    from builder.util.resources import find_recipe

    loaded = parse_recipe(find_recipe("quickstart"), ["stages.sample_by_length.n_docs=7", "seed=5"])
    assert loaded.recipe.stage_objects()[0].params.n_docs == 7
    assert loaded.recipe.seed == 5


def test_set_to_a_missing_place_is_a_recipe_error():
    result = runner.invoke(app, ["validate", "quickstart", "--set", "stages.nope.x=1"])
    assert result.exit_code == 2
    assert "no such place" in result.output


def test_env_expansion_with_default(write_recipe, monkeypatch):
    from builder.recipe.model import parse_recipe

    monkeypatch.setenv("BB_TEST_URL", "http://127.0.0.1:1234/v1")
    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\n"
        "models:\n  gen: {model: '${BB_TEST_MODEL:-tiny}', base_url: '${BB_TEST_URL}'}\n"
        "stages: [{summarize: {llm: gen}}]\n"
    )
    recipe = parse_recipe(path).recipe
    assert recipe.models["gen"].model == "tiny"
    assert recipe.models["gen"].base_url == "http://127.0.0.1:1234/v1"


def test_unknown_recipe_name_exits_2():
    result = runner.invoke(app, ["validate", "no_such_recipe"])
    assert result.exit_code == 2
    assert "no recipe file or shipped recipe named 'no_such_recipe'" in result.output


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_binary_file_is_one_line_error(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_bytes(b"name: x\nseed: 1\n\xd0\x00\xff\xfe binary")
    line = _one_line_error(runner.invoke(app, ["validate", str(path)]))
    assert line == f"recipe {path}:3: not UTF-8 text (byte 0xd0)"


def test_directory_is_one_line_error(tmp_path):
    line = _one_line_error(runner.invoke(app, ["validate", str(tmp_path)]))
    assert line == f"recipe {tmp_path}: is a directory, not a recipe file"


@pytest.mark.parametrize("value", ["seed=[1", "seed={a: 1", "seed=&a [*a]", "seed=a: b: c", "seed=\x00"])
def test_malformed_set_value_is_one_line_error(value):
    line = _one_line_error(runner.invoke(app, ["validate", "quickstart", "--set", value]))
    assert f"--set {value!r}: the value is not valid YAML" in line


def test_alias_bomb_is_refused_before_it_is_expanded():
    result = runner.invoke(app, ["validate", str(FIXTURES / "broken_recipes" / "alias_bomb.yaml")])
    assert result.exit_code == 2
    assert "more than 100000 values once aliases are expanded" in result.output


def test_anchors_and_merge_keys_still_work(write_recipe):
    from builder.recipe.model import parse_recipe

    path = write_recipe(
        "name: t\nsources: [{type: python_docs}]\n"
        "models:\n  gen: &base {model: m, base_url: 'https://example.org/v1'}\n"
        "  judge: {<<: *base, model: j}\n"
        "stages: [{summarize: {llm: gen}}, {summarize: {llm: judge}}]\n"
    )
    recipe = parse_recipe(path).recipe
    assert recipe.models["judge"].model == "j"
    assert recipe.models["judge"].base_url == "https://example.org/v1"


def test_integer_bound_allows_the_largest_int32(write_recipe):
    from builder.recipe.model import parse_recipe

    path = write_recipe("name: t\nsources: [{type: python_docs}]\nstages: [{sample_by_length: {n_docs: 2147483647}}]\n")
    assert parse_recipe(path).recipe.stage_objects()[0].params.n_docs == 2**31 - 1


# -- mutated shipped recipes: every one is either valid or a clean exit 2 ------------------

SHIPPED_TEXT = {p.name: p.read_text(encoding="utf-8") for p in shipped_recipes()}
_JUNK_PIECES = [
    *":-[]{}&*!|>'\"#%@`,?\\$",
    "${",
    "\t",
    "\n",
    "\0",
    "\x07",
    "\ufeff",
    "\x85",
    "\u2028",
    "é",
    "  ",
    "&a",
    "*a",
    "<<",
]
_JUNK = st.lists(st.sampled_from(_JUNK_PIECES), min_size=1, max_size=6).map("".join)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**31, max_value=10**40),
    st.floats(),
    st.text(max_size=8),
    st.just("${HOME"),
    st.just("http://u:p@h/v1?token=x"),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _slots(data, out, seen=frozenset()):
    """Every (container, key) pair in a parsed recipe (once, where a list contains itself)."""
    if id(data) in seen:
        return out
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        out.append((data, key))
        _slots(value, out, seen | {id(data)})
    return out


def _mutate_text(draw, text: str, op: str) -> str:
    lines = text.splitlines(keepends=True) or [""]
    if op == "bytes":  # anything, invalid UTF-8 included; kept as surrogates until written
        raw = text.encode("utf-8", "surrogateescape")
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]
        return raw.decode("utf-8", "surrogateescape")
    if op == "duplicate":
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[: i + 1] + lines[i:])
    at = draw(st.integers(0, len(text)))
    return text[:at] if op == "truncate" else text[:at] + draw(_JUNK) + text[at:]


def _mutate_data(draw, text: str, op: str) -> str:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return _mutate_text(draw, text, "junk")
    slots = _slots(data, [])
    if not slots:
        return text
    container, key = draw(st.sampled_from(slots))
    if op == "delete":
        del container[key]
    elif op == "retype":
        container[key] = draw(_VALUES)
    elif op == "self_alias":  # dumped as `&id001 [*id001]`: a list that contains itself
        loop: list = []
        loop.append(loop)
        container[key] = loop
    else:
        other, other_key = draw(st.sampled_from(slots))
        a, b = copy.deepcopy(container[key]), copy.deepcopy(other[other_key])
        container[key], other[other_key] = b, a
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@st.composite
def mutated_recipes(draw) -> bytes:
    text = SHIPPED_TEXT[draw(st.sampled_from(sorted(SHIPPED_TEXT)))]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "duplicate", "retype", "self_alias", "swap", "junk", "bytes", "truncate"]))
        data_op = op in ("delete", "retype", "self_alias", "swap")
        text = (_mutate_data if data_op else _mutate_text)(draw, text, op)
    return text.encode("utf-8", "surrogateescape")


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(recipe=mutated_recipes())
def test_mutated_shipped_recipes_exit_0_or_2_without_traceback(recipe: bytes):
    """Deleted, duplicated, retyped and swapped keys, junk characters and bytes, truncation."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recipe.yaml"
        path.write_bytes(recipe)
        result = runner.invoke(app, ["validate", str(path)])
    crash = (
        "" if isinstance(result.exception, SystemExit | None) else "".join(traceback.format_exception(result.exception))
    )
    assert result.exit_code in (0, 2), result.output + crash
    assert "Traceback" not in result.output


def test_unusable_recipe_path_is_one_line_error():
    line = _one_line_error(runner.invoke(app, ["validate", "a" * 300]))
    assert line.startswith("cannot open recipe 'aaaa") and line.endswith(": File name too long")


_PAPERS = ("PosIR", "FineWeb-PosQ", "SQuAD-PosQ", "FarRelevant", "ColDeR")
_SECTION = re.compile(r"§\s?\d|appendix [A-Z]")


def _header(path: Path) -> str:
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


@pytest.mark.parametrize("recipe", shipped_recipes(), ids=lambda p: p.stem)
def test_shipped_recipe_header_names_its_paper_section_and_differences(recipe: Path):
    header = _header(recipe)
    assert any(name in header for name in _PAPERS), f"{recipe.name}: header names no paper"
    assert _SECTION.search(header), f"{recipe.name}: header names no section or appendix of its paper"
    assert "Differs from" in header, f"{recipe.name}: header has no 'Differs from ...' list"
