"""What the mock LLM reads in a request: which shipped prompt it is, and the pieces of it.

A request carries only its rendered messages, so the prompt is told by its fixed
wording: every line of literal text that one shipped template has and no other has
is a fingerprint, and the template with the most fingerprints found in the request
wins. Editing a shipped prompt therefore needs no change here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from builder.util.resources import shipped_dir

Message = dict[str, str]

# A literal line shorter than this ("<document>", "Title:") says too little to tell prompts apart.
_MIN_FINGERPRINT = 24
_WORD = re.compile(r"\w+", re.UNICODE)
# A sentence: a run of text up to . ! ? (or their CJK forms) or a line break.
_SENTENCE = re.compile(r"[^\s][^\n.!?。！？]*(?:[.!?。！？]+|(?=\n)|$)")
STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having
he her here hers him his how i if in into is it its itself just me more most my no nor not now of off on
once only or other our out over own same she should so some such than that the their them then there these
they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours said known related matter happened described mentioned explain tell things
""".split()
)


@dataclass(frozen=True)
class Sentence:
    start: int
    text: str  # exactly the document's characters from `start`

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    """The words that carry meaning: no stopwords, no one- or two-letter words."""
    return [w for w in words(text) if len(w) > 2 and w not in STOPWORDS]


def sentences(text: str) -> list[Sentence]:
    out = []
    for m in _SENTENCE.finditer(text):
        piece = m.group().rstrip()
        if len(words(piece)) >= 3:
            out.append(Sentence(m.start(), piece))
    return out


def between(text: str, tag: str) -> str | None:
    """What stands between the lines `<tag>` and `</tag>` (the prompts put them on lines of
    their own; the instructions may name a tag inside a sentence)."""
    m = re.search(f"^<{tag}>\\n(.*)\\n</{tag}>$", text, re.S | re.M)
    return m.group(1) if m else None


def blocks(text: str, tag: str) -> list[str]:
    """What stands in every `<tag>` ... `</tag>` block, in order."""
    return re.findall(f"^<{tag}>\\n(.*?)\\n</{tag}>$", text, re.S | re.M)


def outside(text: str, tag: str) -> str:
    """The text with its `<tag>` block cut out: the instructions around a document, so that
    words of the document are never read as instructions."""
    return re.sub(f"^<{tag}>\\n.*\\n</{tag}>$", "", text, count=1, flags=re.S | re.M)


def numbered(block: str) -> list[tuple[int, str]]:
    """`1. text` lines, as the prompts list questions and short texts."""
    out = []
    for line in block.splitlines():
        m = re.match(r"\s*(\d+)\.\s?(.*)", line)
        if m:
            out.append((int(m.group(1)), m.group(2).strip()))
    return out


def _literal_lines(source: str) -> set[str]:
    from jinja2 import nodes  # only a mock build reads the prompts' text
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment()
    lines: set[str] = set()
    for data in env.parse(source).find_all(nodes.TemplateData):
        lines |= {line.strip() for line in data.data.splitlines() if len(line.strip()) >= _MIN_FINGERPRINT}
    return lines


@cache
def fingerprints() -> dict[str, frozenset[str]]:
    """Shipped prompt name -> the literal lines only that prompt has."""
    lines = {p.stem: _literal_lines(p.read_text(encoding="utf-8")) for p in sorted(shipped_dir("prompts").glob("*.j2"))}
    seen = Counter(line for found in lines.values() for line in found)
    return {name: frozenset(line for line in found if seen[line] == 1) for name, found in lines.items()}


def prompt_text(messages: Sequence[Message]) -> str:
    """The system message and the first user message: a re-ask appends to the conversation,
    but the task stays the one the first user message set."""
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    return f"{system}\n{user}"


def identify(messages: Sequence[Message]) -> str | None:
    """The shipped prompt these messages were rendered from, or None when none fits.

    Two fingerprints must be found (a conditional block may hide the rest), so a user's
    own prompt that merely quotes one line of ours is not taken for it.
    """
    text = prompt_text(messages)
    best, best_found = None, 0
    for name, lines in fingerprints().items():
        found = sum(line in text for line in lines)
        if found > best_found and found >= min(2, len(lines)):
            best, best_found = name, found
    return best
