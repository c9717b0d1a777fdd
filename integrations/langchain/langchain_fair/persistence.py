"""Saving and loading a `FaissVectorStore`: its folder layout, its store.json, `save_local` and `load_local`.

A saved store is a folder with `index/` (FaissIndex.save) and `store.json` (documents, metadata and the id map); a
store saved under another `index_name` uses `<name>/` and `<name>.store.json`, so several stores can share a
folder. Saving both together and reading them back consistently is `fair_retrieval.stores.files`' job; this module
says where the files are and what store.json holds (format "langchain-fair-faiss-store", version 1), checks the
recorded embeddings (`fair_retrieval.embedding.identity`), and refuses a folder written by langchain-community's FAISS
store (its documents are in a pickle) with the way to convert it.

A multi-vector store (`multivector=True`) records its mode and aggregate in store.json (the optional keys
"multivector" and "aggregate", `fair_retrieval.stores.modes`; a file without them is a pooled store, as every file
of earlier releases is, so the format stays version 1) and in the identity it records ("embedder": the embeddings'
identity with the two fields added, so a release that checks identities refuses it as another configuration). Its
`index/` is a `MultiVectorIndex` folder, which `FaissIndex.load` refuses, as `MultiVectorIndex.load` refuses a
pooled one: a pooled store is never read as a multi-vector one, nor the other way round.

`LocalFolderPersistence` is FaissVectorStore's base class that gives it `save_local` and `load_local`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from langchain_core.embeddings import Embeddings
from typing_extensions import Self

from fair_retrieval.stores import (
    AGGREGATE_KEY,
    MULTIVECTOR_KEY,
    DamagedFileError,
    DocumentMode,
    IndexedRecords,
    StoreGeneration,
    check_identity,
    embedder_identity,
    json_bytes,
    load_store_file,
    parse_versioned_json,
    save_store_file,
    store_generation,
)

logger = logging.getLogger(__name__)

STORE_FILE = "store.json"
INDEX_FOLDER = "index"
DEFAULT_INDEX_NAME = "index"  # langchain-community's default; this name keeps the original layout
STORE_SUFFIX = ".store.json"  # the store file of another index_name: <name>.store.json next to <name>/
COMMUNITY_SUFFIXES = (".faiss", ".pkl")  # what langchain-community's FAISS.save_local writes
FORMAT_NAME = "langchain-fair-faiss-store"
FORMAT_VERSION = 1
REBUILD = "Rebuild the store (from_texts / from_embeddings) and save it again, or restore the folder from a backup."
MISMATCH_OVERRIDE = "allow_embedder_mismatch=True"
MISMATCH_REMEDY = (
    "Load it with the embeddings it was built with (same model and options), or rebuild it with these (from_texts)."
)


class StoredDocument(NamedTuple):
    """A stored document (a tuple, lighter than a LangChain `Document`: one is built per result)."""

    key: str  # the LangChain id
    text: str
    metadata: dict[str, Any]


class LocalFolderPersistence:
    """`save_local` and `load_local` of `FaissVectorStore`, its base class (the store module keeps to the rest).

    The store class provides its records, its embeddings, its document mode, `_settings()` and `_empty(...)`.
    """

    _records: IndexedRecords[StoredDocument]
    _embedding: Embeddings
    _mode: DocumentMode
    _generation: StoreGeneration | None = None  # the store.json it was loaded from or last saved to

    def _settings(self) -> dict[str, Any]:
        """The store's "metric", "kind", "index_params" and document mode ("multivector", "aggregate"), as
        store.json records them."""
        raise NotImplementedError

    @classmethod
    def _empty(cls, embedding: Embeddings, settings: Mapping[str, Any], mode: DocumentMode, **options: Any) -> Self:
        """An empty store of the `_settings()` store.json records and of `mode`, with the constructor's other
        `options`."""
        raise NotImplementedError

    def save_local(
        self, folder_path: str | os.PathLike[str], index_name: str = DEFAULT_INDEX_NAME, *, overwrite: bool = False
    ) -> Path:
        """Write the store to `folder_path` (created if needed), no pickle: `index/` and `store.json`.

        The two change together: store.json is written under a temporary name and published in the commit of the
        index folder (`FaissIndex.save(companions=...)`), so a save killed at any point (even by SIGKILL) leaves
        the previous store or this one, and `load_local` running meanwhile reads one of them. Saves into one
        folder run one after the other. store.json records the identity of the store's embeddings (as they are
        now), which `load_local` checks, and the store's mode (multi-vector and its aggregate, or pooled).

        Concurrent writers: a store loaded with `load_local` (or loaded, then saved) remembers the store.json it
        read or wrote; when another process saved into the folder since, the save is refused with
        `StoreConflictError` and nothing is written: load the store again, redo the change and save again. A
        store built in memory (the constructor, `from_texts`) is not saved over a store the folder already holds
        (`StoreConflictError` too) unless `overwrite=True`.

        Args:
            folder_path: the folder.
            index_name: as in langchain-community's FAISS store, a name that lets several stores share a folder:
                a store saved under another name than "index" is written to `<name>/` and `<name>.store.json`.
                Load it with the same name.
            overwrite: replace a store saved there that this store was not loaded from.

        Returns:
            The folder path.

        Raises:
            StoreConflictError: (a ValueError) another writer saved into the folder after this store was loaded,
                or the folder holds a store this one was not loaded from (and `overwrite` is False).
            ValueError: if `index_name` is empty or holds a path separator.
        """
        folder = Path(folder_path)
        index_folder, store_file = saved_paths(folder, index_name)
        folder.mkdir(parents=True, exist_ok=True)
        data = store_json(
            self._settings(),
            next_int_id=self._records.next_int_id,
            has_index=self._records.index is not None,
            embedder=self._mode.identity(embedder_identity(self._embedding)),
            documents=self._records.records,
        )
        generation = save_store_file(
            store_file, data, self._records.index, index_folder, base=self._generation, overwrite=overwrite
        )
        if self._generation is not None:  # a loaded store keeps track of the folder it is saved to
            self._generation = generation
        logger.info("Saved %d documents to %s (index_name=%r)", len(self._records), folder, index_name)
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

        The index folder's index.json is read first and names the store.json of the same save, so a load that
        runs while the folder is being saved again returns the store before or after that save.

        store.json records the identity of the embeddings the store was saved with (`fair_retrieval.embedding.identity`:
        model, pooling, window, long-document policy, calibration, LPES and prompts of a FairEmbeddings; class and
        model name of other embeddings). `embeddings` with another identity are refused, because new documents
        and queries would then be embedded into another vector space than the stored vectors. A store saved by
        an earlier release records none: it loads with an INFO line saying it cannot be checked.

        Args:
            folder_path: the folder given to `save_local`.
            embeddings: the embeddings to embed new documents and queries with; use the same model (and
                calibration) as when the store was built, or the stored and new vectors will not be comparable.
            index_name: the name given to `save_local` ("index" by default, as in langchain-community).
            allow_dangerous_deserialization: accepted so that code written for langchain-community's FAISS store
                runs unchanged, and ignored: nothing is ever unpickled here, so loading is safe either way.
            gpu: as in the constructor.
            relevance_score_fn: as in the constructor.
            allow_embedder_mismatch: load even when `embeddings` differ from those the store was saved with (a
                WARNING lists the differences); for embeddings known to make the same vectors, e.g. the same model
                under another name. The next `save_local` records the embeddings given here.
            multivector: None (the default) loads the store in the mode it was saved in (a multi-vector store with
                its aggregate; a store saved before multi-vector stores existed is pooled). True or False asserts
                the mode: a folder that holds the other one is refused with a ValueError saying what it holds.

        A folder written by langchain-community's `FAISS.save_local` (`index.faiss` + `index.pkl`) is refused:
        its documents are in a pickle. Convert it once, where you trust the folder, with langchain-community::

            old = FAISS.load_local(folder, embeddings, allow_dangerous_deserialization=True)
            ids = [old.index_to_docstore_id[position] for position in range(old.index.ntotal)]
            documents = [old.docstore.search(id_) for id_ in ids]
            vectors = old.index.reconstruct_n(0, old.index.ntotal)  # row i is the vector at position i
            store = FaissVectorStore.from_embeddings(
                zip([d.page_content for d in documents], vectors), embeddings,
                metadatas=[d.metadata for d in documents], ids=ids,
                metric="l2",  # community's default; "ip" for MAX_INNER_PRODUCT, "cosine" if it had normalize_L2
            )
            store.save_local(new_folder)

        Raises:
            FileNotFoundError: if the folder lacks the store file (or its index); for a langchain-community folder,
                the message says how to convert it.
            DamagedFileError: (a ValueError) if store.json or a file of the index is truncated or corrupted; the
                message names the file.
            ValueError: if the files are malformed or disagree with each other, or `index_name` is malformed; if
                `multivector` is not the saved mode; or if `embeddings` are not those the store was saved with (the
                message lists the differing fields), unless `allow_embedder_mismatch=True`.
            TypeError: `embeddings` is not a LangChain `Embeddings`, or a multi-vector store is loaded with
                embeddings that give no window vectors.
        """
        folder = Path(folder_path)
        index_folder, store_file = saved_paths(folder, index_name)
        if allow_dangerous_deserialization:
            logger.debug("allow_dangerous_deserialization=True changes nothing: FaissVectorStore never unpickles.")
        refuse_community_folder(folder, index_name, store_file)
        return load_store_file(
            store_file,
            index_folder,
            lambda raw: cls._restore(
                raw, store_file, embeddings, index_folder, gpu, relevance_score_fn, allow_embedder_mismatch, multivector
            ),
            missing=f"{store_file} does not exist; it is written by FaissVectorStore.save_local().",
        )

    @classmethod
    def _restore(
        cls,
        raw: bytes,
        store_file: Path,
        embeddings: Embeddings,
        index_folder: Path,
        gpu: Literal["auto"] | bool,
        relevance_score_fn: Callable[[float], float] | None,
        allow_embedder_mismatch: bool = False,
        multivector: bool | None = None,
    ) -> Self:
        """The store saved in `raw` (the bytes of `store_file`) with the index in `index_folder`, checked."""
        state = read_state(store_file, raw)
        mode = DocumentMode.saved(state, store_file, REBUILD)
        mode.check_requested(multivector, store_file.parent)
        if not isinstance(embeddings, Embeddings):  # checked before its identity is taken (the constructor's error)
            raise TypeError(f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}.")
        check_identity(
            state.get("embedder"),
            mode.identity(embedder_identity(embeddings)),
            source=str(store_file),
            allow_mismatch=allow_embedder_mismatch,
            override=MISMATCH_OVERRIDE,
            remedy=MISMATCH_REMEDY,
        )
        store = cls._empty(embeddings, state, mode, gpu=gpu, relevance_score_fn=relevance_score_fn)
        index = mode.load_index(index_folder, gpu) if state.get("has_index") else None
        documents, next_int_id = saved_documents(state, store_file)
        store._records.restore(index, documents, next_int_id)
        held = store._records.index_mismatch()
        if held is not None:
            raise mismatch_error(store_file, len(state["documents"]), held)
        store._generation = store_generation(store_file, raw)
        return store


