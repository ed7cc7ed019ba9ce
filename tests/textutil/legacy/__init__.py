"""The span matcher as it was before the direct path and the array-based normalization
(frozen copies), kept as the reference the equivalence tests compare against."""
