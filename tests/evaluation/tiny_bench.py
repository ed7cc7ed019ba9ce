"""A small position-aware benchmark: 16 documents, each hiding one fact at a chosen depth."""

from __future__ import annotations

import polars as pl

from builder.backends.tokenizers import WordCounter
from builder.bench import SPAN_DTYPE, Bench
from builder.stages.position_columns import PositionOptions, annotate_positions
from builder.textutil.positions import char_bucket

FACTS = [
    ("The Varneck lighthouse was painted crimson in 1894.", "When was the Varneck lighthouse painted crimson?"),
    ("Brindle goats in Oskara produce blue cheese each spring.", "Which goats produce blue cheese in Oskara?"),
    ("The Tellmar bridge spans four hundred meters of river.", "How long is the Tellmar bridge?"),
    ("Quillon violins are carved from mountain maple wood.", "What wood are Quillon violins carved from?"),
    ("Saltmere harbour froze solid during the winter of 1921.", "When did Saltmere harbour freeze solid?"),
    ("The Ombrel festival celebrates lanterns made of paper.", "What does the Ombrel festival celebrate?"),
    ("Drevin beetles glow green when they sense danger.", "When do Drevin beetles glow green?"),
    ("Castor Pell invented the folding telescope in Lisbon.", "Who invented the folding telescope?"),
    ("The Karsk railway carries copper ore to the coast.", "What does the Karsk railway carry?"),
    ("Maple syrup from Henwick is aged in oak barrels.", "How is Henwick maple syrup aged?"),
    ("The Purlow choir sings only in ancient Gothic.", "Which language does the Purlow choir sing in?"),
    ("Yellow kites nest on the cliffs of Dunmara.", "Where do yellow kites nest?"),
    ("The Grellin observatory tracks comets with radio dishes.", "How does the Grellin observatory track comets?"),
    ("Ferrin wool is dyed purple using crushed snails.", "How is Ferrin wool dyed purple?"),
    ("The Astel mine produced silver until 1967.", "Until when did the Astel mine produce silver?"),
    ("Tobrin pastry is folded seventy times before baking.", "How many times is Tobrin pastry folded?"),
]
FILLER = [
    "Local records describe the weather as mild for most of the year.",
    "Visitors often arrive by train and stay in small guest houses.",
    "The surrounding hills are covered with pine forests and meadows.",
    "Several schools teach history through walking tours of the old town.",
    "A weekly market sells bread, vegetables and hand-made tools.",
    "Older residents remember a time before the paved roads arrived.",
    "The regional council meets twice a month in the town hall.",
    "Footpaths connect the villages along the northern valley.",
]
DEPTHS = [0.0, 0.45, 0.9]  # fraction of the filler placed before the fact


def tiny_bench() -> Bench:
    docs, queries, qrels = [], [], []
    for i, (fact, question) in enumerate(FACTS):
        filler = [FILLER[(i + j) % len(FILLER)] for j in range(4 + 3 * (i % 4))]
        cut = round(DEPTHS[i % 3] * len(filler))
        before = " ".join(filler[:cut])
        text = " ".join(part for part in (before, fact, " ".join(filler[cut:])) if part)
        start = len(before) + 1 if before else 0
        docs.append(
            {
                "doc_id": f"d{i:02d}",
                "title": "",
                "text": text,
                "lang": "en",
                "domain": "test",
                "n_tokens": len(text.split()),
            }
        )
        queries.append(
            {
                "query_id": f"q{i:02d}",
                "text": question,
                "doc_id": f"d{i:02d}",
                "lang": "en",
                "spans": [{"start": start, "end": start + len(fact), "method": "exact", "score": 1.0}],
                "char_bucket": char_bucket(start),
            }
        )
        qrels.append({"query_id": f"q{i:02d}", "doc_id": f"d{i:02d}", "score": 1})
    corpus = pl.DataFrame(docs)
    query_frame = pl.DataFrame(queries, schema_overrides={"spans": SPAN_DTYPE})
    options = PositionOptions(length_edges=[60, 90, 120])
    query_frame = annotate_positions(query_frame, corpus, WordCounter(), options)
    return Bench.of(corpus=corpus, queries=query_frame, qrels=pl.DataFrame(qrels))