def saved_paths(folder: Path, index_name: str) -> tuple[Path, Path]:
    """(index folder, store file) of a store saved under `index_name` in `folder`.

    Raises:
        ValueError: `index_name` is empty, "." / "..", or holds a path separator.
    """
    if (
        not isinstance(index_name, str)
        or not index_name
        or index_name in (".", "..")
        or any(separator in index_name for separator in ("/", "\\", os.sep))
    ):
        raise ValueError(
            f"index_name must be a plain file name such as 'index' or 'products' (no path separators), got "
            f"{index_name!r}; put the folder in folder_path."
        )
    if index_name == DEFAULT_INDEX_NAME:
        return folder / INDEX_FOLDER, folder / STORE_FILE
    return folder / index_name, folder / f"{index_name}{STORE_SUFFIX}"


def refuse_community_folder(folder: Path, index_name: str, store_file: Path) -> None:
    """Refuse a folder written by langchain-community's FAISS.save_local (and holding no store file of ours).

    Raises:
        FileNotFoundError: saying how to convert it once with `FaissVectorStore.from_embeddings`.
    """
    community = [folder / f"{index_name}{suffix}" for suffix in COMMUNITY_SUFFIXES]
    if not store_file.is_file() and any(path.is_file() for path in community):
        raise FileNotFoundError(
            f"{folder} holds {' and '.join(path.name for path in community if path.is_file())}, written by "
            "langchain-community's FAISS.save_local, and no "
            f"{store_file.name}. FaissVectorStore never unpickles (the documents are in the .pkl): convert the "
            "folder once with langchain-community and FaissVectorStore.from_embeddings, as "
            "FaissVectorStore.load_local's docstring shows."
        )


