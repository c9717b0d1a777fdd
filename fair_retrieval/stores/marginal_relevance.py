"""Maximal marginal relevance (MMR): k documents chosen for relevance to a query and diversity among themselves.

One MMR for both stacks: LangChain's `max_marginal_relevance_search*` and LlamaIndex's `vector_store_query_mode="mmr"`
both call `mmr_hits`. The selection (`mmr_order`) is the exact greedy MMR of Carbonell and Goldstein, as
langchain-core's `maximal_marginal_relevance` computes it: the document most similar to the query first, then each
time the candidate maximising λ · sim(query, d) − (1 − λ) · max over the chosen c of sim(d, c), similarities being
cosines. (llama-index's SimpleVectorStore compares a candidate with the last chosen document only; here every chosen
document counts.)

The candidates are the `fetch_k` best documents of the store's own search (filters applied inside it). A document's
vector is its stored vector; in multi-vector mode its pooled vector (the token-weighted mean of its windows,
L2-normalised: `DocumentStore.vectors`), so relevance and diversity compare whole documents, not one window each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.store_core import StoreCore, StoreHit
from fair_retrieval.validate import positive_int

__all__ = ["check_mmr_lambda", "mmr_hits", "mmr_order"]

R = TypeVar("R", bound=Keyed)


def mmr_order(query: Any, vectors: Any, k: int, lambda_mult: float = 0.5) -> list[int]:
    """The positions in `vectors` MMR chooses, in the order chosen (at most k).

    Args:
        query: the query vector (dim,).
        vectors: the candidates' vectors (n, dim); a zero vector has cosine 0 with everything.
        k: how many to choose.
        lambda_mult: 1 ranks by relevance only, 0 by diversity only.

    Raises:
        ValueError: `lambda_mult` outside [0, 1].
    """
    lambda_mult = check_mmr_lambda(lambda_mult)
    count = min(k, len(vectors))
    if count <= 0:
        return []
    candidates = _unit(np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1))
    to_query = candidates @ _unit(np.asarray(query, dtype=np.float64).reshape(1, -1))[0]
    chosen = [int(np.argmax(to_query))]
    redundancy = np.full(len(candidates), -np.inf)
    while len(chosen) < count:
        redundancy = np.maximum(redundancy, candidates @ candidates[chosen[-1]])
        scores = lambda_mult * to_query - (1.0 - lambda_mult) * redundancy
        scores[chosen] = -np.inf
        chosen.append(int(np.argmax(scores)))
    return chosen


def mmr_hits(
    store: StoreCore[R],
    query: Any,
    k: int,
    fetch_k: int | None = None,
    lambda_mult: float = 0.5,
    *,
    among: Sequence[int] | None = None,
    keep: Callable[[R], bool] | None = None,
    candidates: Callable[[int], list[StoreHit[R]]] | None = None,
    lambda_name: str = "lambda_mult",
) -> list[StoreHit[R]]:
    """k of the store's documents chosen by MMR among the `fetch_k` best (None: every document that qualifies),
    restricted as `DocumentStore.search` is (`among`, `keep`); each hit keeps its search score and best window.
    `candidates` gives the best n hits another way (a sparse or hybrid search: `DocumentStore.text_search`); MMR
    then chooses among those, by the same cosines of the query and the documents' vectors. `lambda_name`: what the
    caller's stack calls λ (LangChain's `lambda_mult`, LlamaIndex's `mmr_threshold`), for the message of its check.

    Raises:
        ValueError: a bad `k`, `fetch_k` or `lambda_mult`, or a query of another size than the stored vectors.
    """
    positive_int(k, "k")
    lambda_mult = check_mmr_lambda(lambda_mult, lambda_name)
    pool = len(store) if fetch_k is None else max(k, positive_int(fetch_k, "fetch_k"))
    if candidates is not None:
        hits = candidates(max(pool, 1))
    else:
        hits = store.search(query, max(pool, 1), among=among, keep=keep)
    if not hits:
        return []
    prepared = store.prepared(np.asarray(query, dtype=np.float32).reshape(1, -1), 1, "the query embedding")[0]
    vectors = store.vectors([hit.int_id for hit in hits])
    return [hits[position] for position in mmr_order(prepared, vectors, k, lambda_mult)]


def check_mmr_lambda(value: Any, name: str = "lambda_mult") -> float:
    """MMR's λ as a float: the one check of both stacks' names for it (LangChain's `lambda_mult`, LlamaIndex's
    `mmr_threshold`), run before any work.

    Raises:
        ValueError: not a number (bools included) or outside [0, 1].
    """
    if not isinstance(value, int | float | np.floating) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1] (1: relevance only, 0: diversity only), got {value!r}.")
    return float(value)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)  # type: ignore[no-any-return]
