"""Publishing a built benchmark: statistics, plots, the data card and Hub releases.

Heavy dependencies (matplotlib, huggingface_hub, datasets) load only inside the modules
that need them.
"""
