"""An on-disk cache of embeddings, so evaluation and tuning never embed the same texts twice.

A tuning run embeds the corpus once plainly and once per configuration; a re-run (after an interruption, or with
a wider search) loads every embedding it has already computed. Entries are keyed by everything that changes the
vectors: the model, its pooling and length limit, the texts, and the calibration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


class EmbeddingCache:
    """Embeddings stored as `<key>.npy` (+ a `<key>.json` that says what they are) under `folder`.

    Args:
        folder: cache directory (created on first write).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(description: dict[str, Any]) -> str:
        """A stable hash of a JSON-compatible description of the embeddings."""
        text = json.dumps(description, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]

    def load(self, description: dict[str, Any]) -> np.ndarray | None:
        """The cached array for `description`, or None when absent or unreadable."""
        path = self.folder / f"{self.key(description)}.npy"
        if not path.is_file():
            return None
        try:
            array = np.load(path)
        except (OSError, ValueError) as error:
            logger.warning("Ignoring unreadable cache entry %s (%s); it will be recomputed.", path, error)
            return None
        logger.debug("Loaded cached embeddings %s", path.name)
        return array

    def save(self, description: dict[str, Any], array: np.ndarray) -> None:
        """Store `array` for `description` (atomically: a crash never leaves a half-written entry)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        key = self.key(description)
        tmp = self.folder / f".{key}.{os.getpid()}.tmp.npy"
        np.save(tmp, array)
        os.replace(tmp, self.folder / f"{key}.npy")
        (self.folder / f"{key}.json").write_text(
            json.dumps(description, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n",
            encoding="utf-8",
        )

    def __contains__(self, description: dict[str, Any]) -> bool:
        return (self.folder / f"{self.key(description)}.npy").is_file()
