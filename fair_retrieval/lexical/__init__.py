"""The lexical side of a store: words read per language, BM25 over the store's documents, and the fusions that join
it with the dense side (`fair_retrieval.stores` searches in "dense", "sparse" or "hybrid" mode)."""

from fair_retrieval.lexical.fusion import FUSIONS, RRF_K, adaptive_alpha, check_alpha, check_fusion, fuse
from fair_retrieval.lexical.lexical_index import LEXICAL_KEY, LEXICAL_METHODS, LexicalIndex, LexicalSettings
from fair_retrieval.lexical.lexical_tokens import DEFAULT_LANGUAGE, LANGUAGES, LexicalTokenizer, check_language

__all__ = [
    "DEFAULT_LANGUAGE",
    "FUSIONS",
    "LANGUAGES",
    "LEXICAL_KEY",
    "LEXICAL_METHODS",
    "RRF_K",
    "LexicalIndex",
    "LexicalSettings",
    "LexicalTokenizer",
    "adaptive_alpha",
    "check_alpha",
    "check_fusion",
    "check_language",
    "fuse",
]
