"""Stage registry: every stage by name, with the module that defines it. A stage's module is
imported only when a recipe (or `build-bench stages`) asks for that stage, so a command pays
for the stages it uses; tests/stages/test_registry.py checks this table against the modules.
A new stage needs one line here."""

from builder.stages.base import STAGES, Estimate, Flow, Stage, StageParams, register_stage

STAGES.declare(
    {
        "sample_by_length": "builder.stages.sample_by_length",
        "from_qa": "builder.stages.from_qa",
        "localize_spans": "builder.stages.localize_spans",
        "position_metadata": "builder.stages.position_metadata",
        "position_probes": "builder.stages.colder.position_probes",
        "far_relevant": "builder.stages.far_relevant.far_relevant",
        "from_beir": "builder.stages.far_relevant.from_beir",
        "shuffle_debias": "builder.stages.far_relevant.shuffle_debias",
        "generate_queries": "builder.stages.generate.generate_queries",
        "summarize": "builder.stages.generate.summarize",
        "generate_to_quota": "builder.stages.generate.to_quota",
        "depth_grid": "builder.stages.grid.depth_grid",
        "from_built": "builder.stages.grid.from_built",
        "balance": "builder.stages.qc.balance",
        "balance_confounds": "builder.stages.qc.confound_balance",
        "false_negatives": "builder.stages.qc.false_negatives",
        "lexical_overlap": "builder.stages.qc.lexical_overlap",
        "llm_relevance": "builder.stages.qc.llm_relevance",
        "segment_agreement": "builder.stages.qc.segment_agreement",
        "span_contrast": "builder.stages.qc.span_contrast",
        "subset": "builder.stages.qc.subset",
        "training_pairs": "builder.stages.training.pairs",
        "split_documents": "builder.stages.training.splits",
        "clean_translations": "builder.stages.translate.clean_translations",
        "iqr_filter": "builder.stages.translate.iqr_filter",
        "translate": "builder.stages.translate.translate",
    }
)

__all__ = ["STAGES", "Estimate", "Flow", "Stage", "StageParams", "register_stage"]
