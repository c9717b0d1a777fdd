"""fair-retrieval: dense retrieval that is fair to every part of a document.

Documents are embedded with attention calibration (arXiv 2606.02737) so that a passage whose relevant sentence sits
at its end is found as often as one where it sits at its start; queries stay plain.

The public names, each defined in one module and re-exported here:

- `FairEmbedder`: the embedder (documents calibrated, queries plain); `Calibration` and `PositionalScaling`: how
  documents are calibrated (attention calibration, LPES); `UnsupportedModelError`: a model whose attention cannot be
  calibrated.
- `DocumentWindows`: every window vector of some documents (`FairEmbedder.embed_document_windows`);
  `LongDocuments`: what happens to a document longer than the model's window ("windows" or "truncate");
  `WindowBoundaries`: where such a document is cut into windows ("text": paragraph and sentence ends; "tokens");
  `Pooling`: how token vectors become one ("cls", "mean", "last"); `Precision`: the numeric precision of the weights.
- `FaissIndex`, `MultiVectorIndex`, `DocumentHit`: the FAISS vector indices (`fair_retrieval.index` has the rest).
- `EmbedderOptions`: every `FairEmbedder` option, defaulted and checked in one place; `DEFAULTS`: its defaults.

What the framework adapters build on is in `fair_retrieval.adapters` (the embeddings' option plumbing) and
`fair_retrieval.stores` (the vector store).
"""

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_options import DEFAULTS, EmbedderOptions, Precision
from fair_retrieval.embedding.windows import DocumentWindows, LongDocuments
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import Pooling, UnsupportedModelError
from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.index import DocumentHit, FaissIndex, MultiVectorIndex
from fair_retrieval.version import __version__ as __version__

__all__ = [
    "DEFAULTS",
    "Calibration",
    "DocumentHit",
    "DocumentWindows",
    "EmbedderOptions",
    "FairEmbedder",
    "FaissIndex",
    "LongDocuments",
    "MultiVectorIndex",
    "Pooling",
    "PositionalScaling",
    "Precision",
    "UnsupportedModelError",
    "WindowBoundaries",
]
