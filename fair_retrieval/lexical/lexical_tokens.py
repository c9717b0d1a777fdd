"""The words of a text as a lexical (BM25) index reads them: lower-cased word tokens, stop words dropped, stemmed.

A text is normalised first (`normalized`), the same for documents and queries, so that what reads as the same word
is the same token: format characters (Unicode category Cf: the soft hyphen, zero-width spaces and joiners, a
byte-order mark) are dropped, since they are invisible and must not split a word, then the text is put in NFKC
form, so composed and decomposed accents (NFC and NFD `café`), fullwidth and halfwidth forms (ｃａｆｅ, halfwidth
katakana) and ligatures (ﬁ) match their ordinary letters. Plain ASCII text is unchanged by it.

Words are runs of letters, digits and their combining marks, two characters or more (as bm25s and llama-index's BM25
retriever read them, with the marks: the vowel signs of Hindi belong to their words). Scripts written without spaces
between words (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) have no such runs to split, so a run of their characters
is read as its overlapping character pairs (a single character alone), the usual fallback of lexical search engines
for those scripts; a run of CJK characters (Han ideographs and kana) also gives each character alone, beside the
pairs, so that a one-character query (a word written with one ideograph) finds the runs holding it; every other
script keeps its words. Stemming is PyStemmer's Snowball stemmer of the language (`LANGUAGES`), stop words bm25s's
list where it has one; `None` reads words as they are (no stemming, no stop words), what any language can use.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any

import regex

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGES", "LexicalTokenizer", "check_language", "normalized"]

DEFAULT_LANGUAGE = "english"
"""The language a store's lexical index reads by default."""

_STOPWORDS = {
    "english": "en",
    "german": "de",
    "spanish": "es",
    "french": "fr",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
    "swedish": "sv",
    "norwegian": "no",
    "danish": "da",
    "russian": "ru",
    "turkish": "tr",
}
"""bm25s's stop-word lists, by the stemmer's language name."""


def _stemmer_languages() -> tuple[str, ...]:
    import Stemmer

    return tuple(sorted(name for name in Stemmer.algorithms() if name != "porter"))


LANGUAGES: tuple[str, ...] = _stemmer_languages()
"""The languages with a stemmer (PyStemmer's Snowball algorithms); None is also accepted: words as they are."""

_WORD = regex.compile(r"[\p{L}\p{N}_][\p{L}\p{N}\p{M}_]+")
# a letter or digit followed by letters, digits or combining marks (vowel signs of Indic scripts, Arabic harakat)
# characters of scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs, Hangul
# syllables are spaced in Korean, so they stay words
_UNSPACED = regex.compile(
    "[\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+"
)

_CJK = regex.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# kana and CJK ideographs: one such character can be a word of its own, so it is a token beside the pairs
_FORMAT = regex.compile(r"\p{Cf}+")


def normalized(text: str) -> str:
    """`text` as the lexical index reads it, documents and queries alike: format characters (category Cf) dropped,
    then in NFKC form (see the module docstring); ASCII text is returned as it is."""
    if text.isascii():
        return text
    # dropped first, so that a mark a format character separated from its letter still composes with it
    return unicodedata.normalize("NFKC", _FORMAT.sub("", text))


def check_language(language: Any) -> str | None:
    """`language` if a lexical index can read it (a name in `LANGUAGES`, or None), else a ValueError naming them."""
    if language is None:
        return None
    if not isinstance(language, str) or language.lower() not in LANGUAGES:
        raise ValueError(
            f"language must be one of {LANGUAGES} (the stemmers of PyStemmer) or None (words as they are, no "
            f"stemming: any language), got {language!r}."
        )
    return language.lower()


class LexicalTokenizer:
    """Turns texts into the tokens a lexical index counts, the same way for documents and queries.

    Args:
        language: a name in `LANGUAGES` (stemmed; stop words dropped where bm25s lists them) or None.

    Raises:
        ValueError: an unknown language.
    """

    def __init__(self, language: str | None = DEFAULT_LANGUAGE) -> None:
        self.language = check_language(language)
        self._stemmer = _stemmer(self.language) if self.language is not None else None
        self._stems = _Stems(self._stemmer) if self._stemmer is not None else None
        self._stopwords = _stopwords(self.language)

    def tokens(self, text: str) -> list[str]:
        """The tokens of one text, in order (empty for a text without words)."""
        words: list[str] = []
        lowered = normalized(text).lower()
        position = 0
        for run in _UNSPACED.finditer(lowered):
            words.extend(self._words(lowered[position : run.start()]))
            words.extend(_run_tokens(run.group()))
            position = run.end()
        words.extend(self._words(lowered[position:]))
        if self._stems is not None and words:
            return list(map(self._stems.__getitem__, words))  # a word's stem looked up: 5x faster than stemWords
        return words

    def _words(self, part: str) -> list[str]:
        return [word for word in _WORD.findall(part) if word not in self._stopwords]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LexicalTokenizer) and other.language == self.language

    def __hash__(self) -> int:
        return hash(self.language)


class _Stems(dict[str, str]):
    """Word → its stem, computed by the stemmer the first time a word is seen (texts repeat their words)."""

    LIMIT = 1 << 20
    """Words kept before the cache starts again (a bound on its memory, about 100 bytes a word)."""

    def __init__(self, stemmer: Any) -> None:
        super().__init__()
        self._stemmer = stemmer

    def __missing__(self, word: str) -> str:
        if len(self) >= self.LIMIT:
            self.clear()
        stem: str = self._stemmer.stemWord(word)
        self[word] = stem
        return stem


def _run_tokens(chars: str) -> list[str]:
    """The tokens of a run of characters written without spaces: its overlapping pairs (one character alone), and
    each CJK character alone too, beside the pair it starts."""
    if len(chars) == 1:
        return [chars]
    tokens = []
    for i in range(len(chars)):
        if _CJK.match(chars[i]):
            tokens.append(chars[i])
        if i + 1 < len(chars):
            tokens.append(chars[i : i + 2])
    return tokens


@cache
def _stemmer(language: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(language)


@cache
def _stopwords(language: str | None) -> frozenset[str]:
    if language not in _STOPWORDS:
        return frozenset()
    import bm25s.stopwords as lists

    name = {"en": "STOPWORDS_EN"}.get(_STOPWORDS[language], f"STOPWORDS_{language.upper()}")
    return frozenset(getattr(lists, name, ()))
