"""Helpers of the multilingual stages: language names, span markers, text pieces, cleanup."""
