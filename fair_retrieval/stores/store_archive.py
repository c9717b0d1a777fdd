"""A saved store as bytes (`serialize_to_bytes` / `deserialize_from_bytes`), without pickle.

The bytes are the store's own saved folder (its JSON store file and its index folder, as `save_store` writes
them) packed as an uncompressed tar archive in memory, after a header and the archive's SHA-256. Reading checks the
header and the digest before anything is unpacked, unpacks only plain files and folders inside a fresh temporary
folder, and then loads the store with the ordinary checked load (`load_store`: format, version, identity, index). So
bytes cut short, changed on the way, or of another kind are refused with a ValueError, and no code in them can run.

A store read from bytes is a store built in memory: saving it over a store already in a folder needs `overwrite`.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.store_format import StoreFormat, save_store

__all__ = ["STORE_BYTES_HEADER", "store_bytes", "store_from_bytes"]

STORE_BYTES_HEADER = b"fair-retrieval store bytes 1\n"
"""The first bytes of every serialized store (the format's name and version)."""
_DIGEST = hashlib.sha256().digest_size

S = TypeVar("S")


def store_bytes(store: DocumentStore[Any], fmt: StoreFormat[Any], store_name: str, index_name: str) -> bytes:
    """The store saved as bytes: the header, the SHA-256 of the archive, the archive of its saved folder.

    Args:
        store: the store.
        fmt: its adapter's format.
        store_name: the store file's name in the folder (e.g. "store.json").
        index_name: the index folder's name beside it.
    """
    with tempfile.TemporaryDirectory(prefix="fair-store-") as temporary:
        folder = Path(temporary)
        generation = store.generation
        store.generation = None  # a save to the scratch folder is no save of the store's own file
        try:
            save_store(store, fmt, folder / store_name, folder / index_name, overwrite=True)
        finally:
            store.generation = generation
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for path in sorted(folder.rglob("*")):
                if path.name.startswith("."):  # the folder's lock and staging files
                    continue
                archive.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    body = buffer.getvalue()
    return STORE_BYTES_HEADER + hashlib.sha256(body).digest() + body


def store_from_bytes(data: Any, load: Callable[[Path], S], store: str) -> S:
    """The store in `data` (written by `store_bytes`), loaded by `load` from the unpacked folder.

    Args:
        data: the bytes.
        load: loads the store from the folder (the adapter's checked load, with its embeddings); its result
            is returned, and its `DocumentStore` (`_store`) forgets the scratch folder's file.
        store: the store class's name, for messages.

    Raises:
        TypeError: `data` is not bytes.
        ValueError: bytes of another kind, cut short or changed (the digest disagrees), or an archive entry that
            is not a plain file or folder inside it; and the load's own errors.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(
            f"{store}.deserialize_from_bytes takes bytes from serialize_to_bytes(), got {type(data).__name__}."
        )
    raw = bytes(data)
    if not raw.startswith(STORE_BYTES_HEADER):
        raise ValueError(
            f"These bytes were not written by {store}.serialize_to_bytes() (they do not start with its header); "
            "langchain-community's FAISS bytes are a pickle, which this store never reads: rebuild the store."
        )
    digest = raw[len(STORE_BYTES_HEADER) : len(STORE_BYTES_HEADER) + _DIGEST]
    body = raw[len(STORE_BYTES_HEADER) + _DIGEST :]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError(
            f"The serialized {store} is damaged: its SHA-256 does not match (cut short or changed on the way). "
            "Serialize the store again."
        )
    with tempfile.TemporaryDirectory(prefix="fair-store-") as temporary:
        folder = Path(temporary)
        _unpack(body, folder, store)
        loaded = load(folder)
    inner = getattr(loaded, "_store", loaded)
    if isinstance(inner, DocumentStore):
        inner.generation = None  # from bytes: a store built in memory
    return loaded


def _unpack(body: bytes, folder: Path, store: str) -> None:
    """Unpack plain files and folders with relative names inside `folder`; refuse anything else."""
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as archive:
        for member in archive.getmembers():
            name = PurePosixPath(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise ValueError(
                    f"The serialized {store} holds {member.name!r}, which is not a plain file of a saved store; it "
                    "was not written by serialize_to_bytes(). Serialize the store again."
                )
            target = folder.joinpath(*name.parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            if source is None:
                raise ValueError(f"The serialized {store} lacks the contents of {member.name!r}; serialize it again.")
            target.write_bytes(source.read())
