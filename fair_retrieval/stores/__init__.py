"""What the vector stores of the LangChain and LlamaIndex adapters share, free of either framework.

Both adapters keep their vectors in a `fair_retrieval.FaissIndex` and their documents (or nodes) beside it; what
they do with them beyond translating between the framework's types and these is defined once here. This package is
the public surface for store builders: an adapter imports what it needs from `fair_retrieval.stores` (and
`fair_retrieval`, `fair_retrieval.index`), never from the modules below, so those can be rearranged without breaking
adapters (tests/test_import_rules.py checks it). Each name is defined in one module and only re-exported here.

The modules, with the names exported from each:

- `records`: the id map (a framework's string id → the index's int64 id), the records kept by int id in insertion
  order, groups of records (a source document's nodes), upserts, deletes and searches over the index.
  `IndexedRecords` (that bookkeeping), `Keyed` (what a record must have: its `key`), `StoreIndex` (the index type
  of a store: a `FaissIndex` or a `MultiVectorIndex`).
- `files`: saving a store file together with its index folder (one atomic commit) and reading both back
  consistently while another process may be saving. `save_store_file`, `load_store_file`, `store_generation` and
  `StoreGeneration` (the generation a store was loaded from, so a save over a newer one raises
  `StoreConflictError`).
- `arguments`: checks of the arguments every store call takes and the short lists of offending values their
  messages show. `id_strings` (a list of ids, not one string), `new_ids` (the ids of documents being added, or new
  ones), `repeated` (the keys that occur twice), `preview` (a short list for a message).
- `metadata`: metadata kept as JSON. `json_metadata_list` (each document's metadata checked and copied).
- `filtering`: a metadata filter compiled once per call, in the grammar of `fair_retrieval.stores.filters`.
  `store_filter` (a filter dict, a callable or None, compiled) and `StoreFilter` (what it returns).
- `vectors`: vectors prepared for the index and relevance scores in [0, 1]. `unit_rows` (checked, unit rows for
  cosine), `text_vector_pairs` (texts and their precomputed vectors, checked), `relevance_function` (a metric's
  score → relevance).
- `modes`: a store's document mode, pooled or multi-vector (its index, how a saved store records it, the checks on
  load), and the windows a multi-vector store takes in or copies out. `DocumentMode`, `MULTIVECTOR_KEY` and
  `AGGREGATE_KEY` (the keys of a saved store file that record the mode), `checked_windows`, `stored_windows`.
- `multivector`, `window_source`: multi-vector mode (documents kept as their window vectors): the embedders that
  give windows, the cache of an embedder's last pass and how a store takes a document's windows from it.
  `window_embedder` (the embedder that gives windows, or a TypeError), `WindowEmbedder` (its protocol),
  `WindowCache` (an embedder's last pass, by text), `BEST_WINDOW_KEY` (the metadata key of a hit's best window),
  `gathered_windows` and `GatheredWindows` (windows taken from the cache, the rest embedded once more),
  `content_offset` and `within_content` (window spans moved from the embedded text into the document's own text).
- `raw_faiss`: reading a bare faiss file, the format of folders written by earlier stores, for their conversion.
  `looks_like_raw_faiss` (by a file's first bytes), `is_raw_faiss` (by its path), `read_raw_faiss` (its vectors
  and metric).

Defined elsewhere in fair_retrieval and re-exported here because every store builder needs them:

- from `fair_retrieval.embedding.identity`: `embedder_identity` (which embedder made a store's vectors, as JSON) and
  `check_identity` (the load-time check of a recorded identity against the embeddings given).
- from `fair_retrieval.jsonio`: `json_bytes` (a store file's bytes), `parse_versioned_json` (a store file read back,
  refusing another format or a newer version), `DamagedFileError` (a damaged store file) and `StoreConflictError`
  (a save over a store another writer saved after it was loaded).
- from `fair_retrieval.stores.filters`: `compile_filter` (a filter dict → a predicate on metadata) and `Predicate`.
- from `fair_retrieval.inputs`: `check_store_entries` (texts, ids and metadata a store can keep), `check_query`
  (a query checked like a document) and `ensure_text_list` (a list of strings, not one string).
- from `fair_retrieval.validate`: `positive_int` (a count such as k, checked).
"""

from fair_retrieval.embedding.identity import check_identity, embedder_identity
from fair_retrieval.inputs import check_query, check_store_entries, ensure_text_list
from fair_retrieval.jsonio import DamagedFileError, StoreConflictError, json_bytes, parse_versioned_json
from fair_retrieval.stores.arguments import id_strings, new_ids, preview, repeated
from fair_retrieval.stores.files import StoreGeneration, load_store_file, save_store_file, store_generation
from fair_retrieval.stores.filtering import StoreFilter, store_filter
from fair_retrieval.stores.filters import Predicate, compile_filter
from fair_retrieval.stores.metadata import json_metadata_list
from fair_retrieval.stores.modes import AGGREGATE_KEY, MULTIVECTOR_KEY, DocumentMode, checked_windows, stored_windows
from fair_retrieval.stores.multivector import BEST_WINDOW_KEY, WindowCache, WindowEmbedder, window_embedder
from fair_retrieval.stores.raw_faiss import is_raw_faiss, looks_like_raw_faiss, read_raw_faiss
from fair_retrieval.stores.records import IndexedRecords, Keyed, StoreIndex
from fair_retrieval.stores.vectors import relevance_function, text_vector_pairs, unit_rows
from fair_retrieval.stores.window_source import GatheredWindows, content_offset, gathered_windows, within_content
from fair_retrieval.validate import positive_int

__all__ = [
    "AGGREGATE_KEY",
    "BEST_WINDOW_KEY",
    "MULTIVECTOR_KEY",
    "DamagedFileError",
    "DocumentMode",
    "GatheredWindows",
    "IndexedRecords",
    "Keyed",
    "Predicate",
    "StoreConflictError",
    "StoreFilter",
    "StoreGeneration",
    "StoreIndex",
    "WindowCache",
    "WindowEmbedder",
    "check_identity",
    "check_query",
    "check_store_entries",
    "checked_windows",
    "compile_filter",
    "content_offset",
    "embedder_identity",
    "ensure_text_list",
    "gathered_windows",
    "id_strings",
    "is_raw_faiss",
    "json_bytes",
    "json_metadata_list",
    "load_store_file",
    "looks_like_raw_faiss",
    "new_ids",
    "parse_versioned_json",
    "positive_int",
    "preview",
    "read_raw_faiss",
    "relevance_function",
    "repeated",
    "save_store_file",
    "store_filter",
    "store_generation",
    "stored_windows",
    "text_vector_pairs",
    "unit_rows",
    "window_embedder",
    "within_content",
]
