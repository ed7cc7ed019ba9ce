"""Small helpers that stand below every other layer: whole-file writes (atomic), file
digests, masking secrets, consoles readable in logs, install hints for extras, where the
shipped resources live, stable ids and seeds, and the `license:` field."""
