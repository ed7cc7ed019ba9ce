"""MS MARCO FarRelevant: BEIR input, far-relevant document assembly, split-and-shuffle de-biasing."""
