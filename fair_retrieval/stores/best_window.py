"""A multi-vector hit's best window, as results carry it in their metadata, and the keys an add therefore refuses.

A multi-vector store scores a document by its windows; a result says which window scored best by its character
span, put in a copy of the document's metadata under `BEST_WINDOW_KEY`, so that an application can highlight it.
A user's own value under that key would be replaced in every result, so adds refuse it (`RESERVED_KEYS`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fair_retrieval.index import DocumentHit

__all__ = ["BEST_WINDOW_KEY", "RESERVED_KEYS", "best_window_metadata", "window_hits"]

BEST_WINDOW_KEY = "best_window"
"""Metadata key of a multi-vector hit: {"start": …, "end": …, "window": …} (character span, window position)."""
RESERVED_KEYS: tuple[str, ...] = (BEST_WINDOW_KEY,)
"""Metadata keys the stores put in their results, so refused in what is added (`check_store_entries`): a user's
value under one would be replaced in every result."""


def best_window_metadata(hit: DocumentHit) -> dict[str, int]:
    """The metadata value under `BEST_WINDOW_KEY` for a hit: its best window's character span and position."""
    return {"start": hit.span[0], "end": hit.span[1], "window": hit.window}


def window_hits(hits: Sequence[DocumentHit]) -> list[tuple[int, float, dict[str, int] | None]]:
    """(id, score, best window's metadata value) of each multi-vector hit, in order: what a result carries."""
    return [(hit.id, hit.score, best_window_metadata(hit)) for hit in hits]
