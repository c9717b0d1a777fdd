"""A saved store as bytes (`serialize_to_bytes` / `deserialize_from_bytes`), without pickle.

The bytes are the store's own saved folder (its JSON store file and its index folder, as `save_store` writes
them) packed as an uncompressed tar archive in memory, after a header and the archive's SHA-256. Reading checks the
header and the digest before anything is unpacked, unpacks only plain files and folders inside a fresh temporary
folder, and then loads the store with the ordinary checked load (`load_store`: format, version, identity, index). So
bytes cut short, changed on the way, or of another kind are refused with a ValueError, and no code in them can run.

The digest only detects damage: bytes crafted with a digest computed again are unpacked under these bounds, each
breach a ValueError naming the member and its cause before anything is allocated for it:

- every member is a folder or a regular file (tar types "0" or NUL), never sparse (no GNU sparse type, no sparse
  map, no PAX ``GNU.sparse.*`` header), a link, a device or a FIFO;
- its name is a plain relative path (no empty, ``.`` or ``..`` part, not absolute, no backslash or NUL), new
  among the members, and not under a file member (``store.json/x``);
- a file holds the bytes its header declares, read `CHUNK_BYTES` at a time, and all files together declare no more
  than the archive's own length (an uncompressed archive cannot hold more), so the unpacked folder is never larger
  than the bytes given.

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

from fair_retrieval.stores.store_core import StoreCore
from fair_retrieval.stores.store_format import StoreFormat, save_store

__all__ = ["STORE_BYTES_HEADER", "store_bytes", "store_from_bytes"]

STORE_BYTES_HEADER = b"fair-retrieval store bytes 1\n"
"""The first bytes of every serialized store (the format's name and version)."""
_DIGEST = hashlib.sha256().digest_size
CHUNK_BYTES = 1 << 20
"""How much of an archive member is read at a time while it is unpacked."""
_REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE)  # the tar types of a regular file

S = TypeVar("S")


def store_bytes(store: StoreCore[Any], fmt: StoreFormat[Any], store_name: str, index_name: str) -> bytes:
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
        ValueError: bytes of another kind, cut short or changed (the digest disagrees), an archive that cannot be
            read, a member outside the bounds of the module docstring, an archive without the files of a saved
            store; and the load's own errors.
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
        try:
            loaded = load(folder)
        except FileNotFoundError as error:  # the scratch folder lacks a file: the archive lacked it
            raise ValueError(
                f"The serialized {store} lacks a file of a saved store ({error}); it was cut short before it was "
                "packed or not written by serialize_to_bytes(). Serialize the store again."
            ) from None
    inner = getattr(loaded, "_store", loaded)
    if isinstance(inner, StoreCore):
        inner.generation = None  # from bytes: a store built in memory
    return loaded


def _unpack(body: bytes, folder: Path, store: str) -> None:
    """Unpack the archive `body` inside `folder`: regular files and folders with plain relative names only, each
    file of its declared size, read in chunks, all of them together no bigger than `body` itself.

    Raises:
        ValueError: naming the member and what is wrong with it, or the archive when it cannot be read.
    """
    budget = len(body)  # an uncompressed archive holds its members' bytes: they cannot add up to more
    files: set[PurePosixPath] = set()
    folders: set[PurePosixPath] = set()
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as archive:
            for member in archive:
                name = _member_name(member, files, folders, store)
                if member.isdir():
                    folders.add(name)
                    _make_folder(folder, name, member, store)
                    continue
                problem = _file_problem(member, budget, len(body))
                if problem is not None:
                    raise _member_error(store, member, problem)
                budget -= member.size
                files.add(name)
                folders.update(name.parents)
                _write_member(archive, member, folder.joinpath(*name.parts), store)
    except (tarfile.TarError, EOFError) as error:
        raise ValueError(
            f"The serialized {store} is not an archive of a saved store ({error}); it was not written by "
            "serialize_to_bytes(). Serialize the store again."
        ) from None
    except ValueError as error:
        if isinstance(error, _MemberError):
            raise
        raise ValueError(  # the archive's own headers are malformed (a sparse map, a number field, an encoding)
            f"The serialized {store} holds a malformed archive header ({error}); it was not written by "
            "serialize_to_bytes(). Serialize the store again."
        ) from None


class _MemberError(ValueError):
    """A member of a serialized store refused by `_unpack` (its message names it)."""


def _member_error(store: str, member: tarfile.TarInfo, problem: str) -> _MemberError:
    return _MemberError(
        f"The serialized {store} holds the member {member.name!r}, which {problem}; it was not written by "
        "serialize_to_bytes(). Serialize the store again."
    )


def _member_name(
    member: tarfile.TarInfo, files: set[PurePosixPath], folders: set[PurePosixPath], store: str
) -> PurePosixPath:
    """The member's name as a relative path inside the folder, new among the members and under no file member."""
    raw = member.name
    parts = raw.split("/")
    if raw.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\\" in raw or "\0" in raw:
        raise _member_error(store, member, "is not a plain relative name (empty, absolute, '.', '..', '\\' or NUL)")
    name = PurePosixPath(*parts)
    nested = next((parent for parent in name.parents if parent in files), None)
    if nested is not None:
        raise _member_error(store, member, f"lies under {str(nested)!r}, a file of the archive, not a folder")
    if name in files or (name in folders and not member.isdir()):
        raise _member_error(store, member, "comes twice in the archive")
    return name


def _file_problem(member: tarfile.TarInfo, budget: int, length: int) -> str | None:
    """Why a member is not a regular, whole file that fits in what the archive holds (`budget` bytes beyond the
    other members, `length` in all); None when it is one."""
    sparse_headers = sorted(key for key in member.pax_headers if key.startswith("GNU.sparse"))
    if member.type == tarfile.GNUTYPE_SPARSE or member.sparse is not None or sparse_headers:
        headers = f" (PAX headers {', '.join(sparse_headers)})" if sparse_headers else ""
        return f"is a sparse file{headers}, not a regular one"
    if member.type not in _REGULAR:
        return f"is of tar type {member.type!r}, not a regular file or folder (a link, a device, a FIFO, …)"
    if member.size < 0 or member.size > budget:
        return f"declares {member.size} bytes, more than the archive holds beyond its other members ({budget} bytes)"
    if member.offset_data + member.size > length:
        return (
            f"is cut short: its header declares {member.size} bytes, the archive ends "
            f"{max(0, length - member.offset_data)} bytes into them"
        )
    return None


def _make_folder(folder: Path, name: PurePosixPath, member: tarfile.TarInfo, store: str) -> None:
    try:
        folder.joinpath(*name.parts).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _member_error(store, member, f"cannot be made a folder ({error.strerror or error})") from None


def _write_member(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path, store: str) -> None:
    """Copy a regular member to `target` in bounded chunks, checking that it holds its declared size."""
    source = archive.extractfile(member)
    if source is None:
        raise _member_error(store, member, "has no contents")
    written = 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with source, open(target, "xb") as out:
            while written < member.size:
                chunk = source.read(min(CHUNK_BYTES, member.size - written))
                if not chunk:
                    break
                out.write(chunk)
                written += len(chunk)
    except tarfile.ReadError:
        pass  # its data is cut short: `written` says how much there was
    except OSError as error:
        raise _member_error(store, member, f"cannot be written ({error.strerror or error})") from None
    if written != member.size:
        raise _member_error(store, member, f"holds {written} bytes, not the {member.size} its header declares")
