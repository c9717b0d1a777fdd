"""Scale-out indexing: calibrated embeddings of large corpora on Ray Data, and compressed FAISS indices from them.

Needs the optional extra: pip install 'fair-retrieval[ray]' (Ray is imported only when a job runs).

    from fair_retrieval.distributed import EmbedderSpec, build_index, embed_to_shards

    spec = EmbedderSpec("sentence-transformers/all-MiniLM-L6-v2")  # calibrated by default
    embed_to_shards("corpus/", "shards/", spec, workers=4)  # Parquet/JSONL folder; resumable; RAY_ADDRESS
    built = build_index("shards/")                          # flat, or IVF-PQ for large corpora
    built.save("index/")

Modules: `spec` (what each worker loads), `source` (input and its checks), `documents` (a folder or JSONL file
read by Ray tasks with the reader of `fair_retrieval.inputs`, for `index --engine ray`), `worker` (the Ray callable
class), `shards` (the Parquet shard folder), `embed` (the Ray Data job), `index_sizing` (which index for which
size; OPQ and refinement are parts of its faiss factory string), `build` (shards → FaissIndex), `indexing` (the whole
job that `index --engine ray` runs: input → documents file, shards and FaissIndex), `runtime` (Ray connection and
errors).
Recall against exact neighbours, to measure the compressed indices, is `fair_retrieval.index.recall`'s.
"""

from fair_retrieval.distributed.build import BuiltIndex, build_index
from fair_retrieval.distributed.embed import EmbedResult, embed_to_shards, texts_key
from fair_retrieval.distributed.index_sizing import plan_index
from fair_retrieval.distributed.runtime import DistributedJobError
from fair_retrieval.distributed.shards import ShardFolder
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.index.index_plan import IndexPlan

__all__ = [
    "BuiltIndex",
    "DistributedJobError",
    "EmbedResult",
    "EmbedderSpec",
    "IndexPlan",
    "ShardFolder",
    "build_index",
    "embed_to_shards",
    "plan_index",
    "texts_key",
]
