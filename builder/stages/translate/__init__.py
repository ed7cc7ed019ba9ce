"""Translation into other languages: the `translate`, `clean_translations` and `iqr_filter`
stages, and their helpers (language names, span markers, text pieces, cleanup)."""
