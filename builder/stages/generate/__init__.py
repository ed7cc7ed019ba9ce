"""Question generation: the `generate_queries` stage with its three modes, and `summarize`."""
