"""What the vector stores of the LangChain and LlamaIndex adapters share, free of either framework.

Both adapters keep their vectors in a `fair_retrieval.FaissIndex` and their documents (or nodes) beside it; what
they do with them beyond translating between the framework's types and these is defined once here:

- `records`: the id map (a framework's string id → the index's int64 id), the records kept by int id in insertion
  order, groups of records (a source document's nodes), upserts, deletes and searches over the index.
- `files`: saving a store file together with its index folder (one atomic commit) and reading both back
  consistently while another process may be saving; a save over a newer generation than the one loaded raises
  `StoreConflictError` (exported here).
- `arguments`: checks of the arguments every store call takes (positive counts, id lists, new ids) and the short
  lists of offending values their messages show.
- `metadata`: metadata kept as JSON (checked and copied when stored, copied again for user code).
- `filtering`: a metadata filter compiled once per call, in the grammar of `fair_retrieval.filters`.
- `vectors`: vectors prepared for the index (checked, unit rows for cosine) and relevance scores in [0, 1].
- `modes`: a store's document mode, pooled or multi-vector (its index, how a saved store records it, the
  checks on load), and the windows a multi-vector store takes in or copies out.
- `multivector`, `window_source`: multi-vector mode (documents kept as their window vectors): the embedders that
  give windows, the cache of an embedder's last pass and how a store takes a document's windows from it.
- `raw_faiss`: reading a bare faiss file, the format of folders written by earlier stores, for their conversion.
"""

from fair_retrieval.jsonio import DamagedFileError, StoreConflictError

__all__ = ["DamagedFileError", "StoreConflictError"]
