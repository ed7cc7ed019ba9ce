"""Recipes: YAML text with line numbers, the pydantic models, and cross-checks."""
