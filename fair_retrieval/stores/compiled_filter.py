"""A store's metadata filter, compiled once per call, in the grammar of `fair_retrieval.stores.filter_grammar`.

A store's public methods call each other (a search by text calls the search by vector); the first compiles the
filter, so that a malformed one fails before anything is embedded or searched, and hands the compiled
`StoreFilter` down, which the next ones take as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fair_retrieval.stores.filter_grammar import Predicate, compile_filter
from fair_retrieval.stores.metadata import private_copy

__all__ = ["StoreFilter", "record_filter", "store_filter"]


class StoreFilter:
    """A compiled filter: `filter(metadata)` is True for the metadata of a document the filter keeps."""

    __slots__ = ("matches",)

    def __init__(self, matches: Predicate) -> None:
        self.matches = matches

    def __call__(self, metadata: Mapping[str, Any]) -> bool:
        return self.matches(metadata)


def store_filter(spec: Mapping[str, Any] | Callable[..., Any] | StoreFilter | None) -> StoreFilter | None:
    """The compiled `spec` (None for none; a `StoreFilter` as it is).

    Args:
        spec: a `fair_retrieval.stores.filter_grammar` dict, a function of the metadata dict returning a truth value, an
            already compiled filter, or None. A function gets a copy of each metadata dict, so one that edits its
            argument cannot edit the store.

    Raises:
        ValueError: a malformed filter dict (the message names the place), before any search.
    """
    if spec is None or isinstance(spec, StoreFilter):
        return spec
    if callable(spec) and not isinstance(spec, Mapping):
        user_filter = spec
        return StoreFilter(lambda metadata: bool(user_filter(private_copy(metadata))))
    return StoreFilter(compile_filter(spec))


def record_filter(spec: Mapping[str, Any] | Callable[..., Any] | StoreFilter | None) -> Callable[[Any], bool] | None:
    """`store_filter(spec)` as a test of a stored record by its `metadata` attribute (what `DocumentStore.search`
    takes as `keep`); None keeps every record.

    Raises:
        ValueError: a malformed filter dict (`store_filter`).
    """
    predicate = store_filter(spec)
    return None if predicate is None else (lambda record: predicate(record.metadata))
