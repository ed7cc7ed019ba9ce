"""Language names as the field's tools want them: PosIR's `<iso639-3>-<Script>` folder
names and the ISO 639-1 codes of the Hub's `language:` metadata."""

from __future__ import annotations

import re

from builder.stages.translate.languages import CODE_SHAPE, LANGUAGES, normalise

_ISO_639_1 = re.compile(r"^[a-z]{2}$")


def posir_name(lang: str) -> str:
    """`en` -> `eng-Latn`, `zh` -> `cmn-Hans`; a name already in that shape, or one we
    cannot map, stays as given."""
    return normalise(lang) or lang


def iso_639_1(lang: str) -> str | None:
    """`fra-Latn` -> `fr`, `cmn-Hans` -> `zh`, `en` -> `en`; None where no two-letter code is known."""
    name = posir_name(lang)
    if CODE_SHAPE.match(name) and name in LANGUAGES:
        return LANGUAGES[name][1].split("-")[0]
    short = lang.strip().lower().split("-")[0].split("_")[0]
    return short if _ISO_639_1.match(short) else None
