"""LexicalTokenizer and check_language: words per language (stemmed, stop words dropped), character pairs for the
scripts written without spaces, words as they are for None, and the languages refused."""

from __future__ import annotations

import pytest

from fair_retrieval.lexical import DEFAULT_LANGUAGE, LANGUAGES, LexicalTokenizer, check_language
from fair_retrieval.lexical.lexical_tokens import normalized


def test_english_is_lower_cased_stemmed_and_its_stop_words_dropped() -> None:
    tokens = LexicalTokenizer("english").tokens("The Runners were RUNNING quickly, and the dogs barked.")
    assert tokens == ["runner", "were", "run", "quick", "dog", "bark"]


def test_words_are_two_characters_or_more_with_digits_and_underscores() -> None:
    assert LexicalTokenizer(None).tokens("I saw 7 x 42 foo_bar a-b") == ["saw", "42", "foo_bar"]


def test_the_default_language_is_english() -> None:
    assert DEFAULT_LANGUAGE == "english"
    assert LexicalTokenizer().language == "english"
    assert LexicalTokenizer().tokens("the running dogs") == ["run", "dog"]


def test_german_is_read_with_its_stemmer_and_stop_words() -> None:
    tokens = LexicalTokenizer("german").tokens("Die Häuser stehen am Fluss und die Kinder spielen")
    assert tokens == ["haus", "steh", "fluss", "kind", "spiel"]
    assert LexicalTokenizer("german").tokens("Haus") == ["haus"]  # a query finds the plural


def test_russian_is_read_with_its_stemmer_and_stop_words() -> None:
    assert LexicalTokenizer("russian").tokens("Книги лежат на столе и в шкафу") == ["книг", "лежат", "стол", "шкаф"]


@pytest.mark.parametrize(
    ("language", "word"),
    [
        ("english", "the"),
        ("german", "und"),
        ("spanish", "los"),
        ("french", "les"),
        ("italian", "della"),
        ("portuguese", "uma"),
        ("dutch", "het"),
        ("swedish", "och"),
        ("norwegian", "og"),
        ("danish", "og"),
        ("russian", "на"),
        ("turkish", "için"),
    ],
)
def test_every_language_with_a_bm25s_stop_word_list_drops_its_stop_words(language: str, word: str) -> None:
    tokenizer = LexicalTokenizer(language)
    assert tokenizer.tokens(f"{word} {word.upper()}") == []
    assert LexicalTokenizer(None).tokens(word) == [word]  # a word of the language otherwise


def test_a_stemmer_language_without_a_stop_word_list_keeps_every_word() -> None:
    assert LexicalTokenizer("finnish").tokens("ja talot ovat kauniita") == ["ja", "talo", "ova", "kauni"]


def test_chinese_runs_are_read_as_overlapping_character_pairs_and_single_characters() -> None:
    tokenizer = LexicalTokenizer("english")
    assert tokenizer.tokens("地铁站") == ["地", "地铁", "铁", "铁站", "站"]
    assert tokenizer.tokens("中") == ["中"]  # a single character alone, once
    assert tokenizer.tokens("地铁。站") == ["地", "地铁", "铁", "站"]  # punctuation ends a run


def test_unspaced_runs_keep_their_place_among_spaced_words() -> None:
    tokens = LexicalTokenizer("english").tokens("Running 世界 the 東京タワー dogs")
    pairs = ["世界", "東京", "京タ", "タワ", "ワー"]
    assert [token for token in tokens if len(token) != 1] == ["run", *pairs, "dog"]
    assert [token for token in tokens if len(token) == 1] == list("世界東京タワー")


def test_thai_is_read_as_character_pairs_marks_included() -> None:
    assert LexicalTokenizer(None).tokens("สวัสดี") == ["สว", "วั", "ัส", "สด", "ดี"]


def test_korean_is_spaced_so_it_keeps_its_words() -> None:
    assert LexicalTokenizer(None).tokens("서울 한국어 텍스트") == ["서울", "한국어", "텍스트"]


