"""JSON round trip for the frozen configuration objects (`Calibration`, `PositionalScaling`), written once.

A config class supplies `to_dict` / `from_dict` (its own fields and validation) and the name under which reports
nest it (`JSON_KEY`); this mixin adds `to_json`, `from_json`, `save` (atomic) and `load` (which also accepts a report
holding the config under that key).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from fair_retrieval.jsonio import write_atomically

T = TypeVar("T", bound="FrozenJson")


class FrozenJson:
    """Mixin: JSON text and file round trip on top of a class's `to_dict` / `from_dict`."""

    JSON_KEY: ClassVar[str]  # the key a report nests this config under, e.g. "calibration"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-compatible dict of the fields (implemented by the config class)."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        """Build the config from `to_dict` output (implemented by the config class)."""
        raise NotImplementedError

    def to_json(self) -> str:
        """Serialise to a JSON string (keys sorted, so equal configs give equal text)."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls: type[T], text: str) -> T:
        """Parse a JSON string produced by `to_json` (or written by hand)."""
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> None:
        """Write the config as JSON to `path` (atomically: readers never see a partial file)."""
        write_atomically(Path(path), (self.to_json() + "\n").encode("utf-8"))

    @classmethod
    def load(cls: type[T], path: str | Path) -> T:
        """Read a config saved with `save`, or a JSON report holding it under `JSON_KEY`."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get(cls.JSON_KEY), dict):
            data = data[cls.JSON_KEY]
        return cls.from_dict(data)


def check_fields(data: object, known: Iterable[str], owner: str) -> dict[str, Any]:
    """Return `data` as a dict after refusing a non-dict or unknown keys (never silently dropped).

    Raises:
        TypeError: if `data` is not a dict.
        ValueError: if it has keys outside `known`.
    """
    if not isinstance(data, dict):
        raise TypeError(f"{owner}.from_dict expects a dict, got {type(data).__name__}.")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"Unknown {owner} field(s) {unknown}; expected a subset of {sorted(known)}.")
    return dict(data)
