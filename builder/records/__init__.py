"""A run's records: what the runner writes as it goes and the publisher reads back —
each stage's record, the run's warnings drawn from them, the QC scorers a stage judged
with, and the marker that claims an output folder for build-bench."""
