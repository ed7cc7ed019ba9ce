import importlib.util
import json
import sqlite3
from dataclasses import replace

import polars as pl
import pytest

from builder.backends.llm import LLMCache, OpenAIBackend, OpenAIModelConfig
from builder.backends.tokenizers import WordCounter
from builder.bench import SPAN_DTYPE, Bench
from builder.executors import ExecutorConfig, make_executor
from builder.stages.position_columns import PositionOptions
from builder.stages.translate.clean_translations import CleanTranslations, CleanTranslationsParams
from builder.stages.translate.cleanup import find_prefix, refusal_hit, shift
from builder.stages.translate.rows import annotate_translated
from tests.helpers import make_ctx

EN = (
    "The cat sleeps on the sofa all afternoon. It likes warm places near the window. "
    "In the evening, it eats and plays with a red ball."
)
FR = (
    "Le chat dort sur le canapé tout l'après-midi. Il aime les endroits chauds près de la fenêtre. "
    "Le soir, il mange et joue avec une balle rouge."
)
DE = (
    "Die Katze schläft den ganzen Nachmittag auf dem Sofa. Sie mag warme Plätze am Fenster. "
    "Am Abend frisst sie und spielt mit einem roten Ball."
)
CITED = "Il aime les endroits chauds près de la fenêtre."
REFUSAL = "I'm sorry, but I cannot translate this text for you."


def _bench(translations: dict[str, str], query_texts: dict[str, str] | None = None, source: str = EN) -> Bench:
    """One English source doc per key plus its French 'translation'; one query each, citing CITED."""
    keys = list(translations)
    corpus = pl.DataFrame(
        {
            "doc_id": keys + [f"{k}@fra-Latn" for k in keys],
            "title": [""] * 2 * len(keys),
            "text": [source] * len(keys) + list(translations.values()),
            "lang": ["eng-Latn"] * len(keys) + ["fra-Latn"] * len(keys),
            "domain": ["web"] * 2 * len(keys),
            "source_doc_id": keys * 2,
            "piece_starts": [None] * len(keys) + [[0]] * len(keys),
        },
        schema_overrides={"piece_starts": pl.List(pl.Int64)},
    )
    corpus = corpus.with_columns(pl.Series("n_tokens", WordCounter().count_many(corpus["text"].to_list())))
    spans = [None] * len(keys) + [
        [{"start": t.index(CITED), "end": t.index(CITED) + len(CITED), "method": "marker", "score": 100.0}]
        if CITED in t
        else None
        for t in translations.values()
    ]
    qtext = query_texts or {}
    queries = pl.DataFrame(
        {
            "query_id": [f"q{k}" for k in keys] + [f"q{k}@fra-Latn" for k in keys],
            "text": ["Where does the cat like to be?"] * len(keys)
            + [qtext.get(k, "Où le chat aime-t-il se reposer l'après-midi ?") for k in keys],
            "doc_id": corpus["doc_id"].to_list(),
            "lang": corpus["lang"].to_list(),
            "source_query_id": [f"q{k}" for k in keys] * 2,
            "span_inherited": [False] * 2 * len(keys),
            "source_rel_pos": [0.3] * 2 * len(keys),
            "source_length_bucket": ["Q1"] * 2 * len(keys),
            "length_bucket_basis": [None] * len(keys) + ["source"] * len(keys),
        }
    ).with_columns(pl.Series("spans", spans, dtype=SPAN_DTYPE))
    translated = queries.filter(pl.col("source_query_id") != pl.col("query_id"))
    queries = pl.concat(
        [
            queries.filter(pl.col("source_query_id") == pl.col("query_id")),
            annotate_translated(translated, corpus, WordCounter(), PositionOptions()),
        ],
        how="diagonal_relaxed",
    )
    qrels = queries.select("query_id", "doc_id", pl.lit(1).alias("score"))
    return Bench.of(corpus, queries, qrels)


def _run(tmp_path, bench, llms=None, **params):
    ctx = make_ctx(tmp_path, llms=llms or {}, models={n: {"model": "m", "base_url": "http://x"} for n in llms or {}})
    return CleanTranslations(CleanTranslationsParams(**params)).run(bench, ctx), ctx


