"""Searching among some ids only, inside faiss: an IDSelector in the search parameters of each structure.

`FaissIndex.search(queries, k, ids=...)` calls `search_among` for a selection of some of the stored ids (checked by
`stored_selection`): `prefers_exhaustive` decides when a selection is scored in
full rather than trusted to the approximate structure, `search_with_selector` runs the restricted search (None
where faiss takes no selector for the structure), `selector_params` builds the SearchParameters that carry the
selector down to the index that picks the candidates, and `first_members` keeps the selected hits of an
unrestricted search (the fallback for structures that take no selector). An unrestricted search is the index's own,
with the rows it returns short searched again in full (`short_rows_in_full`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fair_retrieval.index.ids import as_ids, distinct, some
from fair_retrieval.index.inspection import ID_MAPS

logger = logging.getLogger(__name__)

EXHAUSTIVE_SELECTION = 1024  # searches restricted to at most this many ids score each of them
HNSW_SELECTIVE = 10  # an HNSW search restricted to under 1/10 of the graph scores the selection on its storage


PADDED_K = 1024
"""Up to this k, a search returns k columns (padded with -1 past what is found) whatever the index holds; above it,
no more columns than the index holds (`result_columns`)."""


def result_columns(k: int, held: int) -> int:
    """How many results a search for `k` returns from `held` vectors or documents: k, clamped to what is held once
    k is above `PADDED_K`, so a caller's fixed small k keeps a fixed shape and a huge k costs no memory."""
    return min(k, max(held, PADDED_K))


def prefers_exhaustive(params: Mapping[str, int], selected: int, total: int) -> bool:
    """Whether a restricted search should score every selected vector rather than trust the approximate structure.

    Small selections always are (cheap, and exact). For IVF, a selection no larger a share of the vectors than the
    probed lists are (nprobe / nlist) costs no more scanned in full, and probing few lists would miss much of it.
    An HNSW graph walk finds selected neighbours poorly once they are under a tenth of the graph (recall@10 falls
    from 0.98 at 10 % to about 0.5 at 2 % with efSearch=64), so such selections are scored on its flat storage.
    """
    if selected <= EXHAUSTIVE_SELECTION:
        return True
    if "nlist" in params and "nprobe" in params:
        return selected * params["nlist"] <= params["nprobe"] * total
    if "ef_search" in params:
        return selected * HNSW_SELECTIVE <= total
    return False


