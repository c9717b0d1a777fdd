"""Checks of the arguments the stores' calls share (ids, texts, metadata), and the short lists of offending values
their messages show.

Stores save metadata as JSON, never pickle, so a value that JSON cannot carry unchanged is refused when it is
stored (not when the store is saved, long after); the copy also keeps later edits by the caller out of the store,
and user code gets a copy again (`private_copy`).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fair_retrieval.inputs import check_store_entries, ensure_text_list
from fair_retrieval.stores.best_window import RESERVED_KEYS

__all__ = [
    "check_keywords",
    "checked_entries",
    "id_strings",
    "ids_to_delete",
    "json_metadata",
    "json_metadata_list",
    "new_ids",
    "preview",
    "private_copy",
    "repeated",
    "require_some",
]

PREVIEW_LIMIT = 5


def preview(items: Sequence[Any], limit: int = PREVIEW_LIMIT) -> str:
    """The first `limit` items as a comma-separated list of reprs, and how many more there are.

    Error messages list some offending ids rather than all of them (there may be millions).
    """
    shown = ", ".join(repr(item) for item in items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")


def check_keywords(
    given: Mapping[str, Any], honoured: Sequence[str], call: str, parameters: Sequence[str] = ()
) -> None:
    """Refuse the keyword arguments of a call that it does not honour, by name, rather than dropping them.

    Args:
        given: the keyword arguments the call got beyond its named parameters.
        honoured: the ones it reads from those.
        call: the call, for the message (e.g. "FaissVectorStore.similarity_search").
        parameters: its named parameters, listed in the message with `honoured`.

    Raises:
        TypeError: a keyword outside `honoured`, naming it and every keyword the call accepts.
    """
    unknown = sorted(name for name in given if name not in honoured)
    if unknown:
        accepted = ", ".join([*parameters, *honoured])
        raise TypeError(
            f"{call}() got unexpected keyword argument(s) {preview(unknown)}; it accepts {accepted} (a retriever's "
            "search_kwargs are passed to it as they are)."
        )


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


def json_metadata_list(metadatas: Any, count: int) -> list[dict[str, Any]]:
    """One JSON metadata dict for each of `count` texts (None: empty dicts), each checked and copied.

    Raises:
        TypeError: a single dict instead of a list, or an entry `json_metadata` refuses.
        ValueError: another number of entries than texts.
    """
    if isinstance(metadatas, dict):
        raise TypeError("metadatas must be a list with one dict per text, got a single dict; wrap it: [metadata].")
    metadata_list = [None] * count if metadatas is None else list(metadatas)
    if len(metadata_list) != count:
        raise ValueError(
            f"Got {count} texts but {len(metadata_list)} metadatas; pass one metadata dict per text (or none)."
        )
    return [json_metadata(metadata, f"metadatas[{position}]") for position, metadata in enumerate(metadata_list)]


def json_metadata(metadata: Any, where: str) -> dict[str, Any]:
    """`metadata` through a JSON round trip (None: {}).

    Args:
        metadata: a dict with str keys and JSON values, or None.
        where: how messages name it, e.g. "metadatas[3]".

    Raises:
        TypeError: naming the first entry that would not come back the same: a non-str key, a value JSON cannot
            hold (a date, a set, an object), NaN or infinity, a tuple (it would come back a list).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise TypeError(f"{where} is {type(metadata).__name__}, expected a dict.")
    copied = {}
    for key, value in metadata.items():
        path = f"{where}[{key!r}]"
        if not isinstance(key, str):
            raise TypeError(f"{where} has the key {key!r} ({type(key).__name__}); JSON keys must be strings.")
        try:
            copied[key] = json.loads(json.dumps(value, allow_nan=False, default=_refuse))
        except ValueError as error:
            raise TypeError(f"{path}: {error}; JSON has no NaN or infinity. Store it as None or a string.") from None
        except TypeError as error:
            raise TypeError(
                f"{path} {error}; the store saves metadata as JSON (never pickle). Convert it to str, int, float, "
                "bool, None, list or dict (e.g. a date with .isoformat())."
            ) from None
        if copied[key] != value:
            raise TypeError(f"{path} would change through JSON: keys must be strings and sequences lists.")
    return copied


def private_copy(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of stored metadata for user code: deep where values are lists or dicts, shallow (cheap) otherwise."""
    if any(isinstance(value, list | dict) for value in metadata.values()):
        return copy.deepcopy(dict(metadata))
    return dict(metadata)


def _refuse(value: Any) -> Any:
    raise TypeError(f"is a {type(value).__name__}, which is not JSON-serialisable")