def test_chatty_prefix_is_stripped_and_spans_move_with_it(tmp_path):
    prefix = "Here is the French translation of your text:\n\n"
    bench = _bench({"a": prefix + FR}, {"a": "Here is the translation: Où le chat aime-t-il se reposer ?"})
    out, ctx = _run(tmp_path, bench)
    doc = out.corpus.filter(pl.col("doc_id") == "a@fra-Latn").row(0, named=True)
    assert doc["text"] == FR and doc["n_tokens"] == len(FR.split()) and doc["piece_starts"] == [0]
    q = out.queries.filter(pl.col("query_id") == "qa@fra-Latn").row(0, named=True)
    (span,) = q["spans"]
    assert FR[span["start"] : span["end"]] == CITED and q["reference_texts"] == [CITED]
    assert q["rel_pos"] == FR.index(CITED) / len(FR) and q["pos_char_length"] == len(FR)
    assert q["text"] == "Où le chat aime-t-il se reposer ?"
    assert out.drops.is_empty()
    assert ctx.stats["clean_translations"]["fra-Latn"] == {"prefixes_stripped": 1, "query_prefixes_stripped": 1}


def test_refusals_wrong_language_and_length_ratio_cascade(tmp_path):
    bench = _bench(
        {"ok": FR, "refused": REFUSAL, "german": DE, "copied": EN, "short": "Le chat."},
        {"ok": "I'm sorry, I can't help with translating that."},
    )
    out, ctx = _run(tmp_path, bench)
    assert sorted(out.drops.select("kind", "id", "reason").rows()) == [
        ("doc", "copied@fra-Latn", "wrong_language"),
        ("doc", "german@fra-Latn", "wrong_language"),
        ("doc", "refused@fra-Latn", "refusal"),
        ("doc", "short@fra-Latn", "length_ratio"),
        ("query", "qcopied@fra-Latn", "doc_removed:wrong_language"),
        ("query", "qgerman@fra-Latn", "doc_removed:wrong_language"),
        ("query", "qok@fra-Latn", "refusal"),
        ("query", "qrefused@fra-Latn", "doc_removed:refusal"),
        ("query", "qshort@fra-Latn", "doc_removed:length_ratio"),
    ]
    assert out.corpus.filter(pl.col("lang") == "fra-Latn")["doc_id"].to_list() == ["ok@fra-Latn"]
    assert set(out.qrels["query_id"]) == {"qok", "qrefused", "qgerman", "qcopied", "qshort"}
    stats = ctx.stats["clean_translations"]["fra-Latn"]
    assert stats["docs_removed"] == {"refusal": 1, "wrong_language": 2, "length_ratio": 1}
    assert stats["queries_removed"]["doc_removed:wrong_language"] == 2


def test_an_apology_that_the_source_also_has_is_no_refusal(tmp_path):
    source = "I'm sorry, said the cat, but the sofa is mine. " + EN
    bench = _bench({"a": "Je suis désolé, dit le chat, mais le canapé est à moi. " + FR}, source=source)
    out, _ = _run(tmp_path, bench)
    assert out.drops.is_empty()


def test_llm_confirms_or_clears_suspects(tmp_path, fake_openai):
    def reply(body):
        return json.dumps({"refusal": "pas traduire" in body["messages"][-1]["content"]})

    srv = fake_openai(responder=reply)
    backend = OpenAIBackend("judge", OpenAIModelConfig(model="m", base_url=srv.base_url), LLMCache.memory())
    polite_fr = "Désolé, je ne peux pas traduire ce texte, il est trop long pour moi aujourd'hui."
    bench = _bench({"a": polite_fr, "b": EN, "c": FR})
    out, ctx = _run(tmp_path, bench, llms={"judge": backend}, refusal_llm="judge")
    backend.close()
    assert sorted(out.drops.filter(pl.col("kind") == "doc").select("id", "reason").rows()) == [
        ("a@fra-Latn", "refusal"),
        ("b@fra-Latn", "wrong_language"),
    ]
    assert srv.request_count == 2  # the two suspects: a pattern hit and an English answer
    assert "1500" not in srv.requests[0]["messages"][-1]["content"]
    assert ctx.stats["clean_translations"]["fra-Latn"]["refusal_suspects"] == 2


