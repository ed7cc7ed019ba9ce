"""Test support that is not itself a test: the local OpenAI-compatible server, llama.cpp's
llama-server built and started for the real-model tests, and the prefix-share measure.
The tests and the benchmarks import it from a checkout; it does not ship in the wheel."""
