"""Where a `FairFaissVectorStore` persists and what its JSON file holds; `persist` and the loaders.

`StorageContext.persist(dir)` writes `dir/default__vector_store.json` and the index folder beside it
(`default__vector_store.index/`), or, into a store folder (`store.json` beside `index/`), that folder's store;
saving, loading and their checks are `fair_retrieval.stores.DocumentStore`'s
(`save`, `load`). Folders of the earlier store (a raw faiss file where the JSON file now stands, the nodes in
docstore.json) are converted by `from_legacy_persist_dir` (`DocumentStore.legacy_entries`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from llama_index.core import Settings
from llama_index.core.storage.docstore.utils import json_to_doc
from llama_index.core.vector_stores.simple import DEFAULT_VECTOR_STORE, NAMESPACE_SEP
from llama_index.core.vector_stores.types import DEFAULT_PERSIST_DIR, DEFAULT_PERSIST_FNAME
from llama_index.vector_stores.fair.node_records import StoredNode, document_node, node_document, node_text
from typing_extensions import Self

from fair_retrieval.index import Aggregate, GpuChoice
from fair_retrieval.stores import DocumentStore, StoreFormat, WrappedStore

logger = logging.getLogger(__name__)
_STORE_LOGGER = logging.getLogger("llama_index.vector_stores.fair.faiss_vector_store")  # the store's own messages

__all__ = ["DEFAULT_PERSIST_PATH", "PersistFiles", "settings_embed_model"]

DEFAULT_PERSIST_PATH = os.path.join(
    DEFAULT_PERSIST_DIR, f"{DEFAULT_VECTOR_STORE}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
)


def _decode(entry: Mapping[str, Any]) -> tuple[int, StoredNode]:
    return int(entry["int_id"]), StoredNode(str(entry["node_id"]), str(entry["doc_id"]), entry["node"])


def legacy_message(path: Path) -> str:
    """The error for a raw faiss file where the JSON file should be: how to convert the folder."""
    folder = str(path.parent)
    return (
        f"{path} is a raw faiss index, written by the earlier FairFaissVectorStore (a subclass of llama-index's "
        "FaissVectorStore) or by FaissVectorStore itself; its nodes are in docstore.json next to it. Convert the "
        f"folder once: store = FairFaissVectorStore.from_legacy_persist_dir({folder!r}); "
        "index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model); "
        f"index.storage_context.persist({folder!r}). Or rebuild the index from your documents."
    )


NOT_A_SIMPLE_VECTOR_STORE = (
    "This file was persisted by FairFaissVectorStore, not SimpleVectorStore: StorageContext.from_defaults("
    "persist_dir=...) without vector_store= reads it as a SimpleVectorStore. Load it with store = "
    "FairFaissVectorStore.from_persist_dir(persist_dir, embed_model=embed_model), then StorageContext.from_defaults("
    "vector_store=store, persist_dir=persist_dir)"
)
"""Under "embedding_dict", where SimpleVectorStore looks for vectors: it fails to read this text as a vector
and raises a ValueError quoting it, where it would otherwise load an empty store without a word."""

STORE_FORMAT: StoreFormat[StoredNode] = StoreFormat(
    name="llama-index-fair-faiss-store",
    version=1,
    store="FairFaissVectorStore",
    writer="FairFaissVectorStore.persist()",
    upgrade="llama-index-vector-stores-fair",
    records_key="nodes",
    noun="nodes",
    encode=lambda int_id, node: {"int_id": int_id, "node_id": node.key, "doc_id": node.doc_id, "node": node.node},
    decode=_decode,
    names_index_folder=True,
    replaced_move_to_end=False,  # a replaced node keeps its place
    group_of=lambda node: node.doc_id,  # delete(ref_doc_id) removes a document's nodes
    text_of=node_text,  # what the lexical side reads
    unrecorded_without_model=(
        "persisted by a store that was never told its embed model: pass embed_model= to create() or the "
        "constructor, or call record_embed_model(), before persisting"
    ),
    raw_faiss_message=legacy_message,
    other_readers={"embedding_dict": {"FairFaissVectorStore": [NOT_A_SIMPLE_VECTOR_STORE]}},
)


class PersistFiles(WrappedStore):
    """`persist`, `from_persist_path`, `from_persist_dir` and `from_legacy_persist_dir`: the store's base class (a
    loaded store is held as `WrappedStore.around` holds it, the constructor's one path)."""

    _store: DocumentStore[StoredNode]

    def persist(
        self, persist_path: str = DEFAULT_PERSIST_PATH, fs: Any | None = None, *, overwrite: bool = False
    ) -> None:
        """Write the JSON file at `persist_path` and the index folder beside it (`<name>.index/`) in one commit,
        no pickle; it records `store_identity`. Into a store folder (one holding `store.json` and no file at
        `persist_path`: what `fair-retrieval index` and LangChain's `save_local` write, opened by `from_persist_dir`)
        the store is written as that folder's store instead, so one folder keeps one store that every surface reads
        alike (the nodes as texts with their metadata). A store built in memory is not persisted over a store that
        is there unless `overwrite=True` (`StorageContext.persist` passes none: delete the old folder first, or load
        it).

        Raises:
            NotImplementedError: a non-local `fs` (faiss writes local files only).
            StoreConflictError: (a ValueError) another writer persisted there since this store was loaded or
                persisted there, or a
                store is there that this one was neither loaded from nor persisted to (and `overwrite` is False).
        """
        _require_local(fs)
        path = Path(persist_path)
        folder = DocumentStore.text_folder_of(path)
        if folder is not None:
            self._store.save_text_folder(folder, STORE_FORMAT, document_node, node_document, overwrite=overwrite)
            logger.info("Persisted %d nodes to the store folder %s (store.json)", len(self._store), folder)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self._store.save(STORE_FORMAT, path, _index_folder(path), overwrite=overwrite)
        logger.info("Persisted %d nodes to %s", len(self._store), path)

    @classmethod
    def from_persist_path(
        cls,
        persist_path: str = DEFAULT_PERSIST_PATH,
        fs: Any | None = None,
        gpu: GpuChoice = "auto",
        *,
        embed_model: Any | None = None,
        allow_embedder_mismatch: bool = False,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
    ) -> Self:
        """Load a store written by `persist` (on a CPU or a GPU machine).

        Args:
            persist_path: the JSON file `persist` wrote.
            fs: None or a local fsspec filesystem.
            gpu: as in the constructor.
            embed_model: the embed model you query with: checked against the recorded one, recorded next time.
                None: LlamaIndex's `Settings.embed_model` when one that gives windows (a `FairEmbedding`) is set,
                as the constructor and `create()` take it; else none (nothing is checked, and a multi-vector store
                can take no new text).
            allow_embedder_mismatch: load even when `embed_model` differs (a WARNING lists the differences).
            multivector: None takes the persisted mode; True or False requires it.
            aggregate: None takes the persisted aggregate; a name requires it.

        Raises:
            FileNotFoundError: no store at `persist_path`, or its index folder is missing.
            ValueError: a folder of the earlier store (see `from_legacy_persist_dir`), malformed files, another
                embed model (unless `allow_embedder_mismatch=True`), mode or aggregate.
            TypeError: a multi-vector store with an `embed_model` that gives no window vectors.
            NotImplementedError: a non-local `fs`.
        """
        _require_local(fs)
        if embed_model is None:
            embed_model = settings_embed_model(say_pooled=False)  # what the first insert embeds with, as create()'s
        path = Path(persist_path)
        missing = (
            f"No FairFaissVectorStore at {path}. Persist one first (index.storage_context.persist(persist_dir) or "
            "store.persist(path)), and pass that folder to from_persist_dir."
        )
        loaded = DocumentStore.load(
            STORE_FORMAT, path, _index_folder(path), gpu=gpu, embedder=embed_model, missing=missing,
            allow_embedder_mismatch=allow_embedder_mismatch, multivector=multivector, aggregate=aggregate,
        )  # fmt: skip
        return cls.around(loaded, stores_text=True)

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        fs: Any | None = None,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        **options: Any,
    ) -> Self:
        """Load the store `StorageContext.persist(persist_dir)` wrote under `namespace` ("default"); `options` and
        the errors are those of `from_persist_path` (`embed_model`, `allow_embedder_mismatch`, `multivector`,
        `aggregate`).

        A store folder of texts (`store.json` and `index/`, written by `fair-retrieval index` or LangChain's
        `FaissVectorStore.save_local`) with no persisted store of this namespace is opened too: its documents become
        `TextNode`s of the same ids, texts and metadata (`node_records.document_node`), over the same vectors;
        persisting the store into that folder writes that folder's store (`persist`).
        """
        _require_local(fs)
        path = os.path.join(persist_dir, f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}")
        if not os.path.exists(path) and os.path.isfile(os.path.join(persist_dir, "store.json")):
            return cls._from_text_folder(Path(persist_dir), gpu, **options)
        return cls.from_persist_path(path, gpu=gpu, **options)

    @classmethod
    def _from_text_folder(
        cls,
        folder: Path,
        gpu: GpuChoice,
        *,
        embed_model: Any | None = None,
        allow_embedder_mismatch: bool = False,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
    ) -> Self:
        """The store of texts saved in `folder`, its documents as nodes (see `from_persist_dir`)."""
        if embed_model is None:
            embed_model = settings_embed_model(say_pooled=False)
        loaded = DocumentStore.load_text_folder(
            folder, STORE_FORMAT, document_node, gpu=gpu, embedder=embed_model,
            allow_embedder_mismatch=allow_embedder_mismatch, multivector=multivector, aggregate=aggregate,
        )  # fmt: skip
        store: Any = cls(multivector=False, gpu=False)  # type: ignore[call-arg]  # the store's constructor
        store._store = loaded
        logger.info("Opened the store of texts in %s: %d documents as nodes", folder, len(loaded))
        return store  # type: ignore[no-any-return]

    @classmethod
    def from_legacy_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        *,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        kind: str | None = None,
        **index_params: int,
    ) -> Self:
        """A store holding the nodes and vectors of a folder persisted by the earlier FairFaissVectorStore (or
        llama-index's FaissVectorStore); the folder is not changed. Build a new index over the store and persist
        that (see the LlamaIndex guide).

        Raises:
            FileNotFoundError: the folder lacks the faiss file, docstore.json or index_store.json.
            ValueError: the faiss file's vectors cannot be read back, or the files do not fit together.
        """
        raw_path = Path(persist_dir) / f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
        entries, metric = DocumentStore.legacy_entries(raw_path, "FairFaissVectorStore")
        nodes = [json_to_doc(data) for data, _ in entries]
        for node, (_, vector) in zip(nodes, entries, strict=True):
            node.embedding = vector.tolist()
        params: dict[str, Any] = index_params  # the index checks them
        store: Any = cls(None, metric=metric, kind=kind, gpu=gpu, multivector=False, **params)  # type: ignore[call-arg]
        store.add(nodes)
        store._store.converts(raw_path)  # persisting over it converts it
        logger.info("Converted %d nodes from the legacy folder %s.", len(nodes), persist_dir)
        return store  # type: ignore[no-any-return]


