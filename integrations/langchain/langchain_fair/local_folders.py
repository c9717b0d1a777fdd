"""Where a `FaissVectorStore` is saved and what its store.json holds; `save_local` and `load_local`.

Saving, loading, the folder layout and the document entries are `fair_retrieval.stores.DocumentStore`'s
(`save_named`, `load_named`, `text_format`, `to_bytes`, `from_bytes`); this module gives them LangChain's signatures.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from typing_extensions import Self

from fair_retrieval.stores import DEFAULT_INDEX_NAME, DocumentStore, TextDocument, WrappedStore

logger = logging.getLogger(__name__)

STORE_FORMAT = DocumentStore.text_format("FaissVectorStore", "FaissVectorStore.save_local()", "langchain-fair")


class LocalFolders(WrappedStore):
    """`save_local` and `load_local`: `FaissVectorStore`'s base class."""

    _store: DocumentStore[TextDocument]
    _relevance_score_fn: Callable[[float], float] | None

    def save_local(
        self, folder_path: str | os.PathLike[str], index_name: str = DEFAULT_INDEX_NAME, *, overwrite: bool = False
    ) -> Path:
        """Write the store to `folder_path` (created if needed; returned), no pickle: `index/` and `store.json`, in
        one commit. Another `index_name` than "index" writes `<name>/` and `<name>.store.json` (as langchain-community
        does), so several stores share a folder. A store built in memory (the constructor, `from_texts`) is not saved
        over a store the folder already holds unless `overwrite=True`.

        Raises:
            StoreConflictError: (a ValueError) another writer saved there after this store was loaded or saved
                there (load it again, redo the change, save again), or the folder holds a store this one was
                neither loaded from nor saved to and `overwrite` is False; nothing is written.
            ValueError: an empty `index_name` or one with a path separator.
        """
        folder = Path(folder_path)
        self._store.save_named(STORE_FORMAT, folder, index_name, overwrite=overwrite)
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
        retrieval_mode: Any = None,
        alpha: float | None = None,
        fusion: str | None = None,
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
            retrieval_mode: how the loaded store answers text queries, as the constructor's ("dense", "hybrid",
                "sparse"); None: as it was saved. `alpha` and `fusion` too.

        Raises:
            FileNotFoundError, DamagedFileError, ValueError, TypeError: as `DocumentStore.load_named` (a
                langchain-community folder: a FileNotFoundError saying how to convert it); ValueError for a
                malformed `index_name` or search setting; TypeError for `embeddings` that are not a LangChain
                `Embeddings`.
        """
        if allow_dangerous_deserialization:
            logger.debug("allow_dangerous_deserialization=True changes nothing: FaissVectorStore never unpickles.")
        if not isinstance(embeddings, Embeddings):
            raise TypeError(f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}.")
        loaded = DocumentStore.load_named(
            STORE_FORMAT,
            Path(folder_path),
            index_name,
            "FaissVectorStore.save_local()",
            gpu=gpu,
            embedder=embeddings,
            allow_embedder_mismatch=allow_embedder_mismatch,
            multivector=multivector,
            search={"mode": retrieval_mode, "alpha": alpha, "fusion": fusion},
        )
        store = cls.around(loaded)  # the constructor's one path to its DocumentStore (`WrappedStore`)
        store._relevance_score_fn = relevance_score_fn
        return store

    def serialize_to_bytes(self) -> bytes:
        """The store as bytes, without pickle: its `save_local` folder packed in memory with a SHA-256
        (`fair_retrieval.stores.DocumentStore.to_bytes`); `deserialize_from_bytes` reads it back."""
        return self._store.to_bytes(STORE_FORMAT, DEFAULT_INDEX_NAME)

    @classmethod
    def deserialize_from_bytes(cls, serialized: bytes, embeddings: Embeddings, **kwargs: Any) -> Self:
        """The store `serialize_to_bytes` wrote; `kwargs` are `load_local`'s (`allow_dangerous_deserialization` is
        accepted and ignored: nothing is unpickled). The result is a store built in memory (see `save_local`).

        Raises:
            TypeError: `serialized` is not bytes; as `load_local`.
            ValueError: bytes of another kind, or cut short or changed (their digest disagrees); as `load_local`.
        """
        load = lambda folder: cls.load_local(folder, embeddings, **kwargs)  # noqa: E731 - the unpacked folder's load
        return DocumentStore.from_bytes(serialized, load, cls.__name__)
