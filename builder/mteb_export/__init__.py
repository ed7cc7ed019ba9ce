"""`build-bench export-mteb`: what an MTEB dataset pull request needs, from a built folder."""
