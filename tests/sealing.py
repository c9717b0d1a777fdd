"""Test helper: give a folder written before records carried checksums (the first format version's fixtures) the
commit record that a save writes today, so tests can check that its content, once verified, still loads.

Loading such a folder as it is, is refused (its index.json has no "publication" entry): nothing is read unchecked.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

from fair_retrieval.jsonio.snapshot import record_crc32


def entry(path: Path) -> dict[str, int]:
    """The size and CRC-32 a record keeps for `path`."""
    raw = path.read_bytes()
    return {"bytes": len(raw), "crc32": zlib.crc32(raw)}


def seal(record: Path, names: list[str], value: dict | None = None) -> None:
    """Write (or complete) the record `record` so that it commits `names` (relative to its folder), as a save
    would: the files' sizes and CRC-32s, a token and the record's own CRC-32."""
    if value is None:
        value = json.loads(record.read_text()) if record.exists() else {}
    record.parent.mkdir(parents=True, exist_ok=True)
    value["publication"] = {"token": "0" * 32, "files": {name: entry(record.parent / name) for name in names}}
    value["publication"]["record_crc32"] = record_crc32(value)
    record.write_text(json.dumps(value))


def sealed_store_copy(source: Path, target: Path) -> Path:
    """A copy of a LangChain store folder of the first format version (store.json, index/), with a record that
    commits its files as today's save does (for a store without vectors, a record of the store file alone)."""
    shutil.copytree(source, target)
    names = ["../store.json"]
    if (target / "index" / "index.faiss").exists():
        names.append("index.faiss")
        seal(target / "index" / "index.json", names)
    else:
        seal(target / "index" / "index.json", names, {"format": "fair-retrieval-faiss-index", "version": 2, "count": 0})
    return target
