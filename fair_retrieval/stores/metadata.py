"""Metadata kept as JSON: checked and copied when a store takes it, copied again before user code sees it.

Stores save metadata as JSON, never pickle, so a value that JSON cannot carry unchanged is refused when it is
stored (not when the store is saved, long after); the copy also keeps later edits by the caller out of the store.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["json_metadata", "json_metadata_list", "private_copy"]


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
