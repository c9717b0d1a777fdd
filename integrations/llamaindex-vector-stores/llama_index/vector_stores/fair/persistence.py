"""Persisting a `FairFaissVectorStore`: the JSON store file, the index folder next to it, and loading both back.

Persisting writes two things, neither pickled, so loading cannot execute code: at `persist_path` (by default
`./storage/default__vector_store.json`) a JSON file with the id map and the nodes (format
"llama-index-fair-faiss-store", version 1), and next to it a FaissIndex folder (`default__vector_store.index/`:
faiss' own binary format plus JSON). Writing them together and reading them back consistently is
`fair_retrieval.stores.files`' job; this module says where the files are and what the JSON file holds, and checks
the recorded embed model (`fair_retrieval.embedding.identity`) and the document mode: a multi-vector store records
"multivector": true and its "aggregate" (also in the identity it records, `fair_retrieval.stores.modes`) and keeps
a `MultiVectorIndex` folder; a pooled store's file is as earlier releases wrote it (no mode recorded means pooled,
so folders persisted before multi-vector stores existed load unchanged), and neither is ever read as the other.
`StorePersistence` is the store's base class that gives it `persist`, `from_persist_path` and `from_persist_dir`.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem
from llama_index.core.vector_stores.simple import DEFAULT_VECTOR_STORE, NAMESPACE_SEP
from llama_index.core.vector_stores.types import DEFAULT_PERSIST_DIR, DEFAULT_PERSIST_FNAME
from llama_index.vector_stores.fair.legacy import legacy_message, legacy_nodes
from llama_index.vector_stores.fair.nodes import StoredNode
from typing_extensions import Self

from fair_retrieval.index import Aggregate, GpuChoice
from fair_retrieval.stores import (
    AGGREGATE_KEY,
    DocumentMode,
    IndexedRecords,
    StoreGeneration,
    check_identity,
    embedder_identity,
    json_bytes,
    load_store_file,
    looks_like_raw_faiss,
    parse_versioned_json,
    save_store_file,
    store_generation,
    window_embedder,
)

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_PERSIST_PATH", "StorePersistence"]

DEFAULT_PERSIST_PATH = os.path.join(
    DEFAULT_PERSIST_DIR, f"{DEFAULT_VECTOR_STORE}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
)
INDEX_SUFFIX = ".index"  # the FaissIndex folder next to the store file: default__vector_store.index/
FORMAT_NAME = "llama-index-fair-faiss-store"
FORMAT_VERSION = 1
UNRECORDED_EARLIER = "saved by an earlier release"
UNRECORDED_WITHOUT_MODEL = (
    "persisted by a store that was never told its embed model: pass embed_model= to create() or the constructor, "
    "or call record_embed_model(), before persisting"
)
MISMATCH_OVERRIDE = "allow_embedder_mismatch=True"
MISMATCH_REMEDY = (
    "Load it with the embed model it was built with (same model and options), or rebuild the index with this one."
)


class StorePersistence:
    """`persist`, `from_persist_path` and `from_persist_dir` of `FairFaissVectorStore`, its base class.

    The store class provides its records and settings, the embed model it was told about, and `_persisted(...)`.
    """

    _records: IndexedRecords[StoredNode]
    _metric: str
    _kind: str
    _index_params: dict[str, int]
    _embed_model: Any
    _recorded_identity: dict[str, Any] | None
    _mode: DocumentMode
    _unrecorded: str  # why a persisted store records no identity (set on load)

    @property
    def embedder_identity(self) -> dict[str, Any] | None:
        """The identity `persist` records for the vectors (`fair_retrieval.embedding.identity.embedder_identity`): that
        of the embed model the store was told about, else the one read from the persisted store, else None (unknown)."""
        if self._embed_model is not None:
            return embedder_identity(self._embed_model)
        return copy.deepcopy(self._recorded_identity)

    @property
    def store_identity(self) -> dict[str, Any] | None:
        """The identity `persist` records ("embedder" in the JSON file) and loading checks: `embedder_identity`,
        with the fields "multivector" and "aggregate" of a multi-vector store (`DocumentMode.identity`; a pooled
        store's is the embedder's alone, as earlier releases recorded it). None when the embed model is unknown."""
        identity = self.embedder_identity
        return None if identity is None else self._mode.identity(identity)

    @classmethod
    def _persisted(
        cls,
        metric: str,
        kind: str,
        gpu: GpuChoice,
        index_params: Mapping[str, int],
        mode: DocumentMode,
    ) -> Self:
        """An empty store of the settings a persisted store records (the store's constructor checks them)."""
        raise NotImplementedError

    def persist(
        self, persist_path: str = DEFAULT_PERSIST_PATH, fs: Any | None = None, *, overwrite: bool = False
    ) -> None:
        """Write the store: a JSON file at `persist_path` and the FaissIndex folder next to it (`<name>.index/`).

        `StorageContext.persist(persist_dir)` calls this with `persist_dir/default__vector_store.json`. A GPU
        index is written as a CPU copy (FaissIndex.save); nothing is pickled. The two change together: the JSON
        file is written under a temporary name and published in the commit of the index folder
        (`FaissIndex.save(companions=...)`), so a persist killed at any point (even by SIGKILL) leaves the previous
        store or this one. The JSON file records `store_identity` (null when the store was never told its embed
        model) and, for a multi-vector store, the keys "multivector" and "aggregate" (its folder is a
        `MultiVectorIndex.save` one; a pooled store's file is as earlier releases wrote it).

        Concurrent writers: persists into one folder run one after the other. A store loaded with
        `from_persist_path` / `from_persist_dir` (or loaded, then persisted) remembers the JSON file it read or
        wrote; when another process persisted there since, `persist` raises `StoreConflictError` and writes
        nothing: load the store again, redo the change and persist again. A store built in memory is not
        persisted over a store that is there (`StoreConflictError` too) unless `overwrite=True`.

        Args:
            persist_path: the JSON file to write (its folder is created if needed).
            fs: None or a local fsspec filesystem; faiss writes local files only.
            overwrite: replace a store persisted there that this store was not loaded from.

        Raises:
            NotImplementedError: a non-local `fs`.
            StoreConflictError: (a ValueError) another writer persisted there after this store was loaded, or a
                store is there that this one was not loaded from (and `overwrite` is False).
            ValueError: node metadata that stopped being JSON (e.g. NaN put in after adding).
        """
        _require_local(fs)
        path = Path(persist_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = _index_folder(path)
        state = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "metric": self._metric,
            "kind": self._kind,
            "index_params": self._index_params,
            "index_folder": folder.name if self._records.index is not None else None,
            "next_int_id": self._records.next_int_id,
            "embedder": self.store_identity,
            **self._mode.settings(),
            "nodes": [
                {"int_id": int_id, "node_id": record.key, "doc_id": record.doc_id, "node": record.node}
                for int_id, record in self._records.records.items()
            ],
        }
        base: StoreGeneration | None = getattr(self, "_generation", None)  # set by from_persist_path
        data = json_bytes(state, indent=None)
        generation = save_store_file(path, data, self._records.index, folder, base=base, overwrite=overwrite)
        if base is not None:  # a loaded store keeps track of the file it is persisted to
            self._generation = generation
        logger.info("Persisted %d nodes to %s (vectors in %s)", len(self._records), path, folder.name)

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
        """Load a store written by `persist` (on a CPU or a GPU machine); `gpu` as in the constructor.

        The index folder's index.json is read first and names the JSON file of the same persist, so a load running
        while the store is persisted again returns the store before or after that persist.

        Args:
            persist_path: the JSON file `persist` wrote.
            fs: None or a local fsspec filesystem.
            gpu: as in the constructor.
            embed_model: the embed model you will query (and add nodes) with; when given, it is checked against the
                identity the store recorded and becomes the one the next `persist` records. None checks nothing
                and keeps the recorded identity.
            allow_embedder_mismatch: load even when `embed_model` differs from the recorded one (a WARNING lists
                the differences).
            multivector: None takes the mode the store was persisted in; True or False requires that mode.
            aggregate: None takes the recorded aggregate; a name requires a multi-vector store built with it.

        Raises:
            FileNotFoundError: no store at `persist_path`, or its index folder is missing.
            ValueError: a folder written by the earlier FairFaissVectorStore / llama-index's FaissVectorStore (a
                raw faiss file; the message says how to convert it with `from_legacy_persist_dir`), files that
                are malformed or disagree with each other, or an `embed_model` other than the one the store was
                persisted with (the message lists the differing fields), unless `allow_embedder_mismatch=True`,
                or a `multivector` / `aggregate` other than the store's.
            TypeError: a multi-vector store with an `embed_model` that gives no window vectors.
            NotImplementedError: a non-local `fs`.
        """
        _require_local(fs)
        path = Path(persist_path)
        store = load_store_file(
            path,
            _index_folder(path),
            lambda raw: cls._restore(path, raw, gpu, multivector, aggregate),
            missing=(
                f"No FairFaissVectorStore at {path}. Persist one first (index.storage_context.persist(persist_dir) "
                "or store.persist(path)), and pass that folder to from_persist_dir."
            ),
        )
        if embed_model is not None:
            if store._mode.multivector:  # before the identity: such a model cannot fill this store at all
                window_embedder(embed_model, "A multi-vector FairFaissVectorStore")
            check_identity(
                store._recorded_identity,
                store._mode.identity(embedder_identity(embed_model)),
                source=str(path),
                allow_mismatch=allow_embedder_mismatch,
                override=MISMATCH_OVERRIDE,
                remedy=MISMATCH_REMEDY,
                unrecorded=getattr(store, "_unrecorded", UNRECORDED_EARLIER),
            )
            store._embed_model = embed_model
        elif store._recorded_identity is not None:
            logger.info("%s records its embed model; pass embed_model= to from_persist_dir to check it.", path)
        logger.info("Loaded %d nodes from %s", len(store._records), path)
        return store

    @classmethod
    def _restore(
        cls,
        path: Path,
        raw: bytes,
        gpu: GpuChoice,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
    ) -> Self:
        """The store persisted in `raw` (the bytes of `path`) with its index folder, checked (and its mode against
        `multivector` / `aggregate` where given)."""
        if looks_like_raw_faiss(raw[:4]):  # a folder of the earlier store: say how to convert it
            raise ValueError(legacy_message(path))
        state = parse_versioned_json(
            path,
            raw,
            format_name=FORMAT_NAME,
            max_version=FORMAT_VERSION,
            required=("metric", "kind", "next_int_id", "nodes"),
            writer="FairFaissVectorStore.persist()",
            upgrade="llama-index-vector-stores-fair",
        )
        mode = DocumentMode.saved(state, path, "Persist the store again, or rebuild it.")
        mode.check_requested(multivector, path)
        _check_aggregate(path, mode, aggregate)
        store = cls._persisted(state["metric"], state["kind"], gpu, state.get("index_params", {}), mode)
        identity = state.get("embedder")
        if identity is not None and not isinstance(identity, dict):
            raise ValueError(f"{path} records a malformed embedder {identity!r}; persist the store again.")
        store._recorded_identity = identity
        store._unrecorded = UNRECORDED_WITHOUT_MODEL if "embedder" in state else UNRECORDED_EARLIER
        index, folder_name = None, state.get("index_folder")
        if folder_name is not None:
            if not isinstance(folder_name, str) or Path(folder_name).name != folder_name or folder_name in ("", ".."):
                raise ValueError(f"{path} names a malformed index folder {folder_name!r}; rebuild the store.")
            folder = path.parent / folder_name
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"{path} keeps its vectors in {folder}, which is missing: copy the whole persist folder."
                )
            index = mode.load_index(folder, gpu)  # each kind of index refuses the other's folder
        entries = [
            (int(entry["int_id"]), StoredNode(str(entry["node_id"]), str(entry["doc_id"]), entry["node"]))
            for entry in state["nodes"]
        ]
        store._records.restore(index, entries, int(state["next_int_id"]))
        held = store._records.index_mismatch()
        if held is not None:
            raise ValueError(
                f"{path} lists {len(state['nodes'])} nodes but its index folder holds {held} vectors under "
                "other ids: the folder was modified or written partially. Persist the store again, or rebuild it."
            )
        store._generation = store_generation(path, raw)
        return store

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        fs: Any | None = None,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        *,
        embed_model: Any | None = None,
        allow_embedder_mismatch: bool = False,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
    ) -> Self:
        """Load the store `StorageContext.persist(persist_dir)` wrote (`persist_dir/default__vector_store.json`).

        Args:
            persist_dir: the folder given to `StorageContext.persist`.
            fs: None or a local fsspec filesystem.
            gpu: as in the constructor.
            namespace: the vector store's name in the storage context ("default" unless you named it).
            embed_model: as in `from_persist_path`: checked against the recorded embed model when given.
            allow_embedder_mismatch: as in `from_persist_path`.
            multivector: as in `from_persist_path`: None takes the persisted mode, True / False requires it.
            aggregate: as in `from_persist_path`.

        Raises:
            FileNotFoundError: no store in `persist_dir` under `namespace`, or its index folder is missing.
            ValueError: as `from_persist_path` (an earlier store's folder, malformed files, another embed model, or
                another mode or aggregate than the store's).
            TypeError: a multi-vector store with an `embed_model` that gives no window vectors.
            NotImplementedError: a non-local `fs`.
        """
        _require_local(fs)
        persist_path = os.path.join(persist_dir, f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}")
        return cls.from_persist_path(
            persist_path,
            gpu=gpu,
            embed_model=embed_model,
            allow_embedder_mismatch=allow_embedder_mismatch,
            multivector=multivector,
            aggregate=aggregate,
        )

    @classmethod
    def from_legacy_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        *,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        kind: str = "flat",
        **index_params: int,
    ) -> Self:
        """Convert a folder persisted with the earlier FairFaissVectorStore (or llama-index's FaissVectorStore).

        Such a folder holds a raw faiss index at `default__vector_store.json` (vectors by position) and the nodes
        in `docstore.json`, tied together by the positions in `index_store.json`. The result is a store holding
        those nodes with their vectors; it does not change the folder. Its old index_store restricts retrievers to
        the old node ids, so build a new index over the store and persist that::

            store = FairFaissVectorStore.from_legacy_persist_dir("storage")
            index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
            index.storage_context.persist("storage")  # now in this store's format

        Args:
            persist_dir: the old folder.
            gpu: as in the constructor.
            namespace: the vector store's name in the storage context ("default" unless you named it).
            kind: the FaissIndex kind of the new store ("flat" unless you want another).
            **index_params: its kind parameters.

        Raises:
            FileNotFoundError: the folder lacks the faiss file, docstore.json or index_store.json.
            ValueError: the faiss file's vectors cannot be read back, or the files do not fit together (e.g. a
                folder written by FaissMapVectorStore); then rebuild the index from your documents.
        """
        folder = Path(persist_dir)
        nodes, metric = legacy_nodes(folder, namespace)
        params: dict[str, Any] = index_params  # the FaissIndex checks them
        store: Any = cls(None, metric=metric, kind=kind, gpu=gpu, **params)  # type: ignore[call-arg]  # the store's constructor
        store.add(nodes)
        legacy = folder / f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"  # persisting over it is the conversion
        store._generation = store_generation(legacy, legacy.read_bytes())
        logger.info("Converted %d nodes from the legacy folder %s.", len(nodes), folder)
        return store  # type: ignore[no-any-return]


def _require_local(fs: Any | None) -> None:
    if fs is not None and not isinstance(fs, LocalFileSystem):
        raise NotImplementedError(
            f"FairFaissVectorStore persists to local folders only (faiss writes local files), got {type(fs).__name__}."
        )


def _index_folder(path: Path) -> Path:
    """The FaissIndex folder of the store file `path`: default__vector_store.json → default__vector_store.index."""
    return path.with_name(path.stem + INDEX_SUFFIX)


def _check_aggregate(path: Path, mode: DocumentMode, aggregate: Aggregate | None) -> None:
    """Refuse an aggregate asked for on load (None: the saved one) that is not the saved store's."""
    if aggregate is None or (mode.multivector and aggregate == mode.aggregate):
        return
    if not mode.multivector:
        raise ValueError(
            f"{path} holds a store of {mode}, which has no {AGGREGATE_KEY} ({AGGREGATE_KEY}={aggregate!r} was asked "
            "for): leave aggregate out, or rebuild the index into a multi-vector store."
        )
    raise ValueError(
        f"{path} was built with {AGGREGATE_KEY}={mode.aggregate!r}, not {aggregate!r}: leave aggregate out to load "
        f"it, or rebuild the index with {AGGREGATE_KEY}={aggregate!r}."
    )
