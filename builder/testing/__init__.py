"""Helpers for testing and benchmarking build-bench without outside services."""
