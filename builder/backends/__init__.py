"""Backends that the build stages call out to (LLMs and friends)."""
