"""The vector store both adapters wrap, free of either framework, and what it is made of.

`DocumentStore` is the store: documents by id with their vectors in one index (a pooled `FaissIndex` or a
`MultiVectorIndex`: the document mode is the index's type), upserts, deletes, groups, filtered searches that return
k distinct documents with their scores and best windows, copies between stores; `save_store` / `load_store` save it
beside its index and restore it (the one restore sequence), in the adapter's `StoreFormat`. The LangChain and
LlamaIndex stores wrap it and translate their types and names only. This package is the public surface for store
builders: an adapter imports from `fair_retrieval.stores` (and `fair_retrieval`, `fair_retrieval.index`), never
from the modules below (tests/test_import_rules.py checks it). Each name is defined in one module and re-exported.

The modules, with the names exported from each:

- `document_store`: `DocumentStore`, `StoreHit` (one document a search found), `StoreMetric` and `STORE_METRICS`
  ("cosine", "ip", "l2").
- `wrapped_store`: `WrappedStore` (the properties an adapter's store class reads off its `DocumentStore`).
- `store_format`: `StoreFormat` (an adapter's file format), `save_store`, `load_store`.
- `document_modes`: the document mode, pooled or multi-vector. `DEFAULT_MULTIVECTOR` (the stores' default mode,
  one constant), `DocumentMode` (a mode with its aggregate: the index it makes, how a saved store records it),
  `requested_mode` (the mode of a store's arguments, checked), `MULTIVECTOR_KEY` and `AGGREGATE_KEY` (the keys of a
  saved store file), `checked_windows`, `stored_windows`.
- `indexed_records`: the id map (a framework's string id → the index's int64 id), the records by int id in
  insertion order, groups, upserts, deletes and searches over the index. `IndexedRecords`, `Keyed` (what a record
  must have: its `key`), `StoreIndex` (`FaissIndex | MultiVectorIndex`).
- `files`: a store file saved together with its index folder (one atomic commit) and read back consistently while
  another process may be saving. `save_store_file`, `load_store_file`, `store_generation`, `StoreGeneration`.
- `arguments`: checks of the arguments store calls take. `checked_entries` (the documents of an add, checked),
  `id_strings`, `ids_to_delete`, `new_ids`, `repeated`, `preview`, `require_some`.
- `metadata`: metadata kept as JSON. `json_metadata_list`.
- `filter_grammar`: the one filter grammar of the stores. `compile_filter` (a filter dict → a predicate on
  metadata), `Predicate`, `MAX_FILTER_DEPTH` (how deep filters nest: 64).
- `operator_filters`: filters written as (field, operator name, value) conditions, as LlamaIndex's
  `MetadataFilters` are. `condition_spec`, `combined_spec`, `SUPPORTED_OPERATORS` (the operator names),
  `check_combination_depth` and `COMBINED_GRAMMAR_DEPTH` (their nesting bound).
- `compiled_filter`: a filter compiled once per call. `store_filter`, `StoreFilter`, `record_filter` (as a test of
  a stored record).
- `marginal_relevance`: maximal marginal relevance, one for both stacks. `mmr_hits` (a store's documents chosen
  by MMR), `mmr_order` (the exact greedy selection).
- `vector_queries`: a query checked and answered in a query mode ("default", "mmr", "sparse", "text_search",
  "hybrid"). `vector_query_hits`, `QUERY_MODES`.
- `search_modes`: how text queries are answered: dense, sparse (the lexical side) or hybrid (both fused).
  `SearchSettings`, `SEARCH_MODES`, `DEFAULT_SEARCH_MODE`, `check_search_mode`; with `LexicalSettings` and
  `FUSIONS` of `fair_retrieval.lexical` (the lexical side's reading and the fusions), re-exported for adapters.
- `vectors`: vectors prepared for the index and scores as relevance. `unit_rows`, `text_vector_pairs`, `node_vectors`,
  `relevance_function`.
- `window_cache`: the embedders that give windows and the cache of an embedder's last pass. `gives_windows` (whether
  an embedder makes a store multi-vector by default), `window_embedder`, `WindowEmbedder`, `WindowCache`,
  `BEST_WINDOW_KEY` (the metadata key of a hit's best window), `RESERVED_KEYS` (the metadata keys an add refuses:
  results carry their own values under them).
- `store_windows`: the windows a multi-vector store keeps and a new store's mode. `StoreWindows` (window sizes and
  boundaries; the default shape of the window study, or the embedder's own windows with `StoreWindows()`).
- `cached_windows`: window vectors kept in an embeddings cache's key-value store (LangChain's
  `CacheBackedEmbeddings` around `FairEmbeddings`). `CachedWindowEmbedder`, `cached_window_embedder`.
- `store_archive`: a saved store as bytes (its folder packed in memory, with a digest), no pickle. `store_bytes`,
  `store_from_bytes`.
- `window_source`: windows taken from that cache where the embedder's own pass cut them, the rest asked of the
  embedder in the store's shape. `gathered_windows`, `GatheredWindows`, `content_offset`, `within_content`.
- `text_documents`: documents as (id, text, metadata) and the folder layout of a store saved under a name (the
  LangChain store's records). `TextDocument`, `text_document_format`, `checked_documents`, `document_text` (what
  the lexical side reads of one), `hit_metadata`, `named_store_paths`, `pickled_folder_error`, `DEFAULT_INDEX_NAME`.
- `raw_faiss`: bare faiss files of earlier stores, read for their conversion. `looks_like_raw_faiss`,
  `is_raw_faiss`, `read_raw_faiss`, `read_legacy_folder` (a folder LlamaIndex persisted around one).

Defined elsewhere in fair_retrieval and re-exported here because every store builder needs them: `embedder_identity`
and `check_identity` (`fair_retrieval.embedding.identity`), `json_bytes`, `parse_versioned_json`, `DamagedFileError`
and `StoreConflictError` (`fair_retrieval.jsonio`), `check_store_entries`, `check_query` (a query checked like a
document), `check_readable` (texts the tokenizer cannot read, refused before any model work; the embeddings adapters
check a whole batch with it) and `ensure_text_list` (`fair_retrieval.inputs`), `positive_int`
(`fair_retrieval.validate`).
"""

