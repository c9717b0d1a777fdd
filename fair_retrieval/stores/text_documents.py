"""Documents kept as (id, text, metadata), the records of a store whose framework has no node type of its own (the
LangChain store), and the folder layout of such a store: where a store saved under a name lives in a folder.

A `TextDocument` is a tuple, lighter than a framework's document object (one is built per search result), with its
file entry (`text_document_format`: the JSON each saved document becomes). `named_store_paths` is the layout of
langchain-community's FAISS store kept for ours (several stores share a folder under different names), and
`pickled_folder_error` the refusal of a folder that store wrote (its documents are in a pickle, which is never read
here). The format (`TEXT_STORE_FORMAT_NAME`) is also the store folder's that `fair-retrieval index` writes
(`fair_retrieval.stores.store_folder`); `text_records_format` reads such a file as another adapter's records (the
LlamaIndex store opens it as nodes).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from fair_retrieval.stores.arguments import checked_entries
from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.store_format import StoreFormat

__all__ = [
    "DEFAULT_INDEX_NAME",
    "TEXT_STORE_FORMAT_NAME",
    "TextDocument",
    "checked_documents",
    "document_text",
    "named_store_paths",
    "pickled_folder_error",
    "text_document_format",
    "text_entry_format",
    "text_records_format",
]

R = TypeVar("R", bound=Keyed)

DEFAULT_INDEX_NAME = "index"  # langchain-community's default name; under it the folder keeps the original layout
TEXT_STORE_FORMAT_NAME = "langchain-fair-faiss-store"
"""The format name of a store of `TextDocument`s saved as a store file beside its index folder: first written by
LangChain's `FaissVectorStore.save_local()` (the name is kept, files of earlier releases carry it), also by
`fair-retrieval index`; both stores open such a folder."""


class TextDocument(NamedTuple):
    """A stored document: its framework id, its text and its JSON metadata."""

    key: str
    text: str
    metadata: dict[str, Any]


def document_text(document: TextDocument) -> str:
    """The text of a stored document: what its store's lexical side searches."""
    return document.text


def checked_documents(texts: list[str], metadatas: Any, ids: Any) -> list[TextDocument]:
    """The documents of an add: each text with its metadata (checked, copied as JSON) and id (a new UUID where
    none is given), every entry checked before any is stored (`fair_retrieval.stores.arguments.checked_entries`)."""
    return [TextDocument(*entry) for entry in checked_entries(texts, metadatas, ids)]


def _entry(int_id: int, document: TextDocument) -> dict[str, Any]:
    return {"id": document.key, "int_id": int_id, "text": document.text, "metadata": document.metadata}


def _decode(entry: Mapping[str, Any]) -> tuple[int, TextDocument]:
    return int(entry["int_id"]), TextDocument(entry["id"], entry["text"], entry["metadata"])


def text_document_format(store: str, writer: str, upgrade: str) -> StoreFormat[TextDocument]:
    """The store file format of a store of `TextDocument`s, whoever writes it (named `TEXT_STORE_FORMAT_NAME`):
    version 1, the documents under "documents" (their id, int id, text and metadata), a "has_index" flag (the index
    folder's place follows from the store's name), and an upserted document moved to the end (as LangChain orders
    them).

    Args:
        store: the store class's name, for messages.
        writer: what writes the file, for messages.
        upgrade: the distribution to upgrade when the file is newer.
    """
    return StoreFormat(
        name=TEXT_STORE_FORMAT_NAME,
        version=1,
        store=store,
        writer=writer,
        upgrade=upgrade,
        records_key="documents",
        encode=_entry,
        decode=_decode,
        names_index_folder=False,
        replaced_move_to_end=True,
        text_of=document_text,
    )


def text_records_format(
    fmt: StoreFormat[R],
    record: Callable[[TextDocument], R],
    text_format: StoreFormat[TextDocument],
    document: Callable[[R], TextDocument] | None = None,
) -> StoreFormat[R]:
    """`text_format` (a store file of `TextDocument`s) read as a store of another adapter's records: each document
    becomes `record(document)`, and the store keeps `fmt`'s rules (its name in messages, groups, the lexical text,
    where an upsert goes). With `document`, the format also writes such a file, each record as `document(record)`
    (what a save into a store folder needs: the folder keeps one store, in the format every surface reads).

    Args:
        fmt: the adapter's own format.
        record: a stored document → the adapter's record (same id, text and metadata).
        text_format: the text-document format of the file (`text_document_format`).
        document: the adapter's record → a stored document (same id, text and metadata); None: `fmt`'s encoding.
    """

    def decode(entry: Mapping[str, Any]) -> tuple[int, R]:
        int_id, stored = text_format.decode(entry)
        return int_id, record(stored)

    def encode(int_id: int, kept: R) -> dict[str, Any]:
        assert document is not None
        return text_format.encode(int_id, document(kept))

    return _named_as(text_format, fmt, fmt.encode if document is None else encode, decode)


