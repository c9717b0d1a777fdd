"""The vector store both adapters wrap, free of either framework: one door, `DocumentStore`, and what it takes.

`DocumentStore` is the door (`fair_retrieval.stores.document_store`): documents by id with their vectors in one
index (a pooled `FaissIndex` or a `MultiVectorIndex`: the mode is one value, `DocumentMode`), upserts, deletes,
groups, filtered searches that return k distinct documents with their scores and best windows as `StoreHit`s,
copies between stores, saving beside its index and the one restore. It takes framework-neutral values (records,
texts with metadata and ids, vectors, windows, filters, query texts and vectors, files) and checks each once. The
LangChain and LlamaIndex stores hold one and translate their framework's types and names only; an adapter imports
from `fair_retrieval.stores` (and `fair_retrieval`, `fair_retrieval.adapters`, `fair_retrieval.index`), never from
the modules behind it (tests/test_import_rules.py checks it). Those modules are not part of the door: they may
change without notice.

The names of the door:

- `DocumentStore` (the store), `StoreHit` (one document a search found), `WrappedStore` (the properties an
  adapter's store class reads off its `DocumentStore`).
- What it is built with: `StoreMetric` and `STORE_METRICS` ("cosine", "ip", "l2"); `StoreIndex` (an index a store
  may be given: a `FaissIndex` or a `MultiVectorIndex`); `DEFAULT_MULTIVECTOR` (the
  stores' default mode, one constant); `StoreWindows` (the windows a multi-vector store keeps: sizes and
  boundaries); `SearchSettings`, `SEARCH_MODES`, `DEFAULT_SEARCH_MODE` (how text queries are answered: dense,
  sparse or hybrid) and `LexicalSettings` (how the lexical side reads texts).
- What it keeps and saves: `TextDocument` (a document as id, text and metadata: the LangChain store's records),
  `StoreFormat` (an adapter's store file format), `DEFAULT_INDEX_NAME` (the name a store is saved under by default).
- Filters: `compile_filter` (a filter dict of the stores' one grammar → a predicate on metadata) and
  `MAX_FILTER_DEPTH` (how deep filters nest: 64), for an adapter translating its framework's filters;
  `RecordFilter` (a compiled filter as a test of a stored record, keeping its grammar dict for an engine).
- Qdrant: `QdrantStore` (the same door over a Qdrant collection: the same windows, BM25 scored in the engine,
  filters evaluated in the engine) and `qdrant_client` (the client a store is given, or one made from a URL or
  path).
- Windows: `BEST_WINDOW_KEY` (the metadata key of a multi-vector hit's best window).
- Errors: `DamagedFileError` and `StoreConflictError` (both ValueErrors), defined in `fair_retrieval.jsonio`.
"""

from fair_retrieval.jsonio import DamagedFileError, StoreConflictError
from fair_retrieval.lexical import LexicalSettings
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY
from fair_retrieval.stores.document_store import DocumentStore, WrappedStore
from fair_retrieval.stores.filters import MAX_DEPTH as MAX_FILTER_DEPTH
from fair_retrieval.stores.filters import RecordFilter, compile_filter
from fair_retrieval.stores.indexed_records import StoreIndex
from fair_retrieval.stores.qdrant_store import QdrantStore, qdrant_client
from fair_retrieval.stores.search_modes import DEFAULT_SEARCH_MODE, SEARCH_MODES, SearchSettings
from fair_retrieval.stores.store_core import STORE_METRICS, StoreHit, StoreMetric
from fair_retrieval.stores.store_format import StoreFormat
from fair_retrieval.stores.store_mode import DEFAULT_MULTIVECTOR, StoreWindows
from fair_retrieval.stores.text_documents import DEFAULT_INDEX_NAME, TextDocument

__all__ = [
    "BEST_WINDOW_KEY",
    "DEFAULT_INDEX_NAME",
    "DEFAULT_MULTIVECTOR",
    "DEFAULT_SEARCH_MODE",
    "MAX_FILTER_DEPTH",
    "SEARCH_MODES",
    "STORE_METRICS",
    "DamagedFileError",
    "DocumentStore",
    "LexicalSettings",
    "QdrantStore",
    "RecordFilter",
    "SearchSettings",
    "StoreConflictError",
    "StoreFormat",
    "StoreHit",
    "StoreIndex",
    "StoreMetric",
    "StoreWindows",
    "TextDocument",
    "WrappedStore",
    "compile_filter",
    "qdrant_client",
]