def settings_embed_model(*, say_pooled: bool, store: str = "FairFaissVectorStore") -> Any | None:
    """The embed model set on LlamaIndex's `Settings` when it gives windows (a `FairEmbedding`), what a store built
    or loaded without `embed_model=` takes, as if it were passed; else None, and with `say_pooled` one INFO line on
    why the store (`store`: its class's name) is pooled. Only a model that was set is read: `Settings.embed_model`
    itself would resolve LlamaIndex's default (OpenAI's) when none was."""
    model = getattr(Settings, "_embed_model", None)
    if model is not None and DocumentStore.gives_windows(model):
        return model
    if say_pooled:
        why = "no embed_model was given and none is set" if model is None else f"{type(model).__name__}, set"
        _STORE_LOGGER.info(
            "%s: %s in Settings.embed_model%s, so this store keeps one pooled vector per node "
            "(multivector=False). Pass embed_model=FairEmbedding(...) (or set Settings.embed_model to one) for a "
            "multi-vector store.",
            store,
            why,
            "" if model is None else ", gives no window vectors",
        )
    return None


def _require_local(fs: Any | None) -> None:
    if fs is not None and not isinstance(fs, LocalFileSystem):
        raise NotImplementedError(
            f"FairFaissVectorStore persists to local folders only (faiss writes local files), got {type(fs).__name__}."
        )


def _index_folder(path: Path) -> Path:
    """The index folder of the store file `path`: default__vector_store.json → default__vector_store.index."""
    return path.with_name(path.stem + ".index")
