import mteb
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from sentence_transformers import SentenceTransformer

FOLDER = "out/quickstart"  # a built folder, or a Hub repo id such as "org/name"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class BuiltBench(AbsTaskRetrieval):
    metadata = TaskMetadata(
        name="BuiltBench",
        description="A build-bench output.",
        type="Retrieval",
        category="t2t",
        dataset={"path": FOLDER, "revision": "main"},
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10",
    )


result = mteb.evaluate(SentenceTransformer(MODEL), BuiltBench(), cache=None)
print(result.task_results[0].get_score())
