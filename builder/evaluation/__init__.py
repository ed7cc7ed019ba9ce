"""Evaluate retrievers on a built benchmark: per-position nDCG@10, Recall@100 and PSI."""
