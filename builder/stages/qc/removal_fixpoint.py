"""Which flagged documents false-negative removal takes out, decided to a fixpoint.

A flag (query, document) says the document beats the query's positive. Removing every
flagged document at once over-removes: a document flagged only by queries that lose
their own positive in the same pass goes for no query that survives. Here a document
goes only for a surviving query: view each flag as an edge positive -> flagged document;
a document is removed when a kept document's query flags it, and kept when every
document whose query flags it is removed (or nothing flags it). Decisions spread from
the documents nothing flags; that is the fixpoint, and it needs no new scores, since a
pair's score does not depend on which other documents stay.

Documents left undecided sit on cycles of mutual flags (A's query prefers B, B's query
prefers A). Keeping either is valid; one at a time, the undecided document that is the
positive of the most queries (then the earliest in the corpus) is kept and decisions
spread again. A document that would be kept while its own queries flag a kept document
(an odd cycle, which no choice resolves) is removed instead: a surviving query never
leaves a document that beats its positive in the corpus.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Sequence


def removed_documents(flags: Iterable[tuple[str, str]], positives: Sequence[str], order: Sequence[str]) -> list[str]:
    """The documents to remove, in corpus order.

    `flags` holds (positive, flagged document) per flagged pair; `positives` the positive
    of every query (one entry per query); `order` the corpus order of document ids.
    """
    flagged_by: dict[str, set[str]] = {}
    flags_of: dict[str, set[str]] = {}
    for positive, doc in flags:
        flagged_by.setdefault(doc, set()).add(positive)
        flags_of.setdefault(positive, set()).add(doc)
    nodes = [d for d in order if d in flagged_by or d in flags_of]
    rank = {d: i for i, d in enumerate(order)}
    queries = Counter(positives)
    kept: set[str] = set()
    removed: set[str] = set()
    # Per document: how many of the documents whose queries flag it are not removed yet.
    open_flaggers = {d: len(flagged_by.get(d, ())) for d in nodes}
    ready = deque(d for d in nodes if open_flaggers[d] == 0)

    def remove(doc: str) -> None:
        removed.add(doc)
        for target in sorted(flags_of.get(doc, ()), key=rank.__getitem__):
            open_flaggers[target] -= 1
            if open_flaggers[target] == 0 and target not in kept and target not in removed:
                ready.append(target)

    def keep(doc: str) -> None:
        if flags_of.get(doc, set()) & kept:
            remove(doc)  # odd cycle: keeping it would keep a document that beats its positive
            return
        kept.add(doc)
        for target in sorted(flags_of.get(doc, ()), key=rank.__getitem__):
            if target not in kept and target not in removed:
                remove(target)

    while True:
        while ready:
            doc = ready.popleft()
            if doc not in kept and doc not in removed:
                keep(doc)
        undecided = [d for d in nodes if d not in kept and d not in removed]
        if not undecided:
            return [d for d in order if d in removed]
        keep(min(undecided, key=lambda d: (-queries[d], rank[d])))
