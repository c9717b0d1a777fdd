"""A Qdrant collection laid out as a fair-retrieval store: the points of each document, the record of the store's
settings, and the calls that read and write them (only calls a Qdrant server accepts; `QdrantClient(":memory:")` and
`QdrantClient(path=...)` run the same API in process).

Each document is one *head* point and one point per window:

- the head (id `point_id(key, "doc")`, the same for every write of the document) holds the document's BM25 sparse
  vector (`SPARSE_VECTOR`, scored with Qdrant's IDF modifier: `fair_retrieval.lexical.sparse_bm25`) and its record
  (the adapter's JSON entry, `RECORD_FIELD`);
- each window (id `point_id(key, "w<i>@<version>")`, new points for each write) holds the window's dense vector
  (`DENSE_VECTOR`), its character span and its weight (its content tokens, what a document's pooled vector is
  weighted by).

Every point carries the document's key (`DOC_FIELD`, what a grouped search groups by: k distinct documents, each by
its best window, the FAISS store's aggregate "max"), its int id (`ID_FIELD`, a stable 63-bit hash of the key), its
group (`GROUP_FIELD`, e.g. LlamaIndex's ref_doc_id), its metadata (`METADATA_FIELD`, what filters read in the
engine, with the markers that make them exact: `qdrant_filters.field_markers`) and the write it belongs to
(`VERSION_FIELD`, and `STAMP_FIELD`: when it was written, in microseconds, increasing within a process). A write puts
the windows first and the head last: a window counts only when its version is its head's, so a search never sees
half a document, and a failed write leaves the previous version whole (a new document unseen).

Concurrent writers of one document: a head is replaced only by a newer write (the upsert's `update_filter`: Qdrant
1.16 or later), so the newest write wins whatever order the requests land in, and heads never go back. After its
heads, a write reads them back by id: where its head landed it deletes the windows of the version it replaced (by
point id: a head records how many windows it has, `COUNT_FIELD`), where a newer write's head is there it deletes its
own windows. Windows no head counts (a killed or refused write's, or a write that raced a newer one) never reach a
result: a dense search that meets one asks again without it (`dense_groups`' `excluded`), and deletes those older
than their document's head, which no write can make current again, and those with no head an hour old (a killed
write's, of a document new then or deleted since: `QdrantStore`'s `ORPHAN_SECONDS`).

The store's settings (format, metric, mode, window shape, lexical settings, BM25's average length, the embedder's
identity) are recorded in the collection's metadata (`SETTINGS_KEY`), read and checked when a store opens it, as a
store file is.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from fair_retrieval.stores.qdrant_filters import METADATA_FIELD, field_markers
from fair_retrieval.validate import is_positive_int

logger = logging.getLogger(__name__)

__all__ = [
    "DENSE_VECTOR",
    "DOC_FIELD",
    "FORMAT_NAME",
    "SETTINGS_KEY",
    "SPARSE_VECTOR",
    "WINDOW_FIELD",
    "QdrantCollection",
    "default_collection_options",
    "default_search_params",
    "int_id_of",
    "point_id",
]

DENSE_VECTOR = "window"
"""The named dense vector of window points."""
SPARSE_VECTOR = "bm25"
"""The named sparse vector of head points (BM25 term weights, IDF by the engine)."""
DOC_FIELD, ID_FIELD, GROUP_FIELD = "fr_doc", "fr_id", "fr_group"
KIND_FIELD, VERSION_FIELD, SEQUENCE_FIELD = "fr_kind", "fr_version", "fr_sequence"
STAMP_FIELD, COUNT_FIELD = "fr_stamp", "fr_windows"
SPAN_FIELD, WINDOW_FIELD, WEIGHT_FIELD, RECORD_FIELD = "fr_span", "fr_window", "fr_weight", "fr_record"
HEAD, WINDOW = "doc", "window"
SETTINGS_KEY = "fair_retrieval"
"""The collection metadata key of the store's settings."""
FORMAT_NAME, FORMAT_VERSION = "fair-retrieval-qdrant-store", 1
_NAMESPACE = uuid.UUID("5d3c1f0e-9b1a-4c61-8f57-2f6a3b9e7d10")
RETRIES = 3
"""How many times a write or read is tried when the connection fails (with 0.5 s, 1 s, 2 s pauses)."""

