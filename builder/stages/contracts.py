"""What a stage needs from the stages before it and what it provides to those after, in
one small vocabulary, so that an order that cannot work (spans located before there are
questions) is refused before anything runs."""

from __future__ import annotations

DOCUMENTS = "documents"
QUERIES = "queries"
SPANS = "spans"
POSITIONS = "positions"
REFERENCE_TEXTS = "reference_texts"
SUMMARIES = "summaries"
CHUNK_TAGS = "chunk_tags"
CHAR_BUCKETS = "char_buckets"
REQUESTED_POSITIONS = "requested_positions"
TRANSLATIONS = "translations"
SPLITS = "splits"
TRAINING_PAIRS = "training_pairs"

# Each word, with what it stands for in the tables (for messages).
VOCABULARY: dict[str, str] = {
    DOCUMENTS: "corpus rows",
    QUERIES: "queries with their qrels",
    SPANS: "each query's evidence as character offsets, column spans",
    POSITIONS: "rel_pos, position_bin, position_tag and length_bucket, measured from the spans",
    REFERENCE_TEXTS: "each query's verbatim evidence passages, column reference_texts",
    SUMMARIES: "a summary per document, column summary",
    CHUNK_TAGS: "the third of its document each question's chunk lies in, column chunk_tag",
    CHAR_BUCKETS: "the character bucket of each answer's start, column char_bucket",
    REQUESTED_POSITIONS: "the third each question was asked about, column requested_position",
    TRANSLATIONS: "translated rows beside their source rows",
    SPLITS: "train / dev / test of every document and query, column split",
    TRAINING_PAIRS: "positive passage, mined negatives and train sets of the train queries",
}

# The query columns a stage may be told to read (balance, subset, segment_agreement), and
# the word of the stages that write each.
COLUMN_PROVIDED_AS: dict[str, str] = {
    "position_tag": POSITIONS,
    "position_bin": POSITIONS,
    "length_bucket": POSITIONS,
    "chunk_tag": CHUNK_TAGS,
    "char_bucket": CHAR_BUCKETS,
    "requested_position": REQUESTED_POSITIONS,
}