from fair_retrieval.embedding.identity import check_identity, embedder_identity
from fair_retrieval.inputs import check_query, check_readable, check_store_entries, ensure_text_list
from fair_retrieval.jsonio import DamagedFileError, StoreConflictError, json_bytes, parse_versioned_json
from fair_retrieval.lexical import FUSIONS, LexicalSettings
from fair_retrieval.stores.arguments import (
    checked_entries,
    id_strings,
    ids_to_delete,
    json_metadata_list,
    new_ids,
    preview,
    repeated,
    require_some,
)
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY, RESERVED_KEYS
from fair_retrieval.stores.document_store import STORE_METRICS, DocumentStore, StoreHit, StoreMetric
from fair_retrieval.stores.embedded_windows import GatheredWindows, content_offset, gathered_windows, within_content
from fair_retrieval.stores.files import StoreGeneration, load_store_file, save_store_file, store_generation
from fair_retrieval.stores.filters import MAX_DEPTH as MAX_FILTER_DEPTH
from fair_retrieval.stores.filters import Predicate, StoreFilter, compile_filter, record_filter, store_filter
from fair_retrieval.stores.indexed_records import IndexedRecords, Keyed, StoreIndex
from fair_retrieval.stores.marginal_relevance import mmr_hits, mmr_order
from fair_retrieval.stores.raw_faiss import is_raw_faiss, looks_like_raw_faiss, read_legacy_folder, read_raw_faiss
from fair_retrieval.stores.search_modes import DEFAULT_SEARCH_MODE, SEARCH_MODES, SearchSettings, check_search_mode
from fair_retrieval.stores.store_archive import store_bytes, store_from_bytes
from fair_retrieval.stores.store_format import StoreFormat, load_store, save_store
from fair_retrieval.stores.store_mode import (
    AGGREGATE_KEY,
    DEFAULT_MULTIVECTOR,
    MULTIVECTOR_KEY,
    DocumentMode,
    StoreWindows,
    checked_windows,
    requested_mode,
    stored_windows,
)
from fair_retrieval.stores.text_documents import (
    DEFAULT_INDEX_NAME,
    TextDocument,
    checked_documents,
    document_text,
    hit_metadata,
    named_store_paths,
    pickled_folder_error,
    text_document_format,
)
from fair_retrieval.stores.vector_queries import QUERY_MODES, vector_query_hits
from fair_retrieval.stores.vectors import node_vectors, relevance_function, text_vector_pairs, unit_rows
from fair_retrieval.stores.window_embedders import (
    CachedWindowEmbedder,
    WindowCache,
    WindowEmbedder,
    cached_window_embedder,
    gives_windows,
    window_embedder,
)
from fair_retrieval.stores.wrapped_store import WrappedStore
from fair_retrieval.validate import positive_int

__all__ = [
    "AGGREGATE_KEY",
    "BEST_WINDOW_KEY",
    "DEFAULT_INDEX_NAME",
    "DEFAULT_MULTIVECTOR",
    "DEFAULT_SEARCH_MODE",
    "FUSIONS",
    "MAX_FILTER_DEPTH",
    "MULTIVECTOR_KEY",
    "QUERY_MODES",
    "RESERVED_KEYS",
    "SEARCH_MODES",
    "STORE_METRICS",
    "CachedWindowEmbedder",
    "DamagedFileError",
    "DocumentMode",
    "DocumentStore",
    "GatheredWindows",
    "IndexedRecords",
    "Keyed",
    "LexicalSettings",
    "Predicate",
    "SearchSettings",
    "StoreConflictError",
    "StoreFilter",
    "StoreFormat",
    "StoreGeneration",
    "StoreHit",
    "StoreIndex",
    "StoreMetric",
    "StoreWindows",
    "TextDocument",
    "WindowCache",
    "WindowEmbedder",
    "WrappedStore",
    "cached_window_embedder",
    "check_identity",
    "check_query",
    "check_readable",
    "check_search_mode",
    "check_store_entries",
    "checked_documents",
    "checked_entries",
    "checked_windows",
    "compile_filter",
    "content_offset",
    "document_text",
    "embedder_identity",
    "ensure_text_list",
    "gathered_windows",
    "gives_windows",
    "hit_metadata",
    "id_strings",
    "ids_to_delete",
    "is_raw_faiss",
    "json_bytes",
    "json_metadata_list",
    "load_store",
    "load_store_file",
    "looks_like_raw_faiss",
    "mmr_hits",
    "mmr_order",
    "named_store_paths",
    "new_ids",
    "node_vectors",
    "parse_versioned_json",
    "pickled_folder_error",
    "positive_int",
    "preview",
    "read_legacy_folder",
    "read_raw_faiss",
    "record_filter",
    "relevance_function",
    "repeated",
    "requested_mode",
    "require_some",
    "save_store",
    "save_store_file",
    "store_bytes",
    "store_filter",
    "store_from_bytes",
    "store_generation",
    "stored_windows",
    "text_document_format",
    "text_vector_pairs",
    "unit_rows",
    "vector_query_hits",
    "window_embedder",
    "within_content",
]