def test_combining_marks_stay_in_their_words() -> None:
    assert LexicalTokenizer(None).tokens("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]
    assert LexicalTokenizer("hindi").tokens("नमस्ते दुनिया") == ["नमस्त", "दुनिय"]  # Hindi's stemmer


def test_none_reads_words_as_they_are_in_any_language() -> None:
    tokenizer = LexicalTokenizer(None)
    assert tokenizer.language is None
    assert tokenizer.tokens("The Running DOGS") == ["the", "running", "dogs"]  # lower-cased only
    assert tokenizer.tokens("Ọ̀rọ̀ ìṣẹ́ Kiswahili") == ["ọ̀rọ̀", "ìṣẹ́", "kiswahili"]


@pytest.mark.parametrize("text", ["", "   ", "!!! ... ?", "a b c", "— « » ¿¡", "the and of"])
def test_a_text_without_words_has_no_tokens(text: str) -> None:
    assert LexicalTokenizer("english").tokens(text) == []


def test_documents_and_queries_are_read_alike() -> None:
    tokenizer = LexicalTokenizer("english")
    assert tokenizer.tokens("Stone ovens") == tokenizer.tokens("stone OVEN")


def test_languages_are_pystemmer_s_snowball_stemmers_without_porter() -> None:
    import Stemmer

    assert tuple(sorted(set(Stemmer.algorithms()) - {"porter"})) == LANGUAGES
    assert {"english", "german", "russian", "hindi"} <= set(LANGUAGES)


def test_check_language_accepts_any_case_and_none() -> None:
    assert check_language("English") == "english"
    assert check_language("GERMAN") == "german"
    assert check_language(None) is None
    assert LexicalTokenizer("English").language == "english"


@pytest.mark.parametrize("language", ["klingon", "porter", "", "en", 5, b"english", ["english"]])
def test_an_unknown_language_is_refused_naming_the_choices(language: object) -> None:
    with pytest.raises(ValueError, match="language must be one of") as error:
        check_language(language)
    assert "'english'" in str(error.value) and "'german'" in str(error.value) and "None" in str(error.value)
    with pytest.raises(ValueError, match="language must be one of"):
        LexicalTokenizer(language)  # type: ignore[arg-type]


def test_tokenizers_are_equal_by_language() -> None:
    assert LexicalTokenizer("English") == LexicalTokenizer("english")
    assert hash(LexicalTokenizer("English")) == hash(LexicalTokenizer("english"))
    assert LexicalTokenizer("english") != LexicalTokenizer("german")
    assert LexicalTokenizer("english") != LexicalTokenizer(None)
    assert LexicalTokenizer("english") != "english"


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("cafe\u0301", "café"),  # NFD: the accent a mark of its own
        ("co\u00adop\u00aderation", "cooperation"),  # soft hyphens
        ("zero\u200bwidth", "zerowidth"),  # a zero-width space does not split the word
        ("joi\u200dner\u200cword", "joinerword"),  # joiner and non-joiner
        ("\ufeffbom", "bom"),  # a byte-order mark inside a text
        ("ｆｕｌｌｗｉｄｔｈ", "fullwidth"),
        ("ﬁnance ﬂow", "finance flow"),  # ligatures
        ("ｶﾀｶﾅ", "カタカナ"),  # halfwidth katakana, its sound mark included
        ("ﾊﾟﾝ", "パン"),
        ("cafe\u00ad\u0301", "café"),  # a mark a format character separated from its letter
    ],
)
def test_texts_that_read_the_same_give_the_same_tokens(written: str, plain: str) -> None:
    for language in ("english", None):
        tokenizer = LexicalTokenizer(language)
        assert tokenizer.tokens(written) == tokenizer.tokens(plain)
    assert normalized(written) == normalized(plain)


def test_plain_text_is_not_changed_by_the_normalisation() -> None:
    text = "The Runners were RUNNING quickly, and the dogs barked."
    assert normalized(text) is text
    assert normalized("Straße café") == "Straße café"  # already NFC, no compatibility form


def test_stems_come_from_the_cache_as_the_stemmer_gives_them_and_the_cache_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import Stemmer

    from fair_retrieval.lexical import lexical_tokens

    tokenizer = LexicalTokenizer("english")
    text = "Running runners ran quickly; the generously generous generation runs again and again"
    words = tokenizer._words(text.lower())
    assert tokenizer.tokens(text) == Stemmer.Stemmer("english").stemWords(words)
    assert tokenizer.tokens(text) == tokenizer.tokens(text)  # the second time from the cache
    monkeypatch.setattr(lexical_tokens._Stems, "LIMIT", 3)
    small = LexicalTokenizer("english")
    assert small.tokens(text) == tokenizer.tokens(text) and len(small._stems) <= 3