DEFAULT_HNSW_M, DEFAULT_EF_CONSTRUCT = 32, 256
DEFAULT_HNSW_EF = 1024
DEFAULT_OVERSAMPLING = 2.0
"""A new collection's HNSW graph, its searches' beam width and the int8 candidates re-scored per result wanted:
chosen by measurement (the Qdrant guide's "Collection defaults at scale", Qdrant Edge at 30,000 chunks of windows:
recall@10 0.998 against exact, where Qdrant's own defaults gave 0.82-0.92; 0.990 at 100,000 chunks)."""


def default_collection_options() -> dict[str, Any]:
    """`create_collection` settings of a new collection when none are given: HNSW of `DEFAULT_HNSW_M` links and
    `DEFAULT_EF_CONSTRUCT`, int8 scalar codes of the windows kept in RAM, the float32 windows on disk (read to
    re-score the codes' candidates)."""
    from qdrant_client import models

    codes = models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99, always_ram=True)
    return {
        "hnsw_config": models.HnswConfigDiff(m=DEFAULT_HNSW_M, ef_construct=DEFAULT_EF_CONSTRUCT),
        "quantization_config": models.ScalarQuantization(scalar=codes),
        "on_disk": True,
    }


def default_search_params() -> Any:
    """The dense searches' settings when none are given (on a server; local mode searches exactly): a beam of
    `DEFAULT_HNSW_EF`, the int8 candidates (`DEFAULT_OVERSAMPLING` per result) re-scored with the float windows."""
    from qdrant_client import models

    rescoring = models.QuantizationSearchParams(rescore=True, oversampling=DEFAULT_OVERSAMPLING)
    return models.SearchParams(hnsw_ef=DEFAULT_HNSW_EF, quantization=rescoring)


def int_id_of(key: str) -> int:
    """A document's int id: a stable 63-bit hash of its key (the same in every process; ids never need a counter)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little") >> 1


CALL_SEARCH_PARAMS: contextvars.ContextVar[Any] = contextvars.ContextVar("fair_retrieval_search_params", default=None)
"""The `SearchParams` of the search running in this thread or task (`QdrantStore.call_search_params`), None for the
store's own: a context variable, so concurrent searches with their own parameters never see each other's."""


MAX_REQUEST_BYTES = 16 * 2**20
"""The most bytes an upsert request carries (estimated): half of a Qdrant server's default request limit (32 MiB),
so a batch of long documents is split rather than refused."""
SERVER_REQUEST_BYTES = 32 * 2**20
"""A Qdrant server's default request limit (`service.max_request_size_mb`): a point larger is refused by name."""
_POINT_BYTES = 400  # a point's id, its store fields and JSON punctuation
_NUMBER_BYTES = 20  # a float as JSON text, with its separator


