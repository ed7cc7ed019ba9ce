"""Pure text helpers: reference span matching and position arithmetic.

The matching methods are named here, apart from the matchers (numpy, rapidfuzz), so a
stage's parameters can name them without loading those."""

from typing import Literal

MatchMethod = Literal["exact", "normalized", "fuzzy"]
ALL_METHODS: tuple[MatchMethod, ...] = ("exact", "normalized", "fuzzy")
