"""How a store answers a text query: by its vectors ("dense"), by its words ("sparse"), or both fused ("hybrid").

`SearchSettings` is a store's choice, given when it is built (each stack's own argument: LlamaIndex's query mode,
LangChain's `retrieval_mode`) and overridable per query; `DocumentStore.hybrid_search` and
`DocumentStore.lexical_search` answer the modes (`fair_retrieval.lexical`: BM25 over the store's documents and the
fusions). The default mode is hybrid, with the hybrid study's fusion (relative scores, α = 0.3: the lexical side
weighted 0.7): ahead of dense by +0.051 nDCG@10 on the study's pooled mean and on held-out collections
(docs/hybrid_study.md). A store records a mode only when it is not the default, so a store saved before hybrid was the
default with dense as its unrecorded default now answers hybrid; one that chose dense keeps it. A search by vector
(no text) is always dense.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from fair_retrieval.jsonio.recorded_settings import recorded_settings, settings_record
from fair_retrieval.lexical import check_alpha, check_fusion, fuse
from fair_retrieval.validate import positive_int

__all__ = ["DEFAULT_SEARCH_MODE", "SEARCH_KEY", "SEARCH_MODES", "SearchMode", "SearchSettings", "check_search_mode"]

SEARCH_KEY = "search"
"""The store file's key of non-default `SearchSettings`."""

SearchMode = Literal["dense", "sparse", "hybrid"]
"""How a text query is answered: the store's vectors, its BM25 lexical index, or both fused."""
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
DEFAULT_SEARCH_MODE: SearchMode = "hybrid"
"""The stores' default mode for a text query (docs/hybrid_study.md says why)."""


def check_search_mode(mode: Any, argument: str = "retrieval_mode") -> SearchMode:
    """`mode` if it is one of `SEARCH_MODES`, else a ValueError naming them."""
    value = getattr(mode, "value", mode)  # an Enum of the stacks (e.g. a RetrievalMode) by its value
    if value not in SEARCH_MODES:
        raise ValueError(
            f"{argument} must be one of {SEARCH_MODES} (dense: vectors; sparse: BM25 over the words; hybrid: both "
            f"fused), got {mode!r}."
        )
    return value  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SearchSettings:
    """A store's default way to answer text queries.

    Attributes:
        mode: "dense", "sparse" or "hybrid".
        fusion: how hybrid joins the two rankings (`fair_retrieval.lexical.FUSIONS`).
        alpha: the dense side's weight in the fusion (1: dense only, 0: lexical only; LlamaIndex's `alpha`).
        candidates: how many candidates each side gives a hybrid fusion at least (k when k is larger).
    """

    mode: SearchMode = DEFAULT_SEARCH_MODE
    fusion: str = "relative_score"  # the hybrid study's: the highest mean nDCG@10 over every set of both models
    alpha: float = 0.3
    candidates: int = 20

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", check_search_mode(self.mode, "SearchSettings.mode"))
        check_fusion(self.fusion)
        object.__setattr__(self, "alpha", check_alpha(self.alpha))
        positive_int(self.candidates, "SearchSettings.candidates")

    def pool(self, k: int) -> int:
        """How many candidates a side gives a hybrid fusion of k results: k, and at least `candidates`."""
        return max(k, self.candidates)

    def fused(
        self,
        dense: Sequence[tuple[Any, float]],
        lexical: Sequence[tuple[Any, float]],
        k: int,
        *,
        dense_larger_is_better: bool = True,
    ) -> list[tuple[Any, float]]:
        """The k best of a dense and a lexical ranking ((id, score) pairs, best first) fused by these settings'
        fusion and α (`fair_retrieval.lexical.fuse`): (id, fused score in [0, 1]) pairs, best first."""
        return fuse(
            dense, lexical, k, fusion=self.fusion, alpha=self.alpha, dense_larger_is_better=dense_larger_is_better
        )

    def with_overrides(self, **changes: Any) -> SearchSettings:
        """These settings with the given (not None) fields replaced, checked (these settings when none is given)."""
        given = {name: value for name, value in changes.items() if value is not None}
        return replace(self, **given) if given else self

    def settings(self) -> dict[str, Any]:
        """The JSON a store file records (nothing for the default settings, as files of earlier releases)."""
        return settings_record(self, SEARCH_KEY)

    @classmethod
    def saved(cls, state: Mapping[str, Any], where: str) -> SearchSettings:
        """The settings a store file records (the default when it records none).

        Raises:
            ValueError: recorded settings that are not an object of known fields and valid values.
        """
        return recorded_settings(cls, state, SEARCH_KEY, "search settings", where)
