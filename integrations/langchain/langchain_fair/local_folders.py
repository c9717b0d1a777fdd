"""Where a `FaissVectorStore` is saved and what its store.json holds; `save_local` and `load_local`.

Saving, loading and their checks are `fair_retrieval.stores`' (`save_store`, `load_store`); this module names the
files, writes and reads a document entry, and refuses a folder of langchain-community's FAISS store (its documents
are in a pickle) with the way to convert it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from langchain_core.embeddings import Embeddings
from typing_extensions import Self

from fair_retrieval.stores import DocumentStore, StoreFormat, load_store, save_store, store_bytes, store_from_bytes

logger = logging.getLogger(__name__)

DEFAULT_INDEX_NAME = "index"  # langchain-community's default; this name keeps the original layout


class StoredDocument(NamedTuple):
    """A stored document (a tuple, lighter than a LangChain `Document`: one is built per result)."""

    key: str  # the LangChain id
    text: str
    metadata: dict[str, Any]


def _decode(entry: Mapping[str, Any]) -> tuple[int, StoredDocument]:
    return int(entry["int_id"]), StoredDocument(entry["id"], entry["text"], entry["metadata"])


STORE_FORMAT: StoreFormat[StoredDocument] = StoreFormat(
    name="langchain-fair-faiss-store",
    version=1,
    store="FaissVectorStore",
    writer="FaissVectorStore.save_local()",
    upgrade="langchain-fair",
    records_key="documents",
    encode=lambda int_id, doc: {"id": doc.key, "int_id": int_id, "text": doc.text, "metadata": doc.metadata},
    decode=_decode,
    names_index_folder=False,  # "has_index": the folder's place follows from index_name
    replaced_move_to_end=True,  # LangChain: an upserted document moves to the end
)


class LocalFolders:
    """`save_local` and `load_local`: `FaissVectorStore`'s base class."""

    _store: DocumentStore[StoredDocument]
    _relevance_score_fn: Callable[[float], float] | None

    def save_local(
        self, folder_path: str | os.PathLike[str], index_name: str = DEFAULT_INDEX_NAME, *, overwrite: bool = False
    ) -> Path:
        """Write the store to `folder_path` (created if needed; returned), no pickle: `index/` and `store.json`, in
        one commit. Another `index_name` than "index" writes `<name>/` and `<name>.store.json` (as langchain-community
        does), so several stores share a folder. A store built in memory (the constructor, `from_texts`) is not saved
        over a store the folder already holds unless `overwrite=True`.

        Raises:
            StoreConflictError: (a ValueError) another writer saved there after this store was loaded (load it
                again, redo the change, save again), or the folder holds a store this one was not loaded from and
                `overwrite` is False; nothing is written.
            ValueError: an empty `index_name` or one with a path separator.
        """
        folder = Path(folder_path)
        index_folder, store_file = saved_paths(folder, index_name)
        folder.mkdir(parents=True, exist_ok=True)
        save_store(self._store, STORE_FORMAT, store_file, index_folder, overwrite=overwrite)
        logger.info("Saved %d documents to %s (index_name=%r)", len(self._store), folder, index_name)
        return folder

    @classmethod
    def load_local(
        cls,
        folder_path: str | os.PathLike[str],
        embeddings: Embeddings,
        index_name: str = DEFAULT_INDEX_NAME,
        *,
        allow_dangerous_deserialization: bool = False,
        gpu: Literal["auto"] | bool = "auto",
        relevance_score_fn: Callable[[float], float] | None = None,
        allow_embedder_mismatch: bool = False,
        multivector: bool | None = None,
    ) -> Self:
        """Load a store written by `save_local`. Only JSON and faiss' own format are read: no code can run.

        Args:
            folder_path: the folder, and index_name the name, given to `save_local`.
            embeddings: the embeddings for new documents and queries; their identity must be the recorded one.
            allow_dangerous_deserialization: accepted for langchain-community's signature, and ignored: nothing
                is ever unpickled here.
            gpu: as in the constructor; relevance_score_fn too.
            allow_embedder_mismatch: load even when `embeddings` differ (a WARNING lists the differences).
            multivector: None loads the saved mode; True or False requires it.

        Raises:
            FileNotFoundError: no store file (or index); for a langchain-community folder (`index.faiss` +
                `index.pkl`), the message says how to convert it (see the LangChain guide).
            DamagedFileError: (a ValueError) a truncated or corrupted file; the message names it.
            ValueError: malformed or disagreeing files, a malformed `index_name`, another mode than `multivector`,
                or other embeddings than the recorded ones (unless `allow_embedder_mismatch=True`).
            TypeError: `embeddings` is not a LangChain `Embeddings`, or gives no windows for a multi-vector store.
        """
        folder = Path(folder_path)
        index_folder, store_file = saved_paths(folder, index_name)
        if allow_dangerous_deserialization:
            logger.debug("allow_dangerous_deserialization=True changes nothing: FaissVectorStore never unpickles.")
        community = [path for path in (folder / f"{index_name}.faiss", folder / f"{index_name}.pkl") if path.is_file()]
        if community and not store_file.is_file():
            raise FileNotFoundError(
                f"{folder} holds {' and '.join(path.name for path in community)}, written by langchain-community's "
                f"FAISS.save_local, and no {store_file.name}. FaissVectorStore never unpickles (the documents are in "
                "the .pkl): convert the folder once with langchain-community and FaissVectorStore.from_embeddings, "
                "as the LangChain guide shows (docs/guides/langchain.md)."
            )
        if not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}.")
        loaded = load_store(
            STORE_FORMAT,
            store_file,
            index_folder,
            gpu=gpu,
            embedder=embeddings,
            allow_embedder_mismatch=allow_embedder_mismatch,
            multivector=multivector,
            missing=f"{store_file} does not exist; it is written by FaissVectorStore.save_local().",
        )
        store = cls.__new__(cls)
        store._store, store._relevance_score_fn = loaded, relevance_score_fn
        return store

    def serialize_to_bytes(self) -> bytes:
        """The store as bytes, without pickle: its `save_local` folder packed in memory with a SHA-256
        (`fair_retrieval.stores.store_bytes`); `deserialize_from_bytes` reads it back."""
        return store_bytes(self._store, STORE_FORMAT, "store.json", DEFAULT_INDEX_NAME)

    @classmethod
    def deserialize_from_bytes(cls, serialized: bytes, embeddings: Embeddings, **kwargs: Any) -> Self:
        """The store `serialize_to_bytes` wrote; `kwargs` are `load_local`'s (`allow_dangerous_deserialization` is
        accepted and ignored: nothing is unpickled). The result is a store built in memory (see `save_local`).

        Raises:
            TypeError: `serialized` is not bytes; as `load_local`.
            ValueError: bytes of another kind, or cut short or changed (their digest disagrees); as `load_local`.
        """
        return store_from_bytes(serialized, lambda folder: cls.load_local(folder, embeddings, **kwargs), cls.__name__)


def saved_paths(folder: Path, index_name: str) -> tuple[Path, Path]:
    """(index folder, store file) of a store saved under `index_name` in `folder` (ValueError: not a plain name)."""
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
