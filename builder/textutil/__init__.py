"""Pure text helpers: reference span matching and position arithmetic."""