def _json_bytes(value: Any) -> int:
    """About how many bytes `value` takes in a request's JSON."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


INT_HEAD = "int-head"
"""The part of a head's point id named by the document's int id (`QdrantCollection.head_id`)."""


def id_collision(first: str, second: str, int_id: int) -> ValueError:
    """The error for two document keys with one int id (a 63-bit hash: about one such pair among 4 billion keys)."""
    return ValueError(
        f"Documents {first!r} and {second!r} have the same int id {int_id} (their keys' 63-bit hashes collide, "
        "which is rare but possible in a large collection), so the store cannot tell them apart. Give one of them "
        "another id (delete it, then add it again under a new key)."
    )


def point_id(key: str, part: str) -> str:
    """The id of one of a document's points (`part`: "doc" for its head, "w<i>@<version>" for its i-th window of one
    write): a UUID made of the key, so a rewrite lands on the same head and on new windows."""
    return str(uuid.uuid5(_NAMESPACE, f"{key}\x00{part}"))


_last_stamp = 0
_stamp_lock = threading.Lock()


def next_stamp() -> int:
    """A write's stamp: microseconds since the epoch (exact in a float64 range, as Qdrant compares them), larger than
    every stamp this process gave before."""
    global _last_stamp
    with _stamp_lock:
        _last_stamp = max(time.time_ns() // 1000, _last_stamp + 1)
        return _last_stamp


def window_ids(key: str, version: str, count: int) -> list[str]:
    """The point ids of a document's `count` windows written by the write `version` (`point_id`'s "w<i>@<version>")."""
    return [point_id(key, f"w{i}@{version}") for i in range(count)]


def _is_window() -> Any:
    """The condition: a window point (not a head)."""
    from qdrant_client import models

    return models.FieldCondition(key=KIND_FIELD, match=models.MatchValue(value=WINDOW))


def _transient(error: Exception) -> bool:
    """Whether an error is a dropped or refused connection (worth another try), not a refused request."""
    names = {type(error).__name__, *(type(cause).__name__ for cause in (error.__cause__, error.__context__) if cause)}
    return bool(names & {"ConnectError", "ReadTimeout", "WriteTimeout", "RemoteProtocolError", "ConnectionError"})


class QdrantCollection:
    """One collection of a Qdrant client as a fair-retrieval store's points (see the module docstring).

    Args:
        client: a `qdrant_client.QdrantClient` (a server's URL, or local mode: ":memory:" or a path).
        name: the collection's name.
        store: the store's class name, for messages.
        search_params: a `qdrant_client.models.SearchParams` for every dense search (HNSW ef, exact, quantization
            rescoring), or None: `default_search_params()` on a server, nothing in local mode (which searches
            exactly, and warns of any).
        batch_size: points per upsert request.
    """

    def __init__(self, client: Any, name: str, store: str, search_params: Any = None, batch_size: int = 256) -> None:
        from qdrant_client import QdrantClient

        if not isinstance(client, QdrantClient):
            raise TypeError(
                f"client must be a qdrant_client.QdrantClient (QdrantClient(url=...), QdrantClient(path=...) or "
                f'QdrantClient(":memory:")), got {type(client).__name__}.'
            )
        if not isinstance(name, str) or not name or len(name) > 255 or any(c in name for c in "/\\\x00"):
            raise ValueError(f"collection_name must be a non-empty name without '/', '\\' or NUL, got {name!r}.")
        self.client, self.name, self.store = client, name, store
        self.search_params, self.batch_size = search_params, batch_size
        self.int_head_ids = True  # the store says otherwise for a collection an earlier release made

    # ------------------------------------------------------------------------------------------------ the record

    def recorded(self) -> dict[str, Any] | None:
        """The store settings the collection records, None when there is no collection yet.

        Raises:
            ValueError: a collection that is not a fair-retrieval store's (no record, another format, a newer
                version), or whose vectors are not the ones the record says.
        """
        if not self._retried(lambda: self.client.collection_exists(self.name)):
            return None
        info = self._retried(lambda: self.client.get_collection(self.name))
        settings = (info.config.metadata or {}).get(SETTINGS_KEY)
        if not isinstance(settings, Mapping) or settings.get("format") != FORMAT_NAME:
            raise ValueError(
                f"Qdrant collection {self.name!r} exists but was not made by a fair-retrieval store (its metadata has "
                f"no {SETTINGS_KEY!r} record of format {FORMAT_NAME!r}). Give another collection_name (the store "
                "creates it), or delete this collection if it is yours to replace."
            )
        if not isinstance(settings.get("version"), int) or settings["version"] > FORMAT_VERSION:
            raise ValueError(
                f"Qdrant collection {self.name!r} was made by a newer fair-retrieval (store format version "
                f"{settings.get('version')!r}; this release reads {FORMAT_VERSION}). Upgrade fair-retrieval."
            )
        self._check_vectors(info, settings)
        return dict(settings)

    def _check_vectors(self, info: Any, settings: Mapping[str, Any]) -> None:
        """Refuse a collection whose vectors are not what its record says (made or changed by hand)."""
        vectors = info.config.params.vectors
        dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, Mapping) else None
        sparse = (info.config.params.sparse_vectors or {}).get(SPARSE_VECTOR)
        fix = "Recreate the collection through the store (a new collection_name), or delete it and add again."
        if dense is None or sparse is None:
            raise ValueError(
                f"Qdrant collection {self.name!r} lacks the named vectors a fair-retrieval store keeps (dense "
                f"{DENSE_VECTOR!r}, sparse {SPARSE_VECTOR!r}); it was created by hand. {fix}"
            )
        dim, distance = settings.get("dim"), settings.get("distance")
        if dim is not None and not is_positive_int(dim):
            raise ValueError(
                f"Qdrant collection {self.name!r}: its record's 'dim' is {dim!r}, not a positive int; its record was "
                f"edited by hand or damaged. {fix}"
            )
        if dim is not None and dense.size != dim:
            raise ValueError(
                f"Qdrant collection {self.name!r} holds {dense.size}-d vectors but its record says {dim}-d. {fix}"
            )
        if distance is not None and str(getattr(dense.distance, "value", dense.distance)) != distance:
            raise ValueError(
                f"Qdrant collection {self.name!r} measures {dense.distance} but the store's metric needs {distance}. "
                f"{fix}"
            )
        modifier = getattr(sparse, "modifier", None)
        if str(getattr(modifier, "value", modifier)).lower() != "idf":
            raise ValueError(
                f"Qdrant collection {self.name!r}: its sparse vector {SPARSE_VECTOR!r} has no IDF modifier, so BM25 "
                f"scores would be wrong. {fix}"
            )

    def create(self, dim: int, distance: str, settings: Mapping[str, Any], options: Mapping[str, Any]) -> None:
        """Create the collection for `dim`-d vectors measured by `distance` ("Dot" or "Euclid"), recording
        `settings`, with `options` passed to `create_collection` (HNSW, quantization, shards, replicas, on-disk),
        and index the payload fields searches filter and group by; another process creating it first is fine
        (its record is read back and checked by the caller)."""
        from qdrant_client import models

        record = {**settings, "format": FORMAT_NAME, "version": FORMAT_VERSION, "dim": dim, "distance": distance}
        options = dict(options)
        on_disk = options.pop("on_disk", None)
        try:
            self._retried(
                lambda: self.client.create_collection(
                    self.name,
                    vectors_config={
                        DENSE_VECTOR: models.VectorParams(size=dim, distance=models.Distance(distance), on_disk=on_disk)
                    },
                    sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                    metadata={SETTINGS_KEY: record},
                    **options,
                )
            )
        except ValueError:
            if not self.client.collection_exists(self.name):
                raise
            logger.info("Qdrant collection %r was created by another writer meanwhile; using it.", self.name)
            return
        if not self._local:  # local mode keeps no payload indexes (it says so); a server builds them
            for field, schema in (
                (DOC_FIELD, models.PayloadSchemaType.KEYWORD),
                (GROUP_FIELD, models.PayloadSchemaType.KEYWORD),
                (ID_FIELD, models.PayloadSchemaType.INTEGER),
                (KIND_FIELD, models.PayloadSchemaType.KEYWORD),
                (STAMP_FIELD, models.PayloadSchemaType.INTEGER),
            ):
                self._retried(functools.partial(self.client.create_payload_index, self.name, field, schema))
        logger.info("Created Qdrant collection %r (%d-d, %s).", self.name, dim, distance)

    def update_record(self, changes: Mapping[str, Any]) -> None:
        """Record `changes` in the collection's store settings (e.g. BM25's average length on the first write)."""
        info = self._retried(lambda: self.client.get_collection(self.name))
        record = {**(info.config.metadata or {}).get(SETTINGS_KEY, {}), **changes}
        self._retried(lambda: self.client.update_collection(self.name, metadata={SETTINGS_KEY: record}))

    @property
    def _search_params(self) -> Any:
        """The dense searches' `SearchParams`: a call's (`call_search_params`), else the store's, else the measured
        defaults on a server (local mode searches exactly)."""
        call = CALL_SEARCH_PARAMS.get()
        if call is not None:
            return call
        if self.search_params is not None or self._local:
            return self.search_params
        return default_search_params()

    @property
    def _local(self) -> bool:
        return type(getattr(self.client, "_client", None)).__name__ == "QdrantLocal"

    # ------------------------------------------------------------------------------------------------ writing

    def write(self, documents: Sequence[Mapping[str, Any]], dim: int) -> None:
        """Write documents, each all its points: {"key", "int_id", "group", "metadata", "record", "sparse":
        (indices, values), "windows": [(vector, (start, end), weight), ...], "sequence": its place in the insertion
        order, or None: after every document stored}; windows first, heads last (a head only over an older one),
        then the windows no head counts any more removed (see the module docstring).

        Raises:
            ValueError: the engine refused a write; the message names the documents that did not land.
        """
        from qdrant_client import models

        version, stamp = uuid.uuid4().hex, next_stamp()
        sequence = time.time_ns()
        keys = [document["key"] for document in documents]
        owners: dict[int, str] = {}
        for document in documents:  # two keys of one int id would read as one document: refused before writing
            owner = owners.setdefault(document["int_id"], document["key"])
            if owner != document["key"]:
                raise id_collision(owner, document["key"], document["int_id"])
        windows, heads, window_bytes, head_bytes = [], [], [], []
        for position, document in enumerate(documents):
            markers = field_markers(document["metadata"])  # what makes filters on lists and nulls exact
            metadata_bytes = _json_bytes(document["metadata"]) + _json_bytes(markers)
            window_bytes += [
                _POINT_BYTES + metadata_bytes + _NUMBER_BYTES * len(vector) for vector, _, _ in document["windows"]
            ]
            indices, _ = document["sparse"]
            head_bytes.append(
                _POINT_BYTES + metadata_bytes + len(document["record"]) + 2 * _NUMBER_BYTES * len(indices)
            )
            common = {
                DOC_FIELD: document["key"],
                ID_FIELD: document["int_id"],
                GROUP_FIELD: document["group"],
                METADATA_FIELD: document["metadata"],
                **markers,
                VERSION_FIELD: version,
                STAMP_FIELD: stamp,
            }
            ids = window_ids(document["key"], version, len(document["windows"]))
            for i, (point, (vector, span, weight)) in enumerate(zip(ids, document["windows"], strict=True)):
                windows.append(
                    models.PointStruct(
                        id=point,
                        vector={DENSE_VECTOR: vector},
                        payload={
                            **common,
                            KIND_FIELD: WINDOW,
                            SPAN_FIELD: list(span),
                            WINDOW_FIELD: i,
                            WEIGHT_FIELD: weight,
                        },
                    )
                )
            indices, values = document["sparse"]
            heads.append(
                models.PointStruct(
                    id=self.head_id(document["key"]),
                    vector={SPARSE_VECTOR: models.SparseVector(indices=indices, values=values)},
                    payload={
                        **common,
                        KIND_FIELD: HEAD,
                        RECORD_FIELD: document["record"],
                        COUNT_FIELD: len(document["windows"]),
                        SEQUENCE_FIELD: sequence + position
                        if document.get("sequence") is None
                        else document["sequence"],
                    },
                )
            )
        self._check_sizes(documents, head_bytes)
        replaced = self.heads_of(keys, claimed=True)
        older = models.Filter(must_not=[models.FieldCondition(key=STAMP_FIELD, range=models.Range(gte=stamp))])
        try:
            self._upsert(windows, sizes=window_bytes)
            self._upsert(heads, only_over=older, sizes=head_bytes)
        except Exception as error:
            raise self._failed_write(documents, version, replaced, error) from error
        self._drop_uncounted(documents, version, replaced, self.heads_of(keys), self.delete_points)

    def _failed_write(
        self,
        documents: Sequence[Mapping[str, Any]],
        version: str,
        replaced: Mapping[str, Mapping[str, Any]],
        error: Exception,
    ) -> ValueError:
        """The error of a write the engine refused or lost part of, after reading back which documents' heads
        landed (those are written whole, and what they replaced is removed) and deleting the windows of the others
        (no head counts them); when the heads cannot be read back, nothing is deleted (searches never count such
        windows) and no document is said to have landed."""
        keys = [document["key"] for document in documents]
        try:
            now = self.heads_of(keys)
        except Exception:  # the engine is gone: say nothing landed, delete nothing
            landed: set[str] = set()
        else:
            landed = {key for key, head in now.items() if head.get(VERSION_FIELD) == version}
            self._drop_uncounted(documents, version, replaced, now, self._forget)  # and those that did not land
        missing = [key for key in keys if key not in landed]
        shown = ", ".join(repr(key) for key in missing[:5]) + (", …" if len(missing) > 5 else "")
        return ValueError(
            f"Qdrant refused or lost a write to {self.name!r} ({type(error).__name__}: {error}): {len(missing)} of "
            f"these {len(keys)} documents did not land and keep their previous version, if any ({shown}); the "
            f"{len(keys) - len(missing)} others are written. No document is ever seen half-written: add those "
            "again."
        )

    def _drop_uncounted(
        self,
        documents: Sequence[Mapping[str, Any]],
        version: str,
        replaced: Mapping[str, Mapping[str, Any]],
        now: Mapping[str, Mapping[str, Any]],
        delete: Callable[[Sequence[str]], None],
    ) -> None:
        """After a write of `version`: delete (by `delete`) the windows of the versions its heads replaced
        (`replaced`: the heads read before it), and its own windows where its head is not there (`now`: the heads
        read after it; a newer write's, or none where the write failed)."""
        from qdrant_client import models

        doomed: list[str] = []
        legacy: list[str] = []  # replaced heads of an earlier release, which do not count their windows
        for document in documents:
            key = document["key"]
            if now.get(key, {}).get(VERSION_FIELD) != version:  # its head is not ours: our windows count no more
                doomed.extend(window_ids(key, version, len(document["windows"])))
                continue
            before = replaced.get(key)
            if before is None or before.get(VERSION_FIELD) == version:
                continue
            if COUNT_FIELD not in before:
                legacy.append(key)
            else:
                doomed.extend(window_ids(key, before[VERSION_FIELD], int(before[COUNT_FIELD])))
        delete(doomed)
        if legacy:
            self._delete(
                models.Filter(
                    must=[self._any(DOC_FIELD, legacy), _is_window()],
                    must_not=[models.FieldCondition(key=VERSION_FIELD, match=models.MatchValue(value=version))],
                )
            )

    def delete_heads(self, heads: Mapping[str, Mapping[str, Any]]) -> None:
        """Delete documents by their heads (key → head payload, `heads_of`): the heads first, so each document
        leaves every search at once (a window without its head is never counted), then their windows, by point id
        where the head counts them, else by a filter on the key; a delete stopped between the two leaves only
        uncounted windows."""
        from qdrant_client import models

        self.delete_points([self.head_id(key) for key in heads])
        counted = {key: head for key, head in heads.items() if COUNT_FIELD in head}
        legacy = [key for key in heads if key not in counted]
        self.delete_points(
            [
                point
                for key, head in counted.items()
                for point in window_ids(key, head[VERSION_FIELD], int(head[COUNT_FIELD]))
            ]
        )
        if legacy:
            self._delete(models.Filter(must=[self._any(DOC_FIELD, legacy), _is_window()]))

    def _forget(self, ids: Sequence[str]) -> None:
        """Try to delete a failed write's windows (no head counts them); a failure here is logged, not raised: the
        searches never count them, and delete them once a later write of their document lands."""
        try:
            self.delete_points(ids)
        except Exception as error:
            logger.warning(
                "%d windows of a failed write to %r stay until their documents are written again (%s).",
                len(ids),
                self.name,
                error,
            )

    def delete_points(self, ids: Sequence[str]) -> None:
        """Delete points by id (in batches)."""
        from qdrant_client import models

        for start in range(0, len(ids), self.batch_size * 16):
            selector = models.PointIdsList(points=list(ids[start : start + self.batch_size * 16]))
            self._retried(functools.partial(self.client.delete, self.name, points_selector=selector, wait=True))

    def delete_documents(self, condition: Any) -> None:
        """Delete every point (head and windows) of the documents `condition` (a `models.Filter`) selects."""
        self._delete(condition)

    def _upsert(self, points: list[Any], only_over: Any = None, sizes: Sequence[int] | None = None) -> None:
        """Upsert `points` in batches of at most `batch_size` points and, where `sizes` estimates each point's bytes
        in a request, of at most `MAX_REQUEST_BYTES`; `only_over`: a filter a point already there must match to be
        replaced."""
        batch: list[Any] = []
        used = 0
        for point, size in zip(points, sizes if sizes is not None else [0] * len(points), strict=True):
            if batch and (len(batch) == self.batch_size or used + size > MAX_REQUEST_BYTES):
                self._upsert_batch(batch, only_over)
                batch, used = [], 0
            batch.append(point)
            used += size
        if batch:
            self._upsert_batch(batch, only_over)

    def _upsert_batch(self, batch: list[Any], only_over: Any) -> None:
        self._retried(
            functools.partial(self.client.upsert, self.name, points=batch, wait=True, update_filter=only_over)
        )

    def _check_sizes(self, documents: Sequence[Mapping[str, Any]], head_bytes: Sequence[int]) -> None:
        """Refuse, before anything is written, a document whose head alone would pass a server's request limit."""
        for document, size in zip(documents, head_bytes, strict=True):
            if size > SERVER_REQUEST_BYTES:
                raise ValueError(
                    f"Document {document['key']!r} is about {size / 2**20:.1f} MiB as a Qdrant point (its text, "
                    "record and metadata), more than a Qdrant server takes in one request "
                    f"({SERVER_REQUEST_BYTES / 2**20:.1f} MiB by default); split it into smaller documents (a text "
                    "splitter) or keep large values out of its metadata. Nothing of this write was stored."
                )

    def _delete(self, condition: Any) -> None:
        from qdrant_client import models

        selector = models.FilterSelector(filter=condition)
        self._retried(lambda: self.client.delete(self.name, points_selector=selector, wait=True))

    # ------------------------------------------------------------------------------------------------ reading

    def dense_groups(
        self, vector: Sequence[float], k: int, condition: Any, excluded: Sequence[str] = ()
    ) -> list[tuple[int, float, Any, str]]:
        """The k best documents for a query vector by their best window, among the windows `condition` keeps and
        not the points `excluded`: (int id, the window's score, its payload, its point id), best first."""
        from qdrant_client import models

        if excluded:
            condition = models.Filter(
                must=[] if condition is None else [condition],
                must_not=[models.HasIdCondition(has_id=list(excluded))],
            )
        found = self._retried(
            lambda: self.client.query_points_groups(
                self.name,
                group_by=DOC_FIELD,
                query=list(vector),
                using=DENSE_VECTOR,
                query_filter=condition,
                search_params=self._search_params,
                limit=k,
                group_size=1,
                with_payload=[ID_FIELD, VERSION_FIELD, STAMP_FIELD, SPAN_FIELD, WINDOW_FIELD],
            )
        )
        return [
            (
                int(group.hits[0].payload[ID_FIELD]),
                float(group.hits[0].score),
                group.hits[0].payload,
                str(group.hits[0].id),
            )
            for group in found.groups
            if group.hits
        ]

    def sparse_hits(self, indices: list[int], values: list[float], k: int, condition: Any) -> list[tuple[int, float]]:
        """The k heads with the best sparse (BM25) scores among those `condition` keeps: (int id, score), best
        first; only heads sharing a word with the query."""
        from qdrant_client import models

        found = self._retried(
            lambda: self.client.query_points(
                self.name,
                query=models.SparseVector(indices=indices, values=values),
                using=SPARSE_VECTOR,
                query_filter=condition,
                limit=k,
                with_payload=[ID_FIELD],
            )
        )
        return [(int(point.payload[ID_FIELD]), float(point.score)) for point in found.points if point.score > 0]

    def heads_of(self, keys: Sequence[str], *, claimed: bool = False) -> dict[str, dict[str, Any]]:
        """The head payloads of the documents of `keys` that are stored, by key (read by point id); `claimed`: the
        keys are about to be written, so another document at one's head is an error, not just "not stored".

        Raises:
            ValueError: with `claimed`, another document holds the head of one of `keys` (their int ids collide:
                heads are named by int id), naming both; what a write reads first, so nothing is written.
        """
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), self.batch_size * 16):
            asked = {self.head_id(key): key for key in keys[start : start + self.batch_size * 16]}
            points = self._retried(
                functools.partial(self.client.retrieve, self.name, ids=list(asked), with_payload=True)
            )
            for point in points:
                key, holder = asked[str(point.id)], point.payload[DOC_FIELD]
                if holder == key:
                    found[key] = point.payload
                elif claimed:
                    raise id_collision(holder, key, int(point.payload[ID_FIELD]))
        return found

    def head_id(self, key: str) -> str:
        """The point id of the document `key`'s head: named by its int id in a collection made by this release
        (`int_head_ids`), so two keys of one int id meet at their head and a write refuses the second; by the key in
        one made before."""
        return point_id(str(int_id_of(key)), INT_HEAD) if self.int_head_ids else point_id(key, HEAD)

    def heads(self, int_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The head payloads of the documents of `int_ids` that are stored, by int id.

        Raises:
            ValueError: two stored documents share an int id (written by separate writes: `write` refuses it
                within one), naming both keys.
        """
        if not int_ids:
            return {}
        found: dict[int, dict[str, Any]] = {}
        for point in self.scroll(self._head_filter(self._any(ID_FIELD, list(int_ids))), with_vectors=False):
            int_id = int(point.payload[ID_FIELD])
            if int_id in found and found[int_id][DOC_FIELD] != point.payload[DOC_FIELD]:
                raise id_collision(found[int_id][DOC_FIELD], point.payload[DOC_FIELD], int_id)
            found[int_id] = point.payload
        return found

    def windows(self, int_ids: Sequence[int]) -> dict[int, list[tuple[list[float], float, str]]]:
        """The window points of documents (vector, weight, version), by int id."""
        from qdrant_client import models

        condition = models.Filter(
            must=[
                self._any(ID_FIELD, list(int_ids)),
                _is_window(),
            ]
        )
        by_id: dict[int, list[tuple[list[float], float, str]]] = {}
        for point in self.scroll(condition, with_vectors=[DENSE_VECTOR]):
            vector = point.vector[DENSE_VECTOR] if isinstance(point.vector, Mapping) else point.vector
            by_id.setdefault(int(point.payload[ID_FIELD]), []).append(
                (vector, float(point.payload[WEIGHT_FIELD]), point.payload[VERSION_FIELD])
            )
        return by_id

    def count(self, condition: Any = None) -> int:
        """How many documents (heads) `condition` keeps (every document for None), exactly."""
        return int(self._retried(lambda: self.client.count(self.name, count_filter=self._head_filter(condition))).count)

    def window_count(self) -> int:
        """How many window points there are, exactly."""
        from qdrant_client import models

        windows = models.Filter(must=[_is_window()])
        return int(self._retried(lambda: self.client.count(self.name, count_filter=windows)).count)

    def scroll(self, condition: Any, *, with_vectors: Any = False, page: int = 1024) -> Iterator[Any]:
        """Every point `condition` keeps, page by page."""
        offset = None
        while True:
            points, offset = self._retried(
                functools.partial(
                    self.client.scroll,
                    self.name,
                    scroll_filter=condition,
                    limit=page,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            )
            yield from points
            if offset is None:
                return

    def head_filter(self, condition: Any = None) -> Any:
        """`condition` restricted to head points (one per document)."""
        return self._head_filter(condition)

    def _head_filter(self, condition: Any) -> Any:
        from qdrant_client import models

        head = models.FieldCondition(key=KIND_FIELD, match=models.MatchValue(value=HEAD))
        return models.Filter(must=[head] if condition is None else [head, condition])

    @staticmethod
    def any_of(field: str, values: Iterable[Any]) -> Any:
        """A condition: `field` is one of `values` (document keys, groups or int ids)."""
        return QdrantCollection._any(field, list(values))

    @staticmethod
    def _any(field: str, values: list[Any]) -> Any:
        from qdrant_client import models

        if not values:
            return models.HasIdCondition(has_id=[])
        return models.FieldCondition(key=field, match=models.MatchAny(any=values))

    def _retried(self, call: Callable[[], Any]) -> Any:
        """`call`, tried again after a dropped connection (`RETRIES` times in all), else its error."""
        for attempt in range(RETRIES):
            try:
                return call()
            except Exception as error:
                if not _transient(error) or attempt == RETRIES - 1:
                    raise
                logger.warning(
                    "Qdrant connection failed (%s: %s); trying again (%d of %d).",
                    type(error).__name__,
                    error,
                    attempt + 2,
                    RETRIES,
                )
                time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")
