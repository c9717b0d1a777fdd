"""A `DocumentStore` saved as a JSON store file beside its index folder, and the one restore sequence.

Each adapter names its files and its format (`StoreFormat`: the format's name and version, the key of the records
and how one record is written and read back); everything else is here, the same for both:

- `save_store`: the store file (format, version, metric, kind, index parameters, the document mode's keys, the id
  counter, where the index is, the recorded identity, the records) published with the index in one commit
  (`fair_retrieval.stores.files`), refused with `StoreConflictError` when another writer saved there since the
  store was loaded.
- `load_store`: read the store file consistently with its index folder, then, in this order: its format and version,
  its document mode (checked against the mode asked for), the embedder given (it must give windows for a
  multi-vector store; its identity is checked against the recorded one), the index (of the saved mode), the records
  (which must be exactly the index's vectors), and the generation a later save checks.

A pooled store's file carries no mode keys, as files of earlier releases (which are pooled) do; a multi-vector
store's carries "multivector" and "aggregate", also in the identity it records, so neither is read as the other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from fair_retrieval.embedding.identity import check_identity, embedder_identity
from fair_retrieval.index import Aggregate, GpuChoice
from fair_retrieval.jsonio import DamagedFileError, json_bytes, parse_versioned_json
from fair_retrieval.lexical import LexicalSettings
from fair_retrieval.stores.files import load_store_file, save_store_file, store_generation
from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.raw_faiss import looks_like_raw_faiss
from fair_retrieval.stores.search_modes import SearchSettings
from fair_retrieval.stores.store_core import MISMATCH_OVERRIDE, StoreCore
from fair_retrieval.stores.store_mode import AGGREGATE_KEY, DocumentMode, StoreWindows
from fair_retrieval.validate import is_int

logger = logging.getLogger(__name__)

__all__ = ["StoreFormat", "load_store", "save_store"]

R = TypeVar("R", bound=Keyed)

INT64_MAX = 2**63 - 1
"""The largest int id a store keeps (faiss ids are int64)."""
UNRECORDED_EARLIER = "saved by an earlier release"


@dataclass(frozen=True)
class StoreFormat(Generic[R]):
    """What an adapter's store file looks like, and how its store is rebuilt.

    Attributes:
        name: the format name the file records, e.g. "langchain-fair-faiss-store".
        version: the newest format version written and read.
        store: the store class's name, for messages ("FaissVectorStore").
        writer: what writes the file, for messages ("FaissVectorStore.save_local()").
        upgrade: the distribution to upgrade when the file is newer.
        remedy: what to do with a damaged or inconsistent file.
        records_key: the key of the records' list ("documents", "nodes").
        noun: what a record is called in messages ("documents", "nodes").
        encode: one record with its int id → its JSON entry.
        decode: a JSON entry → (int id, record); raises KeyError, TypeError or ValueError when malformed.
        names_index_folder: whether the file names its index folder ("index_folder": the folder's name beside the
            file, or null) or only says whether there is one ("has_index"; the folder's place is the adapter's).
        replaced_move_to_end: as `DocumentStore`.
        group_of: as `DocumentStore`.
        mismatch_remedy: what to do when the embedder given is not the recorded one.
        unrecorded_without_model: why a file written by this release records no identity (its store was never
            told its embedder), or None when a store always knows it.
        raw_faiss_message: the error for a raw faiss file where the store file should be (an earlier store's
            folder), or None.
        other_readers: fixed keys the file carries for other programs that may open it by mistake (e.g. a value
            that makes llama-index's SimpleVectorStore fail with the way to load it); ignored on load.
        text_of: the text of a record its lexical side searches (`DocumentStore`'s `text_of`), or None: a store
            of this format has no lexical side.
    """

    name: str
    version: int
    store: str
    writer: str
    upgrade: str
    records_key: str
    encode: Callable[[int, R], dict[str, Any]]
    decode: Callable[[Mapping[str, Any]], tuple[int, R]]
    names_index_folder: bool
    replaced_move_to_end: bool
    group_of: Callable[[R], str] | None = None
    noun: str = "documents"
    remedy: str = "Save the store again, or rebuild it from its documents."
    mismatch_remedy: str = (
        "Load it with the embeddings it was built with (same model and options), or rebuild it with these."
    )
    unrecorded_without_model: str | None = None
    raw_faiss_message: Callable[[Path], str] | None = None
    other_readers: Mapping[str, Any] = field(default_factory=dict)
    text_of: Callable[[R], str] | None = None


def save_store(
    store: StoreCore[R], fmt: StoreFormat[R], store_file: Path, index_folder: Path, *, overwrite: bool = False
) -> None:
    """Write `store` to `store_file` and its index to `index_folder` (beside it), in one commit.

    A store that was not loaded from `store_file` nor saved there (built in memory) is not saved over a store
    already there unless `overwrite` is True: a fresh store never silently replaces another writer's saves. Once
    saved, a store tracks the file as a loaded one does.

    Raises:
        StoreConflictError: (a ValueError) another writer saved `store_file` after `store` was loaded from it (or
            last saved there), or a store is there that `store` was neither loaded from nor saved to (and
            `overwrite` is False).
        ValueError: metadata that stopped being JSON since it was stored, or a store its own load would refuse
            (`_check_loadable`); nothing is written then, so a good folder is never replaced by one that fails.
    """
    with store.lock:  # the records, the index and the counter are written as one state
        _check_loadable(store, fmt, store_file)
        _save_locked(store, fmt, store_file, index_folder, overwrite)


def _check_loadable(store: StoreCore[Any], fmt: StoreFormat[Any], store_file: Path) -> None:
    """Refuse to save what `load_store` would refuse of the store's own state: records other than the index's
    vectors (`IndexedRecords.index_mismatch`, the load's check), an index holding an id twice (the index load's
    check), or an id counter not above every int id (the load's `_id_counter` bound).

    Raises:
        ValueError: naming what disagrees; the store was changed behind its API (its records or index edited
            directly) and should be rebuilt from its documents.
    """
    records, index = store.records, store.index
    ids = index.ids if index is not None else np.zeros(0, np.int64)
    if records.index_mismatch() is not None or len(np.unique(ids)) != len(ids):
        problem = f"its {len(records)} {fmt.noun} and the {len(ids)} vectors of its index disagree"
    elif records.next_int_id <= max(records.records, default=-1):
        problem = f"its id counter {records.next_int_id} is not above its highest int id"
    else:
        return
    raise ValueError(
        f"{store.name} was not saved to {store_file}: {problem}, so the saved folder would not load (nothing was "
        "written). Its records or index were changed outside the store's API; rebuild it from its documents."
    )


def _save_locked(
    store: StoreCore[R], fmt: StoreFormat[R], store_file: Path, index_folder: Path, overwrite: bool
) -> None:
    """`save_store`'s writing, with the store locked and checked."""
    has_index = store.index is not None
    where = {"index_folder": index_folder.name if has_index else None} if fmt.names_index_folder else {}
    state = {
        "format": fmt.name,
        "version": fmt.version,
        "metric": store.metric,
        "kind": store.kind,
        "index_params": store.index_params,
        **where,
        **store.mode.settings(),
        **(store.windows.settings() if store.multivector and store.windows is not None else {}),
        **(store.lexical.settings() if store.lexical is not None else {}),
        **store.search_settings.settings(),
        "next_int_id": store.records.next_int_id,
        **({} if fmt.names_index_folder else {"has_index": has_index}),
        "embedder": store.identity(),
        **fmt.other_readers,
        fmt.records_key: [fmt.encode(int_id, record) for int_id, record in store.records.records.items()],
    }
    base = store.generation
    data = json_bytes(state, indent=None)
    generation = save_store_file(store_file, data, store.index, index_folder, base=base, overwrite=overwrite)
    store.generation = generation  # the file it is saved to: its next save there is checked against this one


def load_store(
    fmt: StoreFormat[R],
    store_file: Path,
    index_folder: Path,
    *,
    gpu: GpuChoice,
    embedder: Any,
    allow_embedder_mismatch: bool = False,
    multivector: bool | None = None,
    aggregate: Aggregate | None = None,
    missing: str,
    store_class: type[StoreCore[Any]] = StoreCore,
) -> StoreCore[R]:
    """The store saved at `store_file` (its index in `index_folder`, unless the file names another), checked.

    Args:
        fmt: the adapter's format.
        store_file: the JSON store file.
        index_folder: where the index is when the file does not name its folder.
        gpu: as `DocumentStore`.
        embedder: what will embed new documents and queries; checked against the recorded identity and recorded
            at the next save. None checks nothing and keeps the recorded identity.
        allow_embedder_mismatch: load even when `embedder` differs from the recorded one (a WARNING says how).
        multivector: None takes the saved mode; True or False requires it.
        aggregate: None takes the saved aggregate; a name requires a multi-vector store saved with it.
        missing: the FileNotFoundError's message when there is no store file.
        store_class: the class of the store made (`DocumentStore` loads its own kind).

    Raises:
        FileNotFoundError: no store file, or its index folder is missing.
        DamagedFileError: (a ValueError) a damaged file.
        ValueError: another format or a newer version, files that disagree, another mode or aggregate than the
            saved one, or an embedder other than the recorded one (unless `allow_embedder_mismatch`).
        TypeError: a multi-vector store with an embedder that gives no windows.
    """

    def restore(raw: bytes) -> StoreCore[R]:
        return _restore(
            fmt,
            store_file,
            raw,
            (index_folder, store_class),
            gpu,
            embedder,
            allow_embedder_mismatch,
            (multivector, aggregate),
        )

    store = load_store_file(store_file, index_folder, restore, missing=missing)
    if embedder is None and store.recorded_identity is not None:
        logger.info("%s records its embedder; pass it when loading to check it.", store_file)
    logger.info("Loaded %d %s from %s", len(store), fmt.noun, store_file)
    return store


def _restore(
    fmt: StoreFormat[R],
    store_file: Path,
    raw: bytes,
    into: tuple[Path, type[StoreCore[Any]]],
    gpu: GpuChoice,
    embedder: Any,
    allow_mismatch: bool,
    requested: tuple[bool | None, Aggregate | None],
) -> StoreCore[R]:
    """The restore sequence, once for every adapter (see the module docstring); `into`: the index folder and the
    class of the store made."""
    index_folder, store_class = into
    if fmt.raw_faiss_message is not None and looks_like_raw_faiss(raw[:4]):
        raise ValueError(fmt.raw_faiss_message(store_file))
    state = parse_versioned_json(
        store_file,
        raw,
        format_name=fmt.name,
        max_version=fmt.version,
        required=("metric", "kind", "next_int_id", fmt.records_key),
        writer=fmt.writer,
        upgrade=fmt.upgrade,
        remedy=fmt.remedy,
    )
    mode = DocumentMode.saved(state, store_file, fmt.remedy)
    windows = StoreWindows.saved(state, store_file, fmt.remedy) if mode.multivector else None
    mode.check_requested(requested[0], store_file.parent if not fmt.names_index_folder else store_file)
    _check_aggregate(store_file, mode, requested[1])
    kind = state["kind"]
    store: StoreCore[R] = store_class(
        metric=state["metric"],
        kind=kind if kind != "custom" else "flat",  # a store over an index of a faiss factory string
        gpu=gpu,
        index_params=dict(state.get("index_params") or {}),
        multivector=mode.multivector,
        aggregate=mode.aggregate if mode.multivector else None,
        replaced_move_to_end=fmt.replaced_move_to_end,
        group_of=fmt.group_of,
        name=fmt.store,
        windows=windows,
        text_of=fmt.text_of,
        lexical=LexicalSettings.saved(state, str(store_file)) if fmt.text_of is not None else None,
        search=SearchSettings.saved(state, str(store_file)) if fmt.text_of is not None else None,
    )
    store.kind = kind
    recorded = state.get("embedder")
    if recorded is not None and not isinstance(recorded, dict):
        raise ValueError(f"{store_file} records a malformed embedder {recorded!r}; save the store again.")
    store.recorded_identity = recorded
    if embedder is not None:
        store.embedder = embedder  # before the identity: checks that it gives windows for a multi-vector store
        unrecorded = fmt.unrecorded_without_model if "embedder" in state else None
        check_identity(
            recorded,
            mode.identity(embedder_identity(embedder), windows),
            source=str(store_file),
            allow_mismatch=allow_mismatch,
            override=MISMATCH_OVERRIDE,
            remedy=fmt.mismatch_remedy,
            unrecorded=unrecorded or UNRECORDED_EARLIER,
        )
    index = mode.load_index(folder, gpu) if (folder := _index_folder(fmt, state, store_file, index_folder)) else None
    entries = _entries(fmt, state[fmt.records_key], store_file)
    next_int_id = _id_counter(state["next_int_id"], entries, store_file, fmt.remedy)
    store.records.restore(index, entries, next_int_id)
    held = store.records.index_mismatch()
    if held is not None:
        raise ValueError(
            f"{store_file} lists {len(entries)} {fmt.noun} but its index folder holds {held} vectors under other ids: "
            f"the folder was modified or written partially. {fmt.remedy}"
        )
    store.check_embedder_size(str(store_file))
    store.generation = store_generation(store_file, raw)
    return store


def _index_folder(fmt: StoreFormat[Any], state: Mapping[str, Any], store_file: Path, default: Path) -> Path | None:
    """The saved store's index folder, or None when it was saved without an index."""
    if not fmt.names_index_folder:
        return default if state.get("has_index") else None
    name = state.get("index_folder")
    if name is None:
        return None
    if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
        raise ValueError(f"{store_file} names a malformed index folder {name!r}; {fmt.remedy}")
    folder = store_file.parent / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{store_file} keeps its vectors in {folder}, which is missing: copy the whole persist folder."
        )
    return folder


def _entries(fmt: StoreFormat[R], entries: Iterable[Any], store_file: Path) -> list[tuple[int, R]]:
    """The (int id, record) entries of a store file.

    Raises:
        DamagedFileError: a malformed entry.
    """
    try:
        decoded = [fmt.decode(entry) for entry in entries]
        for int_id, record in decoded:
            hash(record.key)  # the id map's key: an unhashable id is damage too (TypeError)
            if not is_int(int_id) or not 0 <= int_id <= INT64_MAX:
                raise ValueError(f"its int id {int_id!r} is not an integer from 0 to 2**63 - 1")
        return decoded
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise DamagedFileError(store_file, f"an entry of its {fmt.noun} is malformed ({error!r})", fmt.remedy) from None


def _id_counter(value: Any, entries: list[tuple[int, Any]], store_file: Path, remedy: str) -> int:
    """The recorded id counter `next_int_id`, checked against the entries: an integer above every int id they use
    and within int64 (the ids new documents get, which faiss keeps as int64).

    Raises:
        DamagedFileError: naming the field and the bound.
    """
    least = max((int_id for int_id, _ in entries), default=-1) + 1
    if not is_int(value) or not least <= value <= INT64_MAX:
        raise DamagedFileError(
            store_file,
            f"its id counter 'next_int_id' {value!r} is not an integer from {least} (one past its highest int id) "
            "to 2**63 - 1",
            remedy,
        )
    return value


def _check_aggregate(path: Path, mode: DocumentMode, aggregate: Aggregate | None) -> None:
    """Refuse an aggregate asked for on load (None: the saved one) that is not the saved store's."""
    if aggregate is None or (mode.multivector and aggregate == mode.aggregate):
        return
    if not mode.multivector:
        raise ValueError(
            f"{path} holds a store of {mode}, which has no {AGGREGATE_KEY} ({AGGREGATE_KEY}={aggregate!r} was asked "
            "for): leave aggregate out, or rebuild it as a multi-vector store."
        )
    raise ValueError(
        f"{path} was built with {AGGREGATE_KEY}={mode.aggregate!r}, not {aggregate!r}: leave aggregate out to load "
        f"it, or rebuild it with {AGGREGATE_KEY}={aggregate!r}."
    )
