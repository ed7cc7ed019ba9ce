"""build-bench: build position-aware retrieval benchmarks from a YAML recipe."""

__version__ = "0.1.0"