def search_with_selector(
    faiss: Any,
    index: Any,
    matrix: np.ndarray,
    k: int,
    wanted: np.ndarray,
    stored: np.ndarray,
    exhaustive: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Search `index` (CPU or GPU) for the k best of the `wanted` ids with a faiss IDSelector in SearchParameters.

    Returns None where faiss takes no selector for this structure (it raised, or it ignored the selector and
    returned other ids).
    """
    top = faiss.downcast_index(index)
    node, id_map = top, None
    if type(top).__name__ in ID_MAPS:
        node, id_map = faiss.downcast_index(top.index), top.id_map
    if 2 * wanted.size > stored.size:  # most ids selected: faiss checks the smaller set of those left out
        batch = faiss.IDSelectorBatch(np.setdiff1d(stored, wanted, assume_unique=True))
        selector = faiss.IDSelectorNot(batch)
    else:
        batch = selector = faiss.IDSelectorBatch(wanted)
    # Below an id map faiss sees positions: translate them to ids (IndexIDMap leaves a translated selector as is).
    # faiss keeps raw pointers to these selectors: the local names hold them until the search is done.
    inner = faiss.IDSelectorTranslated(id_map, selector) if id_map is not None else selector
    try:
        if exhaustive and id_map is not None and type(node).__name__.startswith("IndexHNSW"):
            storage = faiss.downcast_index(node.storage)  # the graph's vectors, by position: scored one by one
            scores, positions = storage.search(matrix, k, params=faiss.SearchParameters(sel=inner))
            labels = faiss.rev_swig_ptr(id_map.data(), id_map.size())
            found = np.where(positions >= 0, labels[np.maximum(positions, 0)], -1)
        else:
            params = selector_params(faiss, node, inner, exhaustive)
            if params is None:
                return None
            scores, found = index.search(matrix, k, params=params)
    except RuntimeError as error:  # faiss: "search params not supported", "selector not supported", …
        logger.debug("faiss refused an id selector for %s: %s", type(node).__name__, str(error).splitlines()[0])
        return None
    if not np.isin(found[found >= 0], wanted).all():  # checked, not trusted: k·n lookups
        name = type(node).__name__
        on_gpu = name.startswith("Gpu")  # then the CPU copy is searched next: expected, not worth a warning
        logger.log(logging.DEBUG if on_gpu else logging.WARNING, "faiss ignored the id selector of a %s search.", name)
        return None
    return np.asarray(scores), np.asarray(found)


def selector_params(faiss: Any, node: Any, selector: Any, exhaustive: bool) -> Any:
    """SearchParameters carrying `selector` for `node` and what lies below it, with the node's own search values
    (nprobe and max_codes, efSearch, k_factor); `exhaustive` probes every IVF list. None for structures whose
    faiss search takes no selector (IndexPQ, IndexLSH, IndexNSG, …)."""
    node = faiss.downcast_index(node)
    name = type(node).__name__
    if name == "IndexPreTransform":  # passes the parameters on to the index it transforms for
        return selector_params(faiss, node.index, selector, exhaustive)
    if name.startswith("IndexRefine"):  # the selector must reach the base index, which picks the candidates
        base = selector_params(faiss, node.base_index, selector, exhaustive)
        if base is None:
            return None
        return faiss.IndexRefineSearchParameters(k_factor=float(node.k_factor), base_index_params=base, sel=selector)
    if isinstance(node, faiss.IndexIVF) or name.startswith("GpuIndexIVF"):
        params = faiss.SearchParametersIVF(sel=selector, nprobe=int(node.nlist) if exhaustive else int(node.nprobe))
        if not exhaustive and hasattr(node, "max_codes"):
            params.max_codes = int(node.max_codes)
        return params
    if name.startswith("IndexHNSW"):
        graph = node.hnsw
        return faiss.SearchParametersHNSW(
            sel=selector,
            efSearch=int(graph.efSearch),
            check_relative_distance=bool(graph.check_relative_distance),
            bounded_queue=bool(graph.search_bounded_queue),
        )
    if name.startswith(("IndexFlat", "GpuIndexFlat")) or name == "IndexScalarQuantizer":
        return faiss.SearchParameters(sel=selector)
    return None


def first_members(
    scores: np.ndarray, found: np.ndarray, members: np.ndarray, k: int, missing: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first k results flagged in `members` (order kept), padded with -1 / `missing` to k columns."""
    rows = found.shape[0]
    order = np.argsort(~members, axis=1, kind="stable")[:, :k]
    picked = np.take_along_axis(members, order, axis=1)
    kept_ids = np.where(picked, np.take_along_axis(found, order, axis=1), -1)
    kept_scores = np.where(picked, np.take_along_axis(scores, order, axis=1), missing)
    if kept_ids.shape[1] < k:
        pad = k - kept_ids.shape[1]
        kept_ids = np.hstack([kept_ids, np.full((rows, pad), -1, dtype=np.int64)])
        kept_scores = np.hstack([kept_scores, np.full((rows, pad), missing, dtype=np.float32)])
    return kept_scores.astype(np.float32), kept_ids.astype(np.int64)


@dataclass(frozen=True)
class Searchable:
    """What a restricted search needs of a FaissIndex.

    Attributes:
        faiss: the faiss module.
        live: the live index (on a GPU or the CPU).
        on_gpu: whether `live` is on a GPU.
        cpu_index: returns the live index on CPU, or its CPU copy (kept by the FaissIndex until the next change).
        stored: every stored id, int64, ascending.
        params: the kind parameters in effect (nlist, nprobe, ef_search, …).
        missing_score: the score of a missing result (-inf for "ip", +inf for "l2").
        max_k: the most results the live index returns per query (faiss' GPU limit), None for no limit.
        description: the index for logs.
    """

    faiss: Any
    live: Any
    on_gpu: bool
    cpu_index: Callable[[], Any]
    stored: np.ndarray
    params: Mapping[str, int]
    missing_score: float
    max_k: int | None
    description: str


def stored_selection(ids: Any, stored: np.ndarray) -> np.ndarray:
    """`ids` as sorted unique int64, all in `stored` (sorted): a vectorised lookup, not one by one.

    Raises:
        ValueError: for ids that are not stored (the message lists some of them); TypeError for non-integer ids.
    """
    wanted = distinct(as_ids(ids, "ids"))
    if wanted.size:
        at = np.searchsorted(stored, wanted)
        known = at < stored.size
        known[known] = stored[at[known]] == wanted[known]
        if not known.all():
            unknown = wanted[~known]
            raise ValueError(
                f"{unknown.size} id(s) to search among are not in the index: {some(unknown)}. Pass stored ids "
                "only (FaissIndex.ids lists them)."
            )
    return wanted


def search_among(index: Searchable, matrix: np.ndarray, k: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k best of `wanted` (sorted, stored, not all of them) for every query row (see `FaissIndex.search`)."""
    expected = min(k, int(wanted.size))
    exhaustive = prefers_exhaustive(index.params, int(wanted.size), int(index.stored.size))
    result = _selector_search(index, matrix, k, wanted, exhaustive)
    if result is None:
        logger.debug("The %s takes no id selector; widening the candidates.", index.description)
        return _widened_search(index, matrix, k, wanted)
    scores, found = result
    short = (found >= 0).sum(axis=1) < expected
    if short.any() and not exhaustive:  # the graph or the probed lists held too few selected vectors
        again = _selector_search(index, matrix[short], k, wanted, exhaustive=True)
        if again is not None:
            scores[short], found[short] = again
            short = (found >= 0).sum(axis=1) < expected
    if short.any():
        scores[short], found[short] = _widened_search(index, matrix[short], k, wanted)
    return scores, found


def short_rows_in_full(
    index: Searchable, matrix: np.ndarray, k: int, scores: np.ndarray, found: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """An unrestricted search's results (`scores`, `found`: the index's own search for k ≤ what it stores) with
    the rows short of k searched again with every list probed (see `FaissIndex.search`); the arrays given when no
    row is short, else new ones.

    An IVF index whose probed lists hold fewer than k vectors (as after many removals) returns such rows; searched
    in full, each holds k results. A structure that cannot be searched so and still comes back short is said at
    WARNING, with what to do.
    """
    short = (found >= 0).sum(axis=1) < k
    if not short.any():  # the usual case: the index's own results, as they are
        return scores, found
    scores, found = np.array(scores), np.array(found)
    logger.debug("The %s found fewer than k=%d of its vectors; searching it in full.", index.description, k)
    again = _selector_search(index, matrix[short], k, index.stored, exhaustive=True)  # a selector of every id
    if again is not None:
        scores[short], found[short] = again
    returned = int((found >= 0).sum(axis=1).min())
    if returned < k:
        logger.warning(
            "The %s returned %d of the k=%d results asked for although it holds %d vectors: its structure cannot "
            "be searched in full. Raise its nprobe / efSearch (FaissIndex.set_search), or rebuild it.",
            index.description,
            returned,
            k,
            int(index.stored.size),
        )
    return scores, found


def _selector_search(
    index: Searchable, matrix: np.ndarray, k: int, wanted: np.ndarray, exhaustive: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """Search with a faiss id selector: on the live GPU index where faiss takes one there, else on the CPU
    (copy); None when this index type takes none."""
    if index.on_gpu:
        result = search_with_selector(index.faiss, index.live, matrix, k, wanted, index.stored, exhaustive)
        if result is not None:
            return result
        logger.debug("faiss takes no id selector for this GPU index; searching its CPU copy.")
    return search_with_selector(index.faiss, index.cpu_index(), matrix, k, wanted, index.stored, exhaustive)


def _widened_search(index: Searchable, matrix: np.ndarray, k: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unrestricted searches over ever more candidates (4x a round) until every row holds min(k, selected)
    selected ids or every stored vector was a candidate; the selected ones, best first."""
    total, expected = int(index.stored.size), min(k, int(wanted.size))
    fetch = min(total, max(4 * k, 64))
    while True:
        searched = index.cpu_index() if index.max_k is not None and fetch > index.max_k else index.live
        scores, found = searched.search(matrix, fetch)
        members = np.isin(found, wanted)
        if fetch >= total or bool((members.sum(axis=1) >= expected).all()):
            break
        fetch = min(total, fetch * 4)
    return first_members(np.asarray(scores), np.asarray(found), members, k, index.missing_score)
