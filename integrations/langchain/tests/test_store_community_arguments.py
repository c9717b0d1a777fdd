"""langchain-community FAISS's arguments: `distance_strategy` and `normalize_L2` read as the metric they mean, and
every argument the store refuses refused before any text is embedded (the constructor, `from_texts`)."""

from __future__ import annotations

from enum import Enum
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore

pytest.importorskip("faiss")

TEXTS = ["The ferry leaves at nine.", "The market opens on Saturdays.", "Bicycles are repaired for free."]


class DistanceStrategy(str, Enum):
    """langchain-community's enum, copied (the store reads it by value and never imports langchain-community)."""

    EUCLIDEAN_DISTANCE = "EUCLIDEAN_DISTANCE"
    MAX_INNER_PRODUCT = "MAX_INNER_PRODUCT"
    DOT_PRODUCT = "DOT_PRODUCT"
    JACCARD = "JACCARD"
    COSINE = "COSINE"


class Counted(DeterministicFakeEmbedding):
    """Fake embeddings that count the texts they embed."""

    embedded: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


@pytest.mark.parametrize(
    ("options", "metric"),
    [
        ({"distance_strategy": "MAX_INNER_PRODUCT"}, "ip"),
        ({"distance_strategy": DistanceStrategy.MAX_INNER_PRODUCT}, "ip"),
        ({"distance_strategy": DistanceStrategy.COSINE}, "cosine"),
        ({"distance_strategy": "EUCLIDEAN_DISTANCE"}, "l2"),
        ({"normalize_L2": True}, "cosine"),
        ({"normalize_L2": True, "distance_strategy": "MAX_INNER_PRODUCT"}, "cosine"),
        ({"normalize_L2": False, "metric": "ip"}, "ip"),
        ({"distance_strategy": "COSINE", "metric": "cosine"}, "cosine"),
        ({}, "cosine"),
    ],
)
def test_community_arguments_are_read_as_the_metric_they_mean(options: dict[str, Any], metric: str) -> None:
    embedding = Counted(size=8)
    store = FaissVectorStore.from_texts(TEXTS, embedding, gpu=False, **options)
    assert store.metric == metric and len(store) == 3
    assert FaissVectorStore(embedding, gpu=False, **options).metric == metric


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"distance_strategy": DistanceStrategy.JACCARD}, ValueError, "'JACCARD' has no metric in FaissVectorStore"),
        ({"distance_strategy": "DOT_PRODUCT"}, ValueError, "pass metric='cosine', 'ip' or 'l2'"),
        ({"distance_strategy": "MAX_INNER_PRODUCT", "metric": "l2"}, ValueError, "pass metric= alone"),
        ({"normalize_L2": True, "distance_strategy": "EUCLIDEAN_DISTANCE"}, ValueError, "metric='cosine'"),
        ({"normalize_L2": "yes"}, TypeError, "normalize_L2 must be a bool"),
        ({"nlist": 8}, TypeError, r"kind='flat' takes no parameter\(s\) \['nlist'\]"),
        ({"kind": "hnsw", "M": 0}, ValueError, "M must be a positive int"),
        ({"kind": "ivfpq", "nlist": 4, "k_factor": 2}, TypeError, "k_factor applies to the sized default"),
    ],
)
def test_refused_arguments_are_refused_before_any_text_is_embedded(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    embedding = Counted(size=8)
    with pytest.raises(error, match=message):
        FaissVectorStore.from_texts(TEXTS, embedding, gpu=False, **options)
    with pytest.raises(error, match=message):
        FaissVectorStore(embedding, gpu=False, **options)
    assert embedding.embedded == 0
