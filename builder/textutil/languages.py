"""Language names as recipes write them (`fra-Latn`: ISO 639-3 + ISO 15924 script), as the
field's tools want them (PosIR's `<iso639-3>-<Script>` folder names, the ISO 639-1 codes of
the Hub's `language:` metadata), and language identification with langdetect mapped onto
those names."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

CODE_SHAPE = re.compile(r"^[a-z]{3}-[A-Z][a-z]{3}$")
_ISO_639_1 = re.compile(r"^[a-z]{2}$")

# Recipe name -> (English name for prompts, langdetect code). The eight PosIR target
# languages, the two PosIR source languages, and other widely used ones.
LANGUAGES: dict[str, tuple[str, str]] = {
    "eng-Latn": ("English", "en"),
    "cmn-Hans": ("Simplified Chinese", "zh-cn"),
    "cmn-Hant": ("Traditional Chinese", "zh-tw"),
    "ara-Arab": ("Arabic", "ar"),
    "fra-Latn": ("French", "fr"),
    "deu-Latn": ("German", "de"),
    "ita-Latn": ("Italian", "it"),
    "kor-Kore": ("Korean", "ko"),
    "por-Latn": ("Portuguese", "pt"),
    "rus-Cyrl": ("Russian", "ru"),
    "spa-Latn": ("Spanish", "es"),
    "jpn-Jpan": ("Japanese", "ja"),
    "nld-Latn": ("Dutch", "nl"),
    "pol-Latn": ("Polish", "pl"),
    "tur-Latn": ("Turkish", "tr"),
    "ukr-Cyrl": ("Ukrainian", "uk"),
    "vie-Latn": ("Vietnamese", "vi"),
    "ind-Latn": ("Indonesian", "id"),
    "hin-Deva": ("Hindi", "hi"),
    "ben-Beng": ("Bengali", "bn"),
    "tha-Thai": ("Thai", "th"),
    "swe-Latn": ("Swedish", "sv"),
    "dan-Latn": ("Danish", "da"),
    "fin-Latn": ("Finnish", "fi"),
    "ces-Latn": ("Czech", "cs"),
    "ell-Grek": ("Greek", "el"),
    "heb-Hebr": ("Hebrew", "he"),
    "pes-Arab": ("Persian", "fa"),
    "ron-Latn": ("Romanian", "ro"),
    "hun-Latn": ("Hungarian", "hu"),
}
# Short codes that sources commonly carry, mapped to recipe names.
_ALIASES = {code: name for name, (_, code) in LANGUAGES.items()}
_ALIASES.update({"zh": "cmn-Hans", "zh-hans": "cmn-Hans", "zh-hant": "cmn-Hant", "eng": "eng-Latn", "no": "nob-Latn"})


def check_code(code: str) -> str:
    """A recipe language name, or ValueError saying what shape is expected."""
    if not CODE_SHAPE.match(code):
        raise ValueError(f"language {code!r} must look like 'fra-Latn' (ISO 639-3 code, '-', script)")
    return code


def normalise(code: str | None) -> str | None:
    """Map `en`, `zh-cn`, `FR`, `fra-Latn` ... to a recipe name; unknown codes stay as given."""
    if code is None:
        return None
    if CODE_SHAPE.match(code):
        return code
    return _ALIASES.get(code.strip().lower().replace("_", "-"), code)


def display_name(code: str, extra: dict[str, str] | None = None) -> str:
    if extra and code in extra:
        return extra[code]
    if code in LANGUAGES:
        return LANGUAGES[code][0]
    raise ValueError(f"no English name known for {code!r}; add it under language_names")


def detectable(code: str) -> bool:
    """Whether langdetect can name this language (a wrong-language verdict needs that)."""
    return code in LANGUAGES


def same_language(a: str | None, b: str | None) -> bool:
    """Same language, ignoring the script: langdetect tells zh-cn from zh-tw poorly."""
    return a is not None and b is not None and a.split("-")[0] == b.split("-")[0]


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


@dataclass(frozen=True)
class Detection:
    lang: str  # recipe name (or langdetect's own code when unmapped)
    prob: float


_LOCK = threading.Lock()


def load_profiles() -> None:
    """Load langdetect's language profiles now: about half a second of CPU, once per process.

    Detection loads them on first use anyway; calling this (on a worker thread) only moves
    that cost off the caller's path. langdetect publishes its factory before filling it,
    so the load holds the same lock as detection.
    """
    from langdetect import detector_factory

    with _LOCK:
        detector_factory.init_factory()


def detect(text: str, max_chars: int = 2000) -> Detection | None:
    """The most likely language of `text`, or None when langdetect finds no features.

    The detector factory is seeded so that the same text always gets the same answer.
    """
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    with _LOCK:  # the seed lives in module state
        DetectorFactory.seed = 0
        try:
            best = detect_langs(text[:max_chars])[0]
        except LangDetectException:
            return None
    return Detection(normalise(best.lang) or best.lang, float(best.prob))


def detect_base(text: str, max_chars: int = 2000) -> Detection | None:
    """Like `detect`, but scripts of one language pool their probability (langdetect
    splits a Chinese text between zh-cn and zh-tw)."""
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    with _LOCK:
        DetectorFactory.seed = 0
        try:
            found = detect_langs(text[:max_chars])
        except LangDetectException:
            return None
    pooled: dict[str, float] = {}
    names: dict[str, str] = {}
    for guess in found:
        name = normalise(guess.lang) or guess.lang
        base = name.split("-")[0]
        pooled[base] = pooled.get(base, 0.0) + float(guess.prob)
        names.setdefault(base, name)
    base = max(pooled, key=pooled.__getitem__)
    return Detection(names[base], pooled[base])
