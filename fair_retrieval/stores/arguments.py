"""Checks of the arguments the stores' calls share, and the short lists of offending values their messages show."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from fair_retrieval.inputs import check_store_entries, ensure_text_list
from fair_retrieval.stores.metadata import json_metadata_list
from fair_retrieval.stores.window_cache import RESERVED_KEYS

__all__ = ["checked_entries", "id_strings", "ids_to_delete", "new_ids", "preview", "repeated", "require_some"]

PREVIEW_LIMIT = 5


def preview(items: Sequence[Any], limit: int = PREVIEW_LIMIT) -> str:
    """The first `limit` items as a comma-separated list of reprs, and how many more there are.

    Error messages list some offending ids rather than all of them (there may be millions).
    """
    shown = ", ".join(repr(item) for item in items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")


def repeated(keys: Iterable[str]) -> list[str]:
    """The keys that occur more than once, sorted (empty when all are unique)."""
    return sorted(key for key, times in Counter(keys).items() if times > 1)


def new_ids(ids: Any, count: int) -> list[str]:
    """One unique str id for each of `count` new texts; `ids=None`, or a None entry, means a new UUID.

    Raises:
        TypeError: a single string, or an id that is not a str (`ensure_text_list`).
        ValueError: another number of ids than texts, or an id repeated within the call.
    """
    if ids is None:
        ids = [None] * count
    if not isinstance(ids, str):  # a single str is refused by ensure_text_list
        ids = [str(uuid.uuid4()) if id_ is None else id_ for id_ in ids]
    id_list = ensure_text_list(ids, "ids")
    if len(id_list) != count:
        raise ValueError(f"Got {count} texts but {len(id_list)} ids; pass one id per text (or ids=None).")
    doubled = repeated(id_list)
    if doubled:
        raise ValueError(f"ids repeat within this call: {preview(doubled)}; every id must be unique.")
    return id_list


def checked_entries(texts: list[str], metadatas: Any, ids: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, text, metadata) of each text to store: metadata checked and copied as JSON (`json_metadata_list`), new
    UUIDs where no id is given (`new_ids`), and the entries checked (`check_store_entries`).

    Raises:
        TypeError: a non-dict or non-JSON metadata value, or a non-string id.
        ValueError: metadatas or ids of the wrong length, an id repeated within the call, or an entry the store
            cannot keep (metadata under a reserved key, `RESERVED_KEYS`, included).
    """
    metadata_list = json_metadata_list(metadatas, len(texts))
    id_list = new_ids(ids, len(texts))
    check_store_entries(texts, id_list, metadata_list, reserved=RESERVED_KEYS)
    return list(zip(id_list, texts, metadata_list, strict=True))


def id_strings(values: Any, name: str) -> list[str]:
    """A list of ids as strings; a single string (a common slip for a list of one) is refused.

    Raises:
        TypeError: `values` is a string or not iterable.
    """
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of ids, got {type(values).__name__} {values!r}; wrap one id: [id].")
    return [str(value) for value in values]


def require_some(items: Sequence[Any], call: str, what: str, store: str) -> None:
    """Refuse a class method that builds a store from `items` (`from_texts`, `from_embeddings`) given none.

    Raises:
        ValueError: `items` is empty; the message points to the constructor for an empty store.
    """
    if not items:
        raise ValueError(f"{call} got no {what}. To start with an empty store, use {store}(embedding) and add later.")


def ids_to_delete(ids: Any) -> list[str]:
    """The ids a delete was given, as a list of strings; None is refused rather than read as "everything".

    Raises:
        ValueError: `ids` is None (to empty a store, pass its ids).
        TypeError: `ids` is a single string or holds a non-string (`ensure_text_list`).
    """
    if ids is None:
        raise ValueError("delete() needs the ids to delete; to delete every document, pass store.ids.")
    return ensure_text_list(ids, "ids")