def test_prefix_rules():
    assert find_prefix("Voici la traduction :\n" + FR, EN, "eng-Latn") == len("Voici la traduction :\n")
    assert find_prefix("Sure! Below is the translated version, keeping the markers\n\n" + FR, EN, "eng-Latn") > 0
    # The keyword rule needs the lead-in to read as the source language.
    assert find_prefix("Le traducteur a travaillé dur ce matin.\n" + FR, EN, "eng-Latn") == 0
    assert find_prefix("This text was translated by our team for you.\n" + FR, EN, "eng-Latn") > 0
    # A source that opens with such words keeps them in the translation.
    assert find_prefix("Traduction : un guide\n" + FR, "Translation: a guide\n" + EN, "eng-Latn") == 0
    # A refusal that mentions translating is left for the refusal check.
    assert find_prefix("I'm sorry, but I can't translate this document.\n" + FR, EN, "eng-Latn") == 0
    assert refusal_hit(REFUSAL) and not refusal_hit(FR)
    assert [shift(o, [(0, 5), (10, 12)]) for o in (0, 5, 7, 11, 12, 20)] == [0, 0, 2, None, 5, 13]


def test_positions_must_match_translate():
    from builder.recipe.model import recipe_model

    recipe = recipe_model().model_validate(
        {
            "name": "t",
            "models": {"g": {"model": "m"}},
            "stages": [
                {"translate": {"llm": "g", "languages": ["fra-Latn"], "positions": {"n_bins": 10}}},
                {"clean_translations": {}},
            ],
        }
    )
    assert recipe.stage_objects()[1].problems(recipe) == [
        ("positions", "must equal the translate stage's positions, or refreshed fields disagree")
    ]


def test_languages_langdetect_cannot_name_are_not_judged(tmp_path):
    bench = _bench({"a": FR})
    bench = bench.replace(corpus=bench.corpus.with_columns(pl.col("lang").replace({"fra-Latn": "bre-Latn"})))
    out, _ = _run(tmp_path, bench)
    assert out.drops.is_empty()


@pytest.mark.parametrize("bad", [{"min_length_ratio": 2, "max_length_ratio": 1}, {"bogus": 1}])
def test_invalid_params(bad):
    with pytest.raises(ValueError):
        CleanTranslationsParams(**bad)


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed: pip install -e '.[ray]'")
def test_ray_executor_cleans_exactly_as_local(ray_local, tmp_path):
    prefix = "Here is the French translation of your text:\n\n"
    bench = _bench(
        {"ok": FR, "pre": prefix + FR, "refused": REFUSAL, "german": DE, "copied": EN, "short": "Le chat."},
        {
            "ok": "I'm sorry, I can't help with translating that.",
            "pre": "Here is the translation: Où le chat aime-t-il se reposer ?",
        },
    )
    local, local_ctx = _run(tmp_path, bench)
    ctx = replace(make_ctx(tmp_path), executor_factory=lambda: make_executor(ExecutorConfig(kind="ray", block_size=2)))
    on_ray = CleanTranslations(CleanTranslationsParams()).run(bench, ctx)
    for table in ("corpus", "queries", "qrels", "drops"):
        assert getattr(on_ray, table).equals(getattr(local, table)), table
    assert ctx.stats == local_ctx.stats
    assert local_ctx.stats["clean_translations"]["fra-Latn"]["prefixes_stripped"] == 1
    assert local.drops.filter(pl.col("kind") == "doc").height == 4


def test_refused_translations_are_marked_in_the_llm_cache(tmp_path):
    from builder.backends.llm.cache import Origin

    cache = LLMCache(tmp_path / "c.sqlite")
    answers = {
        "refused": (REFUSAL, "02_translate"),
        "good": (FR, "02_translate"),
        "query": ("I'm sorry, I can't help with translating that.", "02_translate"),
        "other stage": (REFUSAL, "03_generate_queries"),
    }
    for key, (text, stage) in answers.items():
        cache.put(key, text, 1, 1, origin=Origin("m", stage))
    bench = _bench({"ok": FR, "refused": REFUSAL}, {"ok": "I'm sorry, I can't help with translating that."})
    ctx = replace(make_ctx(tmp_path), flag_answers=cache.mark_failed_containing)
    CleanTranslations(CleanTranslationsParams()).run(bench, ctx)
    cache.close()
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        marks = dict(db.execute("SELECT key, failure FROM answers").fetchall())
    assert marks == {"refused": "refusal", "query": "refusal", "good": None, "other stage": None}