def store_json(
    settings: Mapping[str, Any],
    *,
    next_int_id: int,
    has_index: bool,
    embedder: Mapping[str, Any],
    documents: Mapping[int, StoredDocument],
) -> bytes:
    """The bytes of store.json.

    Args:
        settings: the store's "metric", "kind", "index_params" and (optional keys) "multivector", "aggregate".
        next_int_id: the int id the next new document takes.
        has_index: whether an index folder is saved with it.
        embedder: the identity of the store's embeddings (`fair_retrieval.embedding.identity.embedder_identity`).
        documents: the stored documents by int id, in insertion order.
    """
    state = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "metric": settings["metric"],
        "kind": settings["kind"],
        "index_params": settings["index_params"],
        **{key: settings[key] for key in (MULTIVECTOR_KEY, AGGREGATE_KEY) if key in settings},
        "next_int_id": next_int_id,
        "has_index": has_index,
        "embedder": embedder,
        "documents": [
            {"id": id_, "int_id": int_id, "text": text, "metadata": metadata}
            for int_id, (id_, text, metadata) in documents.items()
        ],
    }
    return json_bytes(state, indent=None)


def read_state(store_file: Path, raw: bytes) -> dict[str, Any]:
    """store.json's content (`raw`, the bytes of `store_file`), its format, version and keys checked.

    Raises:
        DamagedFileError: (a ValueError) the bytes are not JSON.
        ValueError: another format, a newer version, or missing keys; the message says what to do.
    """
    return parse_versioned_json(
        store_file,
        raw,
        format_name=FORMAT_NAME,
        max_version=FORMAT_VERSION,
        required=("metric", "kind", "next_int_id", "documents"),
        writer="FaissVectorStore.save_local()",
        upgrade="langchain-fair",
        remedy=REBUILD,
    )


def saved_documents(state: Mapping[str, Any], store_file: Path) -> tuple[list[tuple[int, StoredDocument]], int]:
    """The (int id, document) entries of store.json and its next int id.

    Raises:
        DamagedFileError: a document entry or the counter is malformed.
    """
    try:
        entries: Iterable[Any] = state["documents"]
        documents = [
            (int(entry["int_id"]), StoredDocument(entry["id"], entry["text"], entry["metadata"])) for entry in entries
        ]
        for _, document in documents:
            hash(document.key)  # the id map's key: an unhashable id is damage too (TypeError)
        return documents, int(state["next_int_id"])
    except (KeyError, TypeError, ValueError) as error:
        raise DamagedFileError(store_file, f"a document entry is malformed ({error!r})", REBUILD) from None


def mismatch_error(store_file: Path, listed: int, held: int) -> ValueError:
    """The error for a store.json whose documents are not the vectors of the index saved with it."""
    return ValueError(
        f"{store_file.parent}: {store_file.name} lists {listed} documents but the index holds {held} vectors under "
        "other ids; the folder was modified or written partially. Rebuild the store."
    )
