"""Parameters of `generate_queries`, apart from the stage so the generation modes can
import them without importing the stage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from builder.stages.base import StageParams
from builder.stages.refs import ModelRef, PromptRef
from builder.textutil.positions import REGION_OF_NAME, Region

# PosIR's over-complete list of question types, in our own short wording.
POSIR_TYPES = [
    "fact lookup",
    "how-to steps",
    "cause and reason",
    "comparison",
    "concept explanation",
    "checking a claim",
    "grounded prediction",
    "yes/no",
    "background and context",
    "advice",
    "open discussion",
    "emotional support",
    "feasibility and cost",
    "calculation or logic",
    "writing request",
    "relationship advice",
    "troubleshooting",
    "hypothetical scenario",
    "decision support",
    "personal growth",
]
POSIR_STYLES = ["short and casual", "formal and professional", "technical or academic"]
_DEFAULT_PROMPT = {"whole_document": "posir_generate", "chunked": "chunk_qa", "extractive": None}
# NoLiMa's control, in our words: the question should not find its evidence by shared words.
AVOID_OVERLAP = (
    "Word each question in your own terms rather than the document's: where you can, use "
    "synonyms, descriptions or more general words in place of the names, terms and phrases of "
    "the passage that answers it, so the question shares as few words with that passage as it "
    "can while asking for the same thing."
)


class GenerateParams(StageParams):
    mode: Literal["whole_document", "chunked", "extractive"] = Field(
        default="whole_document",
        description=(
            "whole_document: questions about one third of the document (PosIR); chunked: FAQs per chunk "
            "(FineWeb-PosQ); extractive: cloze questions from templates, no LLM"
        ),
    )
    llm: ModelRef | None = Field(default=None, description="model name; not used by extractive")
    prompt: PromptRef | None = Field(
        default=None,
        description=(
            "defaults: posir_generate (notes on searchers, types and register, then the JSON) / chunk_qa; "
            "posir_generate_json asks for the JSON alone"
        ),
    )
    calls_per_doc: int = Field(default=1, ge=1, description="whole_document: one region drawn per call")
    region_draw: Literal["independent", "dealt"] = Field(
        default="independent",
        description=(
            "whole_document: draw each call's region on its own, or deal the regions in turn within "
            "each language and domain so their counts follow region_weights (even thirds on small builds)"
        ),
    )
    questions_per_call: int = Field(
        default=3,
        ge=1,
        description=("whole_document: questions asked per call; chunked: the most kept from a chunk's list"),
    )
    region_weights: dict[Region, float] = Field(
        default={"beginning": 1.0, "middle": 1.0, "end": 1.0},
        description=("weight of each third: beginning, middle, end; first and final are read as beginning and end"),
    )
    question_types: list[str] = Field(
        default_factory=lambda: list(POSIR_TYPES),
        description=("whole_document: question types the prompt offers (PosIR's list by default)"),
    )
    styles: list[str] = Field(
        default_factory=lambda: list(POSIR_STYLES),
        description=("whole_document: registers the prompt offers (PosIR's list by default)"),
    )
    chunk_size: int = Field(default=256, ge=16, description="chunked: chunk length in chunk_unit")
    chunk_overlap: int = Field(
        default=0, ge=0, description="chunked: length two neighbouring chunks share, in chunk_unit"
    )
    chunk_unit: Literal["words", "tokens"] = Field(
        default="words", description=("chunked: chunk_size counted in words or in the recipe tokenizer's tokens")
    )
    avoid_overlap: bool = Field(
        default=False,
        description=(
            "ask the model to word questions apart from their evidence (NoLiMa's lexical control); pair it "
            "with a lexical_overlap stage after localize_spans, which drops questions that still share too "
            "many words with their span"
        ),
    )
    check_language: bool = Field(
        default=True, description=("drop questions langdetect places in another language than their document")
    )

    @field_validator("region_weights", mode="before")
    @classmethod
    def _canonical_names(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        out: dict[object, object] = {}
        given: dict[object, object] = {}
        for name, weight in value.items():
            region = REGION_OF_NAME.get(name, name) if isinstance(name, str) else name
            if region in out:
                raise ValueError(
                    f"region_weights names the {region} twice ({given[region]!r} and {name!r} are one third)"
                )
            out[region], given[region] = weight, name
        return out

    @model_serializer(mode="wrap")
    def _omit_independent_draw(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Independent draws came before region_draw (and no steering before avoid_overlap): left
        # out while they are the default, the stage fingerprints (and cards) of recipes that
        # never name them stay what they were.
        data: dict[str, Any] = handler(self)
        if data.get("region_draw") == "independent":
            del data["region_draw"]
        if data.get("avoid_overlap") is False:
            del data["avoid_overlap"]
        return data

    @property
    def wording(self) -> str:
        """The prompt's wording instruction: empty unless avoid_overlap."""
        return AVOID_OVERLAP if self.avoid_overlap else ""

    @model_validator(mode="after")
    def _consistent(self) -> GenerateParams:
        if self.mode != "extractive" and not self.llm:
            raise ValueError(f"mode {self.mode!r} needs an llm")
        if self.mode == "extractive" and self.llm:
            raise ValueError("mode 'extractive' uses no llm; remove it")
        if self.mode == "extractive" and self.avoid_overlap:
            raise ValueError("avoid_overlap words an LLM's questions; mode 'extractive' quotes its evidence by design")
        if self.prompt is None:
            self.prompt = _DEFAULT_PROMPT[self.mode]
        if not any(w > 0 for w in self.region_weights.values()):
            raise ValueError("region_weights need at least one positive weight")
        return self
