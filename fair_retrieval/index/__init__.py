"""The FAISS vector index of fair-retrieval and what it is made of.

Modules: `faiss_index` (the `FaissIndex` class; `saving`: its save and load), `index_plan` (which faiss index to build
and how to search it: the named kinds, their default parameters and the sized IVF-PQ default), `index_building` (faiss
indices from plans), `persistence` (index folders on disk: atomic saves, checked loads, format migration), `gpu`
(importing faiss and placing indices on GPUs), `selection` (searching among some ids inside faiss), `inspection`
(reading faiss' index structures), `multivector` (documents kept as their window vectors, searched for k distinct
documents: `MultiVectorIndex`; `aggregates`: how window scores become a document's; `window_table`: which document owns
which window), `ids` (checks of vectors and ids, the stored id set) and `recall` (how close an approximate index comes
to exact search: `knn_recall_at_k`, `top1_in_k`).

Exported here: `FaissIndex` with its `Kind` (the named kinds: `KINDS`; `check_kind_params`: a kind's parameters
checked before the index is made) and `Metric` (`METRICS`); `MultiVectorIndex`,
`DocumentHit` (one of its hits), `Aggregate`, `AGGREGATES` and `DEFAULT_AGGREGATE` (how a document's window scores
become its score); the names of an index folder's files (`INDEX_FILE`, `META_FILE`, `WINDOWS_FILE`); `import_faiss`
(faiss, or an ImportError naming the extra to install), `GpuChoice` (the `gpu="auto" | True | False` argument),
`gpu_count` (how many GPUs such an argument means, refusing `gpu=True` without one) and `faiss_gpu_count` (how many GPUs
faiss sees).

    from fair_retrieval.index import FaissIndex

    index = FaissIndex(384, kind="ivfpq")
    index.add(vectors)
    scores, ids = index.search(queries, 10)
    index.save("index/")
"""

from fair_retrieval.index.aggregates import AGGREGATES, DEFAULT_AGGREGATE, Aggregate
from fair_retrieval.index.faiss_index import FaissIndex
from fair_retrieval.index.gpu import GpuChoice, faiss_gpu_count, gpu_count, import_faiss
from fair_retrieval.index.index_plan import KINDS, Kind, check_kind_params
from fair_retrieval.index.inspection import METRICS, Metric
from fair_retrieval.index.multivector import DocumentHit, MultiVectorIndex
from fair_retrieval.index.persistence import INDEX_FILE, META_FILE, WINDOWS_FILE

__all__ = [
    "AGGREGATES",
    "DEFAULT_AGGREGATE",
    "INDEX_FILE",
    "KINDS",
    "META_FILE",
    "METRICS",
    "WINDOWS_FILE",
    "Aggregate",
    "DocumentHit",
    "FaissIndex",
    "GpuChoice",
    "Kind",
    "Metric",
    "MultiVectorIndex",
    "check_kind_params",
    "faiss_gpu_count",
    "gpu_count",
    "import_faiss",
]
