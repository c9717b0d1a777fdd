"""A store folder: a store of texts saved as both vector stores save and open it, what `fair-retrieval index`
writes and `fair-retrieval search` reads.

A store folder holds `store.json` (the text-document store file, `TEXT_STORE_FORMAT_NAME`: each document's id,
text and metadata, the mode, the window shape, the index settings and the embedder's identity) beside `index/` (its
`FaissIndex` or `MultiVectorIndex` folder), committed together (`fair_retrieval.stores.files`). It is the folder
LangChain's `FaissVectorStore.save_local(folder)` writes and `load_local(folder, embeddings)` opens; LlamaIndex's
`FairFaissVectorStore.from_persist_dir(folder)` opens it too, its documents read as nodes
(`DocumentStore.load_text_folder`). One format, owned here and in `text_documents`, written by every surface.

- `FOLDER_FORMAT`: the store file's format as the command line writes and reads it (the text-document format;
  only the names in messages are the command's).
- `store_folder_paths`, `is_store_folder`: where the files are, and whether a folder holds a store.
- `new_folder_store`: an empty store of texts, in the stores' default mode unless told otherwise (multi-vector,
  the window study's windows, the default aggregate, a flat index), or over an index of a faiss factory string.
- `save_store_folder`, `load_store_folder`: saving and loading it (the checks are `save_store` / `load_store`'s);
  `folder_generation`: the store there when a build starts, which its save may replace and no other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fair_retrieval.index import Aggregate, FaissIndex, GpuChoice, MultiVectorIndex
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.files import StoreGeneration, store_generation
from fair_retrieval.stores.store_mode import StoreWindows, requested_mode
from fair_retrieval.stores.text_documents import (
    DEFAULT_INDEX_NAME,
    TextDocument,
    named_store_paths,
    text_document_format,
)

__all__ = [
    "FOLDER_FORMAT",
    "folder_generation",
    "is_store_folder",
    "load_store_folder",
    "new_folder_store",
    "save_store_folder",
    "store_folder_paths",
]

FOLDER_FORMAT = text_document_format(
    "store folder", "fair-retrieval index (or FaissVectorStore.save_local())", "fair-retrieval"
)
"""The store file of a store folder: the text-document format (the same bytes LangChain's store writes)."""


def store_folder_paths(folder: Path) -> tuple[Path, Path]:
    """(index folder, store file) of the store folder `folder`: `index/` and `store.json`."""
    return named_store_paths(Path(folder), DEFAULT_INDEX_NAME)


def is_store_folder(folder: Path) -> bool:
    """Whether `folder` holds a store file (`store.json`): a store folder, not an older command-line index."""
    return store_folder_paths(folder)[1].is_file()


def new_folder_store(
    embedder: Any,
    *,
    multivector: bool | None = None,
    aggregate: Aggregate | None = None,
    windows: StoreWindows | None = None,
    kind: str | None = None,
    factory: str | None = None,
    search: str | None = None,
    gpu: GpuChoice = "auto",
    index_params: dict[str, Any] | None = None,
) -> DocumentStore[TextDocument]:
    """An empty store of texts (`TextDocument`s, cosine scores) whose vectors `embedder` makes, as the vector stores
    build one by default unless told otherwise.

    Args:
        embedder: the `FairEmbedder` (or embeddings holding one) the documents are embedded with; its identity is
            recorded. None: the vectors come from elsewhere (`DocumentStore.add_windows`), no identity recorded.
        multivector: None: the stores' default (`DEFAULT_MULTIVECTOR`, documents kept as their windows); False:
            one pooled vector per document.
        aggregate: how a document's window scores make its score (None: `DEFAULT_AGGREGATE`); refused for a
            pooled store.
        windows: the windows a multi-vector store keeps; None: the window study's (`default_windows`: the
            embedder's window and half of it, cut at the text's boundaries); `StoreWindows()`: the embedder's own.
        kind: the index kind (None: the stores' default, `DocumentMode.new_index`: compressed windows for a
            multi-vector store where the codes fit the vector size, else flat).
        factory: instead of `kind`, a faiss index-factory string (its search parameters in `search`); needs
            `index_params` empty and the vector size from `embedder`.
        search: search parameters of the factory index, by faiss ParameterSpace name.
        gpu: as `DocumentStore`.
        index_params: the kind's parameters (and `fetch_factor` in multi-vector mode).

    Raises:
        ValueError, TypeError: as `DocumentStore`; a factory with a kind, or without an embedder to size it.
    """
    options: dict[str, Any] = {
        "metric": "cosine",
        "gpu": gpu,
        "multivector": multivector,
        "aggregate": aggregate,
        "embedder": embedder,
        "windows": windows,
        "name": "fair-retrieval index",
    }
    if factory is None:
        if kind is not None:
            options["kind"] = kind
        return DocumentStore.of_texts(index_params=dict(index_params or {}), **options)
    if kind is not None:
        raise ValueError("Pass either a kind or a faiss factory string, not both.")
    if embedder is None:
        raise ValueError("A store over a faiss factory string needs its embedder, whose vectors size the index.")
    mode = requested_mode(multivector, aggregate)
    dim = embedder.dimension
    params = dict(index_params or {})
    index = (
        MultiVectorIndex(dim, "ip", gpu=gpu, aggregate=mode.aggregate, factory=factory, search=search, **params)
        if mode.multivector
        else FaissIndex(dim, "ip", gpu=gpu, factory=factory, search=search, **params)
    )
    return DocumentStore.of_texts(index=index, **options)


def folder_generation(folder: Path) -> StoreGeneration | None:
    """The generation of the store saved in `folder` now (None: none there), for `save_store_folder(replacing=...)`:
    a build that replaces it then fails, rather than replace unseen a store that another writer saved meanwhile.

    The store file's bytes are read as they are (its index is not loaded): a store file that is damaged or being
    replaced gives a generation no save matches, so that save fails instead of replacing it.
    """
    store_file = store_folder_paths(folder)[1]
    try:
        return store_generation(store_file, store_file.read_bytes())
    except FileNotFoundError:
        return None


def save_store_folder(
    store: DocumentStore[TextDocument],
    folder: Path,
    *,
    overwrite: bool = False,
    replacing: StoreGeneration | None = None,
) -> None:
    """Save `store` as the store folder `folder` (created if needed): `store.json` and `index/`, in one commit.

    Args:
        store: the store.
        folder: the store folder.
        overwrite: replace any store there (as `save_store`).
        replacing: replace the store there only if it is still this generation (`folder_generation`, taken when
            the build started); a store saved there since is not replaced.

    Raises:
        StoreConflictError: (a ValueError) as `save_store`: a store is there that `store` was neither loaded from
            nor saved to and neither `overwrite` nor `replacing` allows it, or another writer saved there since
            `replacing`.
    """
    index_folder, store_file = store_folder_paths(folder)
    Path(folder).mkdir(parents=True, exist_ok=True)
    if replacing is not None:
        store.generation = replacing  # the save checks the file against it (`save_store_file`'s base)
    store.save(FOLDER_FORMAT, store_file, index_folder, overwrite=overwrite)


def load_store_folder(
    folder: Path, *, embedder: Any = None, gpu: GpuChoice = "auto", allow_embedder_mismatch: bool = False
) -> DocumentStore[TextDocument]:
    """The store saved in the store folder `folder`, checked as `load_store` checks it (the embedder given against
    the recorded identity; None checks nothing).

    Raises:
        FileNotFoundError: no store file in `folder`.
        DamagedFileError, ValueError, TypeError: as `load_store`.
    """
    index_folder, store_file = store_folder_paths(folder)
    missing = (
        f"{folder} holds no store ({store_file.name}); build one with `fair-retrieval index --input DOCS --output DIR`."
    )
    return DocumentStore.load(
        FOLDER_FORMAT,
        store_file,
        index_folder,
        gpu=gpu,
        embedder=embedder,
        allow_embedder_mismatch=allow_embedder_mismatch,
        missing=missing,
    )
