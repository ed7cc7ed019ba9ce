"""Training data beside the benchmark: leak-free train / dev / test splits, and hard-negative
training pairs drawn to chosen position shares."""