def _named_as(
    text_format: StoreFormat[TextDocument],
    fmt: StoreFormat[R],
    encode: Callable[[int, R], dict[str, Any]],
    decode: Callable[[Mapping[str, Any]], tuple[int, R]],
) -> StoreFormat[R]:
    """`fmt`'s rules with `text_format`'s name, version and layout, its records written by `encode` and read by
    `decode`: a file (or collection) every surface reads as texts."""
    return dataclasses.replace(
        fmt,
        name=text_format.name,
        version=text_format.version,
        records_key=text_format.records_key,
        encode=encode,
        decode=decode,
        names_index_folder=text_format.names_index_folder,
        raw_faiss_message=None,
        other_readers={},
    )


TextEntry = tuple[str, str, dict[str, Any], dict[str, Any]]
"""A record as a text-document entry: its id, text, metadata, and the fields an adapter keeps beside them."""
TEXT_FIELDS = ("id", "int_id", "text", "metadata")


def text_entry_format(
    fmt: StoreFormat[R], write: Callable[[R], TextEntry], read: Callable[[str, str, dict[str, Any], dict[str, Any]], R]
) -> StoreFormat[R]:
    """`fmt` writing and reading the text-document entry (`text_document_format`'s: what LangChain's store and the
    command line write, so every surface reads it) with an adapter's own fields beside it: `write` gives a
    record's (id, text, metadata, own fields), `read` makes a record of them (the own fields empty in an entry
    another surface wrote). Named as the text-document format, so a store recording it is read by each surface."""
    text_format = text_document_format(fmt.store, fmt.writer, fmt.upgrade)

    def encode(int_id: int, record: R) -> dict[str, Any]:
        key, text, metadata, own = write(record)
        return {**own, **text_format.encode(int_id, TextDocument(key, text, metadata))}

    def decode(entry: Mapping[str, Any]) -> tuple[int, R]:
        int_id, document = text_format.decode(entry)
        own = {name: value for name, value in entry.items() if name not in TEXT_FIELDS}
        return int_id, read(document.key, document.text, document.metadata, own)

    return _named_as(text_format, fmt, encode, decode)


def named_store_paths(folder: Path, index_name: str) -> tuple[Path, Path]:
    """(index folder, store file) of a store saved under `index_name` in `folder`: `index/` and `store.json` for the
    default name, else `<name>/` and `<name>.store.json`.

    Raises:
        ValueError: `index_name` is empty, "." or "..", or holds a path separator.
    """
    if (
        not isinstance(index_name, str)
        or index_name in ("", ".", "..")
        or any(separator in index_name for separator in ("/", "\\", os.sep))
    ):
        raise ValueError(
            f"index_name must be a plain file name such as 'index' or 'products' (no path separators), got "
            f"{index_name!r}; put the folder in folder_path."
        )
    if index_name == DEFAULT_INDEX_NAME:
        return folder / "index", folder / "store.json"
    return folder / index_name, folder / f"{index_name}.store.json"


def pickled_folder_error(folder: Path, index_name: str, store_file: Path, store: str) -> FileNotFoundError | None:
    """The error for a folder where langchain-community's FAISS store saved under `index_name` (`.faiss` and
    `.pkl`) and no `store_file` is: its documents are in a pickle, which is never read; None for another folder."""
    found = [path for path in (folder / f"{index_name}.faiss", folder / f"{index_name}.pkl") if path.is_file()]
    if not found or store_file.is_file():
        return None
    return FileNotFoundError(
        f"{folder} holds {' and '.join(path.name for path in found)}, written by langchain-community's "
        f"FAISS.save_local, and no {store_file.name}. {store} never unpickles (the documents are in the .pkl): "
        f"convert the folder once with langchain-community and {store}.from_embeddings, as the LangChain guide "
        "shows (docs/guides/langchain.md)."
    )
