"""Settings a file records as one JSON object under a key, written only when they differ from the defaults.

A store file records a frozen dataclass of settings (e.g. the lexical side's or the search mode's) as
``{key: {field: value, ...}}``, or nothing for the defaults, so files written before a setting existed keep loading
as its defaults. `settings_record` writes that object, `recorded_settings` reads it back, refusing unknown fields
and values the dataclass's own checks refuse, with a ValueError that names the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, TypeVar

__all__ = ["recorded_settings", "settings_record"]

T = TypeVar("T")


def settings_record(settings: Any, key: str) -> dict[str, Any]:
    """``{key: the settings' fields}``, or ``{}`` when they are the dataclass's defaults."""
    return {} if settings == type(settings)() else {key: asdict(settings)}


def recorded_settings(cls: type[T], state: Mapping[str, Any], key: str, what: str, where: str) -> T:
    """The `cls` settings a file's JSON `state` records under `key` (the defaults when it records none).

    Args:
        cls: a dataclass whose fields all have defaults and whose constructor checks their values.
        state: the file's JSON object.
        key: the key of the settings in it.
        what: the settings' name in messages (e.g. "lexical settings").
        where: the file, for messages.

    Raises:
        ValueError: recorded settings that are not an object of known fields and valid values.
    """
    raw = state.get(key)
    if raw is None:
        return cls()
    known = {field.name for field in fields(cls)}  # type: ignore[arg-type]
    if not isinstance(raw, dict) or set(raw) - known:
        raise ValueError(f"{where} records malformed {what} {raw!r}; save the store again.")
    try:
        return cls(**raw)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where} records {what} this release cannot use: {error}") from None
